"""Shared pieces of the PrIM microbenchmark ports: cycle counter, results, the one-DPU runner.

PrIM's microbenchmarks run on one DPU of its 2,556-DPU system (350 MHz, 24 tasklets: chip
v1A, timing-model.md §1a). Each tasklet times a region with ``perfcounter_get`` and stores
the cycles in ``DPU_RESULTS[me()]``; the host reads them back and keeps the maximum.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np

import aiopim
from aiopim import timing
from aiopim.dpu import Var
from aiopim.sdk import dpu_copy_from

#: the chip of PrIM's measurements
PRIM_CHIP = "v1A"

T = TypeVar("T")


def perfcounter_get(t: aiopim.Tasklet) -> int:
    """Cycles since boot, as ``perfcounter_get()`` after ``perfcounter_config(COUNT_CYCLES)``.

    Exact cycles: PrIM's ``timer_stop`` cancels the cost of reading the counter itself.
    """
    dpu = t.dpu
    return round((dpu.kernel.now - dpu.boot_time) / dpu.chip.cycle_ps)


async def timer_start(t: aiopim.Tasklet) -> int:
    """Issue the instructions charged so far, then read the cycle counter."""
    await t.flush()
    return perfcounter_get(t)


async def timer_stop(t: aiopim.Tasklet, start: int) -> int:
    """Cycles since ``start`` once the charged instructions have issued."""
    await t.flush()
    return perfcounter_get(t) - start


def declare_results(prog: aiopim.Program) -> Var:
    """``__host dpu_results_t DPU_RESULTS[NR_TASKLETS]`` (one uint64 cycle count each)."""
    return prog.host("DPU_RESULTS", np.uint64, prog.nr_tasklets)


async def read_max_cycles(dpu: aiopim.DpuSet, nr_tasklets: int) -> int:
    """The host side: the largest ``DPU_RESULTS[i].cycles`` of one DPU."""
    out = np.zeros(nr_tasklets, np.uint64)
    await dpu_copy_from(dpu, "DPU_RESULTS", 0, out, out.nbytes)
    return int(out.max())


def run_on_one_dpu(
    host: Callable[..., Awaitable[T]], *args: Any, chip: str = PRIM_CHIP, backend: str = "asyncio"
) -> T:
    """Run ``host(*args)`` on a fresh emulated machine of one rank of one DPU."""
    machine = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=1, chip=chip)
    emu = aiopim.Emulator(machine, record=False)
    return emu.run(host, *args, backend=backend)


def frequency_hz(chip: str) -> int:
    """Clock of ``chip`` in Hz."""
    return timing.CHIPS[chip].frequency_hz
