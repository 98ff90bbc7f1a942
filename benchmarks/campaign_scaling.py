"""One campaign serially, on 2 local processes and on a 2-worker Dask LocalCluster.

The campaign is ``--runs`` runs of ``examples/vector_add.py``'s host program (64 DPUs,
``--elements`` int32 elements: 3 Mi by default, about 1 s per run on an idle core), each with
its own data seed. The three result tables must be identical (``same=1``). Each executor is
started and warmed (its workers have imported the program) before the clock starts, so the
times are throughput; start-up times are printed apart. The executors take the campaign in
``--rounds`` slices in turn (each slice resumed from the executor's results directory), so
that a load that comes and goes on a shared machine falls on all three alike.

Goals (issue 36): 2 workers >= 1.8x serial throughput for runs of >= 1 s; Dask's overhead
<= 10 % over local processes. Both need 2 idle cores.

Last line: ``campaign_scaling runs=<n> same=<0|1> procs_speedup=<x> dask_overhead_pct=<y>``.

Usage: ``python benchmarks/campaign_scaling.py [--quick] [--runs N] [--elements N] [--rounds N]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
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


def started(make: Callable[[], Executor]) -> tuple[Executor, float]:
    """An executor whose workers have run the program, and the seconds that took."""
    t0 = time.perf_counter()
    executor = make()
    campaign(4, 64).run(executor=executor)  # the workers import vector_add
    return executor, time.perf_counter() - t0


def interleaved(
    runs: int, elements: int, rounds: int, executors: dict[str, Executor | None], out: Path
) -> tuple[dict[str, Results], dict[str, float]]:
    """Each executor's results and wall seconds for the whole campaign, run in ``rounds``
    slices taken in turn (slice k: the campaign's first k/rounds runs, the earlier ones
    resumed from its directory), so that every executor sees the machine's load alike."""
    wall = dict.fromkeys(executors, 0.0)
    results: dict[str, Results] = {}
    for k in range(1, rounds + 1):
        for name, executor in executors.items():
            t0 = time.perf_counter()
            results[name] = campaign(runs * k // rounds, elements).run(
                out / name.replace(" ", "_"), executor=executor
            )
            wall[name] += time.perf_counter() - t0
    return results, wall


def _load() -> str:
    """The 1-minute load average (other jobs on the machine take cores from the workers)."""
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--elements", type=int, default=3 << 20, help="per run (default 3 Mi)")
    parser.add_argument("--rounds", type=int, default=4, help="slices taken in turn")
    parser.add_argument("--quick", action="store_true", help="CI size: 6 runs of 4 Ki elements")
    opts = parser.parse_args(argv)
    runs, elements, rounds = (
        (6, 1 << 12, 2) if opts.quick else (opts.runs, opts.elements, opts.rounds)
    )

    load_before = _load()
    procs, t_start_procs = started(lambda: local_processes(2))
    dask, t_start_dask = started(lambda: DaskExecutor("local:2"))
    executors: dict[str, Executor | None] = {
        "serial": None,
        "2 local processes": procs,
        "Dask LocalCluster x2": dask,
    }
    try:
        with tempfile.TemporaryDirectory() as out:
            results, wall = interleaved(runs, elements, rounds, executors, Path(out))
    finally:
        procs.shutdown()
        dask.shutdown()

    tables = [r.table() for r in results.values()]
    same = all(t == tables[0] for t in tables) and not results["serial"].failures
    per_run = wall["serial"] / runs
    print(f"{runs} runs of vector_add ({DPUS} DPUs, {elements} elements), {per_run:.2f} s each")
    print(f"{'executor':<22}{'wall s':>9}{'runs/s':>9}{'start s':>9}")
    starts = {
        "serial": 0.0,
        "2 local processes": t_start_procs,
        "Dask LocalCluster x2": t_start_dask,
    }
    for name, seconds in wall.items():
        print(f"{name:<22}{seconds:>9.2f}{runs / seconds:>9.2f}{starts[name]:>9.2f}")
    speedup = wall["serial"] / wall["2 local processes"]
    overhead = 100.0 * (wall["Dask LocalCluster x2"] / wall["2 local processes"] - 1.0)
    print(f"identical tables: {same}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load_before} before, {_load()} after")
    print(
        f"campaign_scaling runs={runs} same={int(same)} procs_speedup={speedup:.2f} "
        f"dask_overhead_pct={overhead:.1f}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
