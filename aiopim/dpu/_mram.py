"""MRAM access beyond ``mram_read``/``mram_write`` (sdk-reference.md §5.7): unaligned transfers,
sequential readers and ``__mram`` variables accessed through the software cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import timing
from .._errors import DpuError
from .._machine._program import MRAM_BIT
from ._runner import DmaCommand, DpuFault
from ._sync import MRAM_UNALIGNED_VMUTEX, SyncMixin

if TYPE_CHECKING:
    from ._program import Var

#: software fault of ``mram_write_unaligned`` when WRAM and MRAM alignments differ (dpufault.h)
FAULT_MRAM_UNALIGNED = 8
#: ``SEQREAD_CACHE_SIZE`` values the runtime accepts (seqread.h); 256 is the default
SEQREAD_CACHE_SIZES = (32, 64, 128, 256, 512, 1024)
DEFAULT_SEQREAD_CACHE_SIZE = 256


def _align8_low(x: int) -> int:
    return x & ~7


def _align8_high(x: int) -> int:
    return (x + 7) & ~7


@dataclass
class SeqReader:
    """``seqreader_t``: the WRAM cache of a sequential reader and the MRAM page it holds."""

    wram_cache: int = 0
    mram_addr: int = 0
    cache_size: int = DEFAULT_SEQREAD_CACHE_SIZE
    loaded: bool = False


class MramMixin(SyncMixin):
    """Unaligned MRAM transfers, sequential readers and the software cache for ``Tasklet``."""

    # -- raw 8-byte DMAs on runtime-private buffers ---------------------------------------------
    async def _dma_word(self, mram: int, write: bool, data: bytearray) -> None:
        """One 8-byte DMA between MRAM word ``mram`` (8-aligned offset) and ``data``."""
        if mram < 0 or mram + 8 > self.dpu.chip.mram_size:
            raise DpuFault(f"DMA fault: MRAM range [{mram:#x}, {mram + 8:#x}) out of bounds")
        await self.flush()
        bank = self.dpu.mram

        def apply() -> None:
            if write:
                bank.write(mram, np.frombuffer(bytes(data), np.uint8))
            else:
                data[:] = bank.read(mram, 8).tobytes()

        await DmaCommand(self.runner.dma, 8, write, apply)

    # -- unaligned transfers ---------------------------------------
    async def mram_read_unaligned(self, mram: Var | int, buffer: int, nb_of_bytes: int) -> int:
        """``mram_read_unaligned``: read the 8-aligned span around ``nb_of_bytes`` at ``mram``
        into ``buffer`` (which must hold ``nb_of_bytes + 16``) with one ``mram_read``; returns
        the WRAM address of the first requested byte."""
        src = self._mram_addr(mram)
        low = _align8_low(src)
        diff = src - low
        self._pending += timing.MRAM_UNALIGNED_INSTRUCTIONS
        await self.mram_read(low, buffer, _align8_high(int(nb_of_bytes) + diff))
        return buffer + diff

    async def mram_write_unaligned(self, wram: int, mram: Var | int, nb_of_bytes: int) -> None:
        """``mram_write_unaligned``: any MRAM address and size (at most 2048) provided
        ``wram % 8 == mram % 8`` (else fault 8); the partial first and last 8-byte words are
        read-modified-written under the runtime's virtual mutexes, so it is tasklet-safe."""
        dest = self._mram_addr(mram)
        n = int(nb_of_bytes)
        self._pending += timing.MRAM_UNALIGNED_INSTRUCTIONS
        if dest % 8 == 0 and n % 8 == 0:
            await self.mram_write(wram, dest, n)
            return
        if wram % 8 != dest % 8:
            raise DpuFault(
                f"mram_write_unaligned: WRAM {wram:#x} and MRAM {dest:#x} differ modulo 8",
                FAULT_MRAM_UNALIGNED,
            )
        src = wram
        if dest % 8:
            start = dest % 8
            take = min(8 - start, n)
            await self._merge_word(_align8_low(dest), start, src, take)
            src += take
            n -= take
            if n == 0:
                return
        body = _align8_low(n)
        high = _align8_high(dest)
        if body:
            await self.mram_write(src, high, body)
            src += body
        if n > body:
            await self._merge_word(high + body, 0, src, n - body)

    async def _merge_word(self, word: int, start: int, src: int, count: int) -> None:
        """Read MRAM word ``word``, put ``count`` WRAM bytes from ``src`` at ``start``, write it
        back, under the virtual mutex hashed from the word's address."""
        ident = (word >> 3) & (MRAM_UNALIGNED_VMUTEX.nb_vmutexes - 1)
        await self.vmutex_lock(MRAM_UNALIGNED_VMUTEX, ident)
        buf = bytearray(8)
        off = word & ~MRAM_BIT
        await self._dma_word(off, False, buf)
        buf[start : start + count] = self.view(src, np.uint8, count).tobytes()
        self._pending += timing.MRAM_UNALIGNED_PER_BYTE_INSTRUCTIONS * count
        await self._dma_word(off, True, buf)
        self.vmutex_unlock(MRAM_UNALIGNED_VMUTEX, ident)

    # -- sequential readers ---------------------------------------
    def _seqread_cache_size(self) -> int:
        """The program's ``SEQREAD_CACHE_SIZE`` (the default for an ELF binary)."""
        return int(getattr(self.program, "seqread_cache_size", DEFAULT_SEQREAD_CACHE_SIZE))

    def seqread_alloc(self, cache_size: int | None = None) -> int:
        """``seqread_alloc``: ``2 * SEQREAD_CACHE_SIZE`` bytes of heap aligned on the size
        (the program's ``seqread_cache_size`` unless ``cache_size`` is given)."""
        size = self._seqread_cache_size() if cache_size is None else int(cache_size)
        if size not in SEQREAD_CACHE_SIZES:
            raise ValueError(f"SEQREAD_CACHE_SIZE must be one of {SEQREAD_CACHE_SIZES}, not {size}")
        here = _align8_high(self.mem_alloc(0))
        pad = -here % size
        if pad:
            self.mem_alloc(pad)
        cache = self.mem_alloc(2 * size)
        sizes: dict[int, int] = self.dpu.persistent.setdefault("seqread_caches", {})
        sizes[cache] = size
        return cache

    async def seqread_init(self, cache: int, mram: Var | int, reader: SeqReader) -> int:
        """``seqread_init``: attach ``reader`` to ``cache`` and load the page of ``mram``;
        returns the WRAM address of the byte at ``mram``."""
        sizes: dict[int, int] = self.dpu.persistent.get("seqread_caches", {})
        reader.wram_cache = int(cache)
        reader.cache_size = sizes.get(reader.wram_cache, self._seqread_cache_size())
        reader.loaded = False
        return await self.seqread_seek(mram, reader)

    async def seqread_seek(self, mram: Var | int, reader: SeqReader) -> int:
        """``seqread_seek``: move to ``mram``, loading its page unless it is the current one."""
        target = self._mram_addr(mram)
        size = reader.cache_size
        self._pending += timing.SEQREAD_SEEK_INSTRUCTIONS
        if not (reader.loaded and reader.mram_addr <= target < reader.mram_addr + size):
            page = target & ~(size - 1)
            await self.mram_read(page, reader.wram_cache, 2 * size)
            reader.mram_addr = page
            reader.loaded = True
        return reader.wram_cache + target - reader.mram_addr

    async def seqread_get(self, ptr: int, inc: int, reader: SeqReader) -> int:
        """``seqread_get``: advance ``ptr`` by ``inc`` (< cache size); crossing into the second
        half of the cache loads the next page (``2 * size`` bytes by DMA)."""
        size = reader.cache_size
        if not 0 <= inc < size:
            raise ValueError(f"seqread_get: increment {inc} must be below the cache size {size}")
        self._pending += timing.SEQREAD_GET_INSTRUCTIONS
        ptr = int(ptr) + int(inc)
        if ptr >= reader.wram_cache + size:
            ptr -= size
            reader.mram_addr += size
            await self.mram_read(reader.mram_addr, reader.wram_cache, 2 * size)
        return ptr

    def seqread_tell(self, ptr: int, reader: SeqReader) -> int:
        """``seqread_tell``: the MRAM address ``ptr`` (in the reader's cache) stands for."""
        self._pending += timing.SEQREAD_TELL_INSTRUCTIONS
        return reader.mram_addr + int(ptr) - reader.wram_cache

    # -- __mram variables through the software cache ---------------------------------------
    def _soft_cache_slot(self) -> int:
        try:
            base = self.program.address_of("__sw_cache_buffer")
        except DpuError:  # an ELF binary without the symbol: the cache ends at the heap
            base = self.program.heap_start - 8 * self.nr_tasklets
        return base + 8 * self._id

    def _soft_target(
        self, var: Var | int, index: int, dtype: npt.DTypeLike | None
    ) -> tuple[int, np.dtype[Any]]:
        from ._program import Var

        if isinstance(var, Var):
            if not var.section.startswith(".mram"):
                raise TypeError(f"{var.name!r} is a WRAM variable; use view()")
            dt = var.dtype if dtype is None else np.dtype(dtype)
            if not 0 <= index < var.size // dt.itemsize:
                raise IndexError(f"index {index} out of range for {var.name!r}")
        else:
            if dtype is None:
                raise TypeError("give the dtype of an MRAM access by address")
            dt = np.dtype(dtype)
        if dt.itemsize > 8:
            raise TypeError("the software cache moves items of at most 8 bytes")
        addr = (self._mram_addr(var) & ~MRAM_BIT) + index * dt.itemsize
        if addr % dt.itemsize:
            raise DpuFault(f"memory fault: unaligned {dt} access to MRAM offset {addr:#x}")
        return addr, dt

    async def mram_load(
        self, var: Var | int, index: int = 0, dtype: npt.DTypeLike | None = None
    ) -> Any:
        """Read ``var[index]`` as C does for an ``__mram`` variable: an 8-byte DMA of the
        enclosing word into this tasklet's software-cache slot, then a WRAM load."""
        addr, dt = self._soft_target(var, index, dtype)
        slot = self._soft_cache_slot()
        word = _align8_low(addr)
        self._pending += timing.SOFT_CACHE_ACCESS_INSTRUCTIONS
        await self.mram_read(word, slot, 8)
        return self.view(slot + addr - word, dt, 1)[0].item()

    async def mram_store(
        self, var: Var | int, index: int, value: Any, dtype: npt.DTypeLike | None = None
    ) -> None:
        """Write ``var[index] = value`` as C does for an ``__mram`` variable. An 8-byte item is
        one 8-byte DMA; a narrower one is read-modify-write of its 8-byte word through this
        tasklet's cache slot (read DMA, modify, write DMA): not tasklet-safe, two tasklets
        writing neighbours in one word can lose an update (guide: "Software cache")."""
        addr, dt = self._soft_target(var, index, dtype)
        slot = self._soft_cache_slot()
        word = _align8_low(addr)
        self._pending += timing.SOFT_CACHE_ACCESS_INSTRUCTIONS
        if dt.itemsize < 8:
            await self.mram_read(word, slot, 8)
        self.view(slot + addr - word, dt, 1)[0] = value
        await self.mram_write(slot, word, 8)
