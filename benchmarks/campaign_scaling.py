"""One campaign serially, on 2 local processes and on a 2-worker Dask LocalCluster.

The campaign is ``--runs`` runs of ``examples/vector_add.py``'s host program (64 DPUs,
``--elements`` int32 elements; about 1.2 s of CPU per run at the default size), each with its own
data seed. The three result tables must be identical (``same=1``). Each executor is started and
warmed (its workers have imported the program) before the clock starts, so the times are
throughput; start-up times are printed apart.

Goals (issue 36): 2 workers >= 1.8x serial throughput for runs of >= 1 s; Dask's overhead
<= 10 % over local processes. Both need 2 idle cores.

Last line: ``campaign_scaling runs=<n> same=<0|1> procs_speedup=<x> dask_overhead_pct=<y>``.

Usage: ``python benchmarks/campaign_scaling.py [--quick] [--runs N] [--elements N]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from aiopim.campaign import Campaign, DaskExecutor, Results, local_processes

EXAMPLES = str(Path(__file__).resolve().parent.parent / "examples")
DPUS = 64


def campaign(runs: int, elements: int) -> Campaign:
    return Campaign(
        "campaign_scaling",
        "vector_add:host",
        runs=[{}] * runs,  # the same size; each run's data seed is its own (derived) seed
        params={"nr_dpus": DPUS, "nr_elements": elements},
        path=[EXAMPLES],
    )


def timed(runs: int, elements: int, executor: Executor | None) -> tuple[Results, float]:
    """The results and the wall seconds of the campaign on ``executor`` (None: serial)."""
    t0 = time.perf_counter()
    results = campaign(runs, elements).run(executor=executor)
    return results, time.perf_counter() - t0


def started(make: Callable[[], Executor]) -> tuple[Executor, float]:
    """An executor whose workers have run the program, and the seconds that took."""
    t0 = time.perf_counter()
    executor = make()
    campaign(4, 64).run(executor=executor)  # the workers import vector_add
    return executor, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--elements", type=int, default=1 << 21, help="per run (default 2 Mi)")
    parser.add_argument("--quick", action="store_true", help="CI size: 6 runs of 4 Ki elements")
    opts = parser.parse_args(argv)
    runs, elements = (6, 1 << 12) if opts.quick else (opts.runs, opts.elements)

    serial, t_serial = timed(runs, elements, None)
    procs, t_start_procs = started(lambda: local_processes(2))
    try:
        on_procs, t_procs = timed(runs, elements, procs)
    finally:
        procs.shutdown()
    dask, t_start_dask = started(lambda: DaskExecutor("local:2"))
    try:
        on_dask, t_dask = timed(runs, elements, dask)
    finally:
        dask.shutdown()

    same = serial.table() == on_procs.table() == on_dask.table() and not serial.failures
    per_run = t_serial / runs
    print(f"{runs} runs of vector_add ({DPUS} DPUs, {elements} elements), {per_run:.2f} s each")
    print(f"{'executor':<22}{'wall s':>9}{'runs/s':>9}{'start s':>9}")
    for name, wall, start in (
        ("serial", t_serial, 0.0),
        ("2 local processes", t_procs, t_start_procs),
        ("Dask LocalCluster x2", t_dask, t_start_dask),
    ):
        print(f"{name:<22}{wall:>9.2f}{runs / wall:>9.2f}{start:>9.2f}")
    speedup = t_serial / t_procs
    overhead = 100.0 * (t_dask / t_procs - 1.0)
    print(f"identical tables: {same}")
    print(
        f"campaign_scaling runs={runs} same={int(same)} procs_speedup={speedup:.2f} "
        f"dask_overhead_pct={overhead:.1f}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
