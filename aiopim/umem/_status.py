"""Per-context status with libumem's rules: the type is overwritten, messages accumulate."""

from __future__ import annotations

from enum import IntEnum


class StatusType(IntEnum):
    """``umemStatusType``: what went wrong last (``OK`` when nothing did)."""

    OK = 0
    MemoryError = 1
    RuntimeError = 2
    IOError = 3
    NotImplementedError = 4
    AssertError = 5
    ValueError = 6
    TypeError = 7
    IndexError = 8
    NotSupportedError = 9


def get_status_name(status: StatusType) -> str:
    """``umem_get_status_name``: the status type as a string (``"OK"``, ``"IndexError"``…)."""
    return StatusType(status).name


class Status:
    """A context's status: a type and a message that grows with every failure.

    Setting a status overwrites the type but appends the message; when the type changes, the
    message records ``status <old> changed to <new>`` first. Nothing is gated: later calls still
    run, so check :meth:`is_ok` after a sequence of calls and :meth:`clear` once handled.
    """

    __slots__ = ("message", "type")

    def __init__(self) -> None:
        self.type = StatusType.OK
        self.message = ""

    def set(self, type: StatusType, message: str | None) -> None:
        """``umem_set_status``; a ``None`` message drops the accumulated text."""
        if not isinstance(type, StatusType):
            raise TypeError(f"type must be a StatusType, not {type!r}")
        if message is None:
            self.message = ""
        elif not self.message:
            self.message = message
        else:
            note = ""
            if self.type != type:
                note = f"\nstatus {self.type.name} changed to {type.name}"
            self.message = f"{self.message}{note}\n{message}"
        self.type = type

    def clear(self) -> None:
        """``umem_clear_status``: back to OK with an empty message."""
        self.type = StatusType.OK
        self.message = ""

    @property
    def is_ok(self) -> bool:
        """True when no failure was recorded since the last clear."""
        return self.type == StatusType.OK

    def __repr__(self) -> str:
        return f"Status({self.type.name}, {self.message!r})"


class UmemError(Exception):
    """Raised inside a context's methods to record a status; never escapes the public calls.

    A new context's ``_alloc``/``_read``/``_write``… raise it to report a failure: the
    caller's context gets ``status`` with ``message`` and the operation stops there.
    """

    def __init__(self, status: StatusType, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
