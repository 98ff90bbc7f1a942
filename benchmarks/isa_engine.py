"""The instruction-set engine on compiled C and on a hand-written loop, and what its one
shortcut buys.

Workloads: PrIM's RED and TRNS as built by UPMEM's clang (``benchmarks/prim_isa.py``'s host
programs, 64 DPUs, 16 tasklets), and ``isa_rate.py``'s 5-instruction loop (1 DPU, 16
threads). Variants, alternated ``--repeat`` times in this process (best of each kept):

* ``compiled``: the engine as shipped;
* ``general``: the compiled engine with its fast rows off (every instruction through the
  general path): what the fast rows buy;
* ``python``: the same source as plain Python, on the quick sizes (the reference the compiled
  path is tested against).

Every variant must execute the same instructions and end at the same virtual times (checked).
Prints DPU instructions per CPU second per workload and variant, the ratios, and a last line
``isa_engine red_ips=... trns_ips=... loop_ips=... fast_rows=<gain> compiled_vs_python=<x>``.
Needs the PrIM binaries (``$AIOPIM_CONFORMANCE_DIR/prim``, default ``../shared/conformance``);
without them it measures the loop alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from aiopim.isa import _engine, _interp, set_engine  # noqa: E402


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


prim_isa = _module("prim_isa")
isa_rate = _module("isa_rate")


def variant(name: str) -> None:
    """Switch the engine to variant ``name``."""
    set_engine("python" if name == "python" else "compiled")
    _interp.set_fast_rows(name != "general")


def workloads(quick: bool) -> dict[str, Callable[[], tuple[int, float, list[float]]]]:
    """name -> run() giving (instructions, CPU seconds, virtual times of the launches)."""
    sizes = prim_isa.SIZES["quick" if quick else "default"]
    prim = prim_isa.corpus_dir() / "prim"
    out: dict[str, Callable[[], tuple[int, float, list[float]]]] = {}

    def prim_run(run: Callable[[], dict[str, Any]]) -> tuple[int, float, list[float]]:
        r = run()
        assert r["ok"], f"{r['name']}: wrong results"
        return r["instructions"], r["cpu_s"], [x["virtual_s"] for x in r["launches"]]

    if prim.is_dir():
        out["red"] = lambda: prim_run(lambda: prim_isa.run_red(prim / "RED", 64, sizes["red"]))
        out["trns"] = lambda: prim_run(lambda: prim_isa.run_trns(prim / "TRNS", 64, sizes["trns"]))
    iterations = 2000 if quick else 100_000
    prog, _ = isa_rate.program(iterations)
    expected, _ = isa_rate.plain_python(iterations)

    def loop() -> tuple[int, float, list[float]]:
        start = time.process_time()
        compiled = _engine.engine_name() == "compiled"
        values, _wall, executed = isa_rate.interpreted(prog, compiled)
        cpu = time.process_time() - start
        assert values == expected, "the loop computed wrong values"
        return executed, cpu, []

    out["loop"] = loop
    return out


def measure(quick: bool, repeat: int) -> dict[tuple[str, str], tuple[int, float, list[float]]]:
    """Best CPU time of each (workload, variant), the variants alternated."""
    best: dict[tuple[str, str], tuple[int, float, list[float]]] = {}

    def keep(key: tuple[str, str], got: tuple[int, float, list[float]]) -> None:
        if key not in best or got[1] < best[key][1]:
            best[key] = got

    runs = workloads(quick)
    for _ in range(repeat):
        for w, run in runs.items():
            for v in ("compiled", "general"):
                variant(v)
                keep((w, v), run())
    # plain Python runs the loop at its quick size only (PrIM would take minutes)
    variant("python")
    keep(("loop", "python"), workloads(True)["loop"]())
    variant("compiled")
    set_engine(None)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, for tests)")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    if not _interp.compiled:
        sys.exit("the compiled engine is not built: pip install -e .")
    best = measure(opts.quick, 1 if opts.quick else opts.repeat)
    print(f"{'workload':<8} {'variant':<9} {'instructions':>14} {'CPU s':>8} {'instr/CPU s':>12}")
    rates: dict[tuple[str, str], float] = {}
    for (w, v), (executed, cpu, _) in sorted(best.items()):
        rates[w, v] = executed / cpu
        print(f"{w:<8} {v:<9} {executed:>14,} {cpu:>8.3f} {rates[w, v]:>12.4g}")
    for w in {w for w, _ in best}:
        same = {(best[w, v][0], tuple(best[w, v][2])) for v in ("compiled", "general")}
        assert len(same) == 1, f"{w}: the variants executed differently"
    gains = [rates[w, "compiled"] / rates[w, "general"] for w in {w for w, _ in best}]
    fast = min(gains)
    vs_python = rates["loop", "compiled"] / rates["loop", "python"]
    print(f"fast rows: compiled / general path, worst workload: {fast:.2f}x")
    print(f"compiled / pure-Python engine on the loop: {vs_python:.0f}x")
    ips = " ".join(f"{w}_ips={rates[w, 'compiled']:.0f}" for w in ("red", "trns", "loop") if
                   (w, "compiled") in rates)  # fmt: skip
    print(f"isa_engine {ips} fast_rows={fast:.2f} compiled_vs_python={vs_python:.0f}")


if __name__ == "__main__":
    main()
