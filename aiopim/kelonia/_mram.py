"""A DPU's MRAM as Kelonia's memory copies see it: byte-addressed transfers, and the program's
own sections (printf buffer, MRAM variables) that host writes must not overwrite."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import DpuProgram, DpuSet, Symbol
from ._coreapi import DPU_MRAM_HEAP_POINTER_NAME, MRAM_BIT, MRAM_SIZE, STDOUT_BUFFER, MemorySpace

#: The whole of MRAM as a transfer target (``copy_to_device`` addresses MRAM bytes)
MRAM_SYMBOL = Symbol("__kelonia_mram", MRAM_BIT, MRAM_SIZE)


@dataclass(frozen=True)
class MramSection:
    """MRAM bytes ``[start, end)`` that the program itself uses (a symbol of its MRAM)."""

    name: str
    start: int
    end: int

    def describe(self) -> str:
        what = "printf buffer" if self.name == STDOUT_BUFFER else "MRAM variable"
        return f"the program's {what} {self.name} (MRAM {self.start:#x}..{self.end:#x})"


@dataclass(frozen=True)
class MramLayout:
    """The program's MRAM sections and where the MRAM it leaves free starts."""

    sections: tuple[MramSection, ...] = ()
    free_start: int = 0

    @classmethod
    def of(cls, program: DpuProgram) -> MramLayout:
        """The MRAM symbols of ``program``; free MRAM starts at ``DPU_MRAM_HEAP_POINTER``
        (else after the last symbol)."""
        symbols = program.symbols()
        sections = sorted(
            (MramSection(s.name, s.offset, s.offset + s.size) for s in symbols.values()
             if s.space is MemorySpace.MRAM and s.size and s.name != DPU_MRAM_HEAP_POINTER_NAME),
            key=lambda s: (s.start, s.name),
        )  # fmt: skip
        heap = symbols.get(DPU_MRAM_HEAP_POINTER_NAME)
        free = heap.offset if heap is not None else max((s.end for s in sections), default=0)
        return cls(tuple(sections), free)

    def overlap(self, start: int, end: int) -> MramSection | None:
        """The first section that ``[start, end)`` overlaps (None: the range is free)."""
        return next((s for s in self.sections if start < s.end and s.start < end), None)

    def refusal(self, what: str, start: int, end: int) -> str | None:
        """Why a host write of ``[start, end)`` must be refused, or None."""
        hit = self.overlap(start, end)
        if hit is None:
            return None
        return (
            f"{what} would write MRAM {start:#x}..{end:#x}, which overlaps {hit.describe()}; "
            f"the program's free MRAM starts at {self.free_start:#x} "
            f"({DPU_MRAM_HEAP_POINTER_NAME}): write there"
        )


async def mram_write(dset: DpuSet, destination: int, data: np.ndarray) -> None:
    """Write bytes at any MRAM address (edges read back to keep 8-byte-aligned transfers)."""
    end = destination + data.size
    lo, hi = destination & ~7, (end + 7) & ~7
    if lo == destination and hi == end:
        if data.size:
            await dset.copy_to(MRAM_SYMBOL, np.ascontiguousarray(data), offset=destination)
        return
    buf = np.zeros(hi - lo, np.uint8)
    if lo != destination:
        buf[:8] = (await dset.copy_from(MRAM_SYMBOL, np.uint8, 8, offset=lo))[0]
    if hi != end:
        buf[-8:] = (await dset.copy_from(MRAM_SYMBOL, np.uint8, 8, offset=hi - 8))[0]
    buf[destination - lo : end - lo] = data
    await dset.copy_to(MRAM_SYMBOL, buf, offset=lo)


async def mram_read(dset: DpuSet, source: int, length: int) -> np.ndarray:
    """``length`` bytes of MRAM from byte ``source``."""
    lo, hi = source & ~7, (source + length + 7) & ~7
    if hi == lo:
        return np.zeros(0, np.uint8)
    raw: np.ndarray = (await dset.copy_from(MRAM_SYMBOL, np.uint8, hi - lo, offset=lo))[0]
    return raw[source - lo : source - lo + length].copy()


__all__ = ["MRAM_SYMBOL", "MramLayout", "MramSection", "mram_read", "mram_write"]
