"""DPU-side runtime for Python kernels, modelled on UPMEM's runtime library."""

from .._machine._dpu import FaultInfo
from .._machine._dpulog import decode_log
from ._alloc import BUDDY_MIN_BLOCK, FsbAllocator
from ._errno import EALREADY, EINVAL, ENOMEM, NULL
from ._fifo import FifoDecl
from ._mailbox import MailboxLayout
from ._mram import FAULT_MRAM_UNALIGNED, SEQREAD_CACHE_SIZES, SeqReader
from ._perfcounter import (
    COUNT_CYCLES,
    COUNT_DISABLE_BOTH,
    COUNT_ENABLE_BOTH,
    COUNT_INSTRUCTIONS,
    COUNT_NOTHING,
    COUNT_SAME,
    FAULT_PERFCOUNTER_CONFIG,
)
from ._program import BarrierDecl, MutexDecl, Program, Var
from ._runner import DpuFault
from ._stdio import FAULT_PRINTF_OVERFLOW
from ._sync import MutexPoolDecl, SemaphoreDecl, VMutexDecl
from ._tasklet import (
    FAULT_ASSERT,
    FAULT_DIVISION_BY_ZERO,
    FAULT_HALT,
    FAULT_HEAP_FULL,
    Tasklet,
)

__all__ = [
    "BUDDY_MIN_BLOCK",
    "COUNT_CYCLES",
    "COUNT_DISABLE_BOTH",
    "COUNT_ENABLE_BOTH",
    "COUNT_INSTRUCTIONS",
    "COUNT_NOTHING",
    "COUNT_SAME",
    "EALREADY",
    "EINVAL",
    "ENOMEM",
    "FAULT_ASSERT",
    "FAULT_DIVISION_BY_ZERO",
    "FAULT_HALT",
    "FAULT_HEAP_FULL",
    "FAULT_MRAM_UNALIGNED",
    "FAULT_PERFCOUNTER_CONFIG",
    "FAULT_PRINTF_OVERFLOW",
    "NULL",
    "SEQREAD_CACHE_SIZES",
    "BarrierDecl",
    "DpuFault",
    "FaultInfo",
    "FifoDecl",
    "FsbAllocator",
    "MailboxLayout",
    "MutexDecl",
    "MutexPoolDecl",
    "Program",
    "SemaphoreDecl",
    "SeqReader",
    "Tasklet",
    "VMutexDecl",
    "Var",
    "decode_log",
]
