"""Fan a campaign's runs out over an executor; store each record as it arrives.

Runs are submitted in run-id order, at most a window of them at a time. A worker that dies
(``BrokenExecutor``) takes the runs it and its pool were running with it: those runs are
retried one at a time on a new pool, so a run that kills its worker again is recorded as failed
(naming it) and the others complete. Results are stored by run id, so the table does not depend
on which worker ran what, nor on the order runs finished.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    BrokenExecutor,
    CancelledError,
    Executor,
    Future,
    wait,
)
from typing import TYPE_CHECKING, Any

from .._progress import Progress
from ._executors import Pool, SerialExecutor, open_pool, workers_of
from ._results import Results
from ._run import execute_run
from ._spec import CampaignError, RunSpec
from ._store import Store

if TYPE_CHECKING:
    from ._spec import Campaign

#: runs in flight per worker (keeps every worker busy while the parent stores results)
RUNS_PER_WORKER = 2
#: ...on a Dask cluster, whose round trips are longer
RUNS_PER_DASK_WORKER = 4

OnRecord = Callable[[str, dict[str, Any]], None]


def _died(spec: RunSpec, exc: BaseException | None) -> str:
    """The record of a run whose worker died while running it, alone."""
    detail = f" ({type(exc).__name__}: {exc})" if exc is not None and str(exc) else ""
    record = {
        "run": spec.index,
        "label": spec.label,
        "key": spec.key(),
        "params": dict(spec.params),
        "seed": spec.seed,
        "status": "failed",
        "result": None,
        "error": f"the worker process died while running it, alone, after a retry{detail}",
        "traceback": None,
        "wall_s": None,
    }
    return json.dumps(record, sort_keys=True)


def _killed_workers(spec: RunSpec, exc: BaseException) -> str:
    """The record of a run whose Dask workers died, each time it ran (``KilledWorker``)."""
    record = json.loads(_died(spec, None))
    record["error"] = f"the Dask workers running it died ({type(exc).__name__}: {exc})"
    return json.dumps(record, sort_keys=True)


class _Fanout:
    """The submission loop of one pass over ``todo`` (run ids, in order)."""

    def __init__(
        self,
        specs: Sequence[RunSpec],
        pool: Pool,
        on_record: OnRecord,
        *,
        window: int,
        stop_at_failure: bool,
    ) -> None:
        self.specs = specs
        self.pool = pool
        self.on_record = on_record
        self.window = window
        self.stop_at_failure = stop_at_failure
        #: the first failed run id seen (exploration stops submitting after it)
        self.first_failure: int | None = None
        self.inflight: dict[Future[str], int] = {}
        self.suspects: deque[int] = deque()
        self.alone: int | None = None  # a suspect running by itself
        #: runs the executor failed to run (a lost scheduler, ...): run id -> its error
        self.lost: dict[int, BaseException] = {}

    def _wanted(self, run: int) -> bool:
        late = self.first_failure is not None and run > self.first_failure
        return not (self.stop_at_failure and late)

    def _submit(self, run: int) -> None:
        future = self.pool.executor.submit(execute_run, self.specs[run])
        self.inflight[future] = run

    def _fill(self, queue: deque[int]) -> None:
        if self.alone is not None:
            return
        if self.suspects:
            if not self.inflight:
                self.alone = self.suspects.popleft()
                self._submit(self.alone)
            return
        while queue and len(self.inflight) < self.window and self._wanted(queue[0]):
            self._submit(queue.popleft())

    def _record(self, line: str) -> None:
        record = json.loads(line)
        if record["status"] != "ok" and (
            self.first_failure is None or record["run"] < self.first_failure
        ):
            self.first_failure = record["run"]
        self.on_record(line, record)

    def run(self, todo: Iterable[int]) -> None:
        queue = deque(todo)
        while True:
            self._fill(queue)
            if not self.inflight:
                return
            done, _ = wait(self.inflight, return_when=FIRST_COMPLETED)
            broken: list[int] = []
            for future in sorted(done, key=self.inflight.__getitem__):
                self._collect(future, broken)
            if broken:
                self._recover(broken)
            if self.stop_at_failure and self.first_failure is not None:
                for future, run in list(self.inflight.items()):
                    if run > self.first_failure and future.cancel():
                        del self.inflight[future]

    def _collect(self, future: Future[str], broken: list[int]) -> None:
        run = self.inflight.pop(future)
        try:
            line: str | None = future.result()
        except BrokenExecutor:
            broken.append(run)
            return
        except (Exception, CancelledError) as exc:  # our cancels never get here
            if type(exc).__name__ == "KilledWorker":
                line = _killed_workers(self.specs[run], exc)
            else:
                self.lost[run] = exc  # the executor's failure, not the run's: not stored
                line = None
        if run == self.alone:
            self.alone = None  # settled: the next suspect may run alone
        if line is not None:
            self._record(line)

    def _recover(self, broken: list[int]) -> None:
        """The pool died: the runs it held are suspects, retried one at a time on a new pool."""
        if self.inflight:  # they fail the same way; keep those that had finished first
            wait(self.inflight)
            for future in sorted(self.inflight, key=self.inflight.__getitem__):
                self._collect(future, broken)
        if broken == [self.alone]:
            self._record(_died(self.specs[broken[0]], None))
            self.alone = None
        else:
            self.suspects.extend(sorted(broken))
        if not self.pool.replace():
            labels = ", ".join(self.specs[r].label for r in sorted(broken))
            raise CampaignError(
                f"the executor broke while running {labels}; every finished result is kept: "
                "run the campaign again to resume"
            )


def fan_out(
    specs: Sequence[RunSpec],
    todo: Iterable[int],
    pool: Pool,
    on_record: OnRecord,
    *,
    stop_at_failure: bool = False,
) -> int | None:
    """Run ``todo`` (run ids) on ``pool``; ``on_record(line, record)`` for each finished run.
    With ``stop_at_failure``, no run after the first failed one is started, and every run
    before it completes. Returns the first failed run id seen. A run the executor itself
    failed to run is not stored: :class:`CampaignError` names it at the end."""
    dask = type(pool.executor).__name__ == "DaskExecutor"
    per_worker = RUNS_PER_DASK_WORKER if dask else RUNS_PER_WORKER
    serial = isinstance(pool.executor, SerialExecutor)  # runs at submit: no need to queue
    window = 1 if serial else max(1, workers_of(pool.executor) * per_worker)
    fanout = _Fanout(specs, pool, on_record, window=window, stop_at_failure=stop_at_failure)
    fanout.run(todo)
    if fanout.lost:
        run, exc = min(fanout.lost.items())
        raise CampaignError(
            f"the executor could not run {len(fanout.lost)} run(s), first {specs[run].label}: "
            f"{type(exc).__name__}: {exc}; the finished results are kept: run the campaign "
            "again to resume"
        )
    return fanout.first_failure


def run_campaign(
    campaign: Campaign,
    directory: str | os.PathLike[str] | None = None,
    *,
    jobs: int | None = None,
    dask: str | None = None,
    executor: Executor | None = None,
    progress: bool | None = False,
    retry_failed: bool = False,
) -> Results:
    """Run a campaign (see :meth:`Campaign.run`)."""
    specs = campaign.check()
    store = None if directory is None else Store(directory, campaign.name, specs[0].program)
    records = {} if store is None else store.finished(specs)
    if retry_failed:
        records = {run: r for run, r in records.items() if r["status"] == "ok"}
    todo = [s.index for s in specs if s.index not in records]
    pool = open_pool(jobs=jobs, dask=dask, executor=executor)
    failures = sum(r["status"] != "ok" for r in records.values())
    try:
        with Progress(campaign.name, total=len(specs), unit="runs", enabled=progress) as bar:
            bar.update(len(records), failures=str(failures))

            def on_record(line: str, record: dict[str, Any]) -> None:
                nonlocal failures
                if store is not None:
                    store.append(line)
                records[record["run"]] = record
                failures += record["status"] != "ok"
                bar.update(len(records), failures=str(failures))

            fan_out(specs, todo, pool, on_record)
    finally:
        pool.close()
        if store is not None:
            store.close()
    return Results(campaign.name, records, len(specs))
