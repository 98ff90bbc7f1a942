"""Every private emulator name Memclave uses, in one place (re-pointed on refactors)."""

from __future__ import annotations

from collections.abc import Callable

from .._emulator import Emulator, current_emulator
from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._dpu import Dpu
from .._machine._jobs import Job
from .._machine._program import MRAM_BIT, DpuProgram, MemorySpace, space_offset
from .._machine._rank import Rank
from .._ops._load import _patch_clocks_per_sec as patch_clocks_per_sec
from .._ops._set import DpuSetBase
from .._ops._submit import submit as submit_jobs
from .._runtime._kernel import Delay
from ..dpu._runner import TaskletRunner
from ..elf import load_elf
from ..isa import FIELD_NAMES, decode
from ..isa._tables import SIG_OPERANDS

#: the value of ``Rank.control_owner`` while Memclave holds a rank
OWNER = "Memclave"


def hook_dpu_stop(rank: Rank, hook: Callable[[Dpu], None]) -> None:
    """Call ``hook(dpu)`` after the rank's own bookkeeping whenever a DPU of ``rank`` stops."""

    def stopped(dpu: Dpu) -> None:
        rank._dpu_stopped(dpu)
        hook(dpu)

    for d in rank.dpus:
        d.on_stop = stopped


def unhook_dpu_stop(rank: Rank) -> None:
    """Undo :func:`hook_dpu_stop`."""
    for d in rank.dpus:
        d.on_stop = rank._dpu_stopped


__all__ = [
    "FIELD_NAMES",
    "SIG_OPERANDS",
    "decode",
    "MRAM_BIT",
    "OWNER",
    "Delay",
    "Dpu",
    "DpuError",
    "DpuErrorCode",
    "DpuProgram",
    "DpuSetBase",
    "Emulator",
    "Job",
    "JobType",
    "MemorySpace",
    "Rank",
    "TaskletRunner",
    "current_emulator",
    "load_elf",
    "patch_clocks_per_sec",
    "hook_dpu_stop",
    "space_offset",
    "submit_jobs",
    "unhook_dpu_stop",
]
