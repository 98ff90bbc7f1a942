"""aiopim's own figures of a finished run: virtual time, PrIM's breakdown, instructions, digest.

PrIM splits a benchmark's time into CPU->DPU, DPU kernel, inter-DPU and DPU->CPU. From a
timeline: *DPU kernel* is the time during which some DPU ran; a host transfer job is *inter-DPU*
when it ran after the first DPU run ended and before the last one started (data moved between
kernel launches), otherwise *CPU->DPU* or *DPU->CPU* by its direction. Each figure is the length
of the union of its intervals, so overlapping jobs of several ranks count once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .._emulator import Emulator
from .._errors import JobType
from .._machine._dpu import Dpu
from .._machine._recorder import Recorder
from ..trace import Timeline
from ..trace._timeline import TRANSFER_CATEGORIES, merge, total

#: transfer job types that move data from the DPUs to the host (the others move it to DPUs)
_FROM_DPU = frozenset(
    {
        JobType.COPY_WRAM_FROM_MATRIX,
        JobType.COPY_IRAM_FROM_MATRIX,
        JobType.COPY_MRAM_FROM_MATRIX,
        JobType.PARALLEL_COPY_WRAM_FROM_MATRIX,
        JobType.PARALLEL_FIFO_FLUSH,
    }
)
#: the figures' names, in table order
BREAKDOWN = ("cpu_dpu_ps", "dpu_kernel_ps", "inter_dpu_ps", "dpu_cpu_ps")


def breakdown(tl: Timeline) -> dict[str, int]:
    """PrIM's four figures of ``tl``, in picoseconds (see the module's docstring)."""
    kernel = merge((r.start, r.end) for r in tl.dpu_runs)
    spans: dict[str, list[tuple[int, int]]] = {"cpu_dpu": [], "inter_dpu": [], "dpu_cpu": []}
    for job in tl.jobs:
        if not job.ran or job.category not in TRANSFER_CATEGORIES:
            continue
        if kernel and job.start >= kernel[0][1] and job.end <= kernel[-1][0]:
            which = "inter_dpu"
        else:
            which = "dpu_cpu" if job.type in _FROM_DPU else "cpu_dpu"
        spans[which].append((job.start, job.end))
    return {
        "cpu_dpu_ps": total(merge(spans["cpu_dpu"])),
        "dpu_kernel_ps": total(kernel),
        "inter_dpu_ps": total(merge(spans["inter_dpu"])),
        "dpu_cpu_ps": total(merge(spans["dpu_cpu"])),
    }


def _issued(dpu: Dpu) -> int:
    """The instruction counter of the DPU's engine: a Python kernel's pipeline counts every run
    of the engine on this DPU, a binary's interpreter counts the current run only."""
    runner: Any = dpu.runner
    if runner is None:
        return 0
    pipeline = getattr(runner, "pipeline", None)
    return int(pipeline.instructions if pipeline is not None else runner.instructions)


class CountingRecorder(Recorder):
    """A recorder that also adds up the instructions each DPU run issued."""

    def __init__(self, clock: Any) -> None:
        super().__init__(clock)
        self.instructions = 0
        self._seen: dict[int, tuple[Any, int]] = {}  # id(DPU) -> (runner, its count then)

    def dpu_stopped(self, dpu: Dpu) -> None:
        super().dpu_stopped(dpu)
        runner, count = dpu.runner, _issued(dpu)
        cumulative = getattr(runner, "pipeline", None) is not None
        before_runner, before = self._seen.get(id(dpu), (None, 0))
        self.instructions += count - before if cumulative and before_runner is runner else count
        self._seen[id(dpu)] = (runner, count)


def counting_emulator(emu: Emulator) -> CountingRecorder:
    """Give ``emu`` (not run yet) a :class:`CountingRecorder`; return it."""
    rec = CountingRecorder(emu.kernel)
    emu.recorder = emu.machine.recorder = rec
    return rec


def instructions_issued(emu: Emulator) -> int:
    """Instructions the DPUs issued, for an emulator without a counting recorder (scenario
    replays, whose kernels are Python kernels: their counters cover every run)."""
    rec = emu.recorder
    if isinstance(rec, CountingRecorder):
        return rec.instructions
    return sum(_issued(d) for r in emu.machine.ranks() for d in r.dpus)


def figures(emu: Emulator) -> dict[str, Any]:
    """The figures of a finished run of ``emu``: virtual time, breakdown, instructions and the
    SHA-256 of its trace."""
    assert emu.recorder is not None
    return {
        "virtual_time_ps": emu.now_ps,
        **breakdown(Timeline.from_emulator(emu)),
        "instructions": instructions_issued(emu),
        "digest": hashlib.sha256(emu.recorder.to_jsonl().encode()).hexdigest(),
    }
