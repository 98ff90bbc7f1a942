"""Argument checks shared by both host API faces (``aiopim.sdk`` and ``aiopim.host``).

Wrong Python types raise ``TypeError`` naming the parameter; wrong values raise
:class:`DpuError` with the code the SDK returns for them. Every check runs in the calling task,
before anything is enqueued, so nothing invalid reaches the kernel or the event loop.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from .._errors import DpuError, DpuErrorCode
from ._set import DpuSetBase

#: C ``uint32_t`` arguments (sizes, flags, counts)
UINT32_MAX = 0xFFFFFFFF


def check_int(
    value: Any,
    name: str,
    code: DpuErrorCode,
    *,
    low: int = 0,
    high: int | None = None,
) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (bool is not an int here; NumPy integers are)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    v = int(value)
    if v < low or (high is not None and v > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise DpuError(code, f"{name} = {v} is out of range ({bound})")
    return v


def check_flags(value: Any, name: str, code: DpuErrorCode) -> int:
    """A ``uint32_t`` flag word (unknown bits are ignored, as the SDK does)."""
    return check_int(value, name, code, high=UINT32_MAX)


def check_str(value: Any, name: str) -> str:
    """A ``str`` argument (symbol and FIFO names)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def check_optional_str(value: Any, name: str) -> str | None:
    """A ``str`` or ``None`` argument (allocation profiles)."""
    return None if value is None else check_str(value, name)


def check_callable(value: Any, name: str) -> Callable[..., Any]:
    """A callable argument (callbacks)."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, not {type(value).__name__}")
    fn: Callable[..., Any] = value
    return fn


def check_text_stream(value: Any, name: str) -> TextIO:
    """A stream text is written to: a ``write(str)`` method, not a binary file."""
    binary = isinstance(value, io.RawIOBase | io.BufferedIOBase) or (
        isinstance(value, io.IOBase) and "b" in str(getattr(value, "mode", ""))
    )
    if binary or not callable(getattr(value, "write", None)):
        kind = "a binary stream" if binary else type(value).__name__
        raise TypeError(
            f"{name} must be a text stream (sys.stdout, io.StringIO, a file opened in text "
            f"mode), not {kind}"
        )
    stream: TextIO = value
    return stream


def check_set(value: Any, name: str = "dpu_set") -> DpuSetBase:
    """A DPU set that has not been freed and whose ranks still belong to its allocation."""
    if not isinstance(value, DpuSetBase):
        raise TypeError(f"{name} must be a DpuSet, not {type(value).__name__}")
    value.check_owned()
    return value
