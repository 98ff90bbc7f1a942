"""Kelonia's memory copies leave the program's own MRAM alone (issue 35, item 12).

A program that links printf keeps its ``__stdout_buffer`` at MRAM 0; a ``copy_to_device(0, …)``
used to overwrite it silently, and the kernel's printf then overwrote the text it counted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aiopim
from aiopim.kelonia import (
    PYTHON,
    BasicDpuAssemblyLine,
    DidlError,
    DpuDeviceDescription,
    DpuFoundry,
    DpuLowLevelError,
    KeloniaInterface,
    parse_didl,
)
from aiopim.kelonia._mram import MramLayout

COUNT_DIDL = """function count(at: in u32, n: in u32, found: out u32) {
    at <- sysmbox[0], n <- sysmbox[1], found <- mbox[0][0]
}"""
TEXT_DIDL = "function put(text: in u8[64], n: out u32) { text <- dram[0], n <- mbox[0][0] }"


def printf_counter() -> aiopim.Program:
    """Counts the 'a's of the ``n`` MRAM bytes at ``at``, saying so with printf."""
    prog = aiopim.Program("printf_count", nr_tasklets=1)  # stdio: __stdout_buffer at MRAM 0
    prog.mailboxes(sysmbox=2, mbox=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        at, n = (int(v) for v in t.sys_mbox_recv())
        t.printf("counting %d bytes at %#x\n", n, at)
        buf = t.mem_alloc(n)
        await t.mram_read(at, buf, n)
        t.mbox_send(int(np.count_nonzero(t.view(buf, np.uint8, n) == ord("a"))))

    return prog


def test_a_copy_over_the_printf_buffer_is_refused_and_free_mram_works(backend: str) -> None:
    device = DpuDeviceDescription(
        KeloniaInterface(parse_didl(COUNT_DIDL, "count.didl")), printf_counter()
    )
    text = b"a" * 64

    async def host() -> tuple[str, float, int, int, str]:
        line = BasicDpuAssemblyLine.using_dpu(device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            task: Any = device.interface.Task
            copy = assembly.worker(task.memory_copy)
            count = assembly.worker(task.count)
            t0 = aiopim.now()
            with pytest.raises(DpuLowLevelError) as refused:
                await copy.copy_to_device(0, text)
            spent = aiopim.now() - t0
            free = assembly.free_mram
            await copy.copy_to_device(free, text)
            found = int(await count.count(free, len(text)))
            assert assembly.dpu_set is not None
            return str(refused.value), spent, free, found, assembly.dpu_set.log()

    message, spent, free, found, log = aiopim.run(host, backend=backend)
    assert message == (
        "DPU_ERR_INVALID_MRAM_ACCESS (10): DPU 0, task memory_copy: copy_to_device(0x0, 64 "
        "bytes) would write MRAM 0x0..0x40, which overlaps the program's printf buffer "
        "__stdout_buffer (MRAM 0x0..0x100000); the program's free MRAM starts at 0x100000 "
        "(__sys_used_mram_end): write there"
    )
    assert spent == 0.0  # refused before any job
    assert (free, found) == (0x100000, 64)
    assert log.endswith("counting 64 bytes at 0x100000\n")


def test_a_didl_input_over_the_programs_mram_fails_the_build(backend: str) -> None:
    device = DpuDeviceDescription(
        KeloniaInterface(parse_didl(TEXT_DIDL, "put.didl")), printf_counter()
    )

    async def host() -> None:
        await DpuFoundry.targeting(PYTHON).build(BasicDpuAssemblyLine.using_dpu(device))

    with pytest.raises(DidlError) as info:
        aiopim.run(host, backend=backend)
    assert str(info.value) == (
        "put.didl:1:45: input 'text' would write MRAM 0x0..0x40, which overlaps the program's "
        "printf buffer __stdout_buffer (MRAM 0x0..0x100000); the program's free MRAM starts at "
        "0x100000 (__sys_used_mram_end): write there (program 'printf_count'); expected an "
        "offset in the free MRAM"
    )


def test_mram_variables_are_the_programs_too() -> None:
    prog = aiopim.Program("vars", stdio=False)
    prog.mram("table", np.uint64, 4)
    prog.mram_noinit("scratch", np.uint8, 100)  # .mram.noinit first, then .mram
    mram = MramLayout.of(prog)
    assert mram.free_start == 0x88
    assert mram.refusal("w", 0x80, 0x90) == (
        "w would write MRAM 0x80..0x90, which overlaps the program's MRAM variable table "
        "(MRAM 0x68..0x88); the program's free MRAM starts at 0x88 (__sys_used_mram_end): "
        "write there"
    )
    assert mram.overlap(0x64, 0x68) is None  # the alignment gap between the two
    assert mram.refusal("w", 0x88, 0x1000) is None
    assert MramLayout.of(aiopim.Program("bare", stdio=False)) == MramLayout((), 0)
