"""The private emulator internals the ``aiopim.isa`` package uses (one place to re-point them)."""

from __future__ import annotations

from .._machine._dpu import Dpu, FaultInfo
from .._machine._engine import DpuRunner
from .._machine._memory import MramBank
from .._machine._program import ATOMIC_BASE, IRAM_BIT, MRAM_BIT
from .._runtime._kernel import INFINITY, PRIO_LATE, Entry, Kernel

__all__ = [
    "ATOMIC_BASE",
    "INFINITY",
    "IRAM_BIT",
    "MRAM_BIT",
    "PRIO_LATE",
    "Dpu",
    "DpuRunner",
    "Entry",
    "FaultInfo",
    "Kernel",
    "MramBank",
]
