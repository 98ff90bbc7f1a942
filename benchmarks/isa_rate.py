"""Instructions per second of the DPU instruction-set interpreter on a compute-bound loop.

One DPU, 16 threads (a boot chain starts them), each running the same 5-instruction loop body
``--iterations`` times; only ``dpu_launch`` is timed. The interpreter runs it compiled (the
extension) and as plain Python; a plain Python loop doing the same 32-bit arithmetic (same
iterations, same 16 threads one after the other) gives the reference rate, in "instructions" of
the loop body.
Results are checked against the plain loop's values. Prints one line per variant and
``isa_rate jit_ips=... python_ips=... ratio=...`` (ratio = compiled rate / plain-Python rate).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from isa_programs import Asm, elf  # noqa: E402

import aiopim  # noqa: E402
from aiopim.isa import set_engine  # noqa: E402

THREADS = 16
M32 = 0xFFFFFFFF


def program(iterations: int) -> tuple[aiopim.elf.ElfProgram, int]:
    def make(out: int) -> Asm:
        a = Asm()
        a.label("chain")
        a("sub:zrici", ra="id", imm=THREADS - 1, cc="geu", pc="work")
        a("boot:rici", ra="id", imm=1, cc="nz", pc="chain")
        a.label("work")
        a("add:rri", rc="r0", ra="zero", imm=iterations)
        a("add:rri", rc="r1", ra="id", imm=1)
        a.label("loop")
        a("add:rrr", rc="r1", ra="r1", rb="r0")
        a("xor:rrr", rc="r2", ra="r1", rb="r0")
        a("lsl:rri", rc="r2", ra="r2", shift=3)
        a("or:rrr", rc="r1", ra="r1", rb="r2")
        a("add:rrici", rc="r0", ra="r0", imm=-1, cc="nz", pc="loop")
        a("sw:erir", endian="little", ra="id4", off=out, rb="r1")
        a("stop:ci", cc="false", pc=0)
        return a

    hv = {"out": bytes(4 * THREADS)}
    _, lay = elf(make(0), nr_tasklets=THREADS, host_vars=hv)
    prog, _ = elf(make(lay["out"][0]), nr_tasklets=THREADS, host_vars=hv)
    return prog, 5 * iterations * THREADS


def plain_python(iterations: int) -> tuple[list[int], float]:
    start = time.perf_counter()
    out = []
    for t in range(THREADS):
        r0, r1 = iterations, t + 1
        while True:
            r1 = (r1 + r0) & M32
            r2 = r1 ^ r0
            r2 = (r2 << 3) & M32
            r1 = r1 | r2
            r0 = (r0 - 1) & M32
            if r0 == 0:
                break
        out.append(r1)
    return out, time.perf_counter() - start


def interpreted(prog: aiopim.elf.ElfProgram, jit: bool) -> tuple[list[int], float, int]:
    set_engine("compiled" if jit else "python")
    timing: dict[str, float] = {}

    async def main() -> tuple[list[int], int]:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        start = time.perf_counter()
        await dpus.launch()
        timing["wall"] = time.perf_counter() - start
        out = await dpus.copy_from("out", np.uint32, THREADS)
        runner = dpus.dpu_list[0].runner
        return [int(v) for v in out[0]], runner.instructions  # type: ignore[union-attr]

    values, executed = aiopim.run(main)
    return values, timing["wall"], executed


def best(fn, repeat: int):  # type: ignore[no-untyped-def]
    runs = [fn() for _ in range(repeat)]
    return min(runs, key=lambda r: r[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100000, help="loop iterations/thread")
    parser.add_argument("--python-iterations", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="CI sizes: 2,000 and 100 iterations, once"
    )
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.python_iterations, args.repeat = 2000, 100, 1

    warm, _ = program(10)
    interpreted(warm, True)  # imports and first touches outside the timing

    prog, body = program(args.iterations)
    expected, plain_s = best(lambda: plain_python(args.iterations), args.repeat)
    values, jit_s, executed = best(lambda: interpreted(prog, True), args.repeat)
    assert values == expected, "compiled interpreter disagrees with the plain loop"
    plain_ips = body / plain_s
    jit_ips = executed / jit_s

    small, small_body = program(args.python_iterations)
    small_expected, _ = plain_python(args.python_iterations)
    pvalues, py_s, py_executed = best(lambda: interpreted(small, False), args.repeat)
    assert pvalues == small_expected, "pure-Python interpreter disagrees with the plain loop"
    py_ips = py_executed / py_s
    assert small_body <= py_executed

    print(f"plain python loop     {plain_ips:14,.0f} ops/s")
    print(f"interpreter (compiled) {jit_ips:14,.0f} instructions/s  ({executed:,} instructions)")
    print(f"interpreter (python)  {py_ips:14,.0f} instructions/s  ({py_executed:,} instructions)")
    print(f"isa_rate jit_ips={jit_ips:.0f} python_ips={py_ips:.0f} ratio={jit_ips / plain_ips:.2f}")


if __name__ == "__main__":
    main()
