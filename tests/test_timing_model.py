"""The timing model: exact virtual times from the constants of aiopim.timing, and PrIM points."""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from helpers import V1B_CYCLE_PS
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_helpers import host_array, run_dpu

import aiopim
from aiopim import timing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks" / "prim"))

Body = Callable[[aiopim.Tasklet], Awaitable[None]]
MRAM_BUF = 1 << 16  # MRAM scratch bytes


def finish_times(
    body: Body, nr_tasklets: int, chip: str = "v1B", backend: str = "asyncio"
) -> list[int]:
    """Run ``body`` on every tasklet of one DPU; each tasklet's finish time in ps after boot."""
    prog = aiopim.Program("timing", nr_tasklets=nr_tasklets)
    done = prog.host("done_ps", np.uint64, nr_tasklets)
    prog.wram("buf", np.uint8, 2048 * min(nr_tasklets, 8))  # buffers of tasklets 0-7
    prog.mram("scratch", np.uint8, MRAM_BUF)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await body(t)
        await t.flush()
        t.view(done)[t.me()] = t.dpu.kernel.now - t.dpu.boot_time

    out = run_dpu(prog, chip=chip, backend=backend)
    assert out.error is None
    return [int(x) for x in host_array(out, prog, done.name)]


def buffers(t: aiopim.Tasklet) -> tuple[int, int]:
    """This tasklet's 2,048-byte WRAM buffer and MRAM scratch block (no runtime calls)."""
    wram = t.program.address_of("buf") + 2048 * t.me()
    mram = t.program.address_of("scratch") + 2048 * t.me()
    return wram, mram


def dma_cycles(size: int, write: bool) -> Fraction:
    alpha = timing.DMA_WRITE_ALPHA_CYCLES if write else timing.DMA_READ_ALPHA_CYCLES
    return alpha + Fraction(timing.DMA_BETA_CYCLES_PER_BYTE) * size


def compute(k: int) -> Body:
    async def body(t: aiopim.Tasklet) -> None:
        t.compute(k)

    return body


# --- the revolver pipeline ------------------------------------------------------------------
def test_one_tasklet_issues_one_instruction_every_11_cycles(backend: str) -> None:
    assert finish_times(compute(1000), 1, backend=backend) == [
        1000 * timing.REVOLVER_CYCLES * V1B_CYCLE_PS
    ]


@pytest.mark.parametrize("n", [1, 2, 5, 10, 11, 12, 16])
def test_n_tasklets_share_the_pipeline(n: int) -> None:
    k = 600
    expected = k * max(timing.REVOLVER_CYCLES, n) * V1B_CYCLE_PS
    assert finish_times(compute(k), n) == [expected] * n


def test_pipeline_saturates_at_11_tasklets() -> None:
    """DPU throughput (instructions per cycle) grows as n/11, then stays at 1."""
    k = 300
    ipc = {}
    for n in (1, 4, 10, 11, 12, 16):
        cycles = Fraction(max(finish_times(compute(k), n)), V1B_CYCLE_PS)
        ipc[n] = n * k / cycles
    assert ipc == {
        1: Fraction(1, 11),
        4: Fraction(4, 11),
        10: Fraction(10, 11),
        11: 1,
        12: 1,
        16: 1,
    }


def test_v1a_times_round_up_to_the_picosecond() -> None:
    k, n = 1000, 24
    exact = Fraction(k * n * 10**12, timing.V1A.frequency_hz)
    assert finish_times(compute(k), n, chip="v1A") == [math.ceil(exact)] * n


def test_a_tasklet_leaving_speeds_up_the_others() -> None:
    """12 tasklets share the pipeline until the short one ends; then the 11 left run at 1/11."""

    async def body(t: aiopim.Tasklet) -> None:
        t.compute(100 if t.me() == 0 else 1000)

    got = finish_times(body, 12)
    short = 100 * 12
    long = short + 900 * 11
    assert got == [short * V1B_CYCLE_PS] + [long * V1B_CYCLE_PS] * 11


# --- the DMA engine -------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 256).map(lambda x: 8 * x), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_dma_sequence_of_one_tasklet_costs_alpha_plus_beta_size(
    transfers: list[tuple[int, bool]],
) -> None:
    async def body(t: aiopim.Tasklet) -> None:
        buf, base = buffers(t)
        for size, write in transfers:
            if write:
                await t.mram_write(buf, base, size)
            else:
                await t.mram_read(base, buf, size)

    expected = sum(dma_cycles(size, write) for size, write in transfers) * V1B_CYCLE_PS
    assert finish_times(body, 1) == [expected]


def test_dma_engine_serialises_transfers_and_overlaps_alpha(backend: str) -> None:
    """Two 2,048-byte reads at once: the second waits for the first's bytes, not its alpha."""

    async def body(t: aiopim.Tasklet) -> None:
        buf, base = buffers(t)
        await t.mram_read(base, buf, 2048)

    beta = Fraction(timing.DMA_BETA_CYCLES_PER_BYTE)
    first = dma_cycles(2048, False)
    second = beta * 2048 + first
    assert finish_times(body, 2, backend=backend) == [first * V1B_CYCLE_PS, second * V1B_CYCLE_PS]


def test_mram_peak_is_two_bytes_per_cycle() -> None:
    """Eight tasklets each reading 2,048 bytes: the engine moves 2 B/cycle plus one alpha."""

    async def body(t: aiopim.Tasklet) -> None:
        buf, base = buffers(t)
        await t.mram_read(base, buf, 2048)

    last = max(finish_times(body, 8))
    assert last == (timing.DMA_READ_ALPHA_CYCLES + 8 * 2048 // 2) * V1B_CYCLE_PS


def test_dma_overlaps_other_tasklets_compute() -> None:
    """A tasklet waiting for its DMA leaves the pipeline to the others."""

    async def body(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            buf, base = buffers(t)
            await t.mram_read(base, buf, 2048)
            t.compute(10)
        else:
            t.compute(100)

    got = finish_times(body, 2)
    assert got == [
        (dma_cycles(2048, False) + 10 * timing.REVOLVER_CYCLES) * V1B_CYCLE_PS,
        100 * timing.REVOLVER_CYCLES * V1B_CYCLE_PS,
    ]


def test_loop_instruction_costs_round_per_call() -> None:
    assert timing.loop_instructions(timing.STREAM_COPY_INSTRUCTIONS, 128) == 427
    assert timing.loop_instructions(timing.STREAM_ADD_INSTRUCTIONS, 128) == 608
    assert timing.MUL_INT64_CALL_INSTRUCTIONS == 132


# --- PrIM points (virtual time: deterministic, not a wall-clock assertion) -----------------
@pytest.mark.parametrize(
    "key",
    [
        "arith/add/int32/tl1/cycles",
        "arith/add/int64/tl11/cycles",
        "arith/ratio/mul-int32/tl11/tl24",
        "mram/write/256/mbps",
        "stream-mram/copy-dma/sat2",
        "stream-mram/copy/sat6",
    ],
)
def test_prim_points_within_10_percent(key: str) -> None:
    import report
    from published import POINTS

    (point,) = [p for p in POINTS if p.key == key and p.tag != "R"]
    assert abs(report.emulated(key) / point.published - 1) <= report.TOLERANCE


def test_prim_kernel_results_are_checked_and_identical_on_both_backends() -> None:
    import prim_common
    import prim_stream

    results = [
        prim_common.run_on_one_dpu(prim_stream.host, "triad", "MRAM", 4, 4096, backend=b)
        for b in ("asyncio", "trio")
    ]
    assert results[0] == results[1]
    assert results[0][1] is True  # the DPU output equals a + s * b
