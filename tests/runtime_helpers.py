"""Run a Python DPU program on one emulated DPU and look at what it left behind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpers import V1B_CYCLE_PS, emu

import aiopim
from aiopim import DpuError, timing
from aiopim._machine._dpu import Dpu
from aiopim._machine._program import MRAM_BIT
from aiopim.dpu import Var
from aiopim.dpu._runner import TaskletRunner


@dataclass
class Outcome:
    """One DPU after ``launches`` synchronous launches of a program."""

    dpu: Dpu
    fault: aiopim.FaultInfo | None
    error: DpuError | None
    run_ps: list[int]
    log: str | None

    @property
    def runner(self) -> TaskletRunner:
        """The Python-kernel engine state of the DPU (pipeline, DMA engine)."""
        assert isinstance(self.dpu.runner, TaskletRunner)
        return self.dpu.runner


def run_dpu(
    prog: aiopim.DpuProgram,
    *,
    launches: int = 1,
    chip: str = "v1B",
    backend: str = "asyncio",
    log: bool = False,
    seed: int | None = None,
) -> Outcome:
    """Load ``prog`` on one DPU, launch it ``launches`` times (stops at a fault)."""
    explore: dict[str, Any] = {} if seed is None else {"seed": seed, "explore": True}

    async def main() -> Outcome:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        dpu = dpus.dpu_list[0]
        runs: list[int] = []
        error = None
        for _ in range(launches):
            try:
                await dpus.launch()
            except DpuError as e:
                error = e
                break
            runs.append(dpu.last_run_ps)
        text = dpus.log() if log and error is None else None
        return Outcome(dpu, dpu.fault, error, runs, text)

    result: Outcome = emu(ranks=1, dpus=1, chip=chip, **explore).run(main, backend=backend)
    return result


def host_array(out: Outcome, prog: aiopim.Program, name: str) -> Any:
    """The WRAM contents of ``__host`` variable ``name`` after the run."""
    var = prog._vars[name]
    addr = prog.address_of(var)
    return out.dpu.wram[addr : addr + var.size].view(var.dtype).copy()


def mram_bytes(out: Outcome, prog: aiopim.Program, var: Var | str, size: int) -> Any:
    """``size`` bytes of MRAM from ``__mram`` variable ``var`` after the run."""
    return out.dpu.mram.read(prog.address_of(var) & ~MRAM_BIT, size)


def dma_ps(size: int, *, write: bool) -> int:
    """Latency of one lone ``size``-byte MRAM DMA on a v1B DPU."""
    return round(timing.dma_cycles(size, write=write)[1] * V1B_CYCLE_PS)
