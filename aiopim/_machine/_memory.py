"""Emulated DPU memories holding real bytes (NumPy)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Bytes = npt.NDArray[np.uint8]

MRAM_PAGE_SHIFT = 16
MRAM_PAGE = 1 << MRAM_PAGE_SHIFT


class MramBank:
    """64 MiB of MRAM that costs host memory only for the 64 KiB pages ever written."""

    __slots__ = ("pages", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.pages: dict[int, Bytes] = {}

    def read(self, offset: int, length: int) -> Bytes:
        """Copy ``length`` bytes starting at ``offset`` (unwritten pages read as zero)."""
        out = np.zeros(length, dtype=np.uint8)
        pos = 0
        while pos < length:
            addr = offset + pos
            page, off = addr >> MRAM_PAGE_SHIFT, addr & (MRAM_PAGE - 1)
            n = min(MRAM_PAGE - off, length - pos)
            data = self.pages.get(page)
            if data is not None:
                out[pos : pos + n] = data[off : off + n]
            pos += n
        return out

    def write(self, offset: int, data: Bytes) -> None:
        """Store ``data`` at ``offset``, allocating the pages it touches."""
        length = len(data)
        pos = 0
        while pos < length:
            addr = offset + pos
            page, off = addr >> MRAM_PAGE_SHIFT, addr & (MRAM_PAGE - 1)
            n = min(MRAM_PAGE - off, length - pos)
            buf = self.pages.get(page)
            if buf is None:
                if not data[pos : pos + n].any():
                    pos += n
                    continue  # writing zeros to an untouched page changes nothing
                buf = self.pages[page] = np.zeros(MRAM_PAGE, dtype=np.uint8)
            buf[off : off + n] = data[pos : pos + n]
            pos += n

    def clear(self) -> None:
        """Drop every page (the bank reads as zeros again)."""
        self.pages.clear()

    @property
    def resident_bytes(self) -> int:
        """Host memory used by this bank."""
        return len(self.pages) * MRAM_PAGE


def as_bytes(data: object, *, what: str = "buffer") -> Bytes:
    """View any bytes-like object or NumPy array as a flat uint8 array (no copy when possible)."""
    if isinstance(data, np.ndarray):
        arr = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        return arr.reshape(-1).view(np.uint8)
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    raise TypeError(f"{what} must be bytes-like or a NumPy array, not {type(data).__name__}")
