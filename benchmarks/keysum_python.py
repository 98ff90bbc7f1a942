"""CPU cost of the key-sum WRAM FIFO demo with Python kernels, per rank and per kernel event.

Runs ``examples/wram_fifo_keysum.py`` (16 tasklets, mode ``all``, 64 keys per DPU, trio) on 1
rank and on N ranks, each in a fresh interpreter, and prints for each: CPU seconds, CPU seconds
per rank, kernel events, CPU microseconds per kernel event, kernel events per key (one key is
one input element processed by one DPU), the virtual time reached, and the CPU-per-rank ratio
before / now. "Before" is either measured in the same way on an older checkout of the package
(``--before PATH``: each rank count runs there right before it runs here) or, without it, the
figures of ``BEFORE`` below. The results are checked (every (key, sum) pair right, the same
virtual time for every rank count and both packages).

python benchmarks/keysum_python.py                      # 1 and 4 ranks
python benchmarks/keysum_python.py --ranks-list 1,4,40  # the full machine too (minutes)
python benchmarks/keysum_python.py --quick              # 1 rank only
python benchmarks/keysum_python.py --before /tmp/old    # side by side with an older checkout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: ranks -> (CPU s per rank, kernel events per key) of the runtime before the per-DPU event
#: queues (commit 1e1f3ca), measured with ``--before`` on the development VM (trio, shared
#: 2-core machine): used when ``--before`` is not given.
BEFORE: dict[int, tuple[float, float]] = {1: (2.42, 162.32), 4: (3.02, 162.32), 40: (4.68, 162.32)}

#: one measurement, run in a fresh interpreter with the package under test on sys.path
_CHILD = r"""
import gc, importlib.util, json, sys, time
root, ranks, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, root)
import aiopim
path = root + "/examples/wram_fifo_keysum.py"
spec = importlib.util.spec_from_file_location("wram_fifo_keysum", path)
example = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = example
spec.loader.exec_module(example)

async def main():
    r = await example.host(ranks, 0, 16, "all", 0)
    r["events"] = aiopim.current_emulator().kernel.events_processed
    return r

assert aiopim.__file__.startswith(root), aiopim.__file__
gc.collect()
t0 = time.process_time()
r = aiopim.run(main, backend=backend)
cpu = time.process_time() - t0
ok = r["complete"] and not r["wrong"]
print(json.dumps({"cpu_s": cpu, "events": r["events"], "dpus": r["dpus"], "ok": ok,
                  "virtual_time_s": r["virtual_time_s"], "keys": r["dpus"] * example.NR_KEYS}))
"""


def measure(root: Path, ranks: int, backend: str) -> dict[str, Any]:
    """One run of the demo on ``ranks`` ranks with the package of checkout ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(ranks), backend],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
    )
    r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if not r["ok"]:
        raise SystemExit(f"keysum on {ranks} ranks ({root}): wrong results")
    return r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks-list", default="1,4", help="comma-separated rank counts")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="trio")
    parser.add_argument("--quick", action="store_true", help="1 rank only")
    parser.add_argument(
        "--before", type=Path, help="a checkout of an older aiopim to measure side by side"
    )
    opts = parser.parse_args(argv)
    counts = [1] if opts.quick else [int(x) for x in opts.ranks_list.split(",")]
    print(
        f"{'ranks':>5} {'DPUs':>5} {'CPU s':>8} {'s/rank':>7} {'events':>10} "
        f"{'us/event':>8} {'ev/key':>6} {'virtual s':>16} {'before s/rank':>13} {'ratio':>6}"
    )
    virtual: set[float] = set()
    per_event: list[float] = []
    for ranks in counts:
        if opts.before is not None:
            old = measure(opts.before.resolve(), ranks, opts.backend)
            virtual.add(old["virtual_time_s"])
            before: float | None = old["cpu_s"] / ranks
        else:
            before = BEFORE[ranks][0] if ranks in BEFORE else None
        r = measure(ROOT, ranks, opts.backend)
        per_rank = r["cpu_s"] / ranks
        us_event = r["cpu_s"] / r["events"] * 1e6
        per_event.append(us_event)
        virtual.add(r["virtual_time_s"])
        ratio = f"{before / per_rank:5.2f}x" if before is not None else "   n/a"
        shown = f"{before:13.2f}" if before is not None else f"{'n/a':>13}"
        print(
            f"{ranks:>5} {r['dpus']:>5} {r['cpu_s']:8.2f} {per_rank:7.2f} {r['events']:>10} "
            f"{us_event:8.2f} {r['events'] / r['keys']:6.2f} {r['virtual_time_s']:16.12f} "
            f"{shown} {ratio}",
            flush=True,
        )
    if len(virtual) != 1:
        raise SystemExit(f"virtual time differs between runs: {sorted(virtual)}")
    growth = per_event[-1] / per_event[0]
    print(
        f"keysum_python cpu_per_event_growth={growth:.2f} "
        f"(CPU per event at {counts[-1]} rank(s) / at {counts[0]})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
