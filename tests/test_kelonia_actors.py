"""Kelonia's actors (issue 35, item 13): DPUs that keep running, take messages from their input
FIFO and answer each in their output FIFO; the fleet's ``send(actor, message)`` and
``async for reply in fleet.replies()``."""

from __future__ import annotations

import re
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim.kelonia import (
    PYTHON,
    ActorDpuAssembly,
    ActorDpuAssemblyLine,
    DpuBackend,
    DpuDeviceDescription,
    DpuFoundry,
    DpuFoundryError,
    DpuLowLevelError,
    KeloniaInterface,
    Reply,
    WorkerFactoryBuilder,
    parse_didl,
)

ECHO_DIDL = """function echo(x: in u32, y: out u32, seq: out u32) {
    x <- sysmbox[0], y <- mbox[0][0], seq <- mbox[0][1]
}"""
ECHO = KeloniaInterface(parse_didl(ECHO_DIDL, "echo.didl"))
Task: Any = ECHO.Task


def echo_actor(ptr_size: int = 2, data_size: int = 8) -> aiopim.Program:
    """Answers x with (x + 1, how many messages it answered before); x == 13 faults."""
    prog = aiopim.Program("echo_actor", nr_tasklets=2, stdio=False)
    active = prog.host("active", np.uint32, 1, init=[1])
    inbox = prog.input_fifo("inbox", ptr_size, data_size)
    outbox = prog.output_fifo("outbox", ptr_size, data_size)
    both = prog.barrier("both")
    answered = prog.wram("answered", np.uint32, 1)

    async def process(t: aiopim.Tasklet, message: np.ndarray) -> None:
        t.compute(200)

    async def reduce(t: aiopim.Tasklet, message: np.ndarray, out: np.ndarray) -> None:
        x = int(message.view(np.uint32)[0])
        if x == 13:
            t.fault(3, "unlucky")
        count = t.view(answered)
        out.view(np.uint32)[:2] = [x + 1, count[0]]
        count[0] += 1

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.process_inputs_all_tasklets(inbox, outbox, process, reduce, both, active)

    return prog


def _emu(ranks: int = 2, per_rank: int = 1) -> aiopim.Emulator:
    return aiopim.Emulator(aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=per_rank))


def _line(n: int, program: aiopim.Program | None = None, **names: str) -> ActorDpuAssemblyLine:
    device = DpuDeviceDescription(ECHO, program or echo_actor())
    return ActorDpuAssemblyLine.using_dpus(n, device, Task.echo, **names)


async def _fleet(line: ActorDpuAssemblyLine) -> ActorDpuAssembly:
    return await DpuFoundry.targeting(PYTHON).build(line)


def _plain(r: Reply) -> tuple[int, int, Any]:
    value = tuple(int(v) for v in r.value) if isinstance(r.value, tuple) else r.value
    return r.actor, r.index, value


# -- exact replies and virtual times -----------------------------------------------------------
def test_replies_come_per_actor_in_order_at_exact_virtual_times(backend: str) -> None:
    async def host() -> tuple[list[tuple[int, int, Any]], list[int]]:
        emu = aiopim.current_emulator()
        async with await _fleet(_line(2)) as fleet:
            await fleet.start()
            started = emu.now_ps
            for i in range(5):
                await fleet.send(i % 2, (10 * i,))
            sent = emu.now_ps
            replies = [_plain(r) async for r in fleet.replies()]
            answered = emu.now_ps
            await fleet.stop()
            return replies, [started, sent, answered, emu.now_ps]

    replies, times = _emu().run(host, backend=backend)
    # one drain brought actor 0's first two replies, then actor 1's
    assert replies == [
        (0, 0, (1, 0)),
        (0, 1, (21, 1)),
        (1, 0, (11, 0)),
        (1, 1, (31, 1)),
        (0, 2, (41, 2)),
    ]
    # started, all sent, all answered, stopped (ps)
    assert times == [130_016_625, 170_816_625, 183_376_625, 201_576_625]


def test_a_full_inbox_drains_replies_and_keeps_them(backend: str) -> None:
    async def host() -> tuple[list[tuple[int, int, Any]], int]:
        async with await _fleet(_line(1, echo_actor(ptr_size=1))) as fleet:  # 2-slot FIFOs
            await fleet.start()
            for x in range(7):  # more than both FIFOs hold: send drains the outbox meanwhile
                await fleet.send(0, {"x": x})
            replies = [_plain(r) async for r in fleet.replies()]
            await fleet.stop()
            return replies, aiopim.current_emulator().now_ps

    replies, end = _emu(1).run(host, backend=backend)
    assert replies == [(0, k, (k + 1, k)) for k in range(7)]
    assert end == 242_716_625  # the pushes wait for room, never for a whole retry budget


def test_stop_lets_the_actors_answer_what_they_hold(backend: str) -> None:
    async def host() -> tuple[int, list[tuple[int, int, Any]]]:
        async with await _fleet(_line(2)) as fleet:
            await fleet.start()
            for x in (1, 2, 3):
                await fleet.send(1, (x,))
            await fleet.stop()  # clears active: the actor still answers its inbox first
            owed = fleet.outstanding
            return owed, [_plain(r) async for r in fleet.replies()]

    owed, replies = _emu().run(host, backend=backend)
    assert owed == 0
    assert replies == [(1, 0, (2, 0)), (1, 1, (3, 1)), (1, 2, (4, 2))]


def test_sends_to_actors_of_different_ranks_overlap(backend: str) -> None:
    async def host(concurrent: bool) -> int:
        async with await _fleet(_line(2)) as fleet:
            await fleet.start()
            emu = aiopim.current_emulator()
            t0 = emu.now_ps
            async with anyio.create_task_group() as tg:
                for actor in (0, 1):
                    if concurrent:
                        tg.start_soon(fleet.send, actor, (actor,))
                    else:
                        await fleet.send(actor, (actor,))
            return emu.now_ps - t0

    assert [_emu().run(host, c, backend=backend) for c in (False, True)] == [22_320_000, 16_160_000]


# -- errors that say what to fix ---------------------------------------------------------------
def test_a_faulting_actor_is_named_instead_of_waited_for(backend: str) -> None:
    async def host(read_first: bool) -> tuple[str, str, list[tuple[int, int, Any]]]:
        got: list[tuple[int, int, Any]] = []
        async with await _fleet(_line(2)) as fleet:
            await fleet.start()
            await fleet.send(0, (4,))
            await fleet.send(1, (13,))
            with pytest.raises(DpuLowLevelError) as info:
                if read_first:
                    async for r in fleet.replies():
                        got.append(_plain(r))  # noqa: PERF401 (kept up to the error)
                else:
                    await fleet.stop()  # raises a fault no error reported yet
            await fleet.stop()  # the healthy actor stops; the fault is not raised twice
            with pytest.raises(DpuLowLevelError) as again:  # actor 1 still owes its reply
                async for r in fleet.replies():
                    got.append(_plain(r))  # noqa: PERF401 (kept up to the error)
        return str(info.value), str(again.value), got

    for read_first in (True, False):
        message, again, got = _emu().run(host, read_first, backend=backend)
        assert re.fullmatch(
            r"DPU_ERR_DPU_FAULT \(23\): DPU 1, task echo: actor 1 is in fault, owing 1 reply: "
            r"DPU 1\.0\.0 tasklet 0 at test_kelonia_actors\.py:\d+ in reduce: fault 3: unlucky",
            message,
        )
        assert again == message
        assert got == [(0, 0, (5, 0))]


def test_misuse_is_refused_before_anything_runs(backend: str) -> None:
    async def host() -> list[str]:
        errors: list[str] = []
        async with await _fleet(_line(2)) as fleet:
            bad: list[tuple[int, Any, type[Exception]]] = [
                (2, (1,), DpuFoundryError),
                (0, 5, TypeError),
                (0, {"x": 1 << 32}, ValueError),
                (0, (1, 2), TypeError),
            ]
            for actor, message, exc in bad:
                with pytest.raises(exc) as info:
                    await fleet.send(actor, message)
                errors.append(str(info.value))
            with pytest.raises(DpuFoundryError) as info2:
                fleet.worker(0, Task.echo)
            errors.append(str(info2.value))
            await fleet.send(0, (1,))  # waits in the inbox: the actor is not started
            with pytest.raises(DpuFoundryError) as info2:
                async for _ in fleet.replies():
                    pass
            errors.append(str(info2.value))
            await fleet.start()
            with pytest.raises(DpuFoundryError) as info2:
                fleet.worker(0, Task.memory_copy)
            errors.append(str(info2.value))
            assert [_plain(r) async for r in fleet.replies()] == [(0, 0, (2, 0))]
        return errors

    assert _emu().run(host, backend=backend) == [
        "actor 2 is not in the fleet of 2",
        "echo messages are a tuple of the in values (x) or a dict by name, not int",
        "x=4294967296 does not fit u32",
        "echo() takes 1 arguments, got 2",
        "an actor fleet answers echo through send(); build a BasicDpuAssemblyLine to call it "
        "as a function",
        "actor 0 owes 1 reply but is not started (start())",
        "the actors are running: their DPUs' job queues hold the launch until stop(), so copy "
        "MRAM data before start() or after stop()",
    ]


def test_a_fleet_needs_fifos_that_hold_a_message_and_a_reply() -> None:
    async def host(line: ActorDpuAssemblyLine) -> None:
        await _fleet(line)

    with pytest.raises(DpuFoundryError) as info:
        _emu().run(host, _line(1, inbox="requests"))
    assert str(info.value) == (
        "an actor program declares INPUT_FIFO_INIT(requests, …), OUTPUT_FIFO_INIT(outbox, …) "
        "and a __host flag 'active': 'echo_actor' has no host-visible symbol 'requests' (WRAM "
        "variables need __host; MRAM variables are always visible)"
    )
    iface = KeloniaInterface(
        parse_didl("function big(x: in u32[3], y: out u32) { x <- sysmbox[0..2], y <- mbox[0][0] }",
                   "big.didl")
    )  # fmt: skip
    line = ActorDpuAssemblyLine.using_dpu(DpuDeviceDescription(iface, echo_actor()), "big")
    with pytest.raises(DpuFoundryError) as info:
        _emu().run(host, line)
    assert str(info.value) == (
        "big messages are 12 bytes (3 words) but FIFO 'inbox' has 8-byte elements; declare it "
        "with a data_size of at least 16"
    )
    iface = KeloniaInterface(
        parse_didl("function m(x: in u32, y: out u32) { x <- dram[0], y <- mbox[0][0] }", "m.didl")
    )
    with pytest.raises(DpuFoundryError) as info:
        ActorDpuAssemblyLine.using_dpu(DpuDeviceDescription(iface, echo_actor()), "m")
    assert str(info.value) == (
        "m maps 'x' to MRAM; an actor's messages and replies travel in FIFO elements only (copy "
        "MRAM data before start())"
    )


# -- never lost, never duplicated, per-actor order: against a reference model ------------------
def reference(sent: list[tuple[int, int]]) -> dict[int, list[tuple[int, int, Any]]]:
    """What the echo actors must answer: per actor, (actor, k, (x + 1, k)) for its k-th x."""
    out: dict[int, list[tuple[int, int, Any]]] = {}
    for actor, x in sent:
        mine = out.setdefault(actor, [])
        mine.append((actor, len(mine), (x + 1, len(mine))))
    return out


class EchoModel:
    """The reference model as a stub worker: the stubbed backend's actor."""

    def __init__(self) -> None:
        self.answered = 0

    async def echo(self, x: int) -> tuple[int, int]:
        self.answered += 1
        return x + 1, self.answered - 1


Op = tuple[str, int, int]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 2), st.integers(0, 12)),
        st.tuples(st.just("take"), st.integers(1, 4), st.just(0)),
    ),
    max_size=14,
)


async def play(fleet: ActorDpuAssembly, script: list[Op]) -> list[tuple[int, int, Any]]:
    """Run ``script`` (sends to actors, partial reads of the replies), then read the rest."""
    got: list[tuple[int, int, Any]] = []
    await fleet.start()
    for op, a, x in script:
        if op == "send":
            await fleet.send(a % fleet.nr_dpus, (x,))
            continue
        stream = fleet.replies()
        for _ in range(a):
            try:
                got.append(_plain(await stream.__anext__()))
            except StopAsyncIteration:
                break
    got += [_plain(r) async for r in fleet.replies()]
    await fleet.stop()
    assert fleet.outstanding == 0 and [r async for r in fleet.replies()] == []
    return got


def _check(got: list[tuple[int, int, Any]], sent: list[tuple[int, int]]) -> None:
    per_actor: dict[int, list[tuple[int, int, Any]]] = {}
    for r in got:
        per_actor.setdefault(r[0], []).append(r)
    assert per_actor == reference(sent)  # nothing lost, nothing twice, each actor in order


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=ops,
    nr_actors=st.integers(1, 3),
    per_rank=st.integers(1, 2),
    ptr_size=st.integers(1, 2),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_replies_are_never_lost_or_duplicated_and_keep_each_actors_order(
    script: list[Op], nr_actors: int, per_rank: int, ptr_size: int, backend: str
) -> None:
    sent = [(a % nr_actors, x) for op, a, x in script if op == "send"]
    line = _line(nr_actors, echo_actor(ptr_size=ptr_size))

    async def host() -> list[tuple[int, int, Any]]:
        async with await _fleet(line) as fleet:
            return await play(fleet, script)

    _check(_emu(nr_actors, per_rank).run(host, backend=backend), sent)
    # the same application code on the stubbed backend, the model as the actors' worker
    models: dict[int, EchoModel] = {}
    stub = ECHO.stubbed(
        WorkerFactoryBuilder()
        .with_worker(lambda n: models.setdefault(n, EchoModel()), "echo")
        .build()
    )
    device = DpuDeviceDescription(stub, backend=DpuBackend.STUBBED)
    stub_line = ActorDpuAssemblyLine.using_dpus(nr_actors, device, "echo")

    async def stubbed() -> list[tuple[int, int, Any]]:
        async with await _fleet(stub_line) as fleet:
            return await play(fleet, script)

    _check(anyio.run(stubbed, backend=backend), sent)
