"""Bridge between the kernel and the host event loop (asyncio or trio, through anyio).

The event loop's clock *is* the kernel's clock. The kernel runs only when every host task is
blocked (the backends in :mod:`._backends` call :meth:`Bridge.on_idle` from the loop's idle
point). Each idle pass runs emulated events up to the loop's next timer and wakes at most one
host waiter, so host tasks react to emulator results in kernel order on both backends.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._errors import DeadlockError, TimeLimitError
from ._kernel import INFINITY, HostWaiter, Kernel

if TYPE_CHECKING:
    import anyio

    from ._backends import HostBackend


class Bridge:
    """Runs the kernel when the host is idle and wakes host tasks with its results."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        #: the Emulator owning this bridge, weakly: a finished emulator is finalized as soon as
        #: its user drops it (its machine is then collected by the bytes it holds, see
        #: ``_emulator._dropped``), without waiting for the garbage collector to find a cycle
        self.emulator: weakref.ref[Any] | None = None
        #: the event-loop backend driving the host (set when its loop or clock starts)
        self.host: HostBackend | None = None
        #: cancelled (with ``failure`` set) when the host must be stopped (deadlock, crash)
        self.main_scope: anyio.CancelScope | None = None
        self.failure: BaseException | None = None
        #: the run is over (the host program returned, Ctrl-C, the time limit): the emulated
        #: machine stops where it is, the kernel runs no more, and a host task that still
        #: waits for it gets :attr:`end_error`
        self.ended = False
        self.end_error: Callable[[], BaseException] = _host_returned
        #: the virtual time (ps) past which the run may not go (None: no limit), and the budget
        #: it came from
        self.limit_ps: int | None = None
        self.budget_ps = 0
        #: where the DPUs still running are (set by the emulator; for the time limit's error)
        self.describe_running: Callable[[], list[str]] = list
        # put in the kernel's host queue by a Ctrl-C: the kernel stops at its next event
        self._interrupt_mark = HostWaiter(kernel, 0, "Ctrl-C", daemon=True)
        self._interrupt_mark.state = HostWaiter.ABANDONED

    @property
    def backend(self) -> str | None:
        """Name of the backend driving the host ("asyncio" or "trio"), None before it starts."""
        return self.host.name if self.host is not None else None

    def start_run(self, limit_ps: int | None) -> None:
        """A host program starts: the machine runs again, up to ``limit_ps`` of virtual time
        from now (None: no limit)."""
        self.ended = False
        self.failure = None
        self.end_error = _host_returned
        self.budget_ps = 0 if limit_ps is None else limit_ps
        self.limit_ps = None if limit_ps is None else self.kernel.now + limit_ps

    def interrupt(self) -> None:
        """Ctrl-C: end the run now (callable from a signal handler, even while the kernel
        runs: it stops at its next event, without moving the clock)."""
        if not self.ended:
            self.ended = True
            self.end_error = KeyboardInterrupt
        self.kernel.host_pending.append(self._interrupt_mark)

    # -- host side ---------------------------------------
    async def wait(self, waiter: HostWaiter) -> Any:
        """Suspend the calling host task until the kernel resolves ``waiter``."""
        if waiter.state == HostWaiter.RESOLVED:
            waiter.state = HostWaiter.DELIVERED
            if waiter.error is not None:
                raise waiter.error
            return waiter.value
        if self.host is None:
            raise RuntimeError("aiopim waits need the emulator's event loop or trio clock")
        return await self.host.wait(waiter)

    # -- kernel side ---------------------------------------
    def on_idle(self, deadline_ps: int | None) -> bool:
        """Every host task is blocked: advance the emulation until a host task can run.

        Returns False when nothing can happen and no aiopim wait is pending (the event loop
        then blocks for real, e.g. while trio shuts down its system tasks).
        """
        k = self.kernel
        if self._deliver_one():
            return True
        if self.ended:
            return self._after_end(deadline_ps)
        target = INFINITY if deadline_ps is None else deadline_ps
        limit = INFINITY if self.limit_ps is None else self.limit_ps
        k.run(min(target, limit))
        if self.ended:  # Ctrl-C while the kernel ran
            return True
        if k.crashed is not None:
            crashed, k.crashed = k.crashed, None
            self._fail(crashed)
            return True
        if self._deliver_one():
            return True
        if target > limit and (deadline_ps is not None or k.next_event_time() is not None):
            self._time_up(limit)
            return True
        if deadline_ps is not None:
            if deadline_ps > k.now:
                k.now = deadline_ps
            return True
        if k.next_event_time() is not None:
            return True
        awaiting = any(not w.daemon and w.handle is not None for w in k.host_waiting.values())
        if awaiting or (self.main_scope is not None and not self.main_scope.cancel_called):
            self._deadlock()
            return True
        return False

    def _after_end(self, deadline_ps: int | None) -> bool:
        """The run is over: the machine stays where it is. A host task that still waits for it
        (a clean-up) gets :attr:`end_error`; host timers still fire (on a frozen machine)."""
        k = self.kernel
        awaiting = [w for w in k.host_waiting.values() if w.handle is not None]
        if awaiting:
            err = self.end_error()
            for w in awaiting:
                w.resolve(error=err)
            if self._deliver_one():
                return True
        if deadline_ps is None:
            return False
        k.now = max(k.now, deadline_ps)
        return True

    def _time_up(self, limit: int) -> None:
        """The next thing to happen lies past the time limit: end the run at the limit."""
        k = self.kernel
        k.now = max(k.now, limit)
        err = TimeLimitError(
            self.budget_ps, k.now, self.describe_running(), k.describe_host_waits()
        )
        self.ended = True
        self.end_error = lambda: err
        # raised where the host waits for the machine; host tasks waiting for anything else
        # (a sleep) are cancelled with the host program
        for w in [w for w in k.host_waiting.values() if not w.daemon and w.handle is not None]:
            w.resolve(error=err)
        self._deliver_one()
        self._fail(err)

    def _deliver_one(self) -> bool:
        pending = self.kernel.host_pending
        host = self.host
        while pending:
            w = pending.popleft()
            if w.state != HostWaiter.RESOLVED or w.handle is None or host is None:
                continue  # abandoned, or the task has not awaited it yet (it will not block)
            w.state = HostWaiter.DELIVERED
            if host.deliver(w):
                return True
        return False

    def _deadlock(self) -> None:
        k = self.kernel
        err = DeadlockError(k.describe_blocked(), k.now)
        awaiting = [w for w in k.host_waiting.values() if not w.daemon and w.handle is not None]
        if awaiting:
            for w in awaiting:
                w.resolve(error=err)
            self._deliver_one()
            return
        self._fail(err)

    def _fail(self, err: BaseException) -> None:
        if self.failure is None:
            self.failure = err
        if self.main_scope is not None and not self.main_scope.cancel_called:
            self.main_scope.cancel()
            return
        raise err


def _host_returned() -> BaseException:
    return RuntimeError(
        "the host program has returned, and the emulated machine stopped with it: "
        "await DPU work before the host program returns"
    )
