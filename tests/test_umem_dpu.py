"""aiopim.umem on DPUs: MRAM and WRAM contexts, the program's layout, rank jobs, virtual time."""

from __future__ import annotations

import numpy as np
from helpers import emu, fault_program, spin_program

import aiopim
from aiopim import timing, umem
from aiopim.sdk import DPU_MRAM_HEAP_POINTER_NAME, JobType
from aiopim.trace import Timeline
from aiopim.umem import StatusType


def now_ps() -> int:
    return aiopim.current_emulator().now_ps


def test_mram_allocation_follows_the_program_layout(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(4) as dpus:
            await dpus.load(spin_program())
            heap = dpus.symbol(DPU_MRAM_HEAP_POINTER_NAME).offset
            mram = umem.Mram(dpus)
            assert mram.device_name == "MRAM" and mram.fundamental_align() == 8
            assert mram.nr_lanes == 4 and mram.is_async
            a = mram.alloc(3)
            b = mram.alloc(16)
            c = mram.aligned_alloc(2, 8)  # raised to 8
            d = mram.aligned_alloc(256, 256)
            assert int(a) == heap and int(b) == heap + 8 and int(c) == heap + 24
            assert c.alignment == 8 and int(d) % 256 == 0 and int(d) >= heap + 32
            mram.free(b)
            assert int(mram.alloc(12)) == heap + 8  # first fit reuses the hole
            huge = mram.alloc(64 << 20)
            assert not huge and mram.get_status() is StatusType.MemoryError
            assert "no free range of 67108864 bytes in MRAM" in mram.get_message()

    aiopim.run(main, backend=backend)


def test_wram_allocation_stays_above_the_program(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            prog = spin_program()
            await dpus.load(prog)
            wram = umem.Wram(dpus)
            top = aiopim.current_emulator().config.chip_profile.wram_size
            a = wram.alloc(12)
            assert int(a) == top - 16  # from the top, 8-aligned
            rest = top - prog.heap_start - 16
            b = wram.alloc(rest)
            assert int(b) == prog.heap_start and wram.is_ok()
            assert not wram.alloc(8) and wram.get_status() is StatusType.MemoryError
            wram.clear_status()
            await dpus.copy_to("x", np.arange(4, dtype=np.uint32))
            await b.set(0xFF)
            await a.set(0xEE)
            assert wram.is_ok()
            x = await dpus.copy_from("x", np.uint32, 4)
            assert x.tolist() == [[0, 1, 2, 3]]  # the program's own WRAM is untouched

    aiopim.run(main, backend=backend)


def test_no_program_loaded_is_a_runtime_error(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            mram = umem.Mram(dpus)
            assert not mram.alloc(8)
            assert mram.get_status() is StatusType.RuntimeError
            assert "load one (dpu_load / DpuSet.load) first" in mram.get_message()

    aiopim.run(main, backend=backend)


def test_a_new_load_invalidates_addresses(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(spin_program())
            mram = umem.Mram(dpus)
            a = await mram.calloc(1, 8)
            await dpus.load(spin_program(name="other"))  # wipes MRAM
            await a.copy_from(b"12345678")
            assert mram.get_status() is StatusType.ValueError
            assert "not inside a live allocation" in mram.get_message()

    aiopim.run(main, backend=backend)


def test_set_broadcasts_in_and_reads_one_dpu_out(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(4) as dpus:
            await dpus.load(spin_program())
            host = umem.Host()
            mram = umem.Mram(dpus, reader=2)
            m = await mram.calloc(1, 16)
            h = host.alloc(16)
            h.view()[:] = np.arange(16)
            await h.copy_to(m)
            rows = await m.gather()
            assert rows.shape == (4, 16) and (rows == np.arange(16)).all()
            per_dpu = np.arange(64, dtype=np.uint8).reshape(4, 16)
            await mram.scatter(m, per_dpu)
            out = host.calloc(1, 16)
            await m.copy_to(out)
            assert out.view().tolist() == per_dpu[2].tolist()  # the reader DPU
            # an unaligned write keeps each DPU's own neighbouring bytes
            await (m + 3).copy_from(b"\xaa\xbb")
            rows = await m.gather()
            expected = per_dpu.copy()
            expected[:, 3:5] = [0xAA, 0xBB]
            assert (rows == expected).all()
            assert mram.is_ok() and host.is_ok()

    aiopim.run(main, backend=backend)


def test_dpu_to_dpu_copies_pair_the_dpus(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(4) as dpus:
            await dpus.load(spin_program())
            mram, wram = umem.Mram(dpus), umem.Wram(dpus)
            m = mram.alloc(24)
            w = wram.alloc(24)
            data = np.arange(96, dtype=np.uint8).reshape(4, 24)
            await mram.scatter(m, data)
            await (m + 1).copy_to(w + 2, 21)  # unaligned on both sides, per DPU
            rows = await wram.gather(int(w) + 2, 21)
            assert (rows == data[:, 1:22]).all()
            one = umem.Mram(dpus.dpus[1])
            o = one.alloc(8)
            await o.copy_from(m, 8)  # 4 DPUs -> one of them: its own bytes
            assert (await o.gather()).tolist() == [data[1, :8].tolist()]
            await m.copy_from(o, 8)  # 1 DPU -> 4 DPUs: a broadcast
            assert ((await m.gather(8)) == data[1, :8]).all()
            await w.copy_to(umem.Mram(dpus[3]).alloc(8), 8)  # WRAM of 4 -> MRAM of DPU 3
            assert await umem.Address(one, int(m), 8).read() == data[1, :8].tobytes()
            two = umem.Mram(aiopim_subset := (await aiopim.DpuSet.alloc(2)))
            await aiopim_subset.load(spin_program())
            t = two.alloc(8)
            await t.copy_from(m, 8)
            assert two.get_status() is StatusType.NotSupportedError
            assert "pair the DPUs one to one" in two.get_message()
            await aiopim_subset.free()

    aiopim.run(main, machine=aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=4), backend=backend)


def test_accessibility_is_asymmetric_between_a_set_and_its_dpus(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(4) as dpus:
            await dpus.load(spin_program())
            whole, part = umem.Mram(dpus), umem.Mram(dpus.dpus[3])
            again = umem.Mram(dpus)
            assert whole.is_accessible_from(part) and not part.is_accessible_from(whole)
            assert whole.is_accessible_from(again) and again.is_accessible_from(whole)
            assert not whole.is_accessible_from(umem.Wram(dpus))
            assert not whole.is_accessible_from(umem.Host())
            a = whole.alloc(8)
            await a.copy_from(b"ABCDEFGH")
            assert await (await a.connect(again)).read() == b"ABCDEFGH"
            zc = await a.connect(again)
            assert zc.zero_copy and int(zc) == int(a)
            # an address of the set is valid on one of its DPUs, not the other way round
            view = umem.Address(part, int(a), 8)
            assert await view.read() == b"ABCDEFGH" and part.is_ok()
            b = part.alloc(8)
            await whole.copy_to(a, whole, int(b), 8)
            assert whole.get_status() is StatusType.ValueError
            mirror = await a.connect(part)  # not mutual: a copy on DPU 3
            assert not mirror.zero_copy and await mirror.read() == b"ABCDEFGH"
            assert int(mirror) not in (int(a), int(b))

    aiopim.run(main, backend=backend)


def test_a_set_allocation_is_freed_only_through_a_context_over_all_its_dpus(
    backend: str,
) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(4) as dpus:
            await dpus.load(spin_program())
            whole, one = umem.Mram(dpus), umem.Mram(dpus.dpus[1])
            a = whole.alloc(64)
            one.free(int(a))
            assert one.get_status() is StatusType.ValueError
            assert "allocated on 4 DPUs" in one.get_message()
            one.clear_status()
            await a.copy_from(b"x" * 64)  # the owner still uses it ...
            assert await umem.Address(one, int(a), 64).read() == b"x" * 64  # ... and DPU 1 too
            assert whole.is_ok() and one.is_ok()
            whole.free(a)  # ... and frees it, on every DPU
            assert whole.is_ok()
            assert int(whole.alloc(64)) == int(a)

    aiopim.run(main, backend=backend)


def test_copies_are_rank_jobs_in_virtual_time(backend: str) -> None:
    e = emu(ranks=1, dpus=4)

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(4)
        await dpus.load(spin_program())
        host, mram = umem.Host(), umem.Mram(dpus)
        h = host.alloc(80)
        m = mram.alloc(80)
        t0 = now_ps()
        await m.copy_from(h)  # aligned: one broadcast job
        assert now_ps() - t0 == timing.transfer_time_ps("broadcast", [80] * 4)
        t0 = now_ps()
        await m.copy_to(h)  # one read from the reader DPU
        assert now_ps() - t0 == timing.transfer_time_ps("from", [80])
        t0 = now_ps()
        await (m + 4).copy_from(b"abcd")  # a partial granule: read 8 from every DPU, write 8
        assert now_ps() - t0 == timing.transfer_time_ps("from", [8] * 4) + timing.transfer_time_ps(
            "to", [8] * 4
        )
        t0 = now_ps()
        h.copy_to(host.alloc(80))  # host to host: no virtual time
        assert now_ps() == t0

    e.run(main, backend=backend)
    assert e.recorder is not None
    jobs = [j.type for j in Timeline.from_emulator(e).jobs if j.type is not JobType.SYNC]
    assert jobs == [
        JobType.LOAD,
        JobType.COPY_MRAM_TO_RANK,
        JobType.COPY_MRAM_FROM_MATRIX,
        JobType.COPY_MRAM_FROM_MATRIX,
        JobType.COPY_MRAM_TO_MATRIX,
    ]


def writer_program() -> aiopim.Program:
    """Spins, then writes 8 bytes of 0x5A at the MRAM address in ``target``."""
    prog = aiopim.Program("writer", nr_tasklets=1)
    target = prog.host("target", np.uint32, 2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(10_000)
        buf = t.mem_alloc(8)
        t.view(buf, np.uint8, 8)[:] = 0x5A
        await t.mram_write(buf, int(t.view(target)[0]), 8)

    return prog


def test_copies_queue_behind_launches(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(writer_program())
            mram = umem.Mram(dpus)
            m = await mram.calloc(1, 8)
            await dpus.copy_to("target", np.array([int(m), 0], np.uint32))
            await dpus.launch(wait=False)
            t0 = now_ps()
            data = await m.read()  # queued behind the launch: sees what the DPU wrote
            assert data == b"\x5a" * 8
            assert now_ps() - t0 > 10_000 * timing.REVOLVER_CYCLES * timing.V1B.cycles_to_ps(1)
            assert mram.is_ok()

    aiopim.run(main, backend=backend)


def test_connect_and_sync_with_mram(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(2) as dpus:
            await dpus.load(spin_program())
            host, mram = umem.Host(), umem.Mram(dpus)
            assert not mram.is_accessible_from(host) and not host.is_accessible_from(mram)
            async with await mram.calloc(8, 4) as m:
                async with await m.connect(host, 32, 64) as h:
                    assert not h.zero_copy and int(h) % 64 == 0 and h.mate is m
                    h.view(np.int64)[:] = [1, 2, 3, 4]
                    await h.sync()
                    assert (await m.gather()).view(np.int64).tolist() == [[1, 2, 3, 4]] * 2
                    await mram.set(m, 0, 8)
                    await h.update()
                    assert h.view(np.int64).tolist() == [0, 2, 3, 4]
                    mirror = int(h)
                assert host._lookup(mirror, 0) is None
                address = int(m)
            assert mram._lookup(address, 0) is None  # the with block freed MRAM
            assert mram.is_ok() and host.is_ok()

    aiopim.run(main, backend=backend)


def test_empty_aligned_mirrors_in_wram_get_their_own_addresses(backend: str) -> None:
    # the long property's failing case: an empty WRAM block connected twice to WRAM with a
    # 64-byte alignment used to give both mirrors the same address
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(2) as dpus:
            await dpus.load(spin_program())
            wram = umem.Wram(dpus)
            top = aiopim.current_emulator().config.chip_profile.wram_size
            empty = await wram.calloc(1, 0)
            assert int(empty) == top - 8 and empty.size == 0
            first = await empty.connect(wram, 0, 64)
            second = await empty.connect(wram, 0, 64)
            assert not first.zero_copy and not second.zero_copy
            assert int(first) % 64 == 0 and int(second) % 64 == 0
            assert int(first) == top - 64 and int(second) == top - 128
            second.free()
            first.free()
            empty.free()
            assert wram.is_ok(), wram.get_message()
            assert wram._lookup(int(first), 0) is None and wram._lookup(int(second), 0) is None

    aiopim.run(main, backend=backend)


def test_dpu_errors_become_status(backend: str) -> None:
    async def main() -> None:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(fault_program())
            mram = umem.Mram(dpus)
            m = mram.alloc(8)
            bad = umem.Mram(dpus, reader=5)
            assert bad.get_status() is StatusType.ValueError and bad.reader == 0
            await dpus.launch(wait=False)  # the DPU faults: an asynchronous error
            await m.copy_from(b"12345678")
            assert mram.get_status() is StatusType.RuntimeError
            assert "DPU_ERR_DPU_FAULT" in mram.get_message()

    aiopim.run(main, backend=backend)


async def exercise(ctx: umem.Context, host: umem.Host) -> None:
    """Every operation once on ``ctx``, checked through a Host."""
    h = host.alloc(24)
    h.view()[:] = np.arange(24)
    a = await ctx.calloc(4, 6)
    assert await a.read() == bytes(24)
    b = ctx.aligned_alloc(16, 32)
    assert int(b) % 16 == 0 and b.alignment == 16 and ctx.aligned_origin(b) <= int(b)
    await ctx.set(b, 7, 32)
    await ctx.copy_to(b, ctx, a, 24)  # within the context
    assert await a.read() == b"\x07" * 24
    await ctx.copy_from(int(a) + 1, host, int(h) + 3, 5)  # unaligned, from the host
    assert await a.read(8) == bytes([7, 3, 4, 5, 6, 7, 7, 7])
    await ctx.copy_to_safe(a, 24, host, h, 24, 24)
    assert h.view()[:8].tolist() == [7, 3, 4, 5, 6, 7, 7, 7]
    await ctx.copy_from_safe(a, 4, host, h, 24, 8)  # the destination area is too small
    assert ctx.get_status() is StatusType.IndexError
    ctx.clear_status()
    await ctx.set_safe(a, 24, 1, 24)
    pair = await a.connect(host, 24, 64)
    assert not pair.zero_copy and int(pair) % 64 == 0 and pair.view().tolist() == [1] * 24
    pair.view()[:4] = 9
    await pair.sync()
    assert await a.read(5) == bytes([9, 9, 9, 9, 1])
    await ctx.sync_to(b, ctx, b, 32)  # the same address: nothing to do
    await ctx.sync_from(a, ctx, b, 8)
    await pair.update(8)
    assert pair.view()[:9].tolist() == [7] * 8 + [1]
    ctx.disconnect(a, host, pair, 64)
    assert host._lookup(int(pair), 0) is None
    rows = await ctx.gather(b, 32)
    assert rows.shape == (ctx.nr_lanes, 32) and (rows == 7).all()
    await ctx.scatter(b, np.full((1, 32), 5, np.uint8))
    assert (await b.gather() == 5).all()
    assert ctx.is_accessible_from(ctx) and not ctx.is_accessible_from(host)
    ctx.free(a)
    ctx.aligned_free(b)
    assert ctx.is_ok()
    ctx.free(a)
    assert ctx.get_status() is StatusType.ValueError
    h.free()


def test_every_operation_on_every_context(backend: str, tmp_path: object) -> None:
    async def main() -> list[str]:
        names = []
        async with await aiopim.DpuSet.alloc(3) as dpus:
            await dpus.load(spin_program())
            host = umem.Host()
            for ctx in (
                umem.Host(),
                umem.File(f"{tmp_path}/f.bin", "w+b"),
                umem.Mram(dpus),
                umem.Mram(dpus[2]),
                umem.Wram(dpus),
                umem.Wram(dpus[0]),
            ):
                if isinstance(ctx, umem.Host):
                    await exercise_host(ctx, host)
                else:
                    await exercise(ctx, host)
                names.append(f"{ctx.device_name}:{ctx.nr_lanes}")
        return names

    assert aiopim.run(main, backend=backend) == [
        "Host:1",
        "FILE:1",
        "MRAM:3",
        "MRAM:1",
        "WRAM:3",
        "WRAM:1",
    ]


async def exercise_host(ctx: umem.Host, host: umem.Host) -> None:
    """The same on a second Host, where connect is zero-copy (checked separately above)."""
    a = await ctx.calloc(4, 6)
    pair = await a.connect(host, 24, 8)
    assert pair.zero_copy and int(pair) == int(a)
    await pair.sync()
    pair.free()
    a.free()
    assert ctx.is_ok() and host.is_ok()


def test_same_trace_on_both_backends() -> None:
    async def main() -> bytes:
        dpus = await aiopim.DpuSet.alloc(4)
        await dpus.load(spin_program())
        mram, wram, host = umem.Mram(dpus), umem.Wram(dpus), umem.Host()
        m = await mram.calloc(1, 40)
        w = wram.alloc(40)
        await (m + 5).copy_from(bytes(range(30)))
        await w.set(9)  # aligned: one broadcast
        await m.copy_to(w)  # DPU by DPU
        async with await w.connect(host) as h:
            h.view()[:] = 1
            await h.sync(13)
            await h.update()
            return h.view().tobytes()

    traces, results = [], []
    for backend in ("asyncio", "trio"):
        e = emu(ranks=1, dpus=4)
        results.append(e.run(main, backend=backend))
        assert e.recorder is not None
        traces.append(e.recorder.to_jsonl())
        types = {j.type for j in Timeline.from_emulator(e).jobs}
        assert {JobType.COPY_WRAM_TO_RANK, JobType.COPY_WRAM_FROM_MATRIX} <= types
    assert results[0] == results[1] == b"\x01" * 13 + bytes(range(8, 30)) + bytes(5)
    assert traces[0] == traces[1]
