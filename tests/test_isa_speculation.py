"""Speculative scheduler events: the running DPUs advance far ahead in one call of the loop and
the ones that ran past the point where the host could first react (an end or a fault plus the
polling latency) go back to a checkpoint. Everything the host sees must be what chunks of one
polling latency give: values written by the DPUs (WRAM and MRAM), DPU run times, faults, the
times at which the host reacts, and the trace, on both backends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiopim
from aiopim import DpuError, timing
from aiopim.isa import _runner, assemble, set_engine

THREADS = 4
TRAIL_FILL = 7
#: a DPU whose iterations word has this bit faults (``fault 3``) instead of stopping
FAULT_BIT = 1 << 31

#: the boot chain (thread t boots thread t + 1 up to ``NR_TASKLETS``), then every thread reads
#: ``iterations`` into r1 at ``work``
BOOT_CHAIN = """
        .text
        .globl __bootstrap
__bootstrap:
        jeq id, NR_TASKLETS - 1, work
        boot id, 1
work:
        lw r1, zero, iterations
"""

#: each thread counts its polls of ``flag`` (at most ``iterations`` of them), writes the count
#: to WRAM and by DMA to slot ``count % 1024`` of its MRAM trail at every poll (after reading
#: that slot: a DPU rolled back must not leave later counts there, even in a page first mapped
#: by a read), then stores it in ``counts``
PROGRAM = (
    """
        .set NR_TASKLETS, 4"""
    + BOOT_CHAIN
    + """        lsl r9, r1, 1
        lsr r9, r9, 1               // without the fault bit
        move r2, 0
        lsl r5, id, 3
        add r6, r5, buffer          // this thread's 8 bytes of WRAM
        add r12, r5, inbox          // 8 more bytes of WRAM
        lsl r7, id, 13
        add r7, r7, trail           // and its 1024 slots of MRAM
loop:
        lw r3, zero, flag
        add r2, r2, 1
        sw r6, 0, r2
        and r11, r2, 1023
        lsl r11, r11, 3
        add r11, r11, r7
        ldma r12, r11, 0            // read the slot first: its page is mapped by a read
        sdma r6, r11, 0
        jnz r3, done
        add r9, r9, -1, nz, loop
done:
        lsl r8, id, 2
        sw r8, counts, r2
        lsr r10, r1, 31
        jnz r10, broken
        stop
broken:
        fault 3

        .section .data.__sys_host
        .balign 8
        .globl buffer
buffer:
        .zero NR_TASKLETS * 8
inbox:
        .zero NR_TASKLETS * 8
        .globl iterations
iterations:
        .quad 0
        .globl flag
flag:
        .quad 0
        .globl counts
counts:
        .zero NR_TASKLETS * 4

        .section .mram.noinit
        .balign 8
        .globl trail
trail:
        .space NR_TASKLETS * 8192
"""
)


@pytest.fixture(scope="module")
def binary() -> aiopim.DpuProgram:
    return aiopim.load_elf(assemble(PROGRAM, "v1B"), name="speculation")


def _run(
    binary: aiopim.DpuProgram,
    iterations: list[list[int]],
    backend: str,
    speculate: bool,
    explore: int | None = None,
    relaunch: bool = False,
) -> tuple[dict[str, Any], tuple[int, int]]:
    """Rank 0's DPUs count ``iterations`` polls (some fault at their end); the host then sets
    ``flag`` on rank 1 (still running) with a parallel transfer, as soon as rank 0 is done.
    What the host saw, and (speculative events, DPUs sent back to their checkpoint). With
    ``explore``, simultaneous events are permuted by that seed. With ``relaunch``, every DPU
    first runs one iteration to its end (its page map then holds the trail's pages)."""
    nr_ranks = len(iterations)
    nr = len(iterations[0])
    machine = aiopim.MachineConfig(nr_ranks=nr_ranks, nr_dpus_per_rank=nr)
    old = _runner._SPECULATE_CHUNKS
    _runner._SPECULATE_CHUNKS = 8 if speculate else 1 << 40
    seen: dict[str, Any] = {}

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=nr_ranks)
        await dpus.load(binary)
        ranks = dpus.ranks
        # the trails start as private pages of sevens (one copy per DPU, not a broadcast); the
        # loop maps them by their first read
        fill = np.full(2048 * THREADS, TRAIL_FILL, np.uint32)
        await dpus.copy_to("trail", [fill.copy() for _ in range(len(dpus))])
        if relaunch:
            await dpus.copy_to("iterations", np.array([1, 0], np.uint32))
            await dpus.launch()
        for rank, its in zip(ranks, iterations, strict=True):
            await rank.copy_to("iterations", [np.array([n, 0], np.uint32) for n in its])
        for rank in ranks:
            await rank.launch(wait=False)
        try:
            await ranks[0].sync()
        except DpuError as exc:
            seen["error"] = exc.code.name
        seen["reacted"] = round(aiopim.now() * 1e12)
        # what rank 1's DPUs wrote to WRAM up to now, read while they run
        seen["buffer_now"] = (
            await ranks[1].copy_from("buffer", np.uint32, 2 * THREADS, parallel=True)
        ).tolist()
        await ranks[1].copy_to("flag", np.array([1, 0], np.uint32), parallel=True)
        for rank in ranks[1:]:
            await rank.sync()
        seen["counts"] = (await dpus.copy_from("counts", np.uint32, THREADS)).tolist()
        seen["trail"] = (await dpus.copy_from("trail", np.uint32, 2048 * THREADS)).tolist()
        seen["runs"] = [d.last_run_ps for d in dpus.dpu_list]
        seen["ends"] = [d.boot_time + d.last_run_ps for d in dpus.dpu_list]
        seen["faults"] = [None if f is None else f.time_ps for f in dpus.faults]
        seen["end"] = round(aiopim.now() * 1e12)

    try:
        emu = aiopim.Emulator(machine, seed=explore or 0, explore=explore is not None)
        emu.run(main, backend=backend)
    finally:
        _runner._SPECULATE_CHUNKS = old
    seen["trace"] = emu.recorder.to_jsonl() if emu.recorder is not None else None
    scheduler = emu.kernel.services["isa"]
    assert isinstance(scheduler, _runner.IsaScheduler)
    stats = (scheduler.speculations, scheduler.rollbacks)
    assert (stats[0] > 0) == speculate
    return seen, stats


@pytest.mark.parametrize(
    ("backend", "jit"),
    # the pure-Python loop on one backend, in the long run (about 10 s of CPU)
    [("asyncio", True), ("trio", True), pytest.param("trio", False, marks=pytest.mark.long)],
    ids=["asyncio-jit", "trio-jit", "trio-python"],
)
def test_a_rank_ending_early_rolls_the_others_back(
    binary: aiopim.DpuProgram, backend: str, jit: bool
) -> None:
    set_engine("compiled" if jit else "python")
    try:
        _rolls_back(binary, backend)
    finally:
        set_engine(None)


def _rolls_back(binary: aiopim.DpuProgram, backend: str) -> None:
    # rank 0's DPUs end at different times; rank 1 runs until the host sets its flag
    iterations = [[150, 20, 450, 60], [1 << 20] * 4]
    lockstep, _ = _run(binary, iterations, backend, speculate=False)
    seen, (_, rollbacks) = _run(binary, iterations, backend, speculate=True)
    assert seen == lockstep
    # every end of rank 0 but the last sent the DPUs still running back once
    assert rollbacks >= 3 * 4 + 3
    poll = timing.COMPLETION_POLL_LATENCY_PS
    assert lockstep["reacted"] == max(lockstep["ends"][:4]) + poll
    assert lockstep["counts"][:4] == [[n] * THREADS for n in iterations[0]]
    # rank 1 polled until the flag write, long after rank 0's last end
    assert all(450 < c < 1 << 20 for row in lockstep["counts"][4:] for c in row)
    for counts, trail in zip(lockstep["counts"], lockstep["trail"], strict=True):
        assert [trail[2048 * t + 2 * (c % 1024)] for t, c in enumerate(counts)] == counts
        # the slots after the last count were never written
        assert all(trail[2048 * t + 2 * (c % 1024) + 2] == TRAIL_FILL for t, c in enumerate(counts))


def test_a_second_launch_rolls_back_pages_its_first_run_mapped(
    binary: aiopim.DpuProgram, backend: str
) -> None:
    """The page map outlives a run: the second launch's checkpoints must clear the write marks
    of the pages the first run mapped, so that the rolled-back trail writes are undone."""
    iterations = [[150, 20, 450, 60], [1 << 20] * 4]
    lockstep, _ = _run(binary, iterations, backend, speculate=False, relaunch=True)
    seen, (_, rollbacks) = _run(binary, iterations, backend, speculate=True, relaunch=True)
    assert rollbacks > 0
    assert seen == lockstep


def test_a_fault_rolls_the_others_back(binary: aiopim.DpuProgram, backend: str) -> None:
    iterations = [[300, 40 | FAULT_BIT, 5000, 120], [1 << 20] * 4]
    lockstep, _ = _run(binary, iterations, backend, speculate=False)
    seen, (_, rollbacks) = _run(binary, iterations, backend, speculate=True)
    assert seen == lockstep
    assert rollbacks > 0
    assert lockstep["error"] == "DPU_ERR_DPU_FAULT"
    fault = lockstep["faults"][1]
    assert lockstep["reacted"] == fault + timing.COMPLETION_POLL_LATENCY_PS
    assert [f is None for f in lockstep["faults"]] == [True, False] + [True] * 6


@settings(max_examples=12, deadline=None)
@given(
    iterations=st.lists(
        st.integers(1, 3000) | st.integers(1, 400).map(lambda n: n | FAULT_BIT),
        min_size=3,
        max_size=3,
    ),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_speculation_changes_nothing_the_host_sees(
    binary: aiopim.DpuProgram, iterations: list[int], backend: str
) -> None:
    runs = [iterations, [1 << 20] * 3]
    set_engine("compiled")
    try:
        assert (
            _run(binary, runs, backend, speculate=True)[0]
            == _run(binary, runs, backend, speculate=False)[0]
        )
    finally:
        set_engine(None)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_pages_first_mapped_while_speculating_are_restored(
    binary: aiopim.DpuProgram, backend: str
) -> None:
    """Rank 0 ends after a few polls, while rank 1 has run far ahead in the first speculative
    event; its MRAM trail page, mapped there by a read and then written, must come back as it
    was (rank 1 stops polling long before it would write those slots again)."""
    set_engine("compiled")
    try:
        iterations = [[5], [1 << 20]]
        lockstep, _ = _run(binary, iterations, backend, speculate=False)
        seen, (_, rollbacks) = _run(binary, iterations, backend, speculate=True)
    finally:
        set_engine(None)
    assert rollbacks > 0
    assert seen == lockstep
    assert lockstep["counts"][1][0] < 200


@pytest.mark.parametrize("seed", [1, 2])
def test_exploration_permutes_the_same_events(binary: aiopim.DpuProgram, seed: int) -> None:
    """Reports are scheduled in the chunks' order, so exploration draws the same keys."""
    runs = [[150, 20 | FAULT_BIT, 450, 60], [1 << 20] * 4]
    set_engine("compiled")
    try:
        lockstep, _ = _run(binary, runs, "trio", speculate=False, explore=seed)
        seen, (_, rollbacks) = _run(binary, runs, "trio", speculate=True, explore=seed)
    finally:
        set_engine(None)
    assert rollbacks > 0
    assert seen == lockstep


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_a_transfer_into_wram_keeps_each_block_once_before_writing_it(engine: str) -> None:
    """While a checkpoint is kept, the loop copies each 2 KiB WRAM block to the checkpoint's
    copy before its first write since the checkpoint (here by two ``ldma`` of zeros), and never
    again: the copy holds the bytes of the checkpoint."""
    from aiopim.isa import _engine
    from aiopim.isa import _layout as L
    from aiopim.isa._semantics import NCOL

    e = _engine.engine(engine)
    nthreads = 2
    regs, th, dv, atomic, dma = e.fresh_state(nthreads, 0, 1 << 20)
    th[0, L.T_RUN] = L.RUN_STOPPED
    wram = (np.arange(65536) % 251 + 1).astype(np.uint8)
    checkpoint = wram.copy()
    saved = np.zeros_like(wram)
    pmap = np.full(16, L.PM_ZERO, np.int64)  # MRAM that reads as zeros
    code = np.zeros((1, NCOL), np.int64)
    hw = np.zeros((1, 4), np.int64)
    core = e.Core(code, regs, th, dv, atomic, wram, dma, pmap, e.PageTable(), hw)
    core.set_checkpoint((regs.copy(), th.copy(), dv.copy(), atomic.copy(), dma.copy(), saved))
    dv[L.D_WKEEP] = 1
    dv[L.D_WBLOCK] = e.wram_block_shift(len(wram))
    assert dv[L.D_WBLOCK] == 11
    for cycle, (waddr, size) in enumerate([(5000, 3000), (6400, 800)], start=100):
        dv[L.D_CYCLE] = cycle
        dv[L.D_DMA_MIN] = cycle
        th[1, L.T_RUN] = L.RUN_DMA
        th[1, L.T_NEXT] = cycle
        dma[1] = (L.DMA_LDMA, waddr, 0, size)
        # the transfer completes, then thread 1 would issue: the instruction bound stops it
        assert e.run(core, cycle + 1, 0) == L.R_STEP
        assert th[1, L.T_RUN] == L.RUN_READY
        assert not wram[waddr : waddr + size].any()
    assert dv[L.D_WKEPT] == 0b1100  # blocks 2 and 3 (bytes 4096-8191)
    assert np.array_equal(saved[4096:8192], checkpoint[4096:8192])
    assert not saved[:4096].any() and not saved[8192:].any()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_transfer_python_serves_keeps_its_wram_block_and_rolls_back(
    binary: aiopim.DpuProgram, backend: str
) -> None:
    """A transfer into WRAM that Python serves while the batch keeps a checkpoint's WRAM (a
    page the batch does not hold) keeps the block first; a rollback brings back the kept
    blocks only."""
    from aiopim.isa import _interp
    from aiopim.isa import _layout as I

    seen: dict[str, Any] = {}

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(nr_dpus=1)
        await dpus.load(binary)
        fill = np.full(2048 * THREADS, TRAIL_FILL, np.uint32)
        await dpus.copy_to("trail", fill)
        await dpus.copy_to("iterations", np.array([2, 0], np.uint32))
        await dpus.launch()
        dpu = dpus.dpu_list[0]
        r = dpu.runner
        assert isinstance(r, _runner.IsaRunner)
        wram = dpu.wram
        wram[:] = (np.arange(len(wram)) % 251 + 1).astype(np.uint8)
        before = wram.copy()
        r.checkpoint()
        r.engine.save_state(r.core)  # what the batch does before it runs the DPU
        r.dv[I.D_WKEEP] = 1  # as the batch keeps WRAM
        r.dv[I.D_WKEPT] = 0
        r.dv[I.D_WBLOCK] = _interp.wram_block_shift(len(wram))
        inbox = binary.address_of("inbox")
        r.th[1, I.T_RUN] = I.RUN_DMA
        r.th[1, I.T_NEXT] = r.dv[I.D_CYCLE]
        trail = binary.address_of("trail") & (dpu.mram.size - 1)  # its MRAM offset
        r.dma[1] = (I.DMA_LDMA, inbox, trail, 16)
        r._dma_due()
        seen["inbox"] = wram[inbox : inbox + 16].tolist()
        seen["mram"] = dpu.mram.read(trail, 16).tolist()
        seen["kept"] = int(r.dv[I.D_WKEPT])
        wram[len(wram) - 8 :] = 0  # a write in a block not kept: not undone
        r.rollback()
        seen["restored"] = bool(np.array_equal(wram[:-8], before[:-8]))
        seen["tail"] = wram[-8:].tolist()
        seen["block"] = inbox >> 11
        seen["before"] = before[inbox : inbox + 16].tolist()

    aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=1)).run(main, backend=backend)
    assert seen["inbox"] == seen["mram"] != seen["before"]
    assert seen["kept"] == 1 << seen["block"]
    assert seen["restored"]
    assert seen["tail"] == [0] * 8


#: sixteen threads, each counting down its own number of iterations in a loop of ALU
#: instructions (long windows of one steady issue pattern), then storing its count
STEADY = (
    """
        .set NR_TASKLETS, 16"""
    + BOOT_CHAIN
    + """        move r5, id
        add r1, r1, r5
        move r2, 0
loop:
        add r2, r2, 1
        xor r3, r2, r1
        add r1, r1, -1, nz, loop
        lsl r4, id, 2
        sw r4, counts, r2
        stop

        .section .data.__sys_host
        .balign 8
        .globl iterations
iterations:
        .quad 0
        .globl counts
counts:
        .zero NR_TASKLETS * 4
"""
)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_rollback_in_a_steady_issue_pattern_finds_the_pattern_again(backend: str) -> None:
    """Rank 0's DPUs end early while rank 1's run on in one issue pattern of sixteen threads; the
    speculative event sends rank 1 back to its checkpoint, whose work array is not kept: its
    threads must issue as in lockstep chunks (same counts, run times and end)."""
    binary = aiopim.load_elf(assemble(STEADY, "v1B"), name="steady")

    def run(speculate: bool) -> tuple[dict[str, Any], int]:
        seen: dict[str, Any] = {}

        async def main() -> None:
            dpus = await aiopim.DpuSet.alloc(nr_ranks=2)
            await dpus.load(binary)
            ranks = dpus.ranks
            for rank, its in zip(ranks, ([50, 83], [20000, 30011]), strict=True):
                await rank.copy_to("iterations", [np.array([n, 0], np.uint32) for n in its])
            for rank in ranks:
                await rank.launch(wait=False)
            await ranks[0].sync()
            seen["reacted"] = round(aiopim.now() * 1e12)
            await ranks[1].sync()
            seen["counts"] = (await dpus.copy_from("counts", np.uint32, 16)).tolist()
            seen["runs"] = [d.last_run_ps for d in dpus.dpu_list]
            seen["end"] = round(aiopim.now() * 1e12)

        old = _runner._SPECULATE_CHUNKS
        _runner._SPECULATE_CHUNKS = 2 if speculate else 1 << 40
        try:
            emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=2))
            emu.run(main, backend=backend)
        finally:
            _runner._SPECULATE_CHUNKS = old
        scheduler = emu.kernel.services["isa"]
        assert isinstance(scheduler, _runner.IsaScheduler)
        return seen, scheduler.rollbacks

    seen, rollbacks = run(True)
    expected, none = run(False)
    assert rollbacks > 0 and none == 0
    assert seen == expected
    assert seen["counts"][2] == [20000 + t for t in range(16)]
