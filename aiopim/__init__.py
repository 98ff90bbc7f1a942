"""aiopim: emulate UPMEM processing-in-memory systems in virtual time for await-based hosts."""

from ._emulator import Emulator, current_emulator, now, run
from ._errors import (
    DeadlockError,
    DpuError,
    DpuErrorCode,
    JobType,
    TimeLimitError,
    dpu_error_to_string,
)
from ._machine._config import MachineConfig
from ._machine._dpu import FaultInfo
from ._machine._program import DpuProgram, MemoryImage, MemorySpace, Symbol
from ._ops._fifo import DpuQuirkWarning, FifoLink
from .dpu import DpuFault, FifoDecl, Program, Tasklet
from .elf import ElfProgram, load_elf, register_model
from .host import DpuSet, InputFifo, OutputFifo

__version__ = "0.1.0"

__all__ = [
    "DeadlockError",
    "DpuError",
    "DpuErrorCode",
    "DpuFault",
    "DpuProgram",
    "DpuQuirkWarning",
    "DpuSet",
    "ElfProgram",
    "Emulator",
    "FaultInfo",
    "FifoDecl",
    "FifoLink",
    "InputFifo",
    "JobType",
    "MachineConfig",
    "MemoryImage",
    "MemorySpace",
    "OutputFifo",
    "Program",
    "Symbol",
    "Tasklet",
    "TimeLimitError",
    "current_emulator",
    "dpu_error_to_string",
    "load_elf",
    "now",
    "register_model",
    "run",
]
