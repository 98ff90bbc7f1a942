"""Host writes scheduled into the runs of interpreter DPUs (``IsaRunner.write_at``).

A host event that writes one DPU at a known time need not bring every running DPU to that
time: the compiled batch makes the write itself when the DPU's run reaches it, and the event
only checks that it was made (or makes it, when the DPU stopped before). Everything the host
and the DPUs see must be what writing at the events gives: results, run times and traces.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import wram_fifo_keysum as keysum
from test_isa_speculation import PROGRAM

import aiopim
from aiopim._runtime._kernel import Delay, Kernel
from aiopim.isa import _runner, assemble


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many scheduled writes the batch made, and how many the host made itself."""
    seen = {"batch": 0, "host": 0}
    wrote = _runner.IsaRunner.wrote

    def counting(self: _runner.IsaRunner, write: int) -> bool:
        made = wrote(self, write)
        seen["batch" if made else "host"] += 1
        return made

    monkeypatch.setattr(_runner.IsaRunner, "wrote", counting)
    yield seen


def _synced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every host event brings the running DPUs to its time (no write is scheduled)."""
    monkeypatch.setattr(_runner.IsaScheduler, "takes_host_writes", lambda self: False)


def _keysum(backend: str) -> dict[str, Any]:
    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=4))
    r = emu.run(keysum.host, 2, 0, 16, "all", 0, "isa", backend=backend)
    assert r["complete"] and not r["wrong"]
    assert emu.recorder is not None
    return {
        "received": r["received"],
        "virtual": r["virtual_time_s"],
        "trace": emu.recorder.to_jsonl(),
        "fires": emu.kernel.events_processed,
    }


def test_keysum_pushes_are_seen_as_at_their_events(
    backend: str, counted: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key-sum's push passes write the DPUs one at a time: scheduled into the runs, they
    give the same pairs, virtual time and trace (jobs, DPU runs, FIFO pointers) as events that
    synchronise."""
    scheduled = _keysum(backend)
    assert counted["batch"] > 100  # the path is taken: most writes made by the batch
    made = dict(counted)
    _synced(monkeypatch)
    synced = _keysum(backend)
    assert counted == made  # nothing scheduled any more
    fires = (scheduled.pop("fires"), synced.pop("fires"))
    assert scheduled == synced
    assert fires[0] < fires[1]  # fewer scheduler events


def _skewed_keysum(backend: str, stop_last: bool = False) -> dict[str, Any]:
    """The key-sum binary on four DPUs whose input write pointers differ: DPU 0 gets key 7
    alone before the launch, then every DPU gets keys 0..7, so each rank-wide push goes pass
    by pass and writes each DPU its own pointer. ``stop_last``: DPU 3's ``active`` is cleared
    at the launch, so it stops before the passes: the host writes it, the others get their
    writes in their runs."""
    from aiopim.sdk import (
        DPU_ASYNCHRONOUS,
        DPU_XFER_DEFAULT,
        DPU_XFER_NO_RESET,
        DPU_XFER_PARALLEL,
        DPU_XFER_TO_DPU,
        dpu_alloc_ranks,
        dpu_broadcast_to,
        dpu_fifo_prepare_xfer,
        dpu_fifo_push_xfer,
        dpu_foreach,
        dpu_launch,
        dpu_link_input_fifo,
        dpu_link_output_fifo,
        dpu_load,
        dpu_prepare_xfer,
        dpu_push_xfer,
        dpu_sync,
        get_fifo_elem,
        get_fifo_size,
    )

    async def main() -> dict[str, Any]:
        dpus = await dpu_alloc_ranks(1)
        await dpu_load(dpus, keysum.build_binary())
        rng = np.random.default_rng(3)
        keys = rng.integers(0, 16, keysum.NR_ELEMS, dtype=np.uint32)
        values = rng.integers(0, 1024, keysum.NR_ELEMS, dtype=np.uint32)
        await dpu_broadcast_to(dpus, "keys", 0, keys, keysum.NR_ELEMS * 4, DPU_XFER_DEFAULT)
        await dpu_broadcast_to(dpus, "values", 0, values, keysum.NR_ELEMS * 4, DPU_XFER_DEFAULT)
        input_link = dpu_link_input_fifo(dpus, "input_fifo")
        output_link = dpu_link_output_fifo(dpus, "output_fifo")
        key = np.zeros(2, np.uint32)
        dpu_fifo_prepare_xfer(dpus, input_link, key)
        key[0] = 7
        first = next(dpu for dpu, _ in dpu_foreach(dpus))
        await dpu_fifo_push_xfer(first, input_link, DPU_XFER_NO_RESET)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        if stop_last:
            last = list(dpu_foreach(dpus))[3][0]
            dpu_prepare_xfer(last, np.zeros(1, np.uint64))
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)
            await aiopim.current_emulator().delay(20_000_000)
            assert not last.dpu_list[0].running
        for k in range(8):
            key[0] = k
            await dpu_fifo_push_xfer(dpus, input_link, DPU_XFER_NO_RESET)
        dpu_prepare_xfer(dpus, np.zeros(1, np.uint64))
        await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)
        await dpu_sync(dpus)
        rings = [np.zeros(output_link.ring_bytes, np.uint8) for _ in range(4)]
        for (dpu, _), ring in zip(dpu_foreach(dpus), rings, strict=True):
            dpu_fifo_prepare_xfer(dpu, output_link, ring)
        await dpu_fifo_push_xfer(dpus, output_link, DPU_XFER_DEFAULT)
        received = []
        for (dpu, i), ring in zip(dpu_foreach(dpus), rings, strict=True):
            for j in range(get_fifo_size(output_link, dpu)):
                pair = get_fifo_elem(output_link, dpu, ring, j).view(np.uint64).tolist()
                received.append((i, *pair))
        sums = [int(values[keys == k].sum()) for k in range(16)]
        return {"received": received, "sums": sums, "end": aiopim.now()}

    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=4))
    seen = emu.run(main, backend=backend)
    assert emu.recorder is not None
    seen["trace"] = emu.recorder.to_jsonl()
    return seen


def test_a_push_pass_writes_each_dpu_its_own_write_pointer(
    backend: str, counted: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write pointers that differ between the DPUs of a rank, scheduled into the runs: each
    DPU gets its own (its keys in order, none lost) and everything is as at the events."""
    scheduled = _skewed_keysum(backend)
    assert counted["batch"] > 0
    sums = scheduled["sums"]
    expected = [(0, 7, sums[7])] + [(i, k, sums[k]) for i in range(4) for k in range(8)]
    assert sorted(scheduled["received"]) == sorted(expected)
    assert [k for i, k, _ in scheduled["received"] if i == 0] == [7, *range(8)]
    _synced(monkeypatch)
    assert _skewed_keysum(backend) == scheduled


def test_a_push_pass_to_running_and_stopped_dpus_keeps_every_write_at_its_time(
    backend: str, counted: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass whose DPUs are not all running: the running ones are written in their runs,
    the stopped one by the host at the pass's end, and everything (results, times, trace) is
    as with events throughout."""
    scheduled = _skewed_keysum(backend, stop_last=True)
    assert counted["batch"] > 0
    sums = scheduled["sums"]
    expected = [(0, 7, sums[7])] + [(i, k, sums[k]) for i in range(3) for k in range(8)]
    assert sorted(scheduled["received"]) == sorted(expected)
    _synced(monkeypatch)
    assert _skewed_keysum(backend, stop_last=True) == scheduled


FLAG_WORD = np.array([1, 0], np.uint32).view(np.uint8)


def _flag_run(
    backend: str, iterations: list[int], after_ps: int, schedule: bool, program: str = PROGRAM
) -> tuple[dict[str, Any], dict[str, int]]:
    """DPUs count their polls of ``flag`` (at most ``iterations`` each); a kernel process sets
    every DPU's flag ``after_ps`` after they boot, by a scheduled write or at its event."""
    binary = aiopim.load_elf(assemble(program, "v1B"), name="flag")
    flag = binary.address_of("flag")
    seen: dict[str, Any] = {}
    made = {"batch": 0, "host": 0}

    async def writer(dpus: list[Any]) -> None:
        k = aiopim.current_emulator().kernel
        while not all(d.running for d in dpus):  # until the launch has booted them
            await Delay(100_000)
        at_ps = k.now + after_ps
        writes = [d.runner.write_at(at_ps, flag, FLAG_WORD) if schedule else None for d in dpus]
        # as a push pass: no DPU is touched from the write's time until 5 µs later
        await Delay(at_ps - k.now, at_ps + 5_000_000 if schedule else None)
        for d, w in zip(dpus, writes, strict=True):
            if w is None or not d.runner_wrote(w):
                made["host"] += 1
                d.wram[flag : flag + 8] = FLAG_WORD
            else:
                made["batch"] += 1
        await Delay(5_000_000)

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=1)
        await dpus.load(binary)
        await dpus.copy_to("iterations", [np.array([n, 0], np.uint32) for n in iterations])
        await dpus.launch(wait=False)
        inner = dpus.dpu_list
        aiopim.current_emulator().kernel.spawn(writer(inner), actor=1, name="writer")
        await dpus.sync()
        seen["counts"] = (await dpus.copy_from("counts", np.uint32, 4)).tolist()
        seen["flags"] = (await dpus.copy_from("flag", np.uint32, 2)).tolist()
        seen["runs"] = [d.last_run_ps for d in inner]
        seen["end"] = round(aiopim.now() * 1e12)

    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=len(iterations)))
    emu.run(main, backend=backend)
    return seen, made


@pytest.mark.parametrize("at_us", [3, 40])
def test_a_scheduled_write_lands_at_its_time(backend: str, at_us: int) -> None:
    """DPUs that run past the write see it at its time (the batch makes it); DPUs that ended
    before it get it from the host at the event. At 3 µs every DPU still polls; at 40 µs the
    DPUs of few iterations have ended."""
    iterations = [20, 200, 2000, 20000] * 4
    after_ps = at_us * 1_000_000 + 333_333  # between two of the host's completion polls
    seen, made = _flag_run(backend, iterations, after_ps, schedule=True)
    expected, direct = _flag_run(backend, iterations, after_ps, schedule=False)
    assert seen == expected
    assert direct == {"batch": 0, "host": 16}
    assert made["batch"] > 0
    if at_us == 40:
        assert made["host"] > 0  # the DPUs that had ended
    assert all(f == [1, 0] for f in seen["flags"])


def test_horizon_skips_events_that_touch_no_dpu_until_their_bound() -> None:
    """``next_synced_event_time``: an event marked with a bound is not a horizon, its bound is;
    the heap is left as it was."""
    k = Kernel()
    k.call_at(50, lambda _: None)
    assert k.next_synced_event_time() == 50
    marked = k.call_at(10, lambda _: None)
    marked.append(80)
    assert k.next_synced_event_time() == 50
    k.call_at(20, lambda _: None).append(30)
    assert k.next_synced_event_time() == 30
    assert k.next_event_time() == 10
    empty = Kernel()
    empty.call_at(10, lambda _: None).append(70)
    assert empty.next_synced_event_time() == 70
    assert empty.next_event_time() == 10


def test_a_scheduled_write_in_a_rolled_back_run_is_undone(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One DPU ends after a few polls while the others run on, far past the write's time, in a
    speculative event: they go back to the end plus the polling latency, before the write, so
    the write's WRAM bytes go back too (the batch kept that WRAM block before writing it), and
    they see the flag at its time. The flag has a WRAM block of its own (no store of the
    program keeps that block first)."""
    rollbacks = {"n": 0}
    rollback = _runner.IsaRunner.rollback

    def counting(self: _runner.IsaRunner) -> None:
        rollbacks["n"] += 1
        rollback(self)

    monkeypatch.setattr(_runner.IsaRunner, "rollback", counting)
    iterations = [3, 20000, 20000, 20000]
    after_ps = 30_000_000
    flag = "        .globl flag\n"
    program = PROGRAM.replace(flag, "        .balign 4096\n" + flag)
    seen, made = _flag_run(backend, iterations, after_ps, True, program)
    assert rollbacks["n"] > 0 and made["batch"] > 0
    expected, _ = _flag_run(backend, iterations, after_ps, False, program)
    assert seen == expected
    assert seen["counts"][0] == [3, 3, 3, 3]
