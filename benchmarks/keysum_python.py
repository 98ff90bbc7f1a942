"""CPU cost of the key-sum WRAM FIFO demo with Python kernels, per rank and per kernel event.

Runs ``examples/wram_fifo_keysum.py`` (16 tasklets, mode ``all``, 64 keys per DPU, trio) on 1
rank and on N ranks and prints, for each: CPU seconds, CPU seconds per rank, kernel events,
CPU microseconds per kernel event, kernel events per key (one key is one input element
processed by one DPU), the virtual time reached, and the CPU-per-rank ratio against the
figures measured before the kernel/runtime optimisation of this release (``BEFORE``). The
results are checked (every (key, sum) pair right, same virtual time for every rank count).

python benchmarks/keysum_python.py                      # 1 and 4 ranks
python benchmarks/keysum_python.py --ranks-list 1,4,40  # the full machine too (~1 min)
python benchmarks/keysum_python.py --quick              # 1 rank only
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import aiopim

#: Before the optimisation: ranks -> (CPU s per rank, kernel events per key). 1 and 4 ranks
#: measured with this script on the code before it (shared 2-core machine, trio); 40 ranks is
#: the figure of issue 13 (618 s for 2,560 DPUs), measured the same way with the example.
BEFORE: dict[int, tuple[float, float]] = {1: (4.15, 162.32), 4: (5.12, 162.32), 40: (15.45, 162.32)}


def _example() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "examples" / "wram_fifo_keysum.py"
    spec = importlib.util.spec_from_file_location("wram_fifo_keysum", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def measure(example: ModuleType, ranks: int, backend: str) -> dict[str, Any]:
    """One run of the demo on ``ranks`` ranks: CPU time, events, virtual time."""

    async def main() -> dict[str, Any]:
        r: dict[str, Any] = await example.host(ranks, 0, 16, "all", 0)
        r["events"] = aiopim.current_emulator().kernel.events_processed
        return r

    gc.collect()
    t0 = time.process_time()
    r = aiopim.run(main, backend=backend)
    r["cpu_s"] = time.process_time() - t0
    if not r["complete"] or r["wrong"]:
        raise SystemExit(f"keysum on {ranks} ranks: wrong results")
    return r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks-list", default="1,4", help="comma-separated rank counts")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="trio")
    parser.add_argument("--quick", action="store_true", help="1 rank only")
    opts = parser.parse_args(argv)
    counts = [1] if opts.quick else [int(x) for x in opts.ranks_list.split(",")]
    example = _example()
    print(
        f"{'ranks':>5} {'DPUs':>5} {'CPU s':>8} {'s/rank':>7} {'events':>10} "
        f"{'us/event':>8} {'ev/key':>6} {'virtual s':>16} {'vs before':>9}"
    )
    virtual: set[float] = set()
    per_event: list[float] = []
    for ranks in counts:
        r = measure(example, ranks, opts.backend)
        keys = r["dpus"] * example.NR_KEYS
        per_rank = r["cpu_s"] / ranks
        us_event = r["cpu_s"] / r["events"] * 1e6
        per_event.append(us_event)
        before = BEFORE.get(ranks)
        ratio = f"{before[0] / per_rank:8.2f}x" if before else "      n/a"
        virtual.add(r["virtual_time_s"])
        print(
            f"{ranks:>5} {r['dpus']:>5} {r['cpu_s']:8.2f} {per_rank:7.2f} {r['events']:>10} "
            f"{us_event:8.2f} {r['events'] / keys:6.2f} {r['virtual_time_s']:16.12f} {ratio}",
            flush=True,
        )
    if len(virtual) != 1:
        raise SystemExit(f"virtual time differs between rank counts: {sorted(virtual)}")
    growth = per_event[-1] / per_event[0]
    print(f"keysum_python cpu_per_event_growth={growth:.2f} (last rank count / first)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
