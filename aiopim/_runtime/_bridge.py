"""Bridge between the kernel and the host event loop (asyncio or trio, through anyio).

The event loop's clock *is* the kernel's clock. The kernel runs only when every host task is
blocked (the backends in :mod:`._backends` call :meth:`Bridge.on_idle` from the loop's idle
point). Each idle pass runs emulated events up to the loop's next timer and wakes at most one
host waiter, so host tasks react to emulator results in kernel order on both backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import DeadlockError
from ._kernel import INFINITY, HostWaiter, Kernel

if TYPE_CHECKING:
    import anyio

    from ._backends import HostBackend


class Bridge:
    """Runs the kernel when the host is idle and wakes host tasks with its results."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        #: the Emulator owning this bridge
        self.emulator: Any = None
        #: the event-loop backend driving the host (set when its loop or clock starts)
        self.host: HostBackend | None = None
        #: cancelled (with ``failure`` set) when the host must be stopped (deadlock, crash)
        self.main_scope: anyio.CancelScope | None = None
        self.failure: BaseException | None = None

    @property
    def backend(self) -> str | None:
        """Name of the backend driving the host ("asyncio" or "trio"), None before it starts."""
        return self.host.name if self.host is not None else None

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
        k.run(INFINITY if deadline_ps is None else deadline_ps)
        if k.crashed is not None:
            crashed, k.crashed = k.crashed, None
            self._fail(crashed)
            return True
        if self._deliver_one():
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
