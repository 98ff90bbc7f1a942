"""WRAM allocators on top of ``mem_alloc``: fixed-size blocks and the buddy allocator (§5.6).

Both hand out real WRAM addresses. The fixed-size block allocator keeps its free list in WRAM
itself (each free block starts with the address of the next one, the allocator is one 32-bit
word pointing at the first), so a program that writes into a freed block corrupts the list
as it would on a DPU. The buddy allocator keeps its bookkeeping in Python; the heap space of
the runtime's bitmap is reserved but not written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import timing
from ._base import TaskletBase
from ._errno import EINVAL, ENOMEM, NULL

#: smallest buddy block: buddy_alloc.h ("the minimal size of the allocated block is 16 bytes")
BUDDY_MIN_BLOCK = 16


@dataclass(frozen=True)
class FsbAllocator:
    """``fsb_allocator_t``: the WRAM word holding the free-list head, and the block geometry."""

    address: int
    block_size: int
    nb_blocks: int
    first_block: int


@dataclass
class _Buddy:
    base: int
    size: int
    free: dict[int, list[int]] = field(default_factory=dict)  # block size -> addresses
    allocated: dict[int, int] = field(default_factory=dict)  # address -> block size

    def reset(self) -> None:
        self.free = {self.size: [self.base]}
        self.allocated = {}

    def levels(self, block: int) -> int:
        return (self.size // block).bit_length()

    def block_of(self, ptr: int) -> int | None:
        """The allocated block containing ``ptr``."""
        for addr, size in self.allocated.items():
            if addr <= ptr < addr + size:
                return addr
        return None


def _block_size(size: int) -> int:
    return max(BUDDY_MIN_BLOCK, 1 << (size - 1).bit_length())


class AllocMixin(TaskletBase):
    """``fsb_*`` and ``buddy_*`` for :class:`Tasklet`."""

    # -- fixed-size block allocator ---------------------------------------
    def fsb_alloc(self, block_size: int, nb_of_blocks: int) -> FsbAllocator:
        """``fsb_alloc``: ``nb_of_blocks`` blocks of ``block_size`` (rounded up to a multiple of
        8) and the allocator word, ``block_size * nb + 4`` bytes of heap (fault 1 if full)."""
        bs = max(8, (int(block_size) + 7) & ~7)
        nb = int(nb_of_blocks)
        first = self.mem_alloc(bs * nb + 4)
        head = first + bs * nb
        for i in range(nb):
            self._set_word(first + i * bs, first + (i + 1) * bs if i + 1 < nb else NULL)
        self._set_word(head, first if nb else NULL)
        self._pending += (
            timing.FSB_ALLOC_INSTRUCTIONS + timing.FSB_ALLOC_PER_BLOCK_INSTRUCTIONS * nb
        )
        return FsbAllocator(head, bs, nb, first)

    def fsb_get(self, allocator: FsbAllocator) -> int:
        """``fsb_get``: a free block's WRAM address, or NULL (0) if none is left."""
        self._pending += timing.FSB_GET_INSTRUCTIONS
        block = self._word(allocator.address)
        if block != NULL:
            self._set_word(allocator.address, self._word(block))
        return block

    def fsb_free(self, allocator: FsbAllocator, ptr: int) -> None:
        """``fsb_free``: give ``ptr`` back (no validity check, as in the runtime)."""
        self._pending += timing.FSB_FREE_INSTRUCTIONS
        self._set_word(int(ptr), self._word(allocator.address))
        self._set_word(allocator.address, int(ptr))

    def _word(self, addr: int) -> int:
        return int(self.view(addr, np.uint32, 1)[0])

    def _set_word(self, addr: int, value: int) -> None:
        self.view(addr, np.uint32, 1)[0] = value

    # -- buddy allocator ---------------------------------------
    def _buddy(self) -> _Buddy:
        b: _Buddy | None = self.dpu.persistent.get("buddy")
        if b is None:
            raise RuntimeError("buddy_alloc/free/realloc/reset called before buddy_init")
        return b

    def buddy_init(self, size_of_heap: int) -> None:
        """``buddy_init``: carve a ``size_of_heap``-byte buddy heap (a power of two, at least
        16) and its bitmap out of ``mem_alloc``; only the first call has any effect (the flag
        is WRAM data, so it survives reboots until the next load)."""
        if self.dpu.persistent.get("buddy") is not None:
            return
        size = int(size_of_heap)
        if size < BUDDY_MIN_BLOCK or size & (size - 1):
            raise ValueError(f"buddy_init: heap size {size} must be a power of two >= 16")
        base = self.mem_alloc(size)
        # the runtime's bitmap, one bit per node of the tree of 16-byte leaves: heap space only
        self.mem_alloc(max(8, size // (BUDDY_MIN_BLOCK * 4)))
        b = _Buddy(base, size)
        b.reset()
        self.dpu.persistent["buddy"] = b
        self._pending += timing.BUDDY_CALL_INSTRUCTIONS

    def buddy_reset(self) -> None:
        """``buddy_reset``: free every block (the heap keeps its size)."""
        self._buddy().reset()
        self._pending += timing.BUDDY_CALL_INSTRUCTIONS

    def buddy_alloc(self, size: int) -> int:
        """``buddy_alloc``: a block of the next power of two (>= 16 B), 8-aligned; NULL (0)
        with ``errno = EINVAL`` for size 0 or above the heap, ``ENOMEM`` when full."""
        b = self._buddy()
        size = int(size)
        if size <= 0 or size > b.size:
            self.errno = EINVAL
            self._pending += timing.BUDDY_CALL_INSTRUCTIONS
            return NULL
        want = _block_size(size)
        self._pending += timing.BUDDY_CALL_INSTRUCTIONS + timing.BUDDY_PER_LEVEL_INSTRUCTIONS * (
            b.levels(want)
        )
        have = want
        while have <= b.size and not b.free.get(have):
            have <<= 1
        if have > b.size:
            self.errno = ENOMEM
            return NULL
        addrs = b.free[have]
        addr = min(addrs)
        addrs.remove(addr)
        while have > want:  # split, keep the lower half
            have >>= 1
            b.free.setdefault(have, []).append(addr + have)
        b.allocated[addr] = want
        return addr

    def buddy_free(self, ptr: int) -> None:
        """``buddy_free``: free the block containing ``ptr`` (NULL: nothing); ``errno =
        EINVAL`` and nothing done if ``ptr`` is unaligned, outside the heap or not allocated."""
        ptr = int(ptr)
        if ptr == NULL:
            return
        b = self._buddy()
        self._pending += timing.BUDDY_CALL_INSTRUCTIONS
        block = None
        if ptr % 8 == 0 and b.base <= ptr < b.base + b.size:
            block = b.block_of(ptr)
        if block is None:
            self.errno = EINVAL
            return
        size = b.allocated.pop(block)
        self._pending += timing.BUDDY_PER_LEVEL_INSTRUCTIONS * b.levels(size)
        while size < b.size:  # merge with the free buddy
            buddy = b.base + ((block - b.base) ^ size)
            peers = b.free.get(size, [])
            if buddy not in peers:
                break
            peers.remove(buddy)
            block = min(block, buddy)
            size <<= 1
        b.free.setdefault(size, []).append(block)

    def buddy_realloc(self, ptr: int, size: int) -> int:
        """``buddy_realloc``: NULL ``ptr`` = ``buddy_alloc``; size 0 = ``buddy_free`` (returns
        ``ptr``); otherwise a block of the new size holding the old contents (the same block
        if the rounded size is unchanged), NULL with ``errno`` set on failure."""
        ptr, size = int(ptr), int(size)
        if ptr == NULL:
            return self.buddy_alloc(size)
        if size == 0:
            self.buddy_free(ptr)
            return ptr
        b = self._buddy()
        block = b.block_of(ptr)
        if block is None:
            self.errno = EINVAL
            return NULL
        old = b.allocated[block]
        if 0 < size <= b.size and _block_size(size) == old:
            self._pending += timing.BUDDY_CALL_INSTRUCTIONS
            return block
        new = self.buddy_alloc(size)
        if new == NULL:
            return NULL
        n = min(old, _block_size(size))
        self.wram[new : new + n] = self.wram[block : block + n]
        self.buddy_free(block)
        return new
