"""The WRAM FIFO struct of ``wramfifo.h`` as the DPU and the host see it (sdk-reference.md §4.1).

Free-running 64-bit read/write pointers at offsets 0 and 8, the data and scratch pointers at
16 and 20, ``ptr_size`` and ``data_size`` at 24 and 28, and ``nb_reserved`` at 32 for output
FIFOs; the slot of a pointer is ``ptr & (2**ptr_size - 1)``.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._memory import Bytes

MAX_PTR_SIZE = 10
INPUT_STRUCT_SIZE = 32
OUTPUT_STRUCT_SIZE = 40  # 36 bytes of fields, padded to 8

READ_PTR = 0
WRITE_PTR = 8
DATA_PTR = 16
TMP_DATA_PTR = 20
PTR_SIZE = 24
DATA_SIZE = 28
NB_RESERVED = 32

MASK64 = 0xFFFF_FFFF_FFFF_FFFF

# struct reads and writes NumPy's buffer directly (typed loosely: the stubs want ``Buffer``)
_unpack_u32: Callable[[Any, int], tuple[int]] = Struct("<I").unpack_from
_unpack_u64: Callable[[Any, int], tuple[int]] = Struct("<Q").unpack_from
#: store a little-endian 64-bit word at an offset of a buffer (no wake-up: see ``write_u64``)
pack_u64: Callable[[Any, int, int], None] = Struct("<Q").pack_into
#: ``(read_ptr, write_ptr)`` of the FIFO struct at an address (``read_ptrs`` without a call)
unpack_ptrs: Callable[[Any, int], tuple[int, int]] = Struct("<QQ").unpack_from


def read_u32(wram: Bytes, addr: int) -> int:
    """The 32-bit word at ``addr``."""
    return int(_unpack_u32(wram, addr)[0])


def read_u64(wram: Bytes, addr: int) -> int:
    """The 64-bit word at ``addr``."""
    return int(_unpack_u64(wram, addr)[0])


def read_ptrs(wram: Bytes, struct_addr: int) -> tuple[int, int]:
    """``(read_ptr, write_ptr)`` of the FIFO struct at ``struct_addr``."""
    return unpack_ptrs(wram, struct_addr + READ_PTR)


def write_u64(dpu: Dpu, addr: int, value: int) -> None:
    """Store a pointer and wake the tasklets polling it."""
    pack_u64(dpu.wram, addr, value & MASK64)
    dpu.wram_written(addr, 8)


def struct_size(output: bool) -> int:
    """``sizeof(dpu_output_fifo_t)`` or ``sizeof(dpu_input_fifo_t)``."""
    return OUTPUT_STRUCT_SIZE if output else INPUT_STRUCT_SIZE


def is_full(rd: int, wr: int, mask: int) -> bool:
    """Same slot, different laps: ``wr - rd`` is the capacity."""
    return (rd & mask) == (wr & mask) and rd != wr
