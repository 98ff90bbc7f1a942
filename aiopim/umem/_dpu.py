"""DPU contexts: MRAM and WRAM of one DPU or of a whole set, moved by rank jobs."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, ClassVar

import numpy as np

from .. import DpuError, DpuSet, MemorySpace, Symbol
from ._blocks import Block, BlockTable, align_up, first_fit
from ._context import Bytes, Context, DeviceType
from ._coreapi import DPU_MRAM_HEAP_POINTER_NAME
from ._status import StatusType, UmemError

#: name of the WRAM window symbol the Wram context transfers through
WRAM_WINDOW_NAME = "__umem_wram_window"


class _DpuHeap:
    """The umem allocations of one DPU, valid while the same program stays loaded."""

    __slots__ = ("mram", "program", "wram")

    def __init__(self, program: object) -> None:
        self.program = program
        self.mram = BlockTable()
        self.wram = BlockTable()


# one heap per emulated DPU, shared by every context that covers it
_HEAPS: weakref.WeakKeyDictionary[Any, _DpuHeap] = weakref.WeakKeyDictionary()


class _DpuMemory(Context):
    """Shared machinery of :class:`Mram` and :class:`Wram`."""

    is_async = True
    fundamental_alignment = 8
    #: granule of a host transfer to this memory (smaller writes read-modify-write it)
    granule: ClassVar[int]
    _space: ClassVar[str]
    _from_top: ClassVar[bool] = False

    def __init__(self, dpus: DpuSet, *, reader: int = 0) -> None:
        super().__init__()
        if not isinstance(dpus, DpuSet):
            raise TypeError(f"dpus must be an aiopim.DpuSet, not {type(dpus).__name__}")
        if isinstance(reader, bool) or not isinstance(reader, int):
            raise TypeError(f"reader must be an int, not {type(reader).__name__}")
        self.dpus = dpus
        self._singles = list(dpus.dpus)
        self._keys = list(dpus.dpu_list)
        if not self._singles:
            self.status.set(StatusType.ValueError, f"{dpus!r} has no enabled DPU")
        if not 0 <= reader < max(1, len(self._singles)):
            self.status.set(
                StatusType.ValueError,
                f"reader {reader} is not a DPU of the set (0..{len(self._singles) - 1}); "
                "reading from DPU 0",
            )
            reader = 0
        #: index (in the set) of the DPU that copies out of a set read
        self.reader = reader

    @property
    def nr_lanes(self) -> int:
        """Number of DPUs: copies in write all of them, copies out read :attr:`reader`."""
        return len(self._singles)

    def is_accessible_from(self, other: Context) -> bool:
        """An address of this context is valid in a context of the same memory over a subset of
        its DPUs (a set's address is valid on each of its DPUs, not the other way round)."""
        if type(other) is not type(self):
            return False
        assert isinstance(other, _DpuMemory)
        mine = {id(k) for k in self._keys}
        return all(id(k) in mine for k in other._keys)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dpus!r})"

    # -- layout and tables ---------------------------------------
    def _tables(self) -> list[BlockTable]:
        tables = []
        for key, program in zip(self._keys, self.dpus.programs(), strict=True):
            heap = _HEAPS.get(key)
            if heap is None or heap.program is not program:
                heap = _HEAPS[key] = _DpuHeap(program)  # a new load wiped the memory
            tables.append(heap.mram if self._space == "mram" else heap.wram)
        return tables

    def _programs(self) -> list[Any]:
        programs = self.dpus.programs()
        if any(p is None for p in programs):
            raise UmemError(
                StatusType.RuntimeError,
                "no program is loaded on some DPU of the set: load one (dpu_load / "
                f"DpuSet.load) first; {self.device_name} allocations follow its layout",
            )
        return programs

    def _window(self) -> Symbol:
        raise NotImplementedError

    def _lookup(self, adr: int, nbytes: int) -> Block | None:
        found = None
        for table in self._tables():
            found = table.containing(adr, nbytes)
            if found is None:
                return None
        return found

    def _register(self, block: Block) -> None:
        tables = self._tables()
        block = dataclasses.replace(block, lanes=len(tables))
        for table in tables:
            table.add(block)

    def _release(self, adr: int, *, aligned: bool) -> None:
        tables = self._tables()
        block = tables[0].get(adr) if tables else None
        if (
            block is not None
            and block.lanes > len(tables)
            and all(t.get(adr) is block for t in tables)
        ):
            # a set's block seen from some of its DPUs: freeing it here would leave it
            # reserved on the others, and its owner unable to use or free it
            self.status.set(
                StatusType.ValueError,
                f"{'aligned_free' if aligned else 'free'}: {adr:#x} was allocated on "
                f"{block.lanes} DPUs and this context covers {len(tables)} of them; free it "
                "through the context that allocated it (one over all its DPUs)",
            )
            return
        super()._release(adr, aligned=aligned)

    def _unregister(self, adr: int) -> Block | None:
        tables = self._tables()
        blocks = [t.get(adr) for t in tables]
        if any(b is None for b in blocks):
            return None
        for t in tables:
            t.pop(adr)
        return blocks[0]

    def _alloc(self, nbytes: int) -> int:
        if not self._singles:
            raise UmemError(StatusType.ValueError, "the context has no DPU")
        win = self._window()
        reserved = [span for t in self._tables() for span in t.reserved()]
        lo, hi = win.offset, win.offset + win.size
        span = align_up(nbytes, self.fundamental_alignment)
        adr = first_fit(reserved, lo, hi, span, self.fundamental_alignment, from_top=self._from_top)
        if adr is None:
            used = sum(e - s for s, e in self._tables()[0].reserved())
            raise UmemError(
                StatusType.MemoryError,
                f"no free range of {nbytes} bytes in {self.device_name} [{lo:#x}, {hi:#x}) "
                f"({used} bytes allocated on DPU 0 of the context); free something or "
                "allocate less",
            )
        return adr

    # -- data ---------------------------------------
    def _lane_keys(self) -> list[object] | None:
        return list(self._keys)

    async def _fetch(self, lo: int, nbytes: int, lanes: list[int] | None) -> Bytes:
        """Granule-aligned rows ``[lo, lo + nbytes)`` of the DPUs ``lanes`` (None: the reader).

        One DPU is read alone; several are read with one transfer of the whole set.
        """
        win = self._window()
        picked = [self.reader] if lanes is None else lanes
        try:
            if len(set(picked)) == 1:
                one = self._singles[picked[0]]
                row = await one.copy_from(win, np.uint8, nbytes, offset=lo - win.offset)
                return np.repeat(row, len(picked), axis=0)
            rows = await self.dpus.copy_from(win, np.uint8, nbytes, offset=lo - win.offset)
        except DpuError as exc:
            raise UmemError(StatusType.RuntimeError, str(exc)) from None
        return rows if picked == list(range(len(rows))) else rows[picked]

    async def _aread(self, adr: int, nbytes: int, lanes: list[int] | None) -> Bytes:
        g = self.granule
        if nbytes == 0:
            return np.zeros((1 if lanes is None else len(lanes), 0), np.uint8)
        lo, hi = adr - adr % g, align_up(adr + nbytes, g)
        rows = await self._fetch(lo, hi - lo, lanes)
        return rows[:, adr - lo : adr - lo + nbytes]

    async def _awrite(self, adr: int, data: Bytes) -> None:
        g, nbytes = self.granule, data.shape[1]
        if nbytes == 0:
            return
        lo, hi = adr - adr % g, align_up(adr + nbytes, g)
        if lo != adr or hi != adr + nbytes:
            # partial granules: read their bytes back from every DPU (they may differ)
            every = list(range(self.nr_lanes))
            buf = np.empty((self.nr_lanes, hi - lo), np.uint8)
            if hi - lo <= 2 * g:
                buf[:] = await self._fetch(lo, hi - lo, every)
            else:
                if lo != adr:
                    buf[:, :g] = await self._fetch(lo, g, every)
                if hi != adr + nbytes:
                    buf[:, -g:] = await self._fetch(hi - g, g, every)
            buf[:, adr - lo : adr - lo + nbytes] = data
        else:
            buf = np.ascontiguousarray(data)
        win = self._window()
        try:
            if len(buf) == 1:  # one row for every DPU: a broadcast
                await self.dpus.copy_to(win, buf[0], offset=lo - win.offset)
            else:
                await self.dpus.copy_to(win, buf, offset=lo - win.offset)
        except DpuError as exc:
            raise UmemError(StatusType.RuntimeError, str(exc)) from None


class Mram(_DpuMemory):
    """The MRAM of a DPU or of every DPU of a set; addresses are MRAM byte offsets.

    Allocation starts at the loaded program's ``DPU_MRAM_HEAP_POINTER`` (never below it) and
    is 8-byte aligned. A context over a set allocates the same offsets on every DPU: copies in
    broadcast, copies out read the DPU ``reader`` (or every DPU with :meth:`gather`). Every
    data move is a transfer job on the DPUs' rank queues: await it.
    """

    device = DeviceType.Mram
    granule = 8
    _space = "mram"

    def _window(self) -> Symbol:
        heaps: list[Symbol] = []
        for program in self._programs():
            sym = program.symbols().get(DPU_MRAM_HEAP_POINTER_NAME)
            if sym is None:
                raise UmemError(
                    StatusType.NotSupportedError,
                    f"program {program.name!r} has no {DPU_MRAM_HEAP_POINTER_NAME} symbol",
                )
            heaps.append(sym)
        return max(heaps, key=lambda s: s.offset)


class Wram(_DpuMemory):
    """The WRAM of a DPU or of every DPU of a set; addresses are WRAM byte addresses.

    Allocation uses the WRAM above the loaded program's variables, stacks and caches (the
    start of its heap), from the top down, so the program's own ``mem_alloc`` heap, which grows
    upwards, meets it last. Copies behave as for :class:`Mram` (4-byte transfer granule).
    """

    device = DeviceType.Wram
    granule = 4
    _space = "wram"
    _from_top = True

    def _window(self) -> Symbol:
        starts = []
        for program in self._programs():
            start = getattr(program, "heap_start", None)
            if not isinstance(start, int):  # a program without a layout: after its symbols
                wram = [s for s in program.symbols().values() if s.space is MemorySpace.WRAM]
                start = max((s.offset + s.size for s in wram), default=0)
            starts.append(align_up(start, self.fundamental_alignment))
        start = max(starts)
        end = self.dpus.emulator.config.chip_profile.wram_size
        return Symbol(WRAM_WINDOW_NAME, start, max(0, end - start))
