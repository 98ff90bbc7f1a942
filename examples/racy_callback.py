"""A host program with a schedule-dependent bug, for aiopim's schedule exploration.

Each DPU sums its slice of an array into ``partial``; the host gathers the partial sums of
every rank with one asynchronous transfer and reduces them in a callback. The bug: the
reduction is attached to the *last rank's* queue only (``racy=True``), as if rank r+1's jobs
always finished after rank r's. All ranks' gather jobs end at the same virtual instant, and
under aiopim's stable order rank 0 goes first, so the program prints the right total. A
property test with ``explore_seed`` drawn by Hypothesis permutes simultaneous events, finds
a schedule where the callback reads partial sums that have not arrived, shrinks it to one
seed and replays it exactly (``tests/test_racy_callback.py``, ``docs/testing.md``).
The fix (``racy=False``) is a ``DPU_CALLBACK_SINGLE_CALL`` callback on the whole set: it runs
once, when every rank has reached it.

python examples/racy_callback.py [--explore-seed N] [--fixed] [--backend trio]
"""

from __future__ import annotations

import argparse

import numpy as np

import aiopim
from aiopim.sdk import (
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_PARALLEL,
    DPU_CALLBACK_SINGLE_CALL,
    DPU_XFER_ASYNC,
    DPU_XFER_FROM_DPU,
    dpu_callback,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_sync,
)

ELEMENTS_PER_DPU = 64

partial_sum = aiopim.Program("partial_sum", nr_tasklets=1)
data = partial_sum.host("data", np.uint32, ELEMENTS_PER_DPU)
partial = partial_sum.host("partial", np.int64, 1)


@partial_sum.main
async def sum_main(t: aiopim.Tasklet) -> None:
    values = t.view(data)
    t.view(partial)[0] = int(values.astype(np.int64).sum())
    t.compute(3 * ELEMENTS_PER_DPU)  # load, add, loop


async def host(nr_ranks: int, seed: int, racy: bool = True) -> tuple[int, int]:
    """Returns ``(total computed by the host program, expected total)``."""
    rng = np.random.default_rng(seed)
    async with await aiopim.DpuSet.alloc(nr_ranks=nr_ranks) as dpus:
        n = len(dpus)
        values = rng.integers(0, 1000, (n, ELEMENTS_PER_DPU), dtype=np.uint32)
        await dpus.load(partial_sum)
        await dpus.copy_to("data", values)
        await dpus.launch()

        partials = np.zeros((n, 1), np.int64)
        for one, row in zip(dpus.dpus, partials, strict=True):
            dpu_prepare_xfer(one, row)
        await dpu_push_xfer(dpus, DPU_XFER_FROM_DPU, "partial", 0, 8, DPU_XFER_ASYNC)

        totals: list[int] = []

        def reduce(rank_set: aiopim.DpuSet, rank_id: int, args: object) -> None:
            totals.append(int(partials.sum()))

        if racy:  # BUG: assumes the last rank's transfer is the last one to end
            last_rank = dpus.ranks[-1]
            await dpu_callback(last_rank, reduce, None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_PARALLEL)
        else:
            await dpu_callback(dpus, reduce, None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_SINGLE_CALL)
        await dpu_sync(dpus)
    return totals[0], int(values.astype(np.int64).sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0, help="input data seed")
    parser.add_argument("--explore-seed", type=int, default=None, help="schedule seed")
    parser.add_argument("--fixed", action="store_true", help="run the corrected program")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    machine = aiopim.MachineConfig(nr_ranks=opts.ranks, nr_dpus_per_rank=8)
    emu = aiopim.Emulator(
        machine, seed=opts.explore_seed or 0, explore=opts.explore_seed is not None
    )
    got, want = emu.run(
        host, opts.ranks, opts.seed, not opts.fixed, backend=opts.backend, progress=opts.progress
    )
    schedule = "stable order" if opts.explore_seed is None else f"explore_seed={opts.explore_seed}"
    status = "OK" if got == want else "WRONG"
    print(f"racy_callback ({schedule}, {opts.backend}): total {got}, expected {want}: {status}")
    return 0 if got == want else 1


if __name__ == "__main__":
    raise SystemExit(main())
