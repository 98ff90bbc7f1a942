"""Bridge between the kernel and the host event loop (asyncio or trio, through anyio).

The event loop's clock *is* the kernel's clock. The kernel runs only when every host task is
blocked: on asyncio inside the selector call the loop makes when it has nothing ready, on trio
inside ``Clock.deadline_to_sleep_time``, which trio calls only when no task is runnable. Each
idle pass runs emulated events up to the loop's next timer and wakes at most one host waiter,
so host tasks react to emulator results in kernel order on both backends.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from typing import TYPE_CHECKING, Any

import outcome
import trio

from .._errors import DeadlockError
from ._kernel import INFINITY, HostWaiter, Kernel

if TYPE_CHECKING:
    from collections.abc import Mapping

    import anyio


def seconds_to_ps_ceil(seconds: float) -> int:
    """Smallest picosecond count whose float value in seconds is >= ``seconds``."""
    ps = math.ceil(seconds * 1e12)
    while ps / 1e12 < seconds:
        ps += 1
    return ps


class Bridge:
    """Runs the kernel when the host is idle and wakes host tasks with its results."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        #: the Emulator owning this bridge
        self.emulator: Any = None
        self.backend: str | None = None
        #: cancelled (with ``failure`` set) when the host must be stopped (deadlock, crash)
        self.main_scope: anyio.CancelScope | None = None
        self.failure: BaseException | None = None

    # -- host side ---------------------------------------
    async def wait(self, waiter: HostWaiter) -> Any:
        """Suspend the calling host task until the kernel resolves ``waiter``."""
        if waiter.state == HostWaiter.RESOLVED:
            return self._take(waiter)
        if self.backend == "trio":
            return await self._wait_trio(waiter)
        return await self._wait_asyncio(waiter)

    @staticmethod
    def _take(waiter: HostWaiter) -> Any:
        waiter.state = HostWaiter.DELIVERED
        if waiter.error is not None:
            raise waiter.error
        return waiter.value

    async def _wait_asyncio(self, waiter: HostWaiter) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        waiter.handle = fut
        try:
            return await fut
        except asyncio.CancelledError:
            waiter.abandon()
            raise

    async def _wait_trio(self, waiter: HostWaiter) -> Any:
        waiter.handle = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            waiter.abandon()
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

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
        while pending:
            w = pending.popleft()
            if w.state != HostWaiter.RESOLVED or w.handle is None:
                continue  # abandoned, or the task has not awaited it yet (it will not block)
            w.state = HostWaiter.DELIVERED
            h = w.handle
            if self.backend == "trio":
                trio.lowlevel.reschedule(
                    h, outcome.Error(w.error) if w.error is not None else outcome.Value(w.value)
                )
            else:
                if h.done():
                    continue
                if w.error is not None:
                    h.set_exception(w.error)
                else:
                    h.set_result(w.value)
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


class _VirtualSelector(selectors.BaseSelector):
    """Selector whose blocking waits run the kernel instead of sleeping."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return self._real.select(0)
        # The loop has nothing ready: every host task is blocked. Real readiness (the
        # self-pipe of call_soon_threadsafe, signals) is polled on the next pass.
        k = self._bridge.kernel
        deadline = None if timeout is None else k.now + seconds_to_ps_ceil(timeout)
        if self._bridge.on_idle(deadline):
            return []
        return self._real.select(timeout)


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """asyncio loop whose ``time()`` is the kernel's virtual time."""

    def __init__(self, bridge: Bridge) -> None:
        super().__init__(selector=_VirtualSelector(bridge))
        self.aiopim_bridge = bridge
        self._kernel = bridge.kernel
        self._clock_resolution = 1e-12

    def time(self) -> float:
        return self._kernel.now / 1e12


class VirtualTrioClock(trio.abc.Clock):
    """trio clock reading the kernel's virtual time; runs the kernel when trio is idle."""

    def __init__(self, bridge: Bridge) -> None:
        self.aiopim_bridge = bridge
        self._kernel = bridge.kernel

    def start_clock(self) -> None:
        self.aiopim_bridge.backend = "trio"

    def current_time(self) -> float:
        return self._kernel.now / 1e12

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # trio calls this only when its run queue is empty: every host task is blocked.
        k = self._kernel
        if deadline != math.inf and deadline * 1e12 <= k.now:
            return 0.0
        limit = None if deadline == math.inf else seconds_to_ps_ceil(deadline)
        if self.aiopim_bridge.on_idle(limit):
            return 0.0
        return math.inf
