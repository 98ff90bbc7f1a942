"""``dpu_load`` writes the program's MRAM image and nothing else: ``__mram_noinit`` variables
and the MRAM no section covers keep their bytes across loads; initialised (and zero-initialised)
``__mram`` variables are written again (issue 35, item 10)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import emu

import aiopim
from aiopim._machine._memory import MRAM_PAGE, MramBank
from aiopim._machine._program import DPU_MRAM_HEAP_POINTER_NAME
from aiopim.elf import load_elf
from aiopim.isa import assemble
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    dpu_alloc,
    dpu_copy_from,
    dpu_copy_to,
    dpu_launch,
    dpu_load,
)

KEPT = bytes(range(1, 65))  # what the host writes before the second load
BEYOND = 4096  # an offset past the program's MRAM variables (in the MRAM heap)


def _python_program() -> aiopim.Program:
    prog = aiopim.Program("mram_vars", nr_tasklets=1)
    prog.mram_noinit("keep", np.uint8, 64)
    prog.mram("inited", np.uint64, 8, init=np.arange(100, 108))
    prog.mram("plain", np.uint8, 64)  # __mram without initialiser: zeros at load

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(1)

    return prog


async def _read(dpus: aiopim.DpuSet, symbol: str, size: int, offset: int = 0) -> bytes:
    out = bytearray(size)
    await dpu_copy_from(dpus.dpus[1], symbol, offset, out, size)
    return bytes(out)


async def _write_everywhere(dpus: aiopim.DpuSet, symbols: list[str]) -> None:
    for name in symbols:
        await dpu_copy_to(dpus, name, 0, KEPT, 64)
    await dpu_copy_to(dpus, DPU_MRAM_HEAP_POINTER_NAME, BEYOND, KEPT, 64)


def test_python_program_reload_keeps_noinit_and_unused_mram(backend: str) -> None:
    async def host() -> dict[str, bytes]:
        dpus = await dpu_alloc(2, "")
        prog = _python_program()
        await dpu_load(dpus, prog)
        await _write_everywhere(dpus, ["keep", "inited", "plain"])
        await dpu_load(dpus, prog)
        return {
            "keep": await _read(dpus, "keep", 64),
            "inited": await _read(dpus, "inited", 64),
            "plain": await _read(dpus, "plain", 64),
            "beyond": await _read(dpus, DPU_MRAM_HEAP_POINTER_NAME, 64, BEYOND),
        }

    got = emu(ranks=1, dpus=2).run(host, backend=backend)
    assert got["keep"] == KEPT
    assert got["beyond"] == KEPT
    assert got["inited"] == np.arange(100, 108, dtype=np.uint64).tobytes()
    assert got["plain"] == bytes(64)


def test_another_program_sees_what_the_first_left_in_mram() -> None:
    other = aiopim.Program("other", nr_tasklets=1)
    other.mram_noinit("left", np.uint8, 64)  # at MRAM offset 0, where "keep" was

    @other.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(1)

    async def host() -> bytes:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, _python_program())
        await _write_everywhere(dpus, ["keep"])
        await dpu_load(dpus, other)
        return await _read(dpus, "left", 64)

    assert other.address_of("left") == _python_program().address_of("keep")
    assert emu(ranks=1, dpus=2).run(host, backend="trio") == KEPT


# A binary: copies 8 bytes of its __mram_noinit variable `keep` to the __host `copy`; its
# initialised __mram `table` is rewritten by every load.
SOURCE = """
        .set NR_TASKLETS, 1
        .text
        .globl __bootstrap
__bootstrap:
        move r0, copy
        move r1, keep
        ldma r0, r1, 0
        stop true, __bootstrap
        .host
        .balign 8
        .globl copy
copy:   .quad 0
        .mram
        .globl table
table:  .quad 7, 8, 9, 10, 11, 12, 13, 14
        .section .mram.noinit
        .globl keep
keep:   .space 64
"""


def test_binary_reload_keeps_noinit_rewrites_initialised_and_the_binary_reads_it() -> None:
    prog = load_elf(assemble(SOURCE))

    async def host() -> dict[str, bytes]:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, prog)
        await dpu_launch(dpus, DPU_SYNCHRONOUS)  # the interpreter has seen this MRAM
        first = await _read(dpus, "copy", 8)
        await _write_everywhere(dpus, ["keep", "table"])
        await dpu_load(dpus, prog)
        await dpu_launch(dpus, DPU_SYNCHRONOUS)
        return {
            "first": first,
            "copy": await _read(dpus, "copy", 8),
            "keep": await _read(dpus, "keep", 64),
            "table": await _read(dpus, "table", 64),
            "beyond": await _read(dpus, DPU_MRAM_HEAP_POINTER_NAME, 64, BEYOND),
        }

    got = emu(ranks=1, dpus=2).run(host, backend="asyncio")
    assert got["first"] == bytes(8)
    assert got["copy"] == KEPT[:8]  # the binary read the bytes the load kept
    assert got["keep"] == KEPT
    assert got["beyond"] == KEPT
    assert got["table"] == np.arange(7, 15, dtype=np.uint64).tobytes()


def test_mram_bank_zero_drops_whole_pages_and_zeroes_edges() -> None:
    bank = MramBank(1 << 26)
    data = np.full(3 * MRAM_PAGE, 0xAB, np.uint8)
    bank.write(MRAM_PAGE, data)
    assert bank.resident_bytes == 3 * MRAM_PAGE
    bank.zero(MRAM_PAGE + 8, 2 * MRAM_PAGE)  # the end of page 1, page 2, the start of page 3
    assert bank.resident_bytes == 2 * MRAM_PAGE  # page 2 dropped
    got = bank.read(MRAM_PAGE, 3 * MRAM_PAGE)
    assert got[:8].tolist() == [0xAB] * 8
    assert not got[8 : 2 * MRAM_PAGE + 8].any()
    assert (got[2 * MRAM_PAGE + 8 :] == 0xAB).all()
    bank.zero(10 * MRAM_PAGE, 100)  # never written: nothing to do
    assert bank.resident_bytes == 2 * MRAM_PAGE
    MramBank(1 << 26).zero(0, 1 << 26)  # an empty bank stays empty


@pytest.mark.parametrize("shared", [False, True])
def test_zero_copies_a_shared_edge_page_first(shared: bool) -> None:
    from aiopim._machine._memory import MramImage

    image = MramImage(0, np.full(MRAM_PAGE, 7, np.uint8))
    a, b = MramBank(1 << 26), MramBank(1 << 26)
    for bank in (a, b):
        if shared:
            bank.write_image(image)
        else:
            bank.write(0, image.data.copy())
    a.zero(100, 8)
    assert not a.read(100, 8).any() and a.read(99, 1)[0] == 7
    assert (b.read(0, MRAM_PAGE) == 7).all()  # the other bank's page did not change
