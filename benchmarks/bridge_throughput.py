"""Host-visible job completions per second through the event-loop bridge (asyncio and trio).

A host program allocates 8 ranks of 1 DPU, loads a trivial program, then performs synchronous
(awaited) ``dpu_copy_to`` calls of 8 bytes, each one a rank job plus a SYNC job whose
completion wakes the host task through the bridge. Two variants:

* ``concurrent``: one host task per rank, each awaiting ``n_ops`` calls in a loop;
* ``single``: one host task awaiting the same calls sequentially (round-robin over the ranks).

A completion is one awaited synchronous call. The rate is completions / wall seconds of the
transfer phase (allocation and load excluded), best of N runs. The virtual time reached must be
identical on both backends (it is checked).

Last line: ``bridge completions_per_s asyncio=<int> trio=<int>`` (concurrent variant).

Usage: ``python benchmarks/bridge_throughput.py [--quick] [--ops N] [--repeat N]``
"""

from __future__ import annotations

import argparse
import gc
import time

import anyio
import numpy as np

import aiopim
from aiopim.sdk import DpuSet, dpu_alloc_ranks, dpu_copy_to, dpu_free, dpu_load, dpu_rank_foreach

NR_RANKS = 8
BACKENDS = ("asyncio", "trio")
VARIANTS = ("concurrent", "single")


def make_program() -> aiopim.Program:
    prog = aiopim.Program("bench", nr_tasklets=1)
    prog.host("x", np.uint32, 2)

    @prog.main
    async def m(t: aiopim.Tasklet) -> None:
        pass

    return prog


async def worker(rank: DpuSet, n: int, buf: np.ndarray, counter: list[int]) -> None:
    for _ in range(n):
        await dpu_copy_to(rank, "x", 0, buf, 8)  # one synchronous (awaited) job per op
        counter[0] += 1


async def single_worker(ranks: list[DpuSet], n: int, buf: np.ndarray, counter: list[int]) -> None:
    for _ in range(n):
        for rank in ranks:
            await dpu_copy_to(rank, "x", 0, buf, 8)
            counter[0] += 1


async def bench_main(variant: str, n_ops: int) -> tuple[int, float, int]:
    """Returns ``(completions, wall seconds of the transfer phase, virtual ps reached)``."""
    dpus = await dpu_alloc_ranks(NR_RANKS, "nrDpusPerRank=1")
    prog = make_program()
    await dpu_load(dpus, prog)
    buf = np.arange(2, dtype=np.uint32)
    ranks = [rank for rank, _ in dpu_rank_foreach(dpus)]
    expect(len(ranks) == NR_RANKS, f"{len(ranks)} ranks allocated")
    counter = [0]
    t0 = time.perf_counter()
    if variant == "concurrent":
        async with anyio.create_task_group() as tg:
            for rank in ranks:
                tg.start_soon(worker, rank, n_ops, buf, counter)
    else:
        await single_worker(ranks, n_ops, buf, counter)
    wall = time.perf_counter() - t0
    virtual_ps = aiopim.current_emulator().now_ps
    # correctness: every DPU holds the buffer, every queue is empty
    x = prog.address_of("x")
    for r in dpus.rank_list:
        expect(not r.queue and r.current is None, f"rank {r.index} did not drain")
        expect(r.job_error == 0, f"rank {r.index} failed")
        for d in r.dpus:
            expect(d.wram[x : x + 8].tobytes() == buf.tobytes(), f"DPU {d.name} lacks the data")
    await dpu_free(dpus)
    return counter[0], wall, virtual_ps


def expect(cond: bool, what: str) -> None:
    """A correctness check that also runs under ``python -O``."""
    if not cond:
        raise SystemExit(f"benchmark check failed: {what}")


def measure(
    backend: str, variant: str, n_ops: int, repeat: int, *, record: bool = True
) -> tuple[int, float, int]:
    """Best of ``repeat`` runs; ``record=True`` is what ``aiopim.run`` does."""
    best: tuple[int, float, int] | None = None
    for _ in range(repeat):
        gc.collect()
        res = aiopim.Emulator(record=record).run(bench_main, variant, n_ops, backend=backend)
        expect(res[0] == NR_RANKS * n_ops, f"{res[0]} completions, expected {NR_RANKS * n_ops}")
        if best is not None:
            expect(res[2] == best[2], "virtual time differs between runs")
        if best is None or res[1] < best[1]:
            best = res
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2500, help="synchronous calls per rank")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="CI sizes: 100 calls per rank, once")
    args = ap.parse_args()
    if args.quick:
        args.ops, args.repeat = 100, 1

    # (variant, record): record=True is aiopim.run's default (trace recorder on)
    cases = (("concurrent", True), ("single", True), ("concurrent", False))
    rates: dict[tuple[str, str, bool], float] = {}
    virtual: dict[str, set[int]] = {v: set() for v in VARIANTS}
    print(
        f"{NR_RANKS} ranks x 1 DPU, {args.ops} synchronous dpu_copy_to per rank "
        f"({NR_RANKS * args.ops} calls per run), best of {args.repeat}"
    )
    print("rate = awaited calls / wall s of the transfer phase (alloc and load excluded)")
    print(
        f"{'backend':<8} {'variant':<11} {'recorder':<8} {'calls':>7} {'wall s':>8} "
        f"{'calls/s':>10} {'virtual ps':>14}"
    )
    for variant, record in cases:
        for backend in BACKENDS:
            calls, wall, vps = measure(backend, variant, args.ops, args.repeat, record=record)
            rates[backend, variant, record] = calls / wall
            virtual[variant].add(vps)
            print(
                f"{backend:<8} {variant:<11} {'on' if record else 'off':<8} {calls:>7} "
                f"{wall:>8.4f} {calls / wall:>10,.0f} {vps:>14}"
            )
    for variant, seen in virtual.items():
        expect(len(seen) == 1, f"{variant}: virtual time differs between backends: {seen}")
        print(f"virtual time reached ({variant}): {seen.pop()} ps on both backends")
    print(
        f"bridge completions_per_s asyncio={rates['asyncio', 'concurrent', True]:.0f} "
        f"trio={rates['trio', 'concurrent', True]:.0f}"
    )


if __name__ == "__main__":
    main()
