"""What stores cost the compiled loop's windows: 16 threads in a loop with one store each.

Each thread of one DPU runs 20,000 iterations of a loop of ``K`` instructions, one of which is a
store to the thread's own word (``sw id4, 64, r1``; no thread reads another's), the others
adds. A store ends the window it falls in (see ``docs/isa-semantics.md``), so the loop's cost
per instruction grows as stores get denser, and when the threads store in step, windows often
have to run again. Printed: nanoseconds per DPU instruction (the fastest of 3 runs of the
compiled loop, ``Machine.run`` of ``tests/isa_programs.py``) and the ratio to the same loop
with no store, run in the same process.

    python benchmarks/window_stores.py               # K = 6, 24, 200
    python benchmarks/window_stores.py 12 48
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from isa_programs import Asm, Machine  # noqa: E402

from aiopim.isa import _interp as I  # noqa: E402
from aiopim.isa import assemble_program, text_words  # noqa: E402

ITERATIONS = 20_000


def program(k: int, store: bool) -> Asm:
    """The loop of ``k`` instructions (with its store, or an add in its place)."""
    body = ["        add r1, r1, r2"] * (k - 3)
    body.append("        sw id4, 64, r1" if store else "        add r1, r1, r2")
    text = f"""
        jeq id, 15, go
        boot id, 1
go:     move r1, 0
        move r2, 7
        move r4, 0
        move r5, {ITERATIONS}
loop:
{chr(10).join(body)}
        add r4, r4, 1
        jltu r4, r5, loop
        stop
"""
    asm = Asm()
    for word in text_words(assemble_program(text).elf):
        asm.raw(word)
    return asm


def ns_per_instruction(asm: Asm) -> float:
    """The fastest of 3 runs of ``asm`` on 16 threads, per DPU instruction."""
    best, count = float("inf"), 0
    for _ in range(3):
        m = Machine(asm, threads=16, jit=True)
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
        start = time.perf_counter()
        reason = m.run()
        best = min(best, time.perf_counter() - start)
        assert reason == I.R_END
        count = int(m.dv[I.D_INSTR])
    return best / count * 1e9


def main(argv: list[str]) -> int:
    ks = [int(a) for a in argv] or [6, 24, 200]
    if min(ks) < 4:
        raise SystemExit("K must be at least 4 (the store, an add, the counter, the jump)")
    print(f"16 threads x {ITERATIONS:,} iterations of a K-instruction loop, compiled loop")
    print(f"{'K':>5} {'with a store':>14} {'without':>10} {'ratio':>7}")
    for k in ks:
        stored = ns_per_instruction(program(k, True))
        plain = ns_per_instruction(program(k, False))
        print(f"{k:>5} {stored:>11.2f} ns {plain:>7.2f} ns {stored / plain:>6.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
