"""Host-side contexts: host RAM (NumPy) and files."""

from __future__ import annotations

import errno
import os
from typing import Any

import numpy as np

from ._blocks import Block, BlockTable, first_fit
from ._context import Bytes, Context, DeviceType
from ._status import StatusType, UmemError

#: alignment of ``malloc`` on 64-bit hosts (``alignof(max_align_t)``)
HOST_ALIGNMENT = 16

# every Host context shares process memory: one table of live blocks, one array per block
_HOST_TABLE = BlockTable()
_HOST_ARRAYS: dict[int, np.ndarray] = {}


class Host(Context):
    """Host RAM: every allocation is a NumPy buffer and its address is the real pointer.

    Addresses are valid in every :class:`Host` context (one process memory), so two Host
    contexts connect zero-copy. ``Address.view(dtype)`` / ``np.asarray(adr)`` give NumPy views.
    """

    device = DeviceType.Host
    fundamental_alignment = HOST_ALIGNMENT

    def __init__(self) -> None:
        super().__init__()
        self._table = _HOST_TABLE

    def _alloc(self, nbytes: int) -> int:
        try:
            arr = np.zeros(nbytes + HOST_ALIGNMENT - 1, np.uint8)
        except (MemoryError, ValueError) as exc:
            raise UmemError(
                StatusType.MemoryError, f"cannot allocate {nbytes} bytes: {exc}"
            ) from None
        base = arr.ctypes.data
        adr = (base + HOST_ALIGNMENT - 1) & -HOST_ALIGNMENT
        _HOST_ARRAYS[adr] = arr[adr - base : adr - base + nbytes]
        return adr

    def _free(self, block: Block) -> None:
        del _HOST_ARRAYS[block.origin]

    def _host_view(self, adr: int, nbytes: int) -> Bytes | None:
        block = self._table.containing(adr, nbytes)
        if block is None:
            return None
        arr = _HOST_ARRAYS[block.origin]
        start = adr - block.origin
        return arr[start : start + nbytes]

    def _read(self, adr: int, nbytes: int) -> Any:
        view = self._host_view(adr, nbytes)
        assert view is not None  # the caller checked the span
        return view

    def _write(self, adr: int, data: Bytes) -> None:
        view = self._host_view(adr, len(data))
        assert view is not None
        view[:] = data

    def is_accessible_from(self, other: Context) -> bool:
        """Host addresses are usable from every Host context."""
        return isinstance(other, Host)

    def __repr__(self) -> str:
        return f"Host(status={self.status.type.name})"


_MODES = {  # mode → (os.open flags, readable, writable, append)
    "r": (os.O_RDONLY, True, False, False),
    "r+": (os.O_RDWR, True, True, False),
    "w": (os.O_WRONLY | os.O_CREAT | os.O_TRUNC, False, True, False),
    "w+": (os.O_RDWR | os.O_CREAT | os.O_TRUNC, True, True, False),
    "a": (os.O_WRONLY | os.O_CREAT, False, True, True),
    "a+": (os.O_RDWR | os.O_CREAT, True, True, True),
}


def parse_mode(mode: str) -> str | None:
    """The ``fopen`` mode without ``b`` (``"rb+"`` → ``"r+"``), None if it is not one."""
    core = mode.replace("b", "", 1)
    return core if core in _MODES else None


class File(Context):
    """A file as memory: addresses are byte offsets, data goes to the real file.

    ``mode`` is an ``fopen`` mode: ``r``, ``r+``, ``w``, ``w+``, ``a`` or ``a+``, optionally with
    ``b``. The file is opened here (``w`` modes truncate it). Allocation hands out ranges of
    the file, first fit from offset 0 (``r``/``r+``: over the existing content, so the first
    ``alloc(size)`` maps the file) or from the end of the existing content (``a``/``a+``, whose
    old bytes are never overwritten); in writable modes the file grows to cover the range.
    ``r`` cannot grow and ``w``/``a`` cannot be read back. Freeing keeps the bytes in the file;
    :meth:`close` closes it.
    """

    device = DeviceType.File
    fundamental_alignment = 1

    def __init__(self, path: str | os.PathLike[str], mode: str = "wb") -> None:
        super().__init__()
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        if not isinstance(mode, str):
            raise TypeError(f"mode must be a str, not {type(mode).__name__}")
        self.path = os.fspath(path)
        self.mode = mode
        self._fd: int | None = None
        self._base = 0
        self._readable = self._writable = self._append = False
        core = parse_mode(mode)
        if core is None:
            self.status.set(
                StatusType.ValueError,
                f"File({self.path!r}, {mode!r}): unknown mode; use r, r+, w, w+, a or a+, "
                "optionally with b",
            )
            return
        flags, self._readable, self._writable, self._append = _MODES[core]
        try:
            self._fd = os.open(self.path, flags | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as exc:
            hint = " (use w, w+, a or a+ to create it)" if core in ("r", "r+") else ""
            self.status.set(
                StatusType.IOError,
                f"File({self.path!r}, {mode!r}): cannot open: {exc.strerror}{hint}",
            )
            return
        if self._append:
            self._base = os.fstat(self._fd).st_size

    def _open_fd(self) -> int:
        if self._fd is None:
            raise UmemError(
                StatusType.IOError, f"{self.path!r} is not open (see the constructor's message)"
            )
        return self._fd

    def _alloc(self, nbytes: int) -> int:
        fd = self._open_fd()
        adr = first_fit(self._table.reserved(), self._base, None, nbytes, 1)
        assert adr is not None  # the range is unbounded
        size = os.fstat(fd).st_size
        if adr + nbytes > size:
            if not self._writable:
                raise UmemError(
                    StatusType.MemoryError,
                    f"{self.path!r} is opened read-only ({self.mode!r}) and holds {size} bytes; "
                    f"{nbytes} bytes at offset {adr} would pass its end (allocate within the "
                    "file, or open it with r+)",
                )
            try:
                os.ftruncate(fd, adr + nbytes)
            except OSError as exc:
                raise UmemError(
                    StatusType.IOError, f"{self.path!r}: cannot grow to {adr + nbytes} bytes: {exc}"
                ) from None
        return adr

    async def _fill(self, adr: int, c: int, nbytes: int) -> None:
        if c == 0 and self._writable:  # the holes of a sparse file are zeros already
            for start, end in self._data_extents(adr, adr + nbytes):
                await super()._fill(start, 0, end - start)
            return
        await super()._fill(adr, c, nbytes)

    def _data_extents(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of ``[lo, hi)`` that may hold other bytes than zeros: the file's data,
        not its holes (all of it where the file system cannot tell)."""
        fd = self._open_fd()
        seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
        if seek_data is None or seek_hole is None:
            return [(lo, hi)]
        out: list[tuple[int, int]] = []
        pos = lo
        while pos < hi:
            try:
                start = os.lseek(fd, pos, seek_data)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after pos
                    break
                return [(lo, hi)]
            if start >= hi:
                break
            end = min(os.lseek(fd, start, seek_hole), hi)
            out.append((start, end))
            pos = end
        return out

    def _read(self, adr: int, nbytes: int) -> Any:
        fd = self._open_fd()
        if not self._readable:
            raise UmemError(
                StatusType.IOError,
                f"{self.path!r} is opened write-only ({self.mode!r}); open it with w+, r+ or a+ "
                "to read it back",
            )
        try:
            data = os.pread(fd, nbytes, adr)
        except OSError as exc:
            raise UmemError(StatusType.IOError, f"{self.path!r}: {exc}") from None
        if len(data) != nbytes:
            raise UmemError(
                StatusType.IOError,
                f"{self.path!r}: read {len(data)} of {nbytes} bytes at offset {adr} (the file "
                "was truncated by someone else?)",
            )
        return data

    def _write(self, adr: int, data: Bytes) -> None:
        fd = self._open_fd()
        if not self._writable:
            raise UmemError(
                StatusType.IOError,
                f"{self.path!r} is opened read-only ({self.mode!r}); open it with r+ to write",
            )
        view = data.data
        try:
            while view.nbytes:
                done = os.pwrite(fd, view, adr)
                view, adr = view[done:], adr + done
        except OSError as exc:
            raise UmemError(StatusType.IOError, f"{self.path!r}: {exc}") from None

    def close(self) -> None:
        """Forget every allocation and close the file."""
        super().close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def __repr__(self) -> str:
        return f"File({self.path!r}, {self.mode!r}, status={self.status.type.name})"
