"""Calls scheduled together at one instant (``LocalQueue.call_soon_in`` / ``post_group``) run
exactly where one kernel entry per call would have run them.

A generated program is run twice on per-DPU queues: once with every call of a group given to
``call_soon`` (an entry per call), once through a group entry. Both runs must log the same
events in the same order at the same times and stop for the host at the same points. The
key-sum example is then run step by step (every tasklet step and runtime callback, with its
virtual time and actor) with and without groups, on both backends and in exploration mode.
Last, the tasklet's cached WRAM views and reused DMA command behave as fresh ones.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import test_local_queue as queue_model
import wram_fifo_keysum as keysum
from helpers import emu
from hypothesis import given, settings
from hypothesis import strategies as st
from test_local_queue import GROUP_ACTORS, Program, actor_of

import aiopim
from aiopim._runtime import _kernel
from aiopim._runtime._kernel import PRIO_LATE, PRIO_NORMAL, Kernel, LocalQueue
from aiopim.dpu import _runner, _tasklet


@contextmanager
def one_entry_per_call() -> Iterator[None]:
    """``call_soon_in`` schedules at once and ``post_group`` does nothing: the runtime's
    grouped calls become one entry each, as before groups existed."""

    def call_soon_in(self: LocalQueue, group: list[Any], fn: Any, arg: Any, actor: int) -> None:
        self.call_soon(fn, arg, actor)

    def post_group(self: LocalQueue, group: list[Any]) -> None:
        assert not group

    saved = LocalQueue.call_soon_in, LocalQueue.post_group
    LocalQueue.call_soon_in = call_soon_in  # type: ignore[method-assign]
    LocalQueue.post_group = post_group  # type: ignore[method-assign]
    try:
        yield
    finally:
        LocalQueue.call_soon_in, LocalQueue.post_group = saved  # type: ignore[method-assign]


@dataclass(frozen=True)
class Spec(queue_model.Spec):
    """One event of a generated program; its children are scheduled when it runs."""

    together: bool = False  # scheduled in its parent's group (same queue, same instant)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    groups = draw(st.integers(1, 3))
    n = draw(st.integers(1, 45))
    specs: list[queue_model.Spec] = []
    for i in range(n):
        group = draw(st.integers(-1, groups - 1))
        together = group >= 0 and draw(st.booleans())
        specs.append(
            Spec(
                parent=draw(st.integers(-1, i - 1)),
                delay=0 if together else draw(st.sampled_from([0, 0, 1, 2, 5])),
                group=group,
                actor=draw(st.integers(0, 7)),
                priority=PRIO_NORMAL
                if together
                else draw(st.sampled_from([PRIO_NORMAL, PRIO_NORMAL, PRIO_LATE])),
                # >= 0: moves its queue's timer to now + timer between two group members
                timer=draw(st.sampled_from([-1, -1, 0, 1, 3])) if group >= 0 else -1,
                cancel=draw(st.integers(-1, n - 1)),
                wakes_host=draw(st.booleans()) and draw(st.booleans()),
                together=together,
            )
        )
    limits = sorted(draw(st.lists(st.integers(0, 20), max_size=3)))
    explore = draw(st.one_of(st.none(), st.integers(0, 2**16)))
    return Program(specs, groups, limits, explore)


class Runner(queue_model.Runner):
    """Runs a program on per-DPU queues, its grouped calls as groups or one entry each."""

    def __init__(self, prog: Program) -> None:
        super().__init__(prog, local=True)

    def fire(self, i: int) -> None:
        s = self.prog.specs[i]
        self.log.append(("event", i, self.k.now))
        if s.cancel >= 0 and s.cancel in self.entries:
            Kernel.cancel(self.entries[s.cancel])
        groups: dict[int, list[Any]] = {}
        for child in self.children.get(i, []):
            c = self.prog.specs[child]
            if isinstance(c, Spec) and c.together:
                group = groups.setdefault(c.group, [])
                self.queues[c.group].call_soon_in(group, self.fire, child, actor_of(c))
                if c.timer >= 0:  # the pipeline moves its timer between two wake-ups
                    self.move_timer(c.group, c.timer)
            else:
                self.schedule(child)
        for g, group in groups.items():
            self.queues[g].post_group(group)
        if s.wakes_host:
            self.k.new_waiter("host").resolve()

    def run(self) -> list[tuple[Any, ...]]:
        log = super().run()
        log.append(("sequence numbers", self.k._seq))
        return log


def _grouped_is_single(prog: Program) -> None:
    grouped = Runner(prog).run()
    with one_entry_per_call():
        single = Runner(prog).run()
    assert grouped == single


@settings(max_examples=30, deadline=None)
@given(programs())
def test_grouped_calls_keep_the_order_of_one_entry_per_call(prog: Program) -> None:
    _grouped_is_single(prog)


@pytest.mark.long
@settings(max_examples=500, deadline=None)
@given(programs())
def test_grouped_calls_keep_the_order_of_one_entry_per_call_long(prog: Program) -> None:
    _grouped_is_single(prog)


def test_a_group_yields_to_an_event_that_comes_between_its_calls() -> None:
    """A group's calls run by actor; an event of an actor between them runs between them,
    even one scheduled by the group's first call."""
    k = Kernel()
    q = LocalQueue(k)
    log: list[str] = []
    base = GROUP_ACTORS

    def first(_: Any) -> None:
        log.append("a0")
        q.call_soon(lambda _: log.append("b2"), None, base + 2)

    group: list[Any] = []
    q.call_soon_in(group, lambda _: log.append("a5"), None, base + 5)
    q.call_soon_in(group, first, None, base)
    q.call_soon_in(group, lambda _: log.append("a3"), None, base + 3)
    k.call_at(0, lambda _: log.append("kernel 4"), None, base + 4)
    q.post_group(group)
    k.run(1 << 62)
    assert log == ["a0", "b2", "a3", "kernel 4", "a5"]
    assert k.events_processed == 5


def test_a_group_yields_to_its_queue_timer_moved_between_its_calls() -> None:
    """The queue's slot (a DPU pipeline's timer) moved by a group's call to an instant and
    actor between the group's next calls runs between them."""
    k = Kernel()
    q = LocalQueue(k)
    log: list[str] = []
    base = GROUP_ACTORS

    def first(_: Any) -> None:
        log.append("a0")
        k._seq += 1
        q.set_slot([k.now, PRIO_NORMAL, base + 2, k._seq, lambda _: log.append("timer 2"), None])

    group: list[Any] = []
    q.call_soon_in(group, first, None, base)
    q.call_soon_in(group, lambda _: log.append("a3"), None, base + 3)
    q.post_group(group)
    k.run(1 << 62)
    assert log == ["a0", "timer 2", "a3"]


def _step_log(
    ranks: int, per_rank: int, tasklets: int, mode: str, backend: str, explore: bool
) -> tuple[Any, ...]:
    """(digest of every tasklet step and runtime callback with its time and actor, the
    number of steps, kernel events, virtual time, trace digest) of one key-sum run."""
    steps = hashlib.sha256()
    count = 0
    emu = aiopim.Emulator(
        aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=per_rank), seed=5, explore=explore
    )
    kernel = emu.kernel
    patched: list[tuple[type, str, Any]] = []

    def log(cls: type, name: str, actor_of: Any) -> None:
        fn = getattr(cls, name)

        @functools.wraps(fn)
        def logged(self: Any, *args: Any) -> Any:
            nonlocal count
            count += 1
            steps.update(repr((kernel.now, name, actor_of(self, *args))).encode())
            return fn(self, *args)

        patched.append((cls, name, fn))
        setattr(cls, name, logged)

    log(_kernel.Process, "resume", lambda p, _: p.actor)
    log(_kernel.Process, "throw", lambda p, _: p.actor)
    log(_tasklet._BarrierCommand, "_arrive", lambda _, p: p.actor)
    log(_runner.MramDmaCommand, "_issue", lambda _, p: p.actor)
    log(_runner.MramDmaCommand, "_complete", lambda _, p: p.actor)
    log(_runner.Pipeline, "_on_timer", lambda p, _: p._actor)
    try:
        r = emu.run(keysum.host, ranks, 0, tasklets, mode, 11, backend=backend)
    finally:
        for cls, name, fn in reversed(patched):
            setattr(cls, name, fn)
    assert r["wrong"] == [] and r["complete"]
    assert emu.recorder is not None
    trace = hashlib.sha256(emu.recorder.to_jsonl().encode()).hexdigest()
    return steps.hexdigest(), count, kernel.events_processed, r["virtual_time_s"], trace


@pytest.mark.parametrize(
    "case",
    [(2, 2, 16, "all", False), (1, 3, 8, "each", False), (1, 3, 16, "all", True)],
    ids=lambda c: "-".join(map(str, c)),
)
def test_keysum_steps_are_those_of_one_entry_per_call(
    case: tuple[int, int, int, str, bool],
) -> None:
    """Every tasklet step, at the same virtual time, in the same order; the same trace, event
    count and end time; on both backends, with and without exploration."""
    ranks, per_rank, tasklets, mode, explore = case
    with one_entry_per_call():
        single = _step_log(ranks, per_rank, tasklets, mode, "trio", explore)
    for backend in ("asyncio", "trio"):
        assert _step_log(ranks, per_rank, tasklets, mode, backend, explore) == single


def test_views_are_fresh_arrays_over_the_same_bytes() -> None:
    """``view`` keeps checked views per address and variable, but every call returns an array
    of its own: reshaping one does not change the next, and all see the same WRAM bytes."""
    prog = aiopim.Program("views", nr_tasklets=1)
    buf = prog.wram("buf", np.uint32, 8)
    seen: list[object] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        addr = prog.address_of(buf)
        a = t.view(addr, np.uint32, 8)
        b = t.view(addr, np.uint32, 8)
        a.shape = (2, 4)
        a[1, 0] = 7
        c = t.view(buf)
        d = t.view(buf)
        d.shape = (4, 2)
        c[5] += 1
        e = t.view(addr, np.uint32, 8)
        seen.extend([a is b, b.shape, int(b[4]), c is d, t.view(buf).shape, e.shape, int(e[5])])

    async def host() -> None:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        await dpus.launch()

    emu(ranks=1, dpus=1).run(host)
    assert seen == [False, (8,), 7, False, (8,), (8,), 1]


def test_dma_commands_taken_before_they_are_awaited_move_their_own_bytes() -> None:
    """A tasklet reuses its DMA command only once the transfer completed: two reads taken
    before either is awaited each bring their own bytes."""
    prog = aiopim.Program("dmas", nr_tasklets=2)
    m = prog.mram("m", np.uint8, 64)
    buf = prog.wram("buf", np.uint8, 64)
    got: dict[int, list[int]] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        w = prog.address_of(buf) + 32 * t.me()
        for _ in range(2):  # the second round reuses the completed commands
            first = t.mram_read(t.mram_address(m, 0), w, 8)
            second = t.mram_read(t.mram_address(m, 8 + 8 * t.me()), w + 8, 8)
            await second
            await first
        got[t.me()] = [int(x) for x in t.view(w, np.uint8, 16)]

    async def host() -> None:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        await dpus.copy_to("m", np.arange(64, dtype=np.uint8))
        await dpus.launch()

    emu(ranks=1, dpus=1).run(host)
    assert got == {0: list(range(16)), 1: [*range(8), *range(16, 24)]}
