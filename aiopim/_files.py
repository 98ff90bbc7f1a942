"""Read an input file safely: regular files only, never blocking, never past a size limit.

``aiopim symbols``, ``dpu_load`` and ``aiopim replay`` read files named by users. A named pipe
would block ``open()`` forever, ``/dev/zero`` never ends, a directory or ``/proc/self/mem``
fails half-way. :func:`read_input_file` opens without blocking (``O_NONBLOCK``), refuses
anything that is not a regular file before reading a byte, and reads at most ``limit`` bytes.
"""

from __future__ import annotations

import os
import stat
from typing import Literal

#: why a file was refused: it could not be opened (missing, permission), it is not a regular
#: file (directory, pipe, device, socket), it is larger than the limit, or reading it failed
Reason = Literal["open", "not_regular", "too_large", "read"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputFileError(OSError):
    """A file that cannot be used as input; ``reason`` says why, ``str()`` says it in words."""

    def __init__(self, path: str, reason: Reason, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason: Reason = reason
        self.message = message


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def read_input_file(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit`` bytes), or
    :class:`InputFileError`. ``what`` names the file in messages ("scenario file")."""
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        if isinstance(exc, IsADirectoryError):
            raise InputFileError(name, "not_regular", f"is a directory, not a {what}") from exc
        raise InputFileError(name, "open", exc.strerror or str(exc)) from exc
    except ValueError as exc:  # e.g. an embedded NUL byte
        raise InputFileError(name, "open", str(exc)) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(
                name, "not_regular", f"is {_kind(st.st_mode)}, not a {what} (regular file)"
            )
        if st.st_size > limit:
            raise InputFileError(name, "too_large", _too_large(what, limit))
        chunks: list[bytes] = []
        size = 0
        while True:  # files of /proc report size 0: read until the end, bounded by the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InputFileError(name, "too_large", _too_large(what, limit))
    except OSError as exc:
        if isinstance(exc, InputFileError):
            raise
        raise InputFileError(name, "read", f"cannot be read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return b"".join(chunks)


def _too_large(what: str, limit: int) -> str:
    return f"larger than {format_size(limit)}, the limit for a {what}"


def format_size(nbytes: int) -> str:
    """``nbytes`` in the largest binary unit that divides it (``"8 MiB"``)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} bytes"
