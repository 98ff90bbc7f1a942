"""Schedules explored per second: whole host programs re-run under successive explore seeds.

One *schedule* is one complete run of a host program on a fresh emulator with
``explore_seed=s`` (simultaneous events in a seeded random order), as a property test does for
each Hypothesis example. Workloads:

* ``racy_callback``: ``examples/racy_callback.py`` on 4 ranks x 8 DPUs (load, copy, launch,
  async gather, callback, sync); the script also counts the distinct traces and the seeds
  that expose its race;
* ``vector_add``: ``examples/vector_add.py`` with 16 DPUs (2 ranks x 8) and 4,096 elements;
* ``keysum_fifo``: ``examples/wram_fifo_keysum.py`` (the WRAM FIFO key-sum host program:
  64 keys pushed, drained by parallel callbacks, stop, sync) on 2 ranks x 4 DPUs with
  8 tasklets, mode ``all``; every (key, sum) is checked;
* ``fifo_hypothesis``: a ``@given`` property over generated FIFO host programs
  (``fifo_scenarios``) played by ``fifo_host`` and checked for FIFO conservation, in
  examples per second;
* ``hypothesis``: a ``@given`` property over generated job sequences checked against
  ``RankQueueModel`` (generation, run and model included), in examples per second.

Rates are runs per wall second, best of N repeats (the Hypothesis workloads: one pass).
Last two lines: ``keysum_fifo schedules_per_s=<y>`` and ``explore schedules_per_s=<x>``,
where ``<x>`` (``<y>``) is the racy_callback (keysum_fifo) rate over both backends together:
the harmonic mean of the two backends' best rates, i.e. schedules per second when the same
number of schedules is run on each backend.

Usage: ``python benchmarks/explore_rate.py [--quick] [--runs N] [--repeat N]``
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import racy_callback
import vector_add
import wram_fifo_keysum
from hypothesis import HealthCheck, given, settings

import aiopim
from aiopim.testing import (
    FifoOp,
    FifoStream,
    Op,
    OpsLog,
    Pim,
    RankQueueModel,
    explore_seeds,
    fifo_host,
    fifo_scenarios,
    ops_program,
    run_ops,
    scenarios,
)

BACKENDS = ("asyncio", "trio")


def best_batch_rate(count: int, repeat: int, batch: Callable[[], Any]) -> float:
    """``count / seconds`` of the fastest of ``repeat`` calls of ``batch`` (``count`` runs)."""
    best = 0.0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        batch()
        best = max(best, count / (time.perf_counter() - t0))
    return best


def best_rate(runs: int, repeat: int, body: Callable[[int], Any]) -> float:
    """Runs per second of ``body(0) ... body(runs - 1)``, best of ``repeat``."""

    def batch() -> None:
        for i in range(runs):
            body(i)

    return best_batch_rate(runs, repeat, batch)


def racy(backend: str, runs: int, repeat: int) -> tuple[float, int, int]:
    machine = aiopim.MachineConfig(nr_ranks=4, nr_dpus_per_rank=8)
    pim = Pim(backend, machine)
    traces: set[str] = set()
    wrong = 0

    def once(seed: int) -> None:
        nonlocal wrong
        run = pim.execute(racy_callback.host, 4, 1, explore_seed=seed)
        got, want = run.unwrap()
        wrong += got != want
        if len(traces) < runs:
            traces.add(run.trace())

    rate = best_rate(runs, repeat, once)
    return rate, len(traces), wrong // repeat


def vadd(backend: str, runs: int, repeat: int) -> float:
    pim = Pim(backend, aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=8))

    def once(seed: int) -> None:
        assert pim.run(vector_add.host, 16, 4096, 7, explore_seed=seed)["correct"]

    return best_rate(runs, repeat, once)


def keysum(backend: str, runs: int, repeat: int) -> float:
    machine = aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=4)
    pim = Pim(backend, machine)

    def once(seed: int) -> None:
        r = pim.run(wram_fifo_keysum.host, 2, 0, 8, "all", 7, explore_seed=seed)
        assert r["complete"] and not r["wrong"]

    return best_rate(runs, repeat, once)


def fifo_hypothesis_rate(backend: str, runs: int, repeat: int) -> float:
    pim = Pim(backend)

    @settings(
        max_examples=runs, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(scenario=fifo_scenarios(min_size=4), explore_seed=explore_seeds())
    def prop(
        scenario: tuple[aiopim.MachineConfig, FifoStream, list[FifoOp]], explore_seed: int | None
    ) -> None:
        machine, stream, ops = scenario
        run = pim.execute(
            fifo_host, machine, stream, ops, machine=machine, explore_seed=explore_seed
        )
        run.unwrap().assert_conserved()

    return best_batch_rate(runs, repeat, prop)


async def ops_host(machine: aiopim.MachineConfig, ops: list[Op]) -> OpsLog:
    dpus = await aiopim.DpuSet.alloc(nr_ranks=machine.nr_ranks)
    await dpus.load(ops_program())
    return await run_ops(dpus, ops)


def hypothesis_rate(backend: str, runs: int, repeat: int) -> float:
    pim = Pim(backend)

    @settings(
        max_examples=runs, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(scenario=scenarios(), explore_seed=explore_seeds())
    def prop(scenario: tuple[aiopim.MachineConfig, list[Op]], explore_seed: int | None) -> None:
        machine, ops = scenario
        run = pim.execute(ops_host, machine, ops, machine=machine, explore_seed=explore_seed)
        RankQueueModel(machine).check(run.emulator, run.unwrap(), ops)

    return best_batch_rate(runs, repeat, prop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150, help="schedules per workload")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="CI sizes: 10 schedules, once")
    opts = parser.parse_args(argv)
    runs, repeat = (10, 1) if opts.quick else (opts.runs, opts.repeat)
    print(f"{'workload':<16}{'backend':<9}{'schedules/s':>12}  notes")
    racy_rates: dict[str, float] = {}
    keysum_rates: dict[str, float] = {}
    for backend in BACKENDS:
        rate, distinct, wrong = racy(backend, runs, repeat)
        racy_rates[backend] = rate
        note = f"{distinct} distinct traces, race exposed by {wrong} of {runs} seeds"
        print(f"{'racy_callback':<16}{backend:<9}{rate:>12.1f}  {note}")
    for backend in BACKENDS:
        print(f"{'vector_add':<16}{backend:<9}{vadd(backend, runs // 2, repeat):>12.1f}")
    for backend in BACKENDS:
        rate = keysum_rates[backend] = keysum(backend, max(1, runs // 10), repeat)
        print(f"{'keysum_fifo':<16}{backend:<9}{rate:>12.1f}  8 DPUs x 64 keys, sums checked")
    for backend in BACKENDS:
        rate = hypothesis_rate(backend, runs, 1)
        print(f"{'hypothesis':<16}{backend:<9}{rate:>12.1f}  examples/s, model-checked")
    for backend in BACKENDS:
        rate = fifo_hypothesis_rate(backend, runs, 1)
        print(f"{'fifo_hypothesis':<16}{backend:<9}{rate:>12.1f}  examples/s, conservation-checked")
    pooled_keysum = 2 / sum(1 / r for r in keysum_rates.values())
    print(f"keysum_fifo schedules_per_s={pooled_keysum:.1f}")
    pooled = 2 / sum(1 / r for r in racy_rates.values())  # same number of runs per backend
    print(f"explore schedules_per_s={pooled:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
