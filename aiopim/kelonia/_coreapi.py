"""The private core names Kelonia uses (one place, to re-point when the core moves)."""

from .._machine._dpu import Dpu
from .._machine._dpulog import STDOUT_BUFFER
from .._machine._program import DPU_MRAM_HEAP_POINTER_NAME, MRAM_BIT, MRAM_SIZE, MemorySpace

__all__ = [
    "DPU_MRAM_HEAP_POINTER_NAME",
    "MRAM_BIT",
    "MRAM_SIZE",
    "STDOUT_BUFFER",
    "Dpu",
    "MemorySpace",
]
