"""Rank-queue throughput: aiopim's kernel and real rank actors versus an equivalent SimPy model.

Workload: ``R`` ranks, each with a FIFO job queue holding ``J`` jobs enqueued up front and run
strictly in order; job ``i`` lasts ``1 + (i * 7 % 5)`` time units (microseconds expressed in
picoseconds for aiopim, plain integers for SimPy). "Events" are completed jobs.

aiopim side: the real :class:`aiopim._machine._rank.Rank` actors of an :class:`Emulator` (recorder
off, slot back-pressure bypassed), driven by ``kernel.run(INFINITY)`` without any event loop.
SimPy side: one process per rank taking jobs from a ``simpy.Store`` and ``yield``-ing a timeout.

Prints a small table and, as its last line, ``kernel_vs_simpy ratio=<aiopim/simpy jobs per s>``.

Usage: ``python benchmarks/kernel_vs_simpy.py [--quick] [--ranks R] [--jobs J] [--repeat N]``
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import NamedTuple

import simpy

from aiopim._emulator import Emulator
from aiopim._errors import JobType
from aiopim._machine._config import MachineConfig
from aiopim._machine._jobs import Job
from aiopim._machine._rank import Rank
from aiopim._runtime._kernel import INFINITY
from aiopim.timing import PS_PER_US


class TimedJob(Job):
    """A job that does nothing for ``duration`` picoseconds (what the removed ``body=`` did)."""

    __slots__ = ("duration",)

    def __init__(self, rank: Rank, duration: int) -> None:
        super().__init__(rank, JobType.COPY_WRAM_TO_MATRIX)
        self.duration = duration

    def start(self) -> int:
        return self.duration


class Result(NamedTuple):
    jobs: int
    #: wall seconds of the run phase (what the rate uses)
    wall: float
    #: wall seconds spent building the model and enqueuing the jobs (not in the rate)
    setup: float
    #: engine events (kernel events for aiopim, jobs for SimPy)
    events: int


def expect(cond: bool, what: str) -> None:
    """A correctness check that also runs under ``python -O``."""
    if not cond:
        raise SystemExit(f"benchmark check failed: {what}")


def durations_for(nr_jobs: int) -> list[int]:
    """Job durations in abstract units (1..5)."""
    return [1 + (i * 7 % 5) for i in range(nr_jobs)]


def run_aiopim(nr_ranks: int, durations: list[int]) -> Result:
    """Enqueue every job on the real rank actors, then run the kernel to completion."""
    t_setup = time.perf_counter()
    emu = Emulator(MachineConfig(nr_ranks=nr_ranks, nr_dpus_per_rank=1), record=False)
    ranks = [emu.rank(i) for i in range(nr_ranks)]
    ps = [d * PS_PER_US for d in durations]
    for r in ranks:
        r.allocated = True
        r.free_slots = 10**9  # bypass slot back-pressure for the benchmark
        for d in ps:
            r.submit(TimedJob(r, d))
    queued = [list(r.queue) for r in ranks]
    t0 = time.perf_counter()
    setup = t0 - t_setup
    emu.kernel.run(INFINITY)
    wall = time.perf_counter() - t0
    # correctness: every queue drained, every job ended, virtual time = one rank's jobs
    for r in ranks:
        expect(not r.queue and r.current is None, f"rank {r.index} did not drain")
        expect(r.job_error == 0, f"rank {r.index} failed: {r.job_error_message}")
    completed = sum(1 for q in queued for j in q if j.end_ps >= 0)
    expect(completed == nr_ranks * len(durations), f"aiopim completed {completed} jobs")
    expect(emu.kernel.now == sum(ps), f"aiopim now={emu.kernel.now} ps, expected {sum(ps)}")
    return Result(completed, wall, setup, emu.kernel.events_processed)


def run_simpy(nr_ranks: int, durations: list[int], *, prefill: bool = False) -> Result:
    """The classic SimPy equivalent: a Store per rank and one consuming process per rank.

    Jobs are ``put`` up front; each put is a SimPy event processed by ``env.run()``. With
    ``prefill`` the items are appended to ``store.items`` directly instead (no put events, like
    aiopim's ``Rank.submit`` which only appends to a deque); reported for information only.
    """
    t_setup = time.perf_counter()
    env = simpy.Environment()

    def worker(store: simpy.Store, nr_jobs: int):  # type: ignore[no-untyped-def]
        for _ in range(nr_jobs):
            d = yield store.get()
            yield env.timeout(d)

    stores = []
    procs = []
    for _ in range(nr_ranks):
        store = simpy.Store(env)  # unbounded capacity: all jobs enqueued up front
        if prefill:
            store.items.extend(durations)
        else:
            for d in durations:
                store.put(d)
        stores.append(store)
        procs.append(env.process(worker(store, len(durations))))
    t0 = time.perf_counter()
    setup = t0 - t_setup
    env.run()
    wall = time.perf_counter() - t0
    # correctness: every store drained, every worker ended, virtual time = one rank's jobs
    expect(all(not store.items for store in stores), "a SimPy store did not drain")
    expect(all(p.processed and p.ok for p in procs), "a SimPy worker did not finish")
    completed = nr_ranks * len(durations)
    expect(env.now == sum(durations), f"simpy now={env.now}, expected {sum(durations)}")
    return Result(completed, wall, setup, completed)


def best_of(fn: Callable[[], Result], repeat: int) -> Result:
    """The run with the smallest measured (run-phase) wall time."""
    best: Result | None = None
    for _ in range(repeat):
        gc.collect()
        res = fn()
        if best is None or res.wall < best.wall:
            best = res
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2000, help="jobs per rank")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="CI sizes: 4 ranks x 200 jobs, once")
    args = ap.parse_args()
    if args.quick:
        args.ranks, args.jobs, args.repeat = 4, 200, 1
    durations = durations_for(args.jobs)

    a = best_of(lambda: run_aiopim(args.ranks, durations), args.repeat)
    s = best_of(lambda: run_simpy(args.ranks, durations), args.repeat)
    p = best_of(lambda: run_simpy(args.ranks, durations, prefill=True), args.repeat)
    a_rate = a.jobs / a.wall
    s_rate = s.jobs / s.wall

    print(
        f"{args.ranks} ranks x {args.jobs} jobs, best of {args.repeat}; virtual span "
        f"{sum(durations)} us; aiopim kernel events {a.events}"
    )
    print("rate = jobs / wall s of the run phase (building and enqueuing excluded: setup s)")
    print(f"{'engine':<22} {'jobs':>8} {'setup s':>9} {'wall s':>9} {'jobs/s':>12}")
    rows = (
        ("aiopim", a),
        ("simpy", s),
        ("simpy (prefilled)*", p),
    )
    for name, r in rows:
        print(f"{name:<22} {r.jobs:>8} {r.setup:>9.4f} {r.wall:>9.4f} {r.jobs / r.wall:>12,.0f}")
    print(
        "* informational: store.items filled directly, no put events in env.run(); "
        f"aiopim/simpy(prefilled) = {a_rate / (p.jobs / p.wall):.2f}"
    )
    print(f"kernel_vs_simpy ratio={a_rate / s_rate:.2f}")


if __name__ == "__main__":
    main()
