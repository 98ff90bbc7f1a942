"""Schedule exploration of ``racy_callback.py`` as a campaign, on one core or many.

``total_is_right`` is the property: the racy host program's total must be right whatever the
order of simultaneous events. ``aiopim explore`` runs it under thousands of explore seeds,
fanned out over local processes or a Dask cluster, stops at the first failing schedule in seed
order (the one a serial run reports), shrinks it and replays it on both backends:

    aiopim explore examples/explore_racy_callback.py:total_is_right \\
        --ranks 4 --dpus-per-rank 8 --schedules 10000 --jobs 2

or from Python, as ``main`` below does: ``python examples/explore_racy_callback.py --jobs 2``.
``--fixed`` explores the corrected program, which passes under every schedule.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import racy_callback

from aiopim.campaign import explore

MACHINE = {"ranks": 4, "dpus_per_rank": 8}


async def total_is_right(nr_ranks: int = 4, data_seed: int = 1, racy: bool = True) -> int:
    """The racy program's total, or an ``AssertionError`` when the schedule exposes the race."""
    got, want = await racy_callback.host(nr_ranks, data_seed, racy)
    assert got == want, f"the callback summed {got}, expected {want}"
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=None, help="local processes (default: 1)")
    parser.add_argument("--fixed", action="store_true", help="explore the corrected program")
    opts = parser.parse_args(argv)
    report = explore(
        f"{Path(__file__).resolve()}:total_is_right",
        params={"racy": not opts.fixed},
        machine=MACHINE,
        schedules=opts.schedules,
        jobs=opts.jobs,
    )
    print(report.text(), end="")
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
