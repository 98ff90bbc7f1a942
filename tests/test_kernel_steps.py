"""One tasklet step instead of two: fused runtime commands keep every time and order."""

from __future__ import annotations

import numpy as np
from helpers import emu
from hypothesis import given, settings
from hypothesis import strategies as st

import aiopim

SIZES = st.integers(1, 32).map(lambda k: 8 * k)


def _program(
    fused: bool, nr_tasklets: int, work: list[tuple[int, int, bool]]
) -> tuple[aiopim.Program, list[tuple[int, int, int]]]:
    """Each tasklet charges instructions then moves bytes by DMA, round after round; it logs
    (round, tasklet, virtual ps) after every DMA. ``fused``: the runtime's
    ``compute; mram_read`` path; otherwise an explicit ``flush`` first (two steps)."""
    prog = aiopim.Program("steps", nr_tasklets=nr_tasklets)
    m = prog.mram("m", np.uint8, 4096)
    buf = prog.wram("buf", np.uint8, 256 * nr_tasklets)
    log: list[tuple[int, int, int]] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        wram = prog.address_of(buf) + 256 * t.me()
        for i, (instructions, size, write) in enumerate(work):
            t.compute(instructions * (t.me() + 1))
            if not fused:
                await t.flush()
            if write:
                await t.mram_write(wram, t.mram_address(m), size)
            else:
                await t.mram_read(t.mram_address(m), wram, size)
            log.append((i, t.me(), t.runner.kernel.now))

    return prog, log


def _run(fused: bool, nr_tasklets: int, work: list[tuple[int, int, bool]]) -> list[object]:
    prog, log = _program(fused, nr_tasklets, work)

    async def host() -> int:
        dpus = await aiopim.DpuSet.alloc(2)
        await dpus.load(prog)
        await dpus.launch()
        return aiopim.current_emulator().kernel.now

    end = emu(ranks=1, dpus=2).run(host)
    return [end, log]


@settings(max_examples=25, deadline=None)
@given(
    nr_tasklets=st.integers(1, 14),
    work=st.lists(st.tuples(st.integers(1, 300), SIZES, st.booleans()), min_size=1, max_size=5),
)
def test_compute_then_dma_in_one_step_keeps_every_time_and_order(
    nr_tasklets: int, work: list[tuple[int, int, bool]]
) -> None:
    assert _run(True, nr_tasklets, work) == _run(False, nr_tasklets, work)


def test_barrier_arrival_order_and_times() -> None:
    """16 tasklets of different lengths meet at a barrier three times: all leave when the last
    one arrives; the last arrival goes on at once, the others resume in tasklet order."""
    prog = aiopim.Program("barrier", nr_tasklets=16)
    barrier = prog.barrier("b", 16)
    log: list[tuple[int, int, int]] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        for r in range(3):
            t.compute(10 * (16 - t.me()) if r % 2 else 10 * (t.me() + 1))
            await t.barrier_wait(barrier)
            log.append((r, t.me(), t.runner.kernel.now))

    async def host() -> None:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        await dpus.launch()

    emu(ranks=1, dpus=1).run(host)
    for r in range(3):
        times = {now for rr, _, now in log if rr == r}
        assert len(times) == 1  # everybody leaves at the last arrival
    assert [me for r, me, _ in log if r == 0] == [15, *range(15)]
    assert [me for r, me, _ in log if r == 1] == list(range(16))
    rounds = [next(now for rr, _, now in log if rr == r) for r in range(3)]
    assert rounds[0] < rounds[1] < rounds[2]
