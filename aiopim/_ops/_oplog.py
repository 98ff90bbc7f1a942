"""The observer of host operations (``aiopim.scenario.record`` installs one)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from ._set import DpuSetBase
from ._validate import check_set

P = ParamSpec("P")
T = TypeVar("T")


class OpLog(Protocol):
    """Observes the host operations of an emulator (``Emulator.op_log``)."""

    def run(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Awaitable[Any]:
        """Run ``fn(*args, **kwargs)`` (the operation ``op``) and note what it did."""


def logged(op: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Route the operation through ``Emulator.op_log`` when one is installed."""

    def deco(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Awaitable[T]:
            first = args[0]
            if op != "alloc":
                check_set(first)  # a freed or stale handle never reaches the queues
            emu = first.emulator if isinstance(first, DpuSetBase) else first
            log: OpLog | None = emu.op_log  # type: ignore[attr-defined]
            if log is None:
                return fn(*args, **kwargs)  # the coroutine itself: no extra frame
            return log.run(op, fn, args, kwargs)

        wrapper.__name__ = fn.__name__
        wrapper.__qualname__ = fn.__qualname__
        wrapper.__doc__ = fn.__doc__
        return wrapper

    return deco
