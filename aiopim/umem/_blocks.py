"""Live allocations of a memory and a first-fit search for free ranges."""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


def align_up(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment`` (a power of two)."""
    return (value + alignment - 1) & -alignment


@dataclass(frozen=True)
class Block:
    """One allocation: ``size`` usable bytes at ``adr`` inside ``span`` reserved bytes at
    ``origin`` (``origin <= adr``; they differ only for aligned allocations)."""

    adr: int
    size: int
    origin: int
    span: int
    aligned: bool = False
    #: how many memories hold the block (the DPUs of the context that allocated it)
    lanes: int = 1

    @property
    def end(self) -> int:
        """First address after the usable bytes."""
        return self.adr + self.size


class BlockTable:
    """Non-overlapping live blocks of one memory, found by any address inside them."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._blocks: dict[int, Block] = {}

    def add(self, block: Block) -> None:
        """Record a new block (its address must be free)."""
        if block.adr in self._blocks:
            raise AssertionError(f"two live blocks would start at {block.adr:#x}")
        insort(self._starts, block.adr)
        self._blocks[block.adr] = block

    def get(self, adr: int) -> Block | None:
        """The block that starts at ``adr``."""
        return self._blocks.get(adr)

    def pop(self, adr: int) -> Block | None:
        """Remove and return the block that starts at ``adr``."""
        block = self._blocks.pop(adr, None)
        if block is not None:
            self._starts.pop(bisect_right(self._starts, adr) - 1)
        return block

    def containing(self, adr: int, nbytes: int = 0) -> Block | None:
        """The block whose usable bytes hold ``[adr, adr + nbytes)`` (for ``nbytes == 0``:
        whose bytes hold ``adr``, or the empty block at ``adr``)."""
        i = bisect_right(self._starts, adr) - 1
        if i < 0:
            return None
        block = self._blocks[self._starts[i]]
        if adr + nbytes > block.end or (adr == block.end and adr != block.adr):
            return None
        return block

    def reserved(self) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of every reserved span, by address."""
        for adr in self._starts:
            b = self._blocks[adr]
            yield b.origin, b.origin + b.span

    def __iter__(self) -> Iterator[Block]:
        return (self._blocks[a] for a in list(self._starts))

    def __len__(self) -> int:
        return len(self._starts)


def first_fit(
    reserved: Iterable[tuple[int, int]],
    lo: int,
    hi: int | None,
    nbytes: int,
    alignment: int,
    *,
    from_top: bool = False,
) -> int | None:
    """Lowest (or, ``from_top``, highest) ``alignment``-aligned start of ``nbytes`` free bytes
    in ``[lo, hi)`` (``hi=None``: unbounded) outside the ``reserved`` spans; None if none."""
    spans = sorted(reserved)
    gaps: list[tuple[int, int | None]] = []
    cursor = lo
    for start, end in spans:
        if start > cursor:
            gaps.append((cursor, start))
        cursor = max(cursor, end)
    gaps.append((cursor, hi))
    if from_top:
        for gap_start, gap_end in reversed(gaps):
            assert gap_end is not None, "from_top needs a bounded range"
            last = (gap_end - nbytes) & -alignment
            if last >= gap_start:
                return last
        return None
    for gap_start, gap_end in gaps:
        first = align_up(gap_start, alignment)
        if gap_end is None or first + nbytes <= gap_end:
            return first
    return None
