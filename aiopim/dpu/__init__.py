"""DPU-side runtime for Python kernels, modelled on UPMEM's runtime library."""

from .._core._dpu import DpuFault, FaultInfo
from ._fifo import FifoDecl
from ._program import BarrierDecl, MutexDecl, Program, Var
from ._tasklet import (
    FAULT_ASSERT,
    FAULT_DIVISION_BY_ZERO,
    FAULT_HALT,
    FAULT_HEAP_FULL,
    FAULT_PRINTF_OVERFLOW,
    Tasklet,
)

__all__ = [
    "FAULT_ASSERT",
    "FAULT_DIVISION_BY_ZERO",
    "FAULT_HALT",
    "FAULT_HEAP_FULL",
    "FAULT_PRINTF_OVERFLOW",
    "BarrierDecl",
    "DpuFault",
    "FaultInfo",
    "FifoDecl",
    "MutexDecl",
    "Program",
    "Tasklet",
    "Var",
]
