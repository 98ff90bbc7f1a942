"""WRAM heap and allocators (sdk-reference.md §5.6), MRAM access (§5.7), with exact DMA
virtual times."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import V1B_CYCLE_PS, run_time_ps
from runtime_helpers import Outcome, dma_ps, host_array, mram_bytes, run_dpu

import aiopim
from aiopim import timing
from aiopim.dpu import (
    EINVAL,
    ENOMEM,
    FAULT_HEAP_FULL,
    FAULT_MRAM_UNALIGNED,
    NULL,
    SEQREAD_CACHE_SIZES,
    SeqReader,
)


# --- mem_alloc ------------------------------------------------------------------------------
def test_mem_alloc_alignment_size_zero_and_reset() -> None:
    prog = aiopim.Program("heap", nr_tasklets=1)
    got = prog.host("got", np.uint32, 6)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        v = t.view(got)
        start = t.mem_reset()
        v[0] = t.mem_alloc(3) - start
        v[1] = t.mem_alloc(0) - start  # current pointer, not aligned, not advanced
        v[2] = t.mem_alloc(5) - start  # aligned up first
        v[3] = t.mem_alloc(0) - start
        v[4] = t.mem_reset() - start
        v[5] = t.mem_alloc(8) - start

    assert host_array(run_dpu(prog), prog, "got").tolist() == [0, 3, 8, 13, 0, 0]
    assert prog.heap_start % 8 == 0


def test_mem_alloc_faults_when_the_end_reaches_the_end_of_wram() -> None:
    prog = aiopim.Program("full", nr_tasklets=1)
    got = prog.host("got", np.uint32)
    prog.symbols()  # lay the program out: heap_start is known from here on
    room = 63488 - prog.heap_start  # v1B WRAM

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.mem_reset()
        t.view(got)[0] = t.mem_alloc(room - 1)  # ends one byte before the end: fine
        t.mem_reset()
        t.mem_alloc(room)  # ends exactly at the end: alloc.c faults (new < end is required)

    out = run_dpu(prog)
    assert out.fault is not None and out.fault.code == FAULT_HEAP_FULL
    assert "heap full" in out.fault.reason
    assert int(host_array(out, prog, "got")[0]) == prog.heap_start


def test_mem_alloc_is_thread_safe_and_the_heap_persists_across_boots() -> None:
    prog = aiopim.Program("heap", nr_tasklets=16)
    ptrs = prog.host("ptrs", np.uint32, 32)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(t.me() % 3)
        await t.flush()
        t.view(ptrs)[t.me() + 16 * int(t.view(ptrs)[t.me()] != 0)] = t.mem_alloc(40)

    out = run_dpu(prog, launches=2)  # no mem_reset: the second boot continues the heap
    p = host_array(out, prog, "ptrs")
    assert len(set(p.tolist())) == 32 and all(x % 8 == 0 for x in p)
    assert sorted(p) == [prog.heap_start + 40 * i for i in range(32)]


# --- fixed-size block allocator ------------------------------------------------------------------
def test_fsb_allocator_blocks_free_list_and_heap_use() -> None:
    prog = aiopim.Program("fsb", nr_tasklets=1)
    got = prog.host("got", np.uint32, 8)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        v = t.view(got)
        start = t.mem_reset()
        a = t.fsb_alloc(3, 3)  # 3 bytes -> 8-byte blocks
        blocks = [t.fsb_get(a) for _ in range(4)]
        v[0:4] = [b - start if b else 0xFFFF for b in blocks]
        t.fsb_free(a, blocks[1])
        t.fsb_free(a, blocks[0])
        v[4] = t.fsb_get(a) - start  # LIFO: the last freed comes back first
        v[5] = t.fsb_get(a) - start
        v[6] = t.mem_alloc(0) - start  # 3 * 8 + 4 bytes of heap used
        v[7] = a.block_size

    got_ = host_array(run_dpu(prog), prog, "got").tolist()
    assert got_ == [0, 8, 16, 0xFFFF, 0, 8, 28, 8]


def test_fsb_free_list_lives_in_wram() -> None:
    prog = aiopim.Program("fsb", nr_tasklets=1)
    got = prog.host("got", np.uint32, 2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        a = t.fsb_alloc(16, 4)
        first = t.fsb_get(a)
        # the free list head points at block 1, whose first word points at block 2
        t.view(got)[0] = int(t.view(a.address, np.uint32, 1)[0]) - first
        t.view(got)[1] = int(t.view(first + 16, np.uint32, 1)[0]) - first

    assert host_array(run_dpu(prog), prog, "got").tolist() == [16, 32]


def test_fsb_alloc_faults_when_the_heap_is_full() -> None:
    prog = aiopim.Program("fsb", nr_tasklets=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.fsb_alloc(1024, 64)

    out = run_dpu(prog)
    assert out.fault is not None and out.fault.code == FAULT_HEAP_FULL


# --- buddy allocator ------------------------------------------------------------------------------
def test_buddy_sizes_alignment_and_errno() -> None:
    prog = aiopim.Program("buddy", nr_tasklets=1)
    got: dict[str, object] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.mem_reset()
        t.buddy_init(1024)
        base = t.buddy_alloc(1)
        t.buddy_init(4096)  # only the first call has an effect
        got["small"] = [t.buddy_alloc(1) - base, t.buddy_alloc(16) - base]
        got["33"] = t.buddy_alloc(33) - base  # 64 bytes, aligned on 64
        got["zero"] = (t.buddy_alloc(0), t.errno)
        t.errno = 0
        got["huge"] = (t.buddy_alloc(1025), t.errno)
        t.errno = 0
        got["nomem"] = (t.buddy_alloc(1024), t.errno)
        t.errno = 0
        t.buddy_free(base + 8)  # any 8-aligned address inside the block frees it
        got["again"] = t.buddy_alloc(16) - base
        t.buddy_free(base + 512)  # not allocated
        got["bad_free"] = t.errno
        t.buddy_reset()
        got["whole"] = t.buddy_alloc(1024) - base
        got["aligned"] = base % 8

    out = run_dpu(prog)
    assert out.fault is None
    assert got == {
        "small": [16, 32],
        "33": 64,
        "zero": (NULL, EINVAL),
        "huge": (NULL, EINVAL),
        "nomem": (NULL, ENOMEM),
        "again": 0,
        "bad_free": EINVAL,
        "whole": 0,
        "aligned": 0,
    }


def test_buddy_blocks_merge_and_realloc_keeps_contents() -> None:
    prog = aiopim.Program("buddy", nr_tasklets=1)
    got: dict[str, object] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.mem_reset()
        t.buddy_init(256)
        a = t.buddy_alloc(100)  # 128
        b = t.buddy_alloc(100)
        t.buddy_free(a)
        t.buddy_free(b)
        c = t.buddy_alloc(256)  # the halves merged back
        got["merged"] = c == a
        t.buddy_free(c)
        p = t.buddy_alloc(16)
        t.view(p, np.uint8, 16)[:] = np.arange(16)
        q = t.buddy_realloc(p, 20)  # 32-byte block: moved, contents copied
        got["moved"] = q != p
        got["data"] = t.view(q, np.uint8, 16).tolist()
        got["same"] = t.buddy_realloc(q, 30) == q  # still 32 bytes: same block
        got["free"] = t.buddy_realloc(q, 0) == q
        got["null"] = t.buddy_realloc(NULL, 8) != NULL

    run_dpu(prog)
    assert got == {
        "merged": True,
        "moved": True,
        "data": list(range(16)),
        "same": True,
        "free": True,
        "null": True,
    }


# --- direct DMA, exact times ---------------------------------------------------------------
def test_dma_sequence_virtual_time_one_tasklet() -> None:
    prog = aiopim.Program("dma", nr_tasklets=1)
    m = prog.mram("m", np.uint8, 4096)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(2048)
        await t.mram_read(m, buf, 8)
        await t.mram_read(m, buf, 2048)
        await t.mram_write(buf, t.mram_address(m, 2048), 512)

    out = run_dpu(prog)
    dmas = dma_ps(8, write=False) + dma_ps(2048, write=False) + dma_ps(512, write=True)
    assert out.run_ps == [run_time_ps(timing.MEM_ALLOC_INSTRUCTIONS) + dmas]


def test_dma_latencies_overlap_between_tasklets_bandwidth_does_not() -> None:
    prog = aiopim.Program("dma", nr_tasklets=2)
    m = prog.mram("m", np.uint8, 8192)
    done: dict[int, int] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        buf = (t.program.heap_start + 2048 * t.me() + 7) & ~7
        await t.mram_read(t.mram_address(m, 2048 * t.me()), buf, 2048)
        done[t.me()] = t.dpu.kernel.now - t.dpu.boot_time

    run_dpu(prog)
    alpha = timing.DMA_READ_ALPHA_CYCLES
    beta = timing.DMA_BETA_CYCLES_PER_BYTE * 2048
    assert done == {
        0: round((alpha + beta) * V1B_CYCLE_PS),
        1: round((alpha + 2 * beta) * V1B_CYCLE_PS),
    }


# --- unaligned access ------------------------------------------------------------------------
@pytest.mark.parametrize(("offset", "size"), [(0, 5), (3, 2), (3, 21), (6, 100), (8, 16), (1, 7)])
def test_mram_unaligned_read_and_write(offset: int, size: int) -> None:
    prog = aiopim.Program("unaligned", nr_tasklets=1)
    m = prog.mram("m", np.uint8, 256, init=np.arange(256) % 251)
    got = prog.host("got", np.uint8, 128)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(size + 16)
        p = await t.mram_read_unaligned(t.mram_address(m, 100 + offset), buf, size)
        t.view(got)[:size] = t.view(p, np.uint8, size)
        src = t.mem_alloc(size + 16) + offset % 8  # same alignment as the destination
        t.view(src, np.uint8, size)[:] = 200 + np.arange(size) % 50
        await t.mram_write_unaligned(src, t.mram_address(m, offset), size)

    out = run_dpu(prog)
    data = np.arange(256) % 251
    assert (
        host_array(out, prog, "got")[:size].tolist()
        == data[100 + offset : 100 + offset + size].tolist()
    )
    expect = data.copy()
    expect[offset : offset + size] = 200 + np.arange(size) % 50
    assert mram_bytes(out, prog, m, 256).tolist() == expect.tolist()


def test_mram_write_unaligned_alignment_mismatch_is_fault_8() -> None:
    prog = aiopim.Program("unaligned", nr_tasklets=1)
    m = prog.mram("m", np.uint8, 64)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(32)
        await t.mram_write_unaligned(buf + 1, t.mram_address(m, 2), 5)

    out = run_dpu(prog)
    assert out.fault is not None and out.fault.code == FAULT_MRAM_UNALIGNED


def test_mram_read_unaligned_span_over_2048_is_a_dma_fault() -> None:
    prog = aiopim.Program("unaligned", nr_tasklets=1)
    m = prog.mram("m", np.uint8, 4096)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(2048 + 16)
        await t.mram_read_unaligned(t.mram_address(m, 1), buf, 2048)  # 2056 bytes rounded

    out = run_dpu(prog)
    assert out.fault is not None and out.fault.code is None
    assert out.fault.reason.startswith("DMA fault")


# --- sequential readers ---------------------------------------------------------------------------
@pytest.mark.parametrize("cache", SEQREAD_CACHE_SIZES)
def test_seqread_sum_and_dma_count(cache: int) -> None:
    n = 5000
    prog = aiopim.Program("seq", nr_tasklets=1, seqread_cache_size=cache)
    data = (np.arange(n) * 7 % 256).astype(np.uint8)
    m = prog.mram("m", np.uint8, n + 2048, init=data)
    got = prog.host("got", np.uint32, 4)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        c = t.seqread_alloc()
        got_ = t.view(got)
        got_[2] = c % cache
        reader = SeqReader()
        p = await t.seqread_init(c, t.mram_address(m, 3), reader)
        total = 0
        for _ in range(n - 3):
            total += int(t.view(p, np.uint8, 1)[0])
            p = await t.seqread_get(p, 1, reader)
        got_[0] = total
        got_[1] = t.seqread_tell(p, reader) - t.mram_address(m)
        p = await t.seqread_seek(t.mram_address(m, 10), reader)
        got_[3] = int(t.view(p, np.uint8, 1)[0])

    out = run_dpu(prog)
    g = host_array(out, prog, "got").tolist()
    assert g[0] == int(data[3:].sum())
    assert g[1] == n and g[2] == 0 and g[3] == data[10]
    pages = (prog.address_of(m) + n) // cache - prog.address_of(m) // cache  # page changes
    seek_reload = (
        1 if (prog.address_of(m) + 10) // cache != (prog.address_of(m) + n) // cache else 0
    )
    assert out.runner.dma.requests == 1 + pages + seek_reload
    assert out.runner.dma.bytes == 2 * cache * out.runner.dma.requests


def test_seqread_cache_size_is_checked() -> None:
    with pytest.raises(ValueError, match="seqread_cache_size"):
        aiopim.Program("seq", seqread_cache_size=100)


# --- __mram variables through the software cache -----------------------------------------------
def _race_program(guarded: bool, dtype: type) -> aiopim.Program:
    prog = aiopim.Program("race", nr_tasklets=2)
    var = prog.mram("var", dtype, 8 // np.dtype(dtype).itemsize)
    m = prog.mutex("m")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        # both tasklets write their own element of the same 8-byte word at the same time
        if guarded:
            await t.mutex_lock(m)
        await t.mram_store(var, t.me(), 0x11 * (t.me() + 1))
        if guarded:
            t.mutex_unlock(m)

    return prog


def _var_after(prog: aiopim.Program, out: Outcome, dtype: type) -> list[int]:
    return mram_bytes(out, prog, "var", 8).view(dtype).tolist()[:2]


def test_soft_cache_narrow_writes_race() -> None:
    # tasklet 0 reads the word, tasklet 1 reads it 4 cycles later (before 0 wrote it back):
    # 1 writes back its stale copy of 0's element -> 0's update is lost
    prog = _race_program(False, np.uint32)
    assert _var_after(prog, run_dpu(prog), np.uint32) == [0, 0x22]
    prog = _race_program(True, np.uint32)
    assert _var_after(prog, run_dpu(prog), np.uint32) == [0x11, 0x22]


def test_soft_cache_8_byte_writes_do_not_race() -> None:
    prog = aiopim.Program("race8", nr_tasklets=2)
    var = prog.mram("var", np.uint64, 2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.mram_store(var, t.me(), 0x11 * (t.me() + 1))
        assert await t.mram_load(var, t.me()) == 0x11 * (t.me() + 1)

    out = run_dpu(prog)
    assert out.fault is None
    assert mram_bytes(out, prog, var, 16).view(np.uint64).tolist() == [0x11, 0x22]


def test_soft_cache_access_time() -> None:
    prog = aiopim.Program("soft", nr_tasklets=1)
    var = prog.mram("var", np.uint16, 4)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.mram_store(var, 1, 7)  # read-modify-write: read + write DMA
        assert await t.mram_load(var, 1) == 7  # one read DMA

    out = run_dpu(prog)
    soft = run_time_ps(timing.SOFT_CACHE_ACCESS_INSTRUCTIONS)
    expected = 2 * soft + 2 * dma_ps(8, write=False) + dma_ps(8, write=True)
    assert out.run_ps == [expected]
