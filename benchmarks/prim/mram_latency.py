"""PrIM MRAM-Latency on one emulated DPU: ``mram_read`` / ``mram_write`` latency vs size.

Port of ``Microbenchmarks/MRAM-Latency`` (CMU-SAFARI/prim-benchmarks). One tasklet copies A
to B in blocks of 8 … 2,048 bytes (``mram_read`` then ``mram_write``) and times either the
reads or the writes; latency = timed cycles / number of transfers, bandwidth = size x f /
latency.

python benchmarks/prim/mram_latency.py [--quick] [--chip v1A] [--transfers 256]

Last line: ``prim_mram_latency read_mbps=<x> write_mbps=<y> bytes=<largest size>``.
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

SIZES = tuple(1 << bl for bl in range(3, 12))  # run.sh: BL = 3 … 11
TRANSFERS = 256  # per point (PrIM moves 16 MiB; the latency per transfer is the same)


def make_program(block: int, write: bool) -> aiopim.Program:
    """The DPU kernel for one block size, timing reads (or writes); one tasklet, as PrIM's run."""
    prog = aiopim.Program(f"mram_latency_{block}", nr_tasklets=1)
    args, results = declare_host_symbols(prog)
    barrier = prog.barrier("my_barrier")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        tid = t.me()
        if tid == 0:
            t.mem_reset()
        await t.barrier_wait(barrier)
        size = int(t.view(args)[0])
        cycles = t.view(results)
        cycles[tid] = 0
        base_a = t.mram_heap_pointer + tid * block
        base_b = base_a + size
        cache = t.mem_alloc(block)
        for off in range(0, size, block * t.nr_tasklets):
            if write:
                await t.mram_read(base_a + off, cache, block)
                start = await timer_start(t)
                await t.mram_write(cache, base_b + off, block)
            else:
                start = await timer_start(t)
                await t.mram_read(base_a + off, cache, block)
            elapsed = await timer_stop(t, start)
            if not write:
                await t.mram_write(cache, base_b + off, block)
            cycles[tid] += elapsed

    return prog


async def host(block: int, write: bool, transfers: int) -> tuple[int, bool]:
    """Load A, launch, read B (= A) and the cycles back."""
    a = np.random.default_rng(0).integers(0, 2**31, transfers * block // 8).astype(np.uint64)
    cycles, b = await run_kernel(make_program(block, write), [a])
    return cycles, bool(np.array_equal(a, b))


def measure(
    block: int, write: bool, chip: str = PRIM_CHIP, transfers: int = TRANSFERS
) -> dict[str, float]:
    """Latency in cycles and bandwidth in MB/s of one transfer size."""
    cycles, correct = run_on_one_dpu(host, block, write, transfers, chip=chip)
    if not correct:
        raise AssertionError(f"MRAM copy with {block}-byte blocks: B differs from A")
    latency = cycles / transfers
    return {"cycles": latency, "mbps": block * frequency_hz(chip) / latency / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", choices=["v1A", "v1B"], default=PRIM_CHIP)
    parser.add_argument("--transfers", type=int, default=TRANSFERS)
    parser.add_argument("--quick", action="store_true", help="CI sizes: 16 transfers per size")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.transfers = 16
    print(f"{'bytes':>6} {'read cyc':>9} {'read MB/s':>10} {'write cyc':>10} {'write MB/s':>11}")
    for size in SIZES:
        r = measure(size, False, opts.chip, opts.transfers)
        w = measure(size, True, opts.chip, opts.transfers)
        print(
            f"{size:6} {r['cycles']:9.1f} {r['mbps']:10.1f} {w['cycles']:10.1f} {w['mbps']:11.1f}"
        )
    print(f"prim_mram_latency read_mbps={r['mbps']:.1f} write_mbps={w['mbps']:.1f} bytes={size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
