"""Where the compiled interpreter's time goes in the assembled key-sum kernel, phase by phase.

Runs ``examples/wram_fifo_keysum.py --kernel isa`` on one rank (64 DPUs, trio, one interpreter
thread) with ``examples/isa/keysum.S`` and with three variants of it, each adding one unit of a
phase to every key:

* ``scan``: a second pass over the tasklet's 256-element block (same loop, into registers the
  kernel does not use, so the results stay right): about 28,000 more instructions per key;
* ``dma``: each tasklet reads its block of values twice: 16 more 1 KiB DMAs per key;
* ``barrier``: a fourth ``barrier_wait`` per key.

Each run happens in a fresh interpreter (the compiled loop comes from numba's disk cache) and
every (key, sum) pair is checked. The time is that of the compiled batch alone (the interpreter
loop over the DPUs, not the host's Python; with one thread, its wall time), the fastest of
``--repeat`` runs. A variant's extra time is the cost of its unit; times the units per key of
the kernel (1 scan pass, 32 DMAs, 3 barriers) it is the phase's share of the kernel's time.
What is left is the rest: the loop at the top of each key, the reduction, the FIFO pointers,
the host's events.

python benchmarks/keysum_isa_phases.py             # 3 runs per variant (about 20 s)
python benchmarks/keysum_isa_phases.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEYSUM = ROOT / "examples" / "isa" / "keysum.S"

_SCAN_END = "        jltu r13, CACHE_SIZE, __scan_loop\n"
_SECOND_PASS = """\
        move r13, id
        lsl r13, r13, 10
        add r14, r13, cache_keys
        add r15, r13, cache_values
        move r20, 0
        move r21, 0
        move r13, 0
__scan_again:
        lw r18, r14, 0
        jneq r18, r12, __scan_again_next
        lw r19, r15, 0
        add r21, r21, r19
        addc r20, r20, 0
__scan_again_next:
        add r14, r14, 4
        add r15, r15, 4
        add r13, r13, 1
        jltu r13, CACHE_SIZE, __scan_again
"""
_VALUES_DMA = """\
        add r18, r13, values
        ldma r15, r18, (CACHE_SIZE * 4 / 8) - 1
"""
_LAST_BARRIER = "__main_next:\n        call r23, barrier_wait\n"

#: variant -> (text to find in keysum.S, what replaces it); the units each adds per key
VARIANTS: dict[str, tuple[str, str]] = {
    "base": ("", ""),
    "scan": (_SCAN_END, _SCAN_END + _SECOND_PASS),
    "dma": (_VALUES_DMA, _VALUES_DMA + _VALUES_DMA),
    "barrier": (_LAST_BARRIER, _LAST_BARRIER + "        call r23, barrier_wait\n"),
}
#: units of each phase per key in the kernel itself
UNITS_PER_KEY = {"scan": 1, "dma": 2, "barrier": 3}
UNIT = {"scan": "scan pass", "dma": "16 DMAs", "barrier": "barrier"}


def variant_source(name: str) -> str:
    """``keysum.S`` with variant ``name``'s addition."""
    text = KEYSUM.read_text()
    find, replace = VARIANTS[name]
    if not find:
        return text
    if text.count(find) != 1:
        raise SystemExit(f"keysum.S changed: the anchor of variant {name!r} is not found once")
    return text.replace(find, replace)


def child(name: str, repeat: int) -> dict[str, Any]:
    """Run variant ``name`` ``repeat`` times on one rank; the fastest batch time."""
    sys.path[:0] = [str(ROOT / "examples")]
    import wram_fifo_keysum as ks
    from full_machine import _isa_batch_time, _isa_counting

    import aiopim
    from aiopim.isa import _interp
    from aiopim.isa import assemble as assemble_elf

    source = variant_source(name)

    def build() -> aiopim.DpuProgram:
        return aiopim.load_elf(assemble_elf(source, "v1B"), name=f"keysum-{name}")

    ks.build_binary = build
    _interp.get_run(True)
    batch = _isa_batch_time(time.perf_counter)
    seen = _isa_counting()
    runs = []
    for _ in range(repeat):
        batch[0] = 0.0
        seen[0] = 0
        r = aiopim.run(ks.host, 1, 0, 16, "all", 0, "isa", backend="trio")
        ok = bool(r["complete"] and not r["wrong"])
        runs.append({"batch_s": batch[0], "instructions": seen[0], "ok": ok, "keys": r["checked"]})
    best = min(runs, key=lambda run: run["batch_s"])
    best["ok"] = all(run["ok"] for run in runs)
    return best


def run_child(name: str, repeat: int) -> dict[str, Any]:
    env = dict(
        os.environ,
        AIOPIM_ISA_THREADS="1",
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--repeat", str(repeat)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"variant {name} failed ({out.returncode}):\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant (fastest kept)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.repeat)))
        return 0
    results = {name: run_child(name, args.repeat) for name in VARIANTS}
    base = results["base"]
    key_dpus = base["keys"]  # (key, DPU) pairs
    print(
        f"key-sum kernel, 1 rank, one interpreter thread: batch {base['batch_s']:.3f} s for "
        f"{base['instructions']:,} instructions ({key_dpus} key x DPU pairs)"
    )
    print(
        f"{'variant':<9} {'batch s':>8} {'extra s':>8} {'extra instr':>12} "
        f"{'M instr/s of the extra':>22} {'batch us per unit per DPU':>26} {'share':>7}"
    )
    shares = 0.0
    for name, r in results.items():
        if name == "base":
            continue
        extra = r["batch_s"] - base["batch_s"]
        extra_instr = r["instructions"] - base["instructions"]
        share = extra * UNITS_PER_KEY[name] / base["batch_s"]
        shares += share
        rate = extra_instr / extra / 1e6 if extra > 0 else float("nan")
        print(
            f"{name:<9} {r['batch_s']:>8.3f} {extra:>8.3f} {extra_instr:>12,} {rate:>22,.0f} "
            f"{extra / key_dpus * 1e6:>18.2f} ({UNIT[name]}) {share:>6.0%}"
        )
    print(f"{'rest':<9} {'':>8} {'':>8} {'':>12} {'':>22} {'':>26} {1 - shares:>6.0%}")
    ok = all(r["ok"] for r in results.values())
    print(f"keysum_isa_phases results={'ok' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
