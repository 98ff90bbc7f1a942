"""Shared pieces of the PrIM microbenchmark ports: cycle counter, host side, one-DPU runner.

PrIM's microbenchmarks run on one DPU of its 2,556-DPU system (350 MHz, 24 tasklets: chip
v1A, sdk-reference.md §10.1). Each tasklet times a region with ``perfcounter_get`` and stores
the cycles in ``DPU_RESULTS[me()]``; the host reads them back and keeps the maximum.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np

import aiopim
from aiopim import timing
from aiopim.dpu import Var
from aiopim.sdk import (
    DPU_MRAM_HEAP_POINTER_NAME,
    DPU_SYNCHRONOUS,
    dpu_alloc,
    dpu_copy_from,
    dpu_copy_to,
    dpu_free,
    dpu_launch,
    dpu_load,
)

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


def declare_host_symbols(prog: aiopim.Program) -> tuple[Var, Var]:
    """``DPU_INPUT_ARGUMENTS`` (input size in bytes, kernel) and ``DPU_RESULTS`` (one uint64
    cycle count per tasklet), the ``__host`` symbols :func:`run_kernel` writes and reads."""
    return (
        prog.host("DPU_INPUT_ARGUMENTS", np.uint32, 2),
        prog.host("DPU_RESULTS", np.uint64, prog.nr_tasklets),
    )


async def run_kernel(prog: aiopim.Program, inputs: Sequence[np.ndarray]) -> tuple[int, np.ndarray]:
    """PrIM's host side on one DPU; returns the largest ``DPU_RESULTS`` cycle count and the output.

    The equal-sized ``inputs`` go one after the other to the MRAM heap, their size in bytes to
    ``DPU_INPUT_ARGUMENTS[0]``; the output, shaped like ``inputs[0]``, is read from after them.
    """
    nbytes = inputs[0].nbytes
    dpus = await dpu_alloc(1, "")
    dpu = dpus.dpus[0]
    await dpu_load(dpus, prog)
    await dpu_copy_to(dpus, "DPU_INPUT_ARGUMENTS", 0, np.array([nbytes, 0], np.uint32), 8)
    for i, x in enumerate(inputs):
        await dpu_copy_to(dpus, DPU_MRAM_HEAP_POINTER_NAME, i * nbytes, x, nbytes)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    out = np.zeros_like(inputs[0])
    await dpu_copy_from(dpu, DPU_MRAM_HEAP_POINTER_NAME, len(inputs) * nbytes, out, nbytes)
    cycles = np.zeros(prog.nr_tasklets, np.uint64)
    await dpu_copy_from(dpu, "DPU_RESULTS", 0, cycles, cycles.nbytes)
    await dpu_free(dpus)
    return int(cycles.max()), out


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
