"""Run a Python DPU program on one emulated DPU and look at what it left behind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiopim
from aiopim import DpuError
from aiopim._core._dpu import Dpu


@dataclass
class Outcome:
    """One DPU after ``launches`` synchronous launches of a program."""

    dpu: Dpu
    fault: aiopim.FaultInfo | None
    error: DpuError | None
    run_ps: list[int]
    log: str | None


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
    cfg = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=1, chip=chip)
    emu = aiopim.Emulator(cfg) if seed is None else aiopim.Emulator(cfg, seed=seed, explore=True)

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

    result: Outcome = emu.run(main, backend=backend)
    return result


def host_array(out: Outcome, prog: aiopim.Program, name: str) -> Any:
    """The WRAM contents of ``__host`` variable ``name`` after the run."""
    var = prog._vars[name]
    addr = prog.address_of(var)
    return out.dpu.wram[addr : addr + var.size].view(var.dtype).copy()
