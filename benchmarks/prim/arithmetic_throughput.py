"""PrIM Arithmetic-Throughput on one emulated DPU: MOPS of ADD/SUB/MUL/DIV on int32/int64.

Port of ``Microbenchmarks/Arithmetic-Throughput`` (CMU-SAFARI/prim-benchmarks). Each tasklet
streams 1,024-byte blocks of A from MRAM to WRAM, applies ``x op= scalar`` to every element
(really, with NumPy, on the WRAM view), and writes the block to B. Only the update is timed,
between two barriers; the host keeps the largest per-tasklet cycle count.

python benchmarks/prim/arithmetic_throughput.py [--quick] [--elements N] [--ops add,mul]
    [--types int32]

Last line: ``prim_arithmetic best_mops=<MOPS>`` (the highest figure of the table).
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

BLOCK_BYTES = 1024  # BL=10, as PrIM's run.sh
PRIM_ELEMENTS = 1 << 20  # run.sh: -i 1048576
OPS = ("add", "sub", "mul", "div")
TYPES: dict[str, type[np.signedinteger]] = {"int32": np.int32, "int64": np.int64}


def apply(op: str, x: np.ndarray, scalar: np.integer) -> None:
    """``x[i] op= scalar`` in place with C semantics (wrap-around, truncating division)."""
    if op == "add":
        x += scalar
    elif op == "sub":
        x -= scalar
    elif op == "mul":
        x *= scalar
    elif op == "div":
        # floor division, then towards zero (np.abs would overflow on the most negative value)
        q = x // scalar
        q += ((x - q * scalar) != 0) & ((x < 0) != (scalar < 0))
        np.copyto(x, q)
    else:
        raise ValueError(f"unknown operation {op!r}")


def make_program(op: str, type_name: str, nr_tasklets: int) -> aiopim.Program:
    """The DPU kernel for one operation, element type and tasklet count."""
    dt = np.dtype(TYPES[type_name])
    cost = timing.ARITHMETIC_LOOP_INSTRUCTIONS[(op, type_name)]
    per_block = BLOCK_BYTES // dt.itemsize
    prog = aiopim.Program(f"arith_{op}_{type_name}", nr_tasklets=nr_tasklets)
    args, results = declare_host_symbols(prog)
    barrier = prog.barrier("my_barrier")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        tid = t.me()
        if tid == 0:
            t.mem_reset()
        await t.barrier_wait(barrier)
        size = int(t.view(args)[0])
        scalar = dt.type(size // dt.itemsize)
        cycles = t.view(results)
        cycles[tid] = 0
        base_a = t.mram_heap_pointer + tid * BLOCK_BYTES
        base_b = base_a + size
        cache = t.mem_alloc(BLOCK_BYTES)
        for off in range(0, size, BLOCK_BYTES * t.nr_tasklets):
            await t.mram_read(base_a + off, cache, BLOCK_BYTES)
            await t.barrier_wait(barrier)
            start = await timer_start(t)
            apply(op, t.view(cache, dt, per_block), scalar)
            t.compute(cost * per_block)
            cycles[tid] += await timer_stop(t, start)
            await t.barrier_wait(barrier)
            await t.mram_write(cache, base_b + off, BLOCK_BYTES)

    return prog


async def host(op: str, type_name: str, nr_tasklets: int, nr_elements: int) -> tuple[int, bool]:
    """PrIM's host program: load A, launch, read B and the cycles back, check B."""
    dt = np.dtype(TYPES[type_name])
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**31, nr_elements).astype(dt)  # rand()
    cycles, b = await run_kernel(make_program(op, type_name, nr_tasklets), [a])
    expected = a.copy()
    apply(op, expected, dt.type(nr_elements))
    return cycles, bool(np.array_equal(b, expected))


def measure(
    op: str, type_name: str, nr_tasklets: int, nr_elements: int = PRIM_ELEMENTS
) -> dict[str, float]:
    """Run one point; returns DPU cycles and MOPS (elements x f / cycles)."""
    cycles, correct = run_on_one_dpu(host, op, type_name, nr_tasklets, nr_elements)
    if not correct:
        raise AssertionError(f"{op} {type_name} with {nr_tasklets} tasklets: wrong results")
    mops = nr_elements * frequency_hz(PRIM_CHIP) / cycles / 1e6
    return {"cycles": cycles, "mops": mops}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=PRIM_ELEMENTS)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--types", default=",".join(TYPES))
    parser.add_argument("--tasklets", default=",".join(str(i) for i in range(1, 25)))
    parser.add_argument(
        "--quick", action="store_true", help="CI sizes: 16,384 int32, ADD, 1 and 16 tasklets"
    )
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.elements, opts.ops, opts.types, opts.tasklets = 16384, "add", "int32", "1,16"
    best = 0.0
    counts = [int(x) for x in opts.tasklets.split(",")]
    print(f"{'op':4} {'type':6} " + " ".join(f"{n:>6}" for n in counts) + "   (MOPS)")
    for type_name in opts.types.split(","):
        for op in opts.ops.split(","):
            row = [measure(op, type_name, n, opts.elements)["mops"] for n in counts]
            print(f"{op:4} {type_name:6} " + " ".join(f"{m:6.2f}" for m in row))
            best = max(best, *row)
    print(f"prim_arithmetic best_mops={best:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
