"""``dpu_callback``: host functions run between the jobs of rank queues, for every
combination of the callback flags (see the callback table in ``docs/sdk-reference.md``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._jobs import Job
from .._machine._rank import Rank
from ._flags import ALL_RANKS_ID, CallbackMode
from ._oplog import logged
from ._set import DpuSetBase
from ._submit import callback_ranks, counted_callback, submit
from ._validate import check_callable

E = DpuErrorCode
CallbackFn = Callable[[Any, int, Any], Any]
#: called with (error code, message) when a host call of the callback returns
Done = Callable[[int, str], None]


class _Call:
    """One ``dpu_callback`` call: the function, its argument and how it runs."""

    __slots__ = ("args", "dset", "fn", "mode", "ranks")

    def __init__(self, dset: DpuSetBase, fn: CallbackFn, args: Any, mode: CallbackMode) -> None:
        self.dset = dset
        self.fn = fn
        self.args = args
        self.mode = mode
        self.ranks = dset.rank_list

    def invoke(
        self,
        call_set: Any,
        rank_id: int,
        held: list[Rank],
        done: Done,
        running: tuple[Rank, ...] = (),
    ) -> None:
        """Run ``fn(call_set, rank_id, args)`` as a host task holding ``held``; a non-blocking
        call counts as running on ``running`` (``dpu_free`` waits for it there)."""
        emu = self.dset.emulator
        fn, args, blocking = self.fn, self.args, self.mode.blocking
        counted = list(running)
        for r in counted:
            r.running_callbacks += 1

        async def host_call() -> None:
            token = callback_ranks.set(frozenset(r.index for r in held) if blocking else None)
            own = counted_callback.set(counted)
            code, message = 0, ""
            t0 = emu.kernel.now
            try:
                result = fn(call_set, rank_id, args)
                if inspect.isawaitable(result):
                    result = await result
                if isinstance(result, int) and result:
                    code, message = int(result), f"callback returned {result}"
            except DpuError as exc:
                code, message = int(exc.code), f"callback raised {exc}"
            finally:
                callback_ranks.reset(token)
                counted_callback.reset(own)
                for r in counted:
                    r.running_callbacks -= 1
                    if r.stop_waiters:  # a dpu_free is waiting
                        emu.kernel.call_soon(_notify_stopped, r, r.actor)
            rec = emu.recorder
            if rec is not None:
                rec.callback_ran(call_set.rank_list, t0, code)
            done(code, message)

        emu.call_host(host_call)


class CallbackJob(Job):
    """CALLBACK / CALLBACK_PARALLEL on one rank: the callback with that rank's set."""

    __slots__ = ("call",)

    def __init__(self, rank: Rank, call: _Call) -> None:
        jt = JobType.CALLBACK_PARALLEL if call.mode.parallel else JobType.CALLBACK
        super().__init__(rank, jt, info={"flags": call.mode.flags})
        self.call = call

    def start(self) -> None:
        call, rank = self.call, self.rank
        if call.dset.is_single_dpu:
            call_set, rank_id = call.dset, ALL_RANKS_ID
        else:
            call_set, rank_id = call.dset._child_rank(rank), call.ranks.index(rank)
        if not call.mode.blocking:
            rank.detach_current(self)
            call.invoke(call_set, rank_id, [], _ignore, (rank,))  # QUIRK: the result is ignored
            return None
        call.invoke(call_set, rank_id, [rank], lambda c, m: _finish_job(self, c, m))
        return None


class SingleCallJob(CallbackJob):
    """``SINGLE_CALL`` on several ranks: one job per rank; the last to start calls once."""

    __slots__ = ("arrived",)

    def __init__(self, rank: Rank, call: _Call, arrived: list[SingleCallJob]) -> None:
        super().__init__(rank, call)
        #: the jobs of this call that have started, shared by the jobs of every rank
        self.arrived = arrived

    def start(self) -> None:
        call, rank = self.call, self.rank
        self.arrived.append(self)
        last = len(self.arrived) == len(call.ranks)
        if not call.mode.blocking:
            if not last:
                rank.kernel.call_soon(lambda _: rank.finish(self, E.DPU_OK))
                return None
            rank.detach_current(self)
            call.invoke(call.dset, ALL_RANKS_ID, [], _ignore, tuple(call.ranks))
            return None
        if last:
            jobs = list(self.arrived)

            def finish_all(code: int, message: str) -> None:
                for other in jobs:
                    _finish_job(other, code, message)

            call.invoke(call.dset, ALL_RANKS_ID, call.ranks, finish_all)
        return None


class HoldingSingleCallJob(CallbackJob):
    """``SINGLE_CALL`` without ``ASYNC`` (QUIRK reproduced): one job on the first rank that
    holds every other rank (once its current job is done) while the callback runs."""

    def start(self) -> None:
        call = self.call

        def all_held() -> None:
            call.invoke(call.dset, ALL_RANKS_ID, call.ranks, self._release_and_finish)

        _hold_all(call.ranks, self.rank, all_held)
        return None

    def _release_and_finish(self, code: int, message: str) -> None:
        for r in self.call.ranks:
            if r is not self.rank:
                r.release_hold()
        _finish_job(self, code, message)


@logged("callback")
async def callback(dset: DpuSetBase, fn: CallbackFn, args: Any, mode: CallbackMode) -> None:
    """``dpu_callback`` with the exact semantics of each flag combination."""
    check_callable(fn, "callback")
    if not mode.blocking and mode.wait:
        raise DpuError(
            E.DPU_ERR_NONBLOCKING_SYNC_CALLBACK,
            "DPU_CALLBACK_NONBLOCKING needs DPU_CALLBACK_ASYNC",
        )
    if not dset.emulator.runs_host_callbacks:
        raise DpuError(
            E.DPU_ERR_INTERNAL,
            "callback jobs run as host tasks of aiopim.run() / Emulator.run(); start the "
            "program that way to use dpu_callback",
        )
    call = _Call(dset, fn, args, mode)
    ranks = call.ranks
    if mode.single_call and mode.wait and not dset.is_single_dpu:
        first = ranks[0]
        await submit(
            dset,
            lambda rank: HoldingSingleCallJob(rank, call),
            wait=True,
            parallel=mode.parallel,
            what="callback",
            ranks=[first],
        )
        return
    if mode.single_call and len(ranks) > 1:
        arrived: list[SingleCallJob] = []
        await submit(
            dset,
            lambda rank: SingleCallJob(rank, call, arrived),
            wait=False,
            parallel=mode.parallel,
            what="callback",
        )
        return
    await submit(
        dset,
        lambda rank: CallbackJob(rank, call),
        wait=mode.wait,
        parallel=mode.parallel,
        what="callback",
    )


def _notify_stopped(rank: Rank) -> None:
    rank.notify_stopped()


def _ignore(code: int, message: str) -> None:
    """The result of a non-blocking callback is dropped, as in the SDK."""


def _finish_job(job: Job, code: int, message: str) -> None:
    rank = job.rank
    if message:
        job.info["error"] = message
    code_enum = (
        DpuErrorCode(code) if code in DpuErrorCode._value2member_map_ else E.DPU_ERR_INTERNAL
    )
    rank.kernel.call_soon(lambda _: rank.finish(job, code_enum), None, rank.actor)


def _hold_all(ranks: list[Rank], owner: Rank, then: Callable[[], None]) -> None:
    """Lock every other rank once its current job is done, then call ``then``."""
    remaining = {r.index for r in ranks if r is not owner}
    if not remaining:
        then()
        return

    def granted(r: Rank) -> None:
        remaining.discard(r.index)
        if not remaining:
            then()

    for r in ranks:
        if r is not owner:
            r.request_hold(granted)
