"""Where runs execute: this process, local processes, or a Dask cluster; all of them
``concurrent.futures.Executor``s, and any other executor works the same way."""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from ._spec import CampaignError

P = ParamSpec("P")
T = TypeVar("T")


class SerialExecutor(Executor):
    """Runs each call in this process when it is submitted (the default, and the reference a
    parallel campaign must match)."""

    workers = 1

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


def _mp_context() -> multiprocessing.context.BaseContext:
    """``forkserver`` where there is one (workers fork from a server that imported aiopim once,
    so a new worker costs milliseconds), else ``spawn``: never a fork of this process."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["aiopim.campaign._run"])
    return ctx


def local_processes(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` worker processes that do not inherit this process's state (``forkserver`` or
    ``spawn``); the program is imported by name in each worker."""
    if jobs < 1:
        raise CampaignError(f"--jobs must be at least 1, not {jobs}")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=_mp_context())


class DaskExecutor(Executor):
    """Runs calls on a Dask cluster: ``local:N`` starts a ``LocalCluster`` of N single-threaded
    worker processes on this machine, anything else is a scheduler address
    (``tcp://host:8786``) of a running cluster (dask-jobqueue, Kubernetes, ...)."""

    def __init__(self, address: str) -> None:
        try:  # imported here only: aiopim.campaign works without Dask
            distributed: Any = importlib.import_module("distributed")
        except ImportError:
            raise CampaignError(
                "the Dask executor needs dask.distributed: pip install -e '.[cluster]'"
            ) from None
        self._cluster: Any = None
        if address.startswith("local:"):
            workers = _positive(address.removeprefix("local:"), "--dask local:N")
            self._cluster = distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            target: Any = self._cluster
        else:
            target = address
        try:
            self.client = distributed.Client(target, timeout="30s")
        except OSError as exc:
            self._close_cluster()
            raise CampaignError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        self._executor: Any = self.client.get_executor(pure=False)
        nthreads: dict[str, int] = self.client.nthreads()
        self.workers = max(1, sum(nthreads.values()))

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self._executor.submit(fn, *args, **kwargs)  # type: ignore[no-any-return]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._executor.shutdown(wait=wait)
        self.client.close()
        self._close_cluster()

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _positive(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise CampaignError(f"{what}: give a positive number of workers, not {text!r}")
    return value


def workers_of(executor: Executor) -> int:
    """How many runs ``executor`` can run at once (its ``workers`` or ``_max_workers``)."""
    for name in ("workers", "_max_workers"):
        value = getattr(executor, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return os.cpu_count() or 1


@dataclass
class Pool:
    """An executor, and how to start a new one if it breaks (None: it is the caller's)."""

    executor: Executor
    restart: Callable[[], Executor] | None = None
    owned: bool = False

    def replace(self) -> bool:
        """Start a new executor after the old one broke; False if this pool cannot."""
        if self.restart is None:
            return False
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.executor = self.restart()
        return True

    def close(self) -> None:
        """Shut the executor down if this pool started it."""
        if self.owned:
            self.executor.shutdown(wait=True, cancel_futures=True)


def open_pool(
    *, jobs: int | None = None, dask: str | None = None, executor: Executor | None = None
) -> Pool:
    """The pool of one of ``executor`` (yours, left open), ``dask``, ``jobs`` or serial."""
    given = [what for what, v in (("executor", executor), ("dask", dask), ("jobs", jobs)) if v]
    if len(given) > 1:
        raise CampaignError(f"choose one of {' and '.join(given)}, not both")
    if executor is not None:
        return Pool(executor)
    if dask is not None:
        return Pool(DaskExecutor(dask), owned=True)
    if jobs is not None and jobs != 1:
        n = jobs
        return Pool(local_processes(n), lambda: local_processes(n), owned=True)
    return Pool(SerialExecutor(), SerialExecutor, owned=True)
