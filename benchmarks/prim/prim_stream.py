"""PrIM STREAM on one emulated DPU: COPY-DMA, COPY, ADD, SCALE, TRIAD over MRAM and in WRAM.

Port of ``Microbenchmarks/STREAM`` (CMU-SAFARI/prim-benchmarks), uint64 elements, 1,024-byte
blocks. Each tasklet reads its blocks of A (and B) from MRAM, computes in WRAM (really, with
NumPy on the WRAM views) and writes the result block back. PrIM's kernel names: ``copy.c`` is
COPY-DMA (the block goes back to MRAM untouched), ``copyw.c`` is COPY (copied in WRAM first).

* ``mem="MRAM"`` times the whole loop per tasklet (MRAM bandwidth, DMA included);
* ``mem="WRAM"`` times only the WRAM computation, between barriers (WRAM bandwidth).

Bandwidth counts the bytes read and written (16 per element; 24 for ADD and TRIAD) over the
largest per-tasklet time.

python benchmarks/prim/prim_stream.py [--quick] [--mem MRAM|WRAM] [--elements N]

Last line: ``prim_stream mem=<MRAM|WRAM> best_mbps=<MB/s>`` (the highest figure).
"""

from __future__ import annotations

import argparse

import numpy as np
from prim_common import (
    PRIM_CHIP,
    declare_host_symbols,
    frequency_hz,
    run_kernel,
    run_on_one_dpu,
    timer_start,
    timer_stop,
)

import aiopim
from aiopim import timing

BLOCK_BYTES = 1024  # BL=10
PER_BLOCK = BLOCK_BYTES // 8
#: elements per array (PrIM: 2^21, 16 MiB; 2^17 keeps 64 blocks per tasklet at 16 tasklets)
ELEMENTS = 1 << 17
KERNELS = ("copy-dma", "copy", "add", "scale", "triad")
WRAM_KERNELS = ("copy", "add", "scale", "triad")
#: instructions per element of each kernel's WRAM loop
COST: dict[str, float] = {
    "copy-dma": 0.0,
    "copy": timing.STREAM_COPY_INSTRUCTIONS,
    "add": timing.STREAM_ADD_INSTRUCTIONS,
    "scale": timing.STREAM_SCALE_INSTRUCTIONS,
    "triad": timing.STREAM_TRIAD_INSTRUCTIONS,
}
TWO_INPUTS = ("add", "triad")


def bytes_per_element(kernel: str) -> int:
    """Bytes read and written per element."""
    return 24 if kernel in TWO_INPUTS else 16


def reference(kernel: str, a: np.ndarray, b: np.ndarray, scalar: np.uint64) -> np.ndarray:
    """What the kernel stores (uint64 wrap-around)."""
    out: np.ndarray
    if kernel in ("copy-dma", "copy"):
        out = a.copy()
    elif kernel == "add":
        out = a + b
    elif kernel == "scale":
        out = scalar * a
    else:
        out = a + scalar * b
    return out


def make_program(kernel: str, mem: str, nr_tasklets: int) -> aiopim.Program:
    """The DPU kernel; ``mem`` selects what is timed (``"MRAM"`` or ``"WRAM"``)."""
    cost = timing.loop_instructions(COST[kernel], PER_BLOCK)
    two = kernel in TWO_INPUTS
    prog = aiopim.Program(f"stream_{kernel}_{mem}", nr_tasklets=nr_tasklets)
    args, results = declare_host_symbols(prog)
    barrier = prog.barrier("my_barrier")
    wram = mem == "WRAM"

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        tid = t.me()
        if tid == 0:
            t.mem_reset()
        await t.barrier_wait(barrier)
        start = 0 if wram else await timer_start(t)
        size = int(t.view(args)[0])
        scalar = np.uint64(size // 8)
        cycles = t.view(results)
        cycles[tid] = 0
        base_a = t.mram_heap_pointer + tid * BLOCK_BYTES
        base_b = base_a + size
        base_out = base_a + (2 * size if two else size)
        cache_a = t.mem_alloc(BLOCK_BYTES)
        cache_b = cache_a if kernel == "copy-dma" else t.mem_alloc(BLOCK_BYTES)
        for off in range(0, size, BLOCK_BYTES * t.nr_tasklets):
            await t.mram_read(base_a + off, cache_a, BLOCK_BYTES)
            if two:
                await t.mram_read(base_b + off, cache_b, BLOCK_BYTES)
            if kernel != "copy-dma":
                if wram:
                    await t.barrier_wait(barrier)
                    start = await timer_start(t)
                a = t.view(cache_a, np.uint64, PER_BLOCK)
                b = t.view(cache_b, np.uint64, PER_BLOCK)
                b[:] = reference(kernel, a, b, scalar)
                t.compute(cost)
                if wram:
                    cycles[tid] += await timer_stop(t, start)
                    await t.barrier_wait(barrier)
            await t.mram_write(cache_b, base_out + off, BLOCK_BYTES)
        if not wram:
            cycles[tid] = await timer_stop(t, start)

    return prog


async def host(kernel: str, mem: str, nr_tasklets: int, nr_elements: int) -> tuple[int, bool]:
    """Load A (and B), launch, read the output and the cycles back, check the output."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**31, nr_elements).astype(np.uint64)
    b = rng.integers(0, 2**31, nr_elements).astype(np.uint64)
    inputs = [a, b] if kernel in TWO_INPUTS else [a]
    cycles, out = await run_kernel(make_program(kernel, mem, nr_tasklets), inputs)
    expected = reference(kernel, a, b, np.uint64(nr_elements))
    return cycles, bool(np.array_equal(out, expected))


def measure(kernel: str, mem: str, nr_tasklets: int, nr_elements: int = ELEMENTS) -> float:
    """Sustained bandwidth in MB/s of one kernel at one tasklet count."""
    cycles, correct = run_on_one_dpu(host, kernel, mem, nr_tasklets, nr_elements)
    if not correct:
        raise AssertionError(f"STREAM {kernel} ({mem}, {nr_tasklets} tasklets): wrong output")
    seconds = cycles / frequency_hz(PRIM_CHIP)
    return bytes_per_element(kernel) * nr_elements / seconds / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mem", choices=["MRAM", "WRAM"], default="MRAM")
    parser.add_argument("--elements", type=int, default=ELEMENTS)
    parser.add_argument("--tasklets", default=",".join(str(i) for i in range(1, 17)))
    parser.add_argument(
        "--quick", action="store_true", help="CI sizes: 16,384 elements, 1 and 16 tasklets"
    )
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.elements, opts.tasklets = 16384, "1,16"
    best = 0.0
    counts = [int(x) for x in opts.tasklets.split(",")]
    kernels = KERNELS if opts.mem == "MRAM" else WRAM_KERNELS
    print(f"{'kernel':9}" + "".join(f"{n:>7}" for n in counts) + f"   (MB/s, {opts.mem})")
    for kernel in kernels:
        row = [measure(kernel, opts.mem, n, opts.elements) for n in counts]
        print(f"{kernel:9}" + "".join(f"{bw:7.1f}" for bw in row))
        best = max(best, *row)
    print(f"prim_stream mem={opts.mem} best_mbps={best:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
