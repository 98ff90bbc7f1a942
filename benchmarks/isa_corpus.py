"""The instruction-set engine on binaries built by UPMEM's toolchain: the conformance corpus and
PrIM's RED and TRNS, on both engine paths and both backends, optionally against an earlier
checkout of aiopim in the same run.

Every measurement is a fresh interpreter (``--child``) that runs its workload twice and times
the second run (the first pays for imports and, on an earlier engine, for loading what it
compiled): process CPU seconds around ``aiopim.run``, DPU instructions and cycles summed over
the DPUs' runs. Workloads:

* the eight binaries of ``$AIOPIM_CONFORMANCE_DIR`` (default ``../shared/conformance``; not in
  the repository) on one v1A DPU, with the input ``vmutex_example`` reads; on the pure-Python
  path each run is cut at ``PYTHON_CAP`` cycles (``IsaRunner.max_run_cycles``: vmutex_example
  would take hours there); the compiled path runs every binary to its end;
* PrIM's RED and TRNS with ``benchmarks/prim_isa.py``'s host programs: 64 DPUs and its default
  sizes compiled, 4 DPUs and its quick sizes on the pure-Python path.

``--before PATH`` runs each measurement also with ``PYTHONPATH=PATH`` (a checkout of an earlier
aiopim, for example the numba engine of commit 36bc4e1 with numba installed), alternating the
two. The runs of a workload must execute the same instructions in the same cycles on both
backends and, with ``--before``, in both checkouts. Last line: ``isa_corpus
compiled_ips=<geometric mean, instr/CPU s> python_ips=<...> [compiled_ratio=<after / before,
geometric mean> python_ratio=<...>] same=<0|1>``.

    python benchmarks/isa_corpus.py [--quick] [--before PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = Path(os.environ.get("AIOPIM_CONFORMANCE_DIR", ROOT.parent / "shared" / "conformance"))
BINARIES = (
    "helloworld",
    "tasklet_stack_check",
    "mutex_example",
    "barrier_example",
    "fsb_example",
    "vmutex_example",
    "NTT",
    "test",
)
QUICK_BINARIES = ("helloworld", "barrier_example")
#: cycles after which a pure-Python run stops (about 0.86 ms of a 350 MHz DPU)
PYTHON_CAP = 300_000
PATHS = ("compiled", "python")
BACKENDS = ("asyncio", "trio")


# --- the child: one workload, one path, one backend ---------------------------------------------
def _inputs(name: str) -> list[tuple[str, Any]]:
    """The symbols a corpus binary's host writes before the launch (its README's host steps)."""
    import numpy as np

    if name == "vmutex_example":
        data = (np.arange(1 << 20, dtype=np.uint64) * 2654435761 >> 7).astype(np.uint8)
        return [("input_table", data)]
    return []


def _run_corpus(name: str, backend: str) -> None:
    import aiopim
    from aiopim.sdk import DPU_SYNCHRONOUS, dpu_alloc, dpu_copy_to, dpu_launch, dpu_load

    async def host() -> None:
        dpus = await dpu_alloc(1, "chip=v1A")
        await dpu_load(dpus, str(CORPUS / f"{name}.dpu"))
        for symbol, data in _inputs(name):
            await dpu_copy_to(dpus, symbol, 0, data, len(data))
        await dpu_launch(dpus, DPU_SYNCHRONOUS)

    aiopim.run(host, backend=backend)


def _run_prim(name: str, path: str, backend: str) -> None:
    sys.path.insert(0, str(HERE))
    import prim_isa

    sizes = prim_isa.SIZES["default" if path == "compiled" else "quick"]
    dpus = 64 if path == "compiled" else 4
    prim = CORPUS / "prim"
    if name == "RED":
        r = prim_isa.run_red(prim / "RED", dpus, sizes["red"], backend)
    else:
        r = prim_isa.run_trns(prim / "TRNS", dpus, sizes["trns"], backend)
    if not r["ok"]:
        raise RuntimeError(f"{name}: wrong results")


def child(workload: str, path: str, backend: str) -> dict[str, Any]:
    """Run ``workload`` twice on ``path`` and ``backend``; the second run's figures."""
    import aiopim
    from aiopim.isa import IsaRunner

    if path == "python" and workload not in ("RED", "TRNS"):
        IsaRunner.max_run_cycles = PYTHON_CAP
    runs: list[IsaRunner] = []
    done = [0, 0]  # instructions and cycles of runs that ended before a runner started again
    start = IsaRunner.start

    def counting(self: IsaRunner, program: Any) -> None:
        if self in runs:
            done[0] += self.instructions
            done[1] += self.cycles
        else:
            runs.append(self)
        start(self, program)

    IsaRunner.start = counting  # type: ignore[method-assign]
    figures: dict[str, Any] = {}
    for _ in range(2):
        runs.clear()
        done[:] = [0, 0]
        outcome = "ok"
        cpu = time.process_time()
        try:
            if workload in ("RED", "TRNS"):
                _run_prim(workload, path, backend)
            else:
                _run_corpus(workload, backend)
        except aiopim.DpuError as exc:
            outcome = exc.code.name
        cpu = time.process_time() - cpu
        figures = {
            "instructions": done[0] + sum(r.instructions for r in runs),
            "cycles": done[1] + sum(r.cycles for r in runs),
            "cpu_s": cpu,
            "outcome": outcome,
        }
    return figures


# --- the parent -----------------------------------------------------------------------------------
def measure(workload: str, path: str, backend: str, checkout: Path | None) -> dict[str, Any]:
    """One child, on this checkout or on ``checkout``."""
    env = dict(
        os.environ, AIOPIM_ISA_ENGINE=path, AIOPIM_ISA_JIT="1" if path == "compiled" else "0"
    )
    env["PYTHONPATH"] = str(checkout or ROOT)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", workload, path, backend]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two small binaries (CI)")
    ap.add_argument("--before", type=Path, help="an earlier checkout to compare with")
    ap.add_argument(
        "--child", nargs=3, metavar=("WORKLOAD", "PATH", "BACKEND"), help=argparse.SUPPRESS
    )
    ap.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = ap.parse_args()
    if opts.child:
        print(json.dumps(child(*opts.child)))
        return 0
    if not CORPUS.is_dir():
        print(f"no corpus: {CORPUS} does not exist", file=sys.stderr)
        return 2
    workloads = list(QUICK_BINARIES if opts.quick else BINARIES)
    if not opts.quick and (CORPUS / "prim").is_dir():
        workloads += ["RED", "TRNS"]
    versions: list[tuple[str, Path | None]] = [("after", None)]
    if opts.before:
        versions.append(("before", opts.before.resolve()))
    header = f"{'workload':<20} {'path':<8} {'backend':<7} {'instructions':>13} {'outcome':<17}"
    header += "".join(f" {v + ' instr/CPU s':>19}" for v, _ in versions)
    print(header + ("  after/before" if opts.before else ""))
    print("-" * (len(header) + (14 if opts.before else 0)))
    same = True
    rates: dict[tuple[str, str], list[float]] = {}
    from aiopim._progress import Progress  # not in the children: they are measured

    total = len(workloads) * len(PATHS) * len(BACKENDS)
    done = 0
    with Progress("isa_corpus", total=total, unit="runs", enabled=opts.progress) as bar:
        for workload in workloads:
            for path in PATHS:
                seen: set[tuple[int, int]] = set()
                for backend in BACKENDS:
                    got = {v: measure(workload, path, backend, where) for v, where in versions}
                    seen |= {(g["instructions"], g["cycles"]) for g in got.values()}
                    after = got["after"]
                    ips = {v: g["instructions"] / g["cpu_s"] for v, g in got.items()}
                    row = (
                        f"{workload:<20} {path:<8} {backend:<7} {after['instructions']:>13,} "
                        f"{after['outcome']:<17}"
                        + "".join(f" {ips[v]:>19.3e}" for v, _ in versions)
                    )
                    if opts.before:
                        ratio = ips["after"] / ips["before"]
                        rates.setdefault((path, "ratio"), []).append(ratio)
                        row += f"  {ratio:>12.2f}x"
                    rates.setdefault((path, "after"), []).append(ips["after"])
                    print(row, flush=True)
                    done += 1
                    bar.update(done)
                if len(seen) != 1:
                    same = False
                    print(f"  {workload} on {path}: instructions and cycles differ: {sorted(seen)}")
        bar.update(done)
    line = " ".join(f"{p}_ips={_geomean(rates[p, 'after']):.0f}" for p in PATHS)
    if opts.before:
        line += " " + " ".join(f"{p}_ratio={_geomean(rates[p, 'ratio']):.2f}" for p in PATHS)
    print(f"isa_corpus {line} same={int(same)}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
