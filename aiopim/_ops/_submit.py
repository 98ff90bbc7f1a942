"""Putting jobs on rank queues as the SDK does: job slots, SYNC jobs, sticky errors, and the
inline execution of synchronous calls made from a blocking callback on its own rank."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from .._dpulist import format_dpu_list
from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._jobs import Job, JobFailed, SyncGroup
from .._machine._rank import Rank
from ._set import DpuSetBase, check_control

E = DpuErrorCode

#: set inside a blocking callback's host task: the ranks it holds (inline execution)
callback_ranks: contextvars.ContextVar[frozenset[int] | None] = contextvars.ContextVar(
    "aiopim_callback_ranks", default=None
)


#: set inside a non-blocking callback's host task: the ranks whose dpu_free waits for it
counted_callback: contextvars.ContextVar[list[Rank] | None] = contextvars.ContextVar(
    "aiopim_counted_callback", default=None
)


def check_sticky(ranks: list[Rank]) -> None:
    """Raise the sticky asynchronous error of the first broken rank."""
    for r in ranks:
        if r.job_error:
            raise DpuError(
                r.job_error,
                f"rank {r.index} is broken by an earlier asynchronous failure "
                f"({r.job_error_message or 'see the trace'}); only a synchronous wait that was "
                "queued before the failure recovers it",
            )


def inline_ranks(ranks: list[Rank]) -> bool:
    """True inside a blocking callback that holds the one rank of ``ranks``."""
    held = callback_ranks.get()
    return held is not None and len(ranks) == 1 and ranks[0].index in held


def prepared_buffers(rank: Rank) -> dict[int, Any]:
    """The per-DPU host buffers of ``dpu_prepare_xfer`` (a callback has its own matrix)."""
    held = callback_ranks.get()
    if held is not None and rank.index in held:
        return rank.callback_matrix
    return rank.xfer_matrix


async def submit(
    dset: DpuSetBase,
    make: Callable[[Rank], Job | None],
    *,
    wait: bool,
    parallel: bool,
    what: str,
    ranks: list[Rank] | None = None,
    owner: str | None = None,
) -> None:
    """Enqueue ``make(rank)`` on each rank (+ SYNC / SYNC_PARALLEL when ``wait``), honouring
    job slots; ``make`` may return None for a rank that only gets the SYNC job.

    ``what`` names the host call in the trace (host waits); ``owner`` the calling library.
    """
    emu = dset.emulator
    rec = emu.recorder
    ranks = dset.rank_list if ranks is None else ranks
    check_control(ranks, owner)
    if wait and inline_ranks(ranks):
        await _run_inline(dset, make(ranks[0]))
        return
    check_sticky(ranks)
    need = 2 if wait else 1
    group: SyncGroup | None = None
    if wait:
        waiter = emu.kernel.new_waiter(lambda: _describe_wait(ranks, parallel))
        group = SyncGroup(waiter, len(ranks))
    sync_type = JobType.SYNC_PARALLEL if parallel else JobType.SYNC
    for r in ranks:
        while r.free_slots < need:
            t0 = emu.kernel.now
            await emu.bridge.wait(r.slot_waiter())
            if rec is not None:
                rec.host_wait(f"{what}: job slot", t0, (r,))
            check_sticky([r])
        job = make(r)
        if job is None:
            if group is not None:
                r.free_slots -= 1
                r.submit(Job(r, sync_type, sync_group=group))
            continue
        r.free_slots -= need
        r.submit(job)
        if group is not None:
            r.submit(Job(r, sync_type, sync_group=group))
    if group is not None:
        t0 = emu.kernel.now
        errors = await emu.bridge.wait(group.waiter)
        if rec is not None:
            rec.host_wait(what, t0, ranks)
        if errors:
            rank, encoded, message = errors[0]
            if len(errors) > 1:
                more = format_dpu_list(r.index for r, _e, _m in errors[1:])
                message += f"; rank{'s' if len(errors) > 2 else ''} {more} failed too"
            raise DpuError(encoded & 0xFFFF, f"rank {rank.index}: {message}")


def _describe_wait(ranks: list[Rank], parallel: bool) -> str:
    what = "SYNC_PARALLEL" if parallel else "SYNC"
    return f"{what} job(s) on rank(s) [{format_dpu_list(r.index for r in ranks)}]"


async def _run_inline(dset: DpuSetBase, job: Job | None) -> None:
    """A synchronous call from a blocking callback on its own rank runs inline."""
    if job is None:
        return
    emu = dset.emulator
    try:
        duration = job.start()
        if duration is None:
            raise DpuError(E.DPU_ERR_INTERNAL, "callbacks cannot be nested inline")
        await emu.delay(duration, f"inline {job.type.name}")
        job.complete()
    except JobFailed as failure:
        raise DpuError(failure.code, failure.message) from None
    if job.type in (JobType.LAUNCH_RANK, JobType.LAUNCH_DPU):
        rank = job.rank
        while rank.running_dpus:
            w = emu.kernel.new_waiter(f"inline launch on rank {rank.index}")
            rank.dpu_stop_waiters.append(w)
            await emu.bridge.wait(w)
        if any(d.fault is not None for d in rank.dpus if d.enabled):
            raise DpuError(E.DPU_ERR_DPU_FAULT, f"rank {rank.index}: {rank.fault_message()}")
