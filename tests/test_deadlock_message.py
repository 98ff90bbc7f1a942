"""A DeadlockError's message groups identical states and cuts long lists; ``.blocked`` keeps
every line (issue 35, item 6). DPU ranges in messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import emu

import aiopim
from aiopim._dpulist import format_dpu_ranges, group_blocked

HERE = Path(__file__)


def _line_of(marker: str) -> int:
    lines = HERE.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(marker))


def _barrier_program(nr_tasklets: int, waits: bool | None = None) -> aiopim.Program:
    """Tasklets wait at a barrier no one completes: every tasklet, or (``waits=True``) those
    whose bit is set in their DPU's index."""
    prog = aiopim.Program("stuck", nr_tasklets=nr_tasklets)
    b = prog.barrier("b", nr_tasklets + 1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if waits is None or (t.dpu.index >> t.me()) & 1:
            await t.barrier_wait(b)  # <- stuck

    return prog


def _deadlock(prog: aiopim.Program, backend: str) -> aiopim.DeadlockError:
    async def host() -> None:
        dpus = await aiopim.DpuSet.alloc(64)
        await dpus.load(prog)
        await dpus.launch()

    with pytest.raises(aiopim.DeadlockError) as info:
        emu(ranks=1, dpus=64).run(host, backend=backend)
    return info.value


def test_64_dpus_of_16_tasklets_at_one_barrier_are_one_line(backend: str) -> None:
    err = _deadlock(_barrier_program(16), backend)
    line = _line_of("# <- stuck")
    assert str(err) == (
        "deadlock at t=0.000110560s: every host task is blocked and no emulated event can ever "
        "wake them. Blocked:\n"
        "  host task waiting for SYNC job(s) on rank(s) [0]\n"
        "  rank 0: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued\n"
        "  tasklets 0-15 of 64 DPUs (0.0.0-0.7.7) waiting on barrier 'b' at "
        f"test_deadlock_message.py:{line} in main"
    )
    assert len(err.blocked) == 2 + 64 * 16  # the data stays complete
    assert err.blocked[-1] == (
        f"DPU 0.7.7 tasklet 15 waiting on barrier 'b' at test_deadlock_message.py:{line} in main"
    )
    assert err.summary == str(err).split("\n  ")[1:]


def test_many_different_states_are_cut_and_counted() -> None:
    err = _deadlock(_barrier_program(6, waits=True), "trio")
    lines = str(err).splitlines()
    assert len(lines) == 1 + 24
    at = f"waiting on barrier 'b' at test_deadlock_message.py:{_line_of('# <- stuck')} in main"
    assert lines[3] == f"  DPU 0.0.1 tasklet 0 {at}"  # DPU 0 has no tasklet waiting
    assert lines[5] == f"  DPU 0.0.3 tasklets 0-1 {at}"
    # 2 lines, then one per DPU 1..63 (no two wait in the same tasklets): 65, 23 shown
    blocked = 2 + sum(bin(i).count("1") for i in range(64))
    assert lines[-1] == (
        f"  … and 42 more lines (DeadlockError.blocked lists all {blocked} blocked actors)"
    )
    assert len(err.blocked) == blocked


def test_grouping_of_report_lines() -> None:
    lines = [
        "host task waiting for a free job slot on rank 0",
        "host task waiting for a free job slot on rank 0",
        "rank 0: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued",
        "rank 1: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued",
        "rank 3: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued",
        "rank 2: head job LAUNCH_RANK running; 2 job(s) queued",
        "DPU 0.0.0 tasklet 0 waiting on mutex 'm'",
        "DPU 0.0.0 tasklet 2 waiting on mutex 'm'",
        "DPU 0.0.0 tasklet 1 waiting on DMA",
        "DPU 0.0.1 tasklet 0 waiting on mutex 'm'",
        "DPU 0.0.1 tasklet 2 waiting on mutex 'm'",
        "DPU 0.0.1 tasklet 1 waiting on DMA",
        "DPU 1.0.0 running",
        "DPU 1.0.1 running",
        "DPU 3.0.0 tasklet 5 waiting on semaphore 's'",
        "something else",
    ]
    assert group_blocked(lines) == [
        "host task waiting for a free job slot on rank 0 (2 times)",
        "ranks 0-1, 3: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued",
        "rank 2: head job LAUNCH_RANK running; 2 job(s) queued",
        "tasklets 0, 2 of 2 DPUs (0.0.0-0.0.1) waiting on mutex 'm'",
        "tasklet 1 of 2 DPUs (0.0.0-0.0.1) waiting on DMA",
        "2 DPUs (1.0.0-1.0.1) running",
        "DPU 3.0.0 tasklet 5 waiting on semaphore 's'",
        "something else",
    ]
    assert group_blocked(lines, limit=3) == [
        "host task waiting for a free job slot on rank 0 (2 times)",
        "ranks 0-1, 3: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued",
        "… and 6 more lines (DeadlockError.blocked lists all 16 blocked actors)",
    ]
    assert group_blocked([]) == []


def test_dpu_ranges() -> None:
    assert format_dpu_ranges([f"0.{i // 8}.{i % 8}" for i in range(64)]) == "0.0.0-0.7.7"
    assert format_dpu_ranges(["1.0.0", "0.7.7", "0.7.6", "2.0.1", "0.0.0"]) == (
        "0.0.0, 0.7.6-0.7.7, 1.0.0, 2.0.1"
    )
    evens = [f"0.{i // 8}.{i % 8}" for i in range(0, 64, 2)]
    assert format_dpu_ranges(evens, limit=3) == "0.0.0, 0.0.2, 0.0.4 … and 29 more"
    assert format_dpu_ranges(["3", "10", "2", "4"]) == "2-4, 10"  # rank indices
    assert format_dpu_ranges(["b", "a"]) == "a, b"  # not DPU names: listed as they are
    assert format_dpu_ranges([]) == ""
