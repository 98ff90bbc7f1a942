"""Schedule exploration as a campaign: schedule ``i`` is one run of the host program with
schedule exploration on, its explore seed derived from the campaign's seed and ``i``.

The first failing schedule is the failing one of lowest index, whatever ran where: nothing
after a known failure is started, everything before it completes. It is then shrunk here, in
this process (the stable order first, then explore seeds 0, 1, 2, ... as Hypothesis shrinks an
integer; the first that fails the same way wins) and replayed on both backends.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from .._machine._config import MachineConfig
from .._progress import Progress
from ._execute import fan_out
from ._executors import open_pool
from ._run import execute_run
from ._spec import Campaign, CampaignError, RunSpec, _machine_dict
from ._store import Store

#: explore seeds the shrinker tries by default (after the stable order)
SHRINK_BUDGET = 64


def _kind(record: Mapping[str, Any]) -> str:
    """The exception type of a failed record (``AssertionError``)."""
    return str(record.get("error") or "").partition(":")[0]


def _schedule(spec: RunSpec, seed: int | None, backend: str | None = None) -> RunSpec:
    """``spec`` under explore seed ``seed`` (None: the stable order)."""
    return dataclasses.replace(
        spec,
        seed=0 if seed is None else seed,
        explore=seed is not None,
        backend=backend or spec.backend,
    )


def shrink(
    spec: RunSpec, failed: Mapping[str, Any], budget: int
) -> tuple[int | None, dict[str, Any]]:
    """The simplest schedule that fails like ``failed`` (a record of ``spec``): the stable order,
    else the smallest explore seed below ``budget``, else ``spec``'s own seed."""
    candidates: list[int | None] = [None, *range(min(budget, spec.seed))]
    for seed in candidates:
        record = json.loads(execute_run(_schedule(spec, seed)))
        if record["status"] != "ok" and _kind(record) == _kind(failed):
            return seed, record
    return spec.seed, dict(failed)


@dataclass
class ExploreReport:
    """What an exploration found: the first failing schedule, shrunk and replayed, or none."""

    program: str
    schedules: int
    #: schedules with a result (those after the first failure are not all run)
    explored: int
    first_failure: dict[str, Any] | None = None
    #: the shrunk schedule's explore seed (None: the stable order fails too)
    shrunk_seed: int | None = None
    shrunk: dict[str, Any] | None = None
    #: backend -> record of the shrunk schedule replayed on it
    replays: dict[str, dict[str, Any]] = field(default_factory=dict)
    command: str = ""

    @property
    def failed(self) -> bool:
        """True when some schedule failed."""
        return self.first_failure is not None

    @property
    def replay_is_exact(self) -> bool:
        """The shrunk schedule failed again on every backend, with one trace digest."""
        digests = {r.get("digest") for r in self.replays.values()}
        failing = all(r["status"] != "ok" for r in self.replays.values())
        return bool(self.replays) and failing and len(digests) == 1

    def text(self) -> str:
        """A short report (deterministic)."""
        if self.first_failure is None:
            return f"{self.program}: {self.explored} schedules explored, none failed\n"
        first = self.first_failure
        seed = (
            "the stable order" if self.shrunk_seed is None else f"explore_seed={self.shrunk_seed}"
        )
        lines = [
            f"{self.program}: schedule {first['run']} of {self.schedules} fails "
            f"(explore_seed={first['seed']}): {_first_line(first)}",
            f"shrunk to {seed}: {_first_line(self.shrunk or first)}",
        ]
        for backend, record in self.replays.items():
            lines.append(
                f"replayed on {backend}: {record['status']}, trace sha256 "
                f"{str(record.get('digest'))[:16]}"
            )
        if self.replays:
            same = "the same failure and trace" if self.replay_is_exact else "NOT the same outcome"
            lines.append(f"replay: {same} on every backend")
        lines.append(f"replay it with: {self.command}")
        return "\n".join(lines) + "\n"

    def assert_passes(self) -> None:
        """Raise ``AssertionError`` with the report if a schedule failed."""
        if self.failed:
            raise AssertionError(self.text())


def _first_line(record: Mapping[str, Any]) -> str:
    text = str(record.get("error") or "failed").strip()
    return text.splitlines()[0] if text else "failed"


def replay_command(
    program: str,
    seed: int | None,
    params: Mapping[str, Any],
    machine: Mapping[str, Any],
    backend: str,
) -> str:
    """The ``aiopim explore ... --replay SEED`` command that runs one schedule again."""
    words = ["aiopim", "explore", program, "--replay", "stable" if seed is None else str(seed)]
    for name, value in params.items():
        words += ["--param", f"{name}={json.dumps(value)}"]
    flags = {"ranks": "--ranks", "dpus_per_rank": "--dpus-per-rank", "chip": "--chip"}
    for key, flag in flags.items():
        if key in machine:
            words += [flag, str(machine[key])]
    if backend != "asyncio":
        words += ["--backend", backend]
    return shlex.join(words)


def explore(
    program: str,
    *,
    params: Mapping[str, Any] | None = None,
    machine: MachineConfig | Mapping[str, Any] | None = None,
    backend: str = "asyncio",
    schedules: int = 1000,
    seed: int = 0,
    time_limit: float | None = None,
    path: Sequence[str] = (),
    jobs: int | None = None,
    dask: str | None = None,
    executor: Executor | None = None,
    directory: str | os.PathLike[str] | None = None,
    shrink_budget: int = SHRINK_BUDGET,
    progress: bool | None = False,
) -> ExploreReport:
    """Explore ``schedules`` schedules of ``program`` (an async function that raises when the
    property it checks fails), fanned out like a campaign; report the first failing one,
    shrunk and replayed. ``jobs``, ``dask``, ``executor``, ``directory``: as
    :meth:`Campaign.run`."""
    params = dict(params or {})
    campaign = Campaign(
        f"explore {program}",
        program,
        runs=[{}] * schedules,
        params=params,
        seed=seed,
        machine=machine,
        backend=backend,
        explore=True,
        time_limit=time_limit,
        path=path,
    )
    specs = campaign.check()
    store = None if directory is None else Store(directory, campaign.name, specs[0].program)
    records = {} if store is None else store.finished(specs)
    known = min((r for r, rec in records.items() if rec["status"] != "ok"), default=schedules)
    todo = [s.index for s in specs if s.index not in records and s.index < known]
    pool = open_pool(jobs=jobs, dask=dask, executor=executor)
    try:
        with Progress(campaign.name, total=len(specs), unit="schedules", enabled=progress) as bar:

            def on_record(line: str, record: dict[str, Any]) -> None:
                if store is not None:
                    store.append(line)
                records[record["run"]] = record
                failed = sum(r["status"] != "ok" for r in records.values())
                bar.update(len(records), failures=str(failed))

            fan_out(specs, todo, pool, on_record, stop_at_failure=True)
    finally:
        pool.close()
        if store is not None:
            store.close()
    failed = sorted(r for r, rec in records.items() if rec["status"] != "ok")
    report = ExploreReport(program, schedules, len(records))
    if not failed:
        return report
    first = specs[failed[0]]
    report.first_failure = records[first.index]
    report.shrunk_seed, report.shrunk = shrink(first, report.first_failure, shrink_budget)
    for replay_backend in ("asyncio", "trio"):
        line = execute_run(_schedule(first, report.shrunk_seed, replay_backend))
        report.replays[replay_backend] = json.loads(line)
    report.command = replay_command(
        program, report.shrunk_seed, params, _machine_dict(machine), backend
    )
    return report


def replay_schedule(
    program: str,
    seed: int | None,
    *,
    params: Mapping[str, Any] | None = None,
    machine: MachineConfig | Mapping[str, Any] | None = None,
    backend: str = "asyncio",
    time_limit: float | None = None,
    path: Sequence[str] = (),
) -> dict[str, Any]:
    """The record of one schedule of ``program`` (explore seed ``seed``; None: stable order)."""
    campaign = Campaign(
        f"explore {program}",
        program,
        params=dict(params or {}),
        machine=machine,
        backend=backend,
        explore=True,
        time_limit=time_limit,
        path=path,
    )
    spec = campaign.check()[0]
    return dict(json.loads(execute_run(_schedule(spec, seed))))


def program_of(fn: Callable[..., Any] | str) -> str:
    """``FILE.py:FUNCTION`` of a module-level async function (workers import it from its file),
    or ``fn`` itself if it is already a program string."""
    if isinstance(fn, str):
        return fn
    if fn.__qualname__ != fn.__name__ or fn.__module__ == "__main__":
        raise CampaignError(
            f"{fn.__qualname__}: explore a module-level async function of an importable module "
            "(workers import it by name)"
        )
    return f"{inspect.getfile(fn)}:{fn.__name__}"


@dataclass
class Explorer:
    """``explore`` bound to an executor: the ``pim_explore`` fixture of the pytest plugin, whose
    ``--aiopim-jobs N`` / ``--aiopim-dask ADDRESS`` options fan the schedules out."""

    jobs: int | None = None
    dask: str | None = None

    def __call__(self, program: Callable[..., Any] | str, **options: Any) -> ExploreReport:
        """Explore ``program`` (an async function or ``MODULE:FUNCTION``); ``options`` as
        :func:`explore`'s."""
        return explore(program_of(program), jobs=self.jobs, dask=self.dask, **options)
