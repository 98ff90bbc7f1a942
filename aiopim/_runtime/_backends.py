"""The two host event-loop backends, each a class: asyncio and trio in virtual time.

Each backend makes its event loop read the kernel's clock and run the kernel at the loop's
idle point: asyncio inside the selector call the loop makes when nothing is ready, trio inside
``Clock.deadline_to_sleep_time``, which trio calls only when no task is runnable. Seconds from
the host become picoseconds through the one conversion :func:`seconds_to_ps` on both.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import outcome
import trio

from ._bridge import Bridge
from ._kernel import HostWaiter, ps_to_seconds, seconds_to_ps


class HostBackend(ABC):
    """How host tasks of one event-loop library wait for and receive kernel results."""

    name: ClassVar[str]

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    @abstractmethod
    def anyio_options(self) -> dict[str, Any]:
        """``backend_options`` for ``anyio.run`` that put the loop in virtual time."""

    @abstractmethod
    async def wait(self, waiter: HostWaiter) -> Any:
        """Suspend the calling task until the bridge delivers ``waiter``."""

    @abstractmethod
    def deliver(self, waiter: HostWaiter) -> bool:
        """Wake the task awaiting the resolved ``waiter``; False if it is gone."""


class AsyncioBackend(HostBackend):
    """asyncio: a selector event loop whose selector runs the kernel."""

    name = "asyncio"

    def loop_factory(self) -> asyncio.AbstractEventLoop:
        """A new event loop in this bridge's virtual time."""
        self.bridge.host = self
        return VirtualEventLoop(self.bridge)

    def anyio_options(self) -> dict[str, Any]:
        return {"loop_factory": self.loop_factory}

    async def wait(self, waiter: HostWaiter) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        waiter.handle = fut
        try:
            return await fut
        except asyncio.CancelledError:
            waiter.abandon()
            raise

    def deliver(self, waiter: HostWaiter) -> bool:
        fut: asyncio.Future[Any] = waiter.handle
        if fut.done():
            return False
        if waiter.error is not None:
            fut.set_exception(waiter.error)
        else:
            fut.set_result(waiter.value)
        return True


class TrioBackend(HostBackend):
    """trio: a clock that reads the kernel and runs it when trio is idle."""

    name = "trio"

    def clock(self) -> VirtualTrioClock:
        """A trio clock in this bridge's virtual time (pass as ``clock=``)."""
        return VirtualTrioClock(self)

    def anyio_options(self) -> dict[str, Any]:
        return {"clock": self.clock()}

    async def wait(self, waiter: HostWaiter) -> Any:
        waiter.handle = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            waiter.abandon()
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def deliver(self, waiter: HostWaiter) -> bool:
        result = (
            outcome.Error(waiter.error) if waiter.error is not None else outcome.Value(waiter.value)
        )
        trio.lowlevel.reschedule(waiter.handle, result)
        return True


BACKENDS: dict[str, type[HostBackend]] = {"asyncio": AsyncioBackend, "trio": TrioBackend}


def backend_class(name: str) -> type[HostBackend]:
    """The backend class called ``name`` ("asyncio" or "trio")."""
    cls = BACKENDS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"backend must be one of {tuple(BACKENDS)}, not {name!r}")
    return cls


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
        deadline = None if timeout is None else k.now + seconds_to_ps(timeout)
        if self._bridge.on_idle(deadline):
            return []
        return self._real.select(timeout)


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """asyncio loop whose ``time()`` is the kernel's virtual time."""

    def __init__(self, bridge: Bridge) -> None:
        super().__init__(selector=_VirtualSelector(bridge))
        self.aiopim_bridge = bridge
        self._kernel = bridge.kernel
        # timers due within half a picosecond are due now (seconds_to_ps rounds to nearest)
        self._clock_resolution = 1e-12

    def time(self) -> float:
        return ps_to_seconds(self._kernel.now)


class VirtualTrioClock(trio.abc.Clock):
    """trio clock reading the kernel's virtual time; runs the kernel when trio is idle."""

    def __init__(self, backend: TrioBackend) -> None:
        self._backend = backend
        self.aiopim_bridge = backend.bridge
        self._kernel = backend.bridge.kernel
        # a deadline that rounds to the current picosecond has been reached, although its
        # float may lie a hair above now/1e12: current_time() reports it at that instant
        self._reached_ps = -1
        self._reached_s = 0.0

    def start_clock(self) -> None:
        self.aiopim_bridge.host = self._backend

    def current_time(self) -> float:
        now = self._kernel.now
        seconds = ps_to_seconds(now)
        return max(seconds, self._reached_s) if now == self._reached_ps else seconds

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # trio calls this only when its run queue is empty: every host task is blocked.
        k = self._kernel
        target = None if deadline == math.inf else seconds_to_ps(deadline)
        if target is not None and target <= k.now:
            self._reach(deadline)
            return 0.0
        if self.aiopim_bridge.on_idle(target):
            if target is not None and k.now >= target:
                self._reach(deadline)
            return 0.0
        return math.inf

    def _reach(self, deadline: float) -> None:
        now = self._kernel.now
        if self._reached_ps != now:
            self._reached_ps, self._reached_s = now, deadline
        else:
            self._reached_s = max(self._reached_s, deadline)
