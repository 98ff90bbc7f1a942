"""Rank jobs: what the rank actor runs, and how synchronous callers wait for them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import PARALLEL_JOB_TYPES, DpuErrorCode, JobType
from .._runtime._kernel import HostWaiter

if TYPE_CHECKING:
    from ._rank import Rank


class JobFailed(Exception):
    """Raised by a job body: the job fails with ``code``."""

    def __init__(self, code: DpuErrorCode, message: str = "") -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code.name}: {message}")


class SyncGroup:
    """Waits for one SYNC/SYNC_PARALLEL job on each rank of a synchronous call."""

    __slots__ = ("errors", "remaining", "waiter")

    def __init__(self, waiter: HostWaiter, nr_ranks: int) -> None:
        self.waiter = waiter
        self.remaining = nr_ranks
        self.errors: list[tuple[Rank, int, str]] = []

    def rank_done(self, rank: Rank, error: int) -> None:
        if error:
            self.errors.append((rank, error, rank.job_error_message))
        self.remaining -= 1
        if self.remaining == 0:
            if self.waiter.pending and self.errors:
                # The synchronous caller knows the queue state: it recovers the ranks (§2.2).
                for r, _, _ in self.errors:
                    r.job_error = 0
            self.errors.sort(key=lambda e: e[0].index)
            self.waiter.resolve(self.errors)


class Job:
    """One entry of a rank's queue: its type, what it does to which DPUs, for how long.

    The rank calls :meth:`start` when the job reaches the head of the queue and may run, and
    :meth:`complete` when its duration has passed. A plain ``Job`` does nothing and takes no
    time (SYNC jobs); the host operations define one subclass per kind of work.
    """

    __slots__ = (
        "end_ps",
        "info",
        "parallel",
        "rank",
        "seq",
        "start_ps",
        "submit_ps",
        "sync_group",
        "type",
    )

    def __init__(
        self,
        rank: Rank,
        job_type: JobType,
        *,
        info: dict[str, Any] | None = None,
        sync_group: SyncGroup | None = None,
    ) -> None:
        self.rank = rank
        self.type = job_type
        self.parallel = job_type in PARALLEL_JOB_TYPES
        self.info = info or {}
        self.sync_group = sync_group
        self.seq = 0
        self.submit_ps = 0
        self.start_ps = -1
        self.end_ps = -1

    def start(self) -> int | None:
        """Begin: check what the SDK's worker checks and return the duration in ps, or None
        when something else ends the job (:meth:`Rank.finish`). Raise :class:`JobFailed` to
        fail it."""
        return 0

    def complete(self) -> None:
        """Apply the job's effects at its end (copy the bytes, boot the DPUs, ...)."""
