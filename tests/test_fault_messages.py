"""A DPU fault's DpuError says why: the earliest fault in full (DPU, tasklet or thread, the
kernel's line or the PC and instruction, the cause), then how many other DPUs are in fault and
where their reasons are (issue 35, item 3)."""

from __future__ import annotations

from pathlib import Path

import anyio
import numpy as np
import pytest
from helpers import emu

import aiopim
from aiopim.elf import load_elf
from aiopim.isa import assemble
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_DEFAULT,
    DPU_SYNCHRONOUS,
    DpuError,
    dpu_alloc,
    dpu_callback,
    dpu_launch,
    dpu_load,
    dpu_sync,
)

HERE = Path(__file__)


def _line_of(marker: str) -> int:
    """The line of this file that ends with ``marker``."""
    lines = HERE.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(marker))


def _bad_dma_program() -> aiopim.Program:
    """Tasklet 1 of every DPU reads 12 bytes of MRAM (a DMA must move a multiple of 8)."""
    prog = aiopim.Program("bad_dma", nr_tasklets=2)
    m = prog.mram("m", np.uint8, 64)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() == 1:
            buf = t.mem_alloc(16)
            await t.mram_read(t.mram_address(m), buf, 12)  # <- DMA fault

    return prog


def _assert_program() -> aiopim.Program:
    """DPU 2 of a rank fails an assert (fault code 3) in tasklet 0; the others end."""
    prog = aiopim.Program("asserts", nr_tasklets=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(100)
        await t.flush()
        t.dpu_assert(t.dpu.index != 2, "index is 2")  # <- assert

    return prog


BAD_LOAD = """
        .set NR_TASKLETS, 1
        .text
        .globl __bootstrap
__bootstrap:
        move r0, 1
        lw r1, r0, 0            // a misaligned word load
        stop true, __bootstrap
"""


async def _launch_error(prog: aiopim.DpuProgram, nr_dpus: int, flags: int = DPU_SYNCHRONOUS) -> str:
    dpus = await dpu_alloc(nr_dpus, "")
    await dpu_load(dpus, prog)
    with pytest.raises(DpuError) as info:
        await dpu_launch(dpus, flags)
        await dpu_sync(dpus)
    assert info.value.code is aiopim.DpuErrorCode.DPU_ERR_DPU_FAULT
    faults = dpus.faults
    assert all(f is not None for f in faults[: len(faults)])
    return str(info.value)


def test_python_kernel_fault_on_64_dpus_names_the_first_and_counts_the_rest(backend: str) -> None:
    text = emu(ranks=1, dpus=64).run(
        lambda: _launch_error(_bad_dma_program(), 64), backend=backend
    )
    line = _line_of("# <- DMA fault")
    assert text == (
        f"DPU_ERR_DPU_FAULT (23): rank 0: DPU 0.0.0 tasklet 1 at test_fault_messages.py:{line} "
        "in main: DMA fault: size 12 must be a multiple of 8 in [8, 2048]; 63 more DPUs in "
        "fault (0.0.1-0.7.7): DpuSet.faults has the reason of each DPU"
    )


def test_assembled_program_fault_names_pc_and_instruction() -> None:
    prog = load_elf(assemble(BAD_LOAD))
    text = emu(ranks=1, dpus=64).run(lambda: _launch_error(prog, 64), backend="trio")
    assert text == (
        "DPU_ERR_DPU_FAULT (23): rank 0: DPU 0.0.0 thread 0 at PC 1 (__bootstrap+1): memory "
        "fault: WRAM access at 0x1 is misaligned or out of range; instruction lw r1, r0, 0; "
        "63 more DPUs in fault (0.0.1-0.7.7): DpuSet.faults has the reason of each DPU"
    )


def test_one_dpu_in_fault_an_asynchronous_launch_and_the_faults_of_the_set() -> None:
    async def host() -> tuple[str, list[str | None]]:
        dpus = await dpu_alloc(4, "")
        await dpu_load(dpus, _assert_program())
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        with pytest.raises(DpuError) as info:
            await dpu_sync(dpus)
        return str(info.value), [None if f is None else f.describe() for f in dpus.faults]

    text, faults = emu(ranks=1, dpus=4).run(host, backend="asyncio")
    where = f"DPU 0.0.2 tasklet 0 at test_fault_messages.py:{_line_of('# <- assert')} in main"
    assert text == (
        f"DPU_ERR_DPU_FAULT (23): rank 0: {where}: fault 3: index is 2"
    )
    assert faults == [None, None, f"{where}: fault 3: index is 2", None]


def test_faults_on_several_ranks_name_the_other_ranks() -> None:
    text = emu(ranks=3, dpus=2).run(lambda: _launch_error(_bad_dma_program(), 6), backend="trio")
    assert text.startswith("DPU_ERR_DPU_FAULT (23): rank 0: DPU 0.0.0 tasklet 1 at ")
    assert text.endswith(
        "; 1 more DPU in fault (0.0.1): DpuSet.faults has the reason of each DPU; "
        "ranks 1, 2 failed too"
    )


def test_a_launch_inside_a_blocking_callback_says_why_too() -> None:
    seen: list[str] = []

    async def inside(rank_set: object, rank_id: int, args: object) -> None:
        with pytest.raises(DpuError) as info:
            await dpu_launch(rank_set, DPU_SYNCHRONOUS)  # type: ignore[arg-type]
        seen.append(str(info.value))

    async def host() -> None:
        dpus = await dpu_alloc(4, "")
        await dpu_load(dpus, _assert_program())
        with pytest.raises(DpuError) as info:  # the rank failed: its SYNC reports it too
            await dpu_callback(dpus, inside, None, DPU_CALLBACK_DEFAULT)
        seen.append(str(info.value))
        await anyio.sleep(1e-3)  # the callback goes on (the fault flushed the SYNC, not it)

    emu(ranks=1, dpus=4).run(host, backend="trio")
    text = (
        f"DPU_ERR_DPU_FAULT (23): rank 0: DPU 0.0.2 tasklet 0 at test_fault_messages.py:"
        f"{_line_of('# <- assert')} in main: fault 3: index is 2"
    )
    assert seen == [text, text]
