"""``aiopim sweep FILE.toml`` and ``aiopim explore PROGRAM``: campaigns from the command line.

Exit statuses: 0 when every run passed, 1 when some run (or schedule) failed, 2 when the
campaign cannot run as given (file, program, parameters, executor).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .._progress import add_progress_options, progress_enabled
from ..cli import EXIT_FAILED, EXIT_INPUT, CommandError
from ._explore import ExploreReport, explore, replay_schedule
from ._results import _columns, format_ps
from ._spec import MAX_SEED, CampaignError
from ._toml import load_campaign


def _executor_options(ap: argparse.ArgumentParser) -> None:
    where = ap.add_mutually_exclusive_group()
    where.add_argument("-j", "--jobs", type=int, metavar="N", help="run on N local processes")
    where.add_argument(
        "--dask", metavar="local:N", help="run on a Dask LocalCluster of N worker processes"
    )
    where.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on the Dask cluster at ADDRESS (tcp://...)"
    )
    add_progress_options(ap)
    ap.add_argument("--debug", action="store_true", help="print tracebacks of errors")


def _where(opts: argparse.Namespace) -> dict[str, Any]:
    return {"jobs": opts.jobs, "dask": opts.dask or opts.scheduler}


def _input_error(exc: CampaignError) -> Exception:
    return CommandError(str(exc), EXIT_INPUT)


# ================================================================================================
# aiopim sweep
# ================================================================================================
def main_sweep(argv: list[str], user_dirs: list[str]) -> int:
    """``aiopim sweep FILE.toml``: run a campaign file, print its table, plot it."""
    ap = argparse.ArgumentParser(
        prog="aiopim sweep",
        description="Run a campaign file (docs/campaigns.md): every run once, results stored as "
        "they finish; rerunning it skips the finished runs. Prints the results table.",
    )
    ap.add_argument("file", metavar="FILE.toml", help="the campaign file")
    ap.add_argument(
        "--dir", metavar="DIR", help="results directory (default: ./<FILE's stem>.campaign)"
    )
    ap.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    ap.add_argument("--plot", metavar="OUT.png", help="plot a parameter against virtual time")
    ap.add_argument("--x", metavar="PARAM", help="the plot's x axis (default: the swept one)")
    ap.add_argument(
        "--y",
        action="append",
        default=[],
        metavar="FIELD",
        help="also plot FIELD (instructions, result.<key>, ...); repeatable",
    )
    _executor_options(ap)
    opts = ap.parse_args(argv)
    try:
        campaign = load_campaign(opts.file)
        user_dirs.extend(str(p) for p in campaign.path)
        directory = opts.dir or f"{Path(opts.file).stem}.campaign"
        results = campaign.run(
            directory,
            **_where(opts),
            progress=progress_enabled(opts.progress),
            retry_failed=opts.retry_failed,
        )
    except CampaignError as exc:
        raise _input_error(exc) from None
    sys.stdout.write(results.text())
    print(f"results: {os.path.join(directory, 'results.jsonl')}")
    if opts.plot:
        from ._plot import save_plot

        try:
            save_plot(results, opts.plot, x=opts.x, fields=opts.y)
        except CampaignError as exc:
            raise _input_error(exc) from None
        print(f"plot: {opts.plot}")
    return EXIT_FAILED if results.failures else 0


# ================================================================================================
# aiopim explore
# ================================================================================================
def _param(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"give a parameter as NAME=VALUE, not {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value  # a plain string


def _replay_seed(text: str) -> int | None:
    if text == "stable":
        return None
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"give an explore seed 0..{MAX_SEED} or 'stable'")
    return seed


def _machine(opts: argparse.Namespace) -> dict[str, Any]:
    given = {"ranks": opts.ranks, "dpus_per_rank": opts.dpus_per_rank, "chip": opts.chip}
    return {k: v for k, v in given.items() if v is not None}


def _summary(report: ExploreReport) -> str:
    first = report.first_failure
    failing = "-" if first is None else f"{first['run']} (explore_seed={first['seed']})"
    shrunk = "-"
    if first is not None:
        shrunk = "stable order" if report.shrunk_seed is None else str(report.shrunk_seed)
    rows = [
        ["schedules", "explored", "first failing", "shrunk to"],
        [str(report.schedules), str(report.explored), failing, shrunk],
    ]
    return "\n".join(_columns(rows)) + "\n"


def main_explore(argv: list[str], user_dirs: list[str]) -> int:
    """``aiopim explore MODULE:FUNCTION``: explore schedules, fanned out like a campaign."""
    ap = argparse.ArgumentParser(
        prog="aiopim explore",
        description="Run an async host program (that raises when its property fails) under "
        "many schedules of simultaneous events; report the first failing one in seed order, "
        "shrunk and replayed (docs/campaigns.md).",
    )
    ap.add_argument("program", metavar="PROGRAM", help="MODULE:FUNCTION or FILE.py:FUNCTION")
    ap.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter of the program (VALUE in JSON, else a string); repeatable",
    )
    ap.add_argument("--ranks", type=int, help="ranks of the machine (default 40)")
    ap.add_argument("--dpus-per-rank", type=int, help="DPUs per rank (default 64)")
    ap.add_argument("--chip", help="v1B (default) or v1A")
    ap.add_argument(
        "--backend",
        choices=["asyncio", "trio"],
        default="asyncio",
        help="event loop of the runs (default asyncio)",
    )
    ap.add_argument("--schedules", type=int, default=1000, metavar="N", help="default 1000")
    ap.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    ap.add_argument("--time-limit", type=float, metavar="SECONDS", help="virtual time per run")
    ap.add_argument("--shrink", type=int, default=64, metavar="N", help="explore seeds tried")
    ap.add_argument(
        "--replay",
        type=_replay_seed,
        default=argparse.SUPPRESS,
        metavar="SEED",
        help="run the schedule of explore seed SEED ('stable': the stable order) on both backends",
    )
    ap.add_argument("--dir", metavar="DIR", help="store the schedules' results in DIR")
    _executor_options(ap)
    opts = ap.parse_args(argv)
    if opts.schedules < 1:
        ap.error("--schedules must be at least 1")
    common: dict[str, Any] = {
        "params": dict(opts.param),
        "machine": _machine(opts) or None,
        "backend": opts.backend,
        "time_limit": opts.time_limit,
        "path": [os.getcwd()],
    }
    user_dirs.append(os.getcwd())
    try:
        if hasattr(opts, "replay"):
            return _replay(opts.program, opts.replay, common)
        report = explore(
            opts.program,
            schedules=opts.schedules,
            seed=opts.seed,
            directory=opts.dir,
            shrink_budget=max(0, opts.shrink),
            progress=progress_enabled(opts.progress),
            **_where(opts),
            **common,
        )
    except CampaignError as exc:
        raise _input_error(exc) from None
    sys.stdout.write(_summary(report))
    sys.stdout.write(report.text())
    return EXIT_FAILED if report.failed else 0


def _replay(program: str, seed: int | None, common: dict[str, Any]) -> int:
    failed = False
    for backend in ("asyncio", "trio"):
        record = replay_schedule(program, seed, **{**common, "backend": backend})
        where = "stable order" if seed is None else f"explore_seed={seed}"
        error = str(record["error"]).strip().splitlines()[0] if record["error"] else "failed"
        outcome = "ok" if record["status"] == "ok" else f"failed: {error}"
        print(
            f"{program} ({where}, {backend}): {outcome}; virtual time "
            f"{format_ps(record.get('virtual_time_ps'))}, trace sha256 "
            f"{str(record.get('digest'))[:16]}"
        )
        failed |= record["status"] != "ok"
    return EXIT_FAILED if failed else 0
