"""The two host event-loop backends, each a class: asyncio and trio in virtual time.

Each backend makes its event loop read the kernel's clock and run the kernel at the loop's
idle point: asyncio inside the selector call the loop makes when nothing is ready, trio inside
``Clock.deadline_to_sleep_time``, which trio calls only when no task is runnable. Seconds from
the host become picoseconds through the one conversion :func:`seconds_to_ps` on both.
"""

from __future__ import annotations

import asyncio
import functools
import math
import selectors
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
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
    def anyio_options(self, owner: object = None) -> dict[str, Any]:
        """``backend_options`` for ``anyio.run`` that put the loop in virtual time (the loop
        or clock keeps ``owner``, the bridge's emulator, alive)."""

    @abstractmethod
    async def wait(self, waiter: HostWaiter) -> Any:
        """Suspend the calling task until the bridge delivers ``waiter``."""

    @abstractmethod
    def deliver(self, waiter: HostWaiter) -> bool:
        """Wake the task awaiting the resolved ``waiter``; False if it is gone."""


class AsyncioBackend(HostBackend):
    """asyncio: a selector event loop whose selector runs the kernel."""

    name = "asyncio"

    def loop_factory(self, owner: object = None) -> asyncio.AbstractEventLoop:
        """A new event loop in this bridge's virtual time (keeping ``owner`` alive)."""
        self.bridge.host = self
        return VirtualEventLoop(self.bridge, owner)

    def anyio_options(self, owner: object = None) -> dict[str, Any]:
        return {"loop_factory": functools.partial(self.loop_factory, owner)}

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

    def clock(self, owner: object = None) -> VirtualTrioClock:
        """A trio clock in this bridge's virtual time (pass as ``clock=``; it keeps ``owner``
        alive)."""
        return VirtualTrioClock(self, owner)

    def anyio_options(self, owner: object = None) -> dict[str, Any]:
        return {"clock": self.clock(owner)}

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

    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        #: runs the kernel for a blocking wait of ``timeout`` seconds (set by the loop)
        self.on_idle: Callable[[float | None], bool] = lambda timeout: False

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
        if self.on_idle(timeout):
            return []
        return self._real.select(timeout)


#: asyncio.base_events.MAXIMUM_SELECT_TIMEOUT: the loop never asks to wait longer at once
_MAX_SELECT_TIMEOUT = 24 * 3600


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """asyncio loop whose ``time()`` is the kernel's virtual time.

    A timer is due when its time is at or before ``time()``, and the loop reaches a timer's
    float deadline exactly: once the kernel is at the picosecond the deadline rounds to,
    ``time()`` reports at least the deadline itself (as the trio clock does), so code that
    compares the clock with its deadline (anyio's cancel scopes) sees it passed.
    """

    #: asyncio's heap of timers (BaseEventLoop's own attribute)
    _scheduled: list[asyncio.TimerHandle]

    def __init__(self, bridge: Bridge, owner: object = None) -> None:
        selector = _VirtualSelector()
        super().__init__(selector=selector)
        selector.on_idle = self._on_idle
        self.aiopim_bridge = bridge
        #: the emulator, kept alive while its loop exists (its bridge refers to it weakly)
        self.aiopim_owner = owner
        self._kernel = bridge.kernel
        self._reached = _Reached()

    def time(self) -> float:
        return self._reached.seconds(self._kernel.now)

    @property
    def _clock_resolution(self) -> float:
        # asyncio runs timers earlier than time() + resolution: exactly those at or before it
        return math.ulp(self.time())

    @_clock_resolution.setter
    def _clock_resolution(self, _: float) -> None:
        pass  # set by asyncio's constructor to the real clock's resolution

    def _on_idle(self, timeout: float | None) -> bool:
        if timeout is None:
            return self.aiopim_bridge.on_idle(None)
        if timeout < _MAX_SELECT_TIMEOUT and self._scheduled:
            # the loop asks for the time left to its earliest timer: wait for that timer's own
            # float, not for now + timeout (one rounding away from it)
            deadline = self._scheduled[0].when()
        else:
            deadline = self.time() + timeout
        return _wait_for_deadline(self.aiopim_bridge, self._reached, deadline)


def _wait_for_deadline(bridge: Bridge, reached: _Reached, deadline: float) -> bool:
    """Every host task waits, the earliest until host time ``deadline``: run the kernel until
    a host task can run or the deadline is reached; True if a host task may now run."""
    k = bridge.kernel
    target = seconds_to_ps(deadline)
    if target <= k.now:
        reached.reach(k.now, deadline)
        return True
    if bridge.on_idle(target):
        if k.now >= target:
            reached.reach(k.now, deadline)
        return True
    return False


class _Reached:
    """The host clock in seconds: the kernel's picoseconds, or a deadline reached at them.

    A deadline that rounds to the current picosecond has been reached, although its float may
    lie a hair above ``now / 1e12``: the host clock reports it at that instant.
    """

    __slots__ = ("ps", "s")

    def __init__(self) -> None:
        self.ps = -1
        self.s = 0.0

    def seconds(self, now: int) -> float:
        """The host clock when the kernel is at ``now`` picoseconds."""
        seconds = ps_to_seconds(now)
        return max(seconds, self.s) if now == self.ps else seconds

    def reach(self, now: int, deadline: float) -> None:
        """The host deadline ``deadline`` (rounding to ``now`` or earlier) has been reached."""
        if self.ps != now:
            self.ps, self.s = now, deadline
        else:
            self.s = max(self.s, deadline)


class VirtualTrioClock(trio.abc.Clock):
    """trio clock reading the kernel's virtual time; runs the kernel when trio is idle."""

    def __init__(self, backend: TrioBackend, owner: object = None) -> None:
        self._backend = backend
        self.aiopim_bridge = backend.bridge
        #: the emulator, kept alive while its clock exists (its bridge refers to it weakly)
        self.aiopim_owner = owner
        self._kernel = backend.bridge.kernel
        self._reached = _Reached()

    def start_clock(self) -> None:
        self.aiopim_bridge.host = self._backend

    def current_time(self) -> float:
        return self._reached.seconds(self._kernel.now)

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # trio calls this only when its run queue is empty: every host task is blocked.
        if deadline == math.inf:
            return 0.0 if self.aiopim_bridge.on_idle(None) else math.inf
        return 0.0 if _wait_for_deadline(self.aiopim_bridge, self._reached, deadline) else math.inf
