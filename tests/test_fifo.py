"""WRAM FIFOs: layout, DPU-side operations, host push/flush with retries, the key-sum example."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import numpy as np
import pytest
import wram_fifo_keysum as keysum
from helpers import V1B_CYCLE_PS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim import timing
from aiopim.dpu import FifoDecl
from aiopim.host import InputFifo, OutputFifo
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_PARALLEL,
    DPU_ERR_DPU_FAULT,
    DPU_ERR_INTERNAL,
    DPU_ERR_INVALID_DPU_SET,
    DPU_ERR_INVALID_MEMORY_TRANSFER,
    DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER,
    DPU_ERR_INVALID_WRAM_ACCESS,
    DPU_ERR_NO_PROGRAM_LOADED,
    DPU_ERR_UNKNOWN_SYMBOL,
    DPU_ERR_WRAM_FIFO_FULL,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_DEFAULT,
    DPU_XFER_PARALLEL,
    DPU_XFER_TO_DPU,
    DpuError,
    DpuSet,
    dpu_alloc,
    dpu_callback,
    dpu_fifo_link_free,
    dpu_fifo_prepare_xfer,
    dpu_fifo_push_xfer,
    dpu_fifo_set_push_max_retries,
    dpu_fifo_set_time_for_push_retries,
    dpu_foreach,
    dpu_launch,
    dpu_link_input_fifo,
    dpu_link_output_fifo,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_sync,
    get_fifo_elem,
    get_fifo_size,
)

US = timing.PS_PER_US


def machine(ranks: int = 1, dpus: int = 4, chip: str = "v1B") -> aiopim.MachineConfig:
    return aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=dpus, chip=chip)


def u64(d: Any, addr: int) -> int:
    return int(d.wram[addr : addr + 8].view(np.uint64)[0])


# --- programs -------------------------------------------------------------------------------------
def hold_program(ptr_size: int = 2, data_size: int = 8) -> tuple[aiopim.Program, FifoDecl]:
    """Tasklet 0 never pops: it waits until the host clears ``active``."""
    prog = aiopim.Program("hold", nr_tasklets=1)
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("fin", ptr_size, data_size)
    prog.output_fifo("fout", ptr_size, data_size)
    view = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        view["a"] = t.view(active)
        await t.poll_until(lambda: not view["a"][0], active, label="active")

    return prog, fin


def echo_program(nr_tasklets: int, mode: str, ptr_in: int = 3, ptr_out: int = 3) -> aiopim.Program:
    """Each input u64 x comes back as the pair (x, 3x + 1)."""
    prog = aiopim.Program("echo", nr_tasklets=nr_tasklets)
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("fin", ptr_in, 8)
    fout = prog.output_fifo("fout", ptr_out, 16)
    barrier = prog.barrier("b")
    mutex = prog.mutex("m")
    partial = prog.wram("partial", np.uint64, nr_tasklets)

    async def process(t: aiopim.Tasklet, element: np.ndarray) -> None:
        t.compute(20 + 7 * t.me())
        t.view(partial)[t.me()] = int(element.view(np.uint64)[0]) * 3 if t.me() == 0 else 0

    async def reduce(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        x = int(element.view(np.uint64)[0])
        out.view(np.uint64)[:] = (x, int(t.view(partial).sum()) + 1)

    async def each(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        x = int(element.view(np.uint64)[0])
        t.compute(30 + (x % 7) * 40)  # uneven work: outputs overtake each other
        await t.flush()
        out.view(np.uint64)[:] = (x, 3 * x + 1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if mode == "all":
            await t.process_inputs_all_tasklets(fin, fout, process, reduce, barrier, active)
        else:
            await t.process_inputs_each_tasklet(fin, fout, each, mutex, active)

    return prog


# --- declaration and layout -----------------------------------------------------------------------
def test_fifo_struct_layout_in_wram() -> None:
    prog = aiopim.Program("layout", nr_tasklets=3)
    fin = prog.input_fifo("q", 5, 8)
    fout = prog.output_fifo("r", 6, 16)
    syms = prog.symbols()
    assert syms["q"].size == 32 and syms["r"].size == 40
    assert syms["__q_data"].size == 32 * 8 and syms["__r_data"].size == 64 * 16
    assert "__q_tmp_data" not in syms  # scratch is not __host
    images = {im.address: im.data for im in prog.images()}
    raw = np.frombuffer(images[syms["q"].address], dtype=np.uint8)
    assert raw[:16].tobytes() == bytes(16)  # read_ptr, write_ptr = 0
    assert raw[16:20].view(np.uint32)[0] == syms["__q_data"].address
    assert raw[20:24].view(np.uint32)[0] == prog.address_of("__q_tmp_data")
    assert raw[24:28].view(np.uint32)[0] == 5 and raw[28:32].view(np.uint32)[0] == 8
    out = np.frombuffer(images[syms["r"].address], dtype=np.uint8)
    assert out[24:28].view(np.uint32)[0] == 6 and out[28:32].view(np.uint32)[0] == 16
    assert out[32:40].tobytes() == bytes(8)  # nb_reserved
    assert fin.capacity == 32 and fout.capacity == 64 and fout.output and not fin.output
    assert syms["__q_data"].address % 8 == 0 and syms["__r_data"].address % 8 == 0


@pytest.mark.parametrize(("ptr_size", "data_size"), [(0, 8), (11, 8), (3, 0), (3, 12), (3, -8)])
def test_fifo_declaration_rejects_bad_geometry(ptr_size: int, data_size: int) -> None:
    with pytest.raises(ValueError, match=r"ptr_size|data_size"):
        aiopim.Program("bad").input_fifo("q", ptr_size, data_size)


# --- the key-sum example --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("backend", "ranks", "dpus", "per_rank"),
    # each machine on one backend, in turn (both give the same, test_keysum_is_identical_...)
    [("asyncio", 0, 1, 64), ("trio", 1, 0, 4), ("asyncio", 3, 0, 2), ("trio", 0, 15, 16)],
    # 15 DPUs of a rank of 16: DPU 7 is disabled, the others are not consecutive
    ids=["1dpu", "1rank", "3ranks", "rank_with_a_hole"],
)
def test_keysum_all_tasklets(backend: str, ranks: int, dpus: int, per_rank: int) -> None:
    r = aiopim.run(
        keysum.host, ranks, dpus, 16, "all", 7, backend=backend, machine=machine(4, per_rank)
    )
    n = dpus or ranks * per_rank
    assert r["dpus"] == n and r["checked"] == 64 * n
    assert r["wrong"] == [] and r["complete"] and r["in_order"]


def test_keysum_is_identical_on_both_backends() -> None:
    runs = [
        aiopim.run(keysum.host, 1, 0, 8, "all", 3, backend=b, machine=machine(1, 2))
        for b in ("asyncio", "trio")
    ]
    assert runs[0]["received"] == runs[1]["received"]
    assert runs[0]["virtual_time_s"] == runs[1]["virtual_time_s"]


def test_keysum_each_tasklet(backend: str) -> None:
    r = aiopim.run(keysum.host, 1, 0, 16, "each", 5, backend=backend, machine=machine(1, 2))
    assert r["wrong"] == [] and r["complete"] and r["checked"] == 128


def test_each_tasklet_outputs_can_overtake(backend: str) -> None:
    async def main() -> tuple[list[int], list[int]]:
        dpus = await DpuSet.alloc(1)
        await dpus.load(echo_program(4, "each", ptr_in=4, ptr_out=4))
        fin = dpus.link_input_fifo("fin", np.uint64)
        fout = dpus.link_output_fifo("fout", np.uint64)
        await dpus.launch(wait=False)
        for x in range(12):
            await fin.push(x)
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpus.sync()
        (pairs,) = await fout.drain()
        return [int(p[0]) for p in pairs], [int(p[1]) for p in pairs]

    keys, values = aiopim.run(main, backend=backend, machine=machine(1, 1))
    assert sorted(keys) == list(range(12))
    assert keys != sorted(keys)  # uneven work per element reorders the outputs
    assert values == [3 * k + 1 for k in keys]


def test_keysum_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert keysum.main(["--dpus", "1", "--backend", "trio"]) == 0
    out = capsys.readouterr().out
    assert "64 (key, sum) pairs checked on 1 DPUs: OK" in out
    assert "virtual time 0.00" in out


# --- host push: retries, back-pressure, partial success -------------------------------------------
def pass_read_ps(nr_dpus: int) -> int:
    return timing.parallel_wram_access_ps(16 * nr_dpus)


@pytest.mark.parametrize(("retries", "interval_us"), [(None, None), (5, 3), (0, 7)])
def test_push_to_a_full_fifo_fails_after_the_retry_budget(
    backend: str, retries: int | None, interval_us: int | None
) -> None:
    prog, _ = hold_program(ptr_size=2)

    async def main() -> tuple[int, int, int, list[int]]:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        if retries is not None:
            dpu_fifo_set_push_max_retries(link, dpus, retries)
        if interval_us is not None:
            dpu_fifo_set_time_for_push_retries(link, dpus, interval_us)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        elem = np.arange(1, dtype=np.uint64)
        dpu_fifo_prepare_xfer(dpus, link, elem)
        for i in range(4):  # fills both FIFOs (capacity 4)
            elem[0] = 100 + i
            await dpu_fifo_push_xfer(dpus, link, 1)  # NO_RESET
        t0 = aiopim.current_emulator().now_ps
        with pytest.raises(DpuError) as err:
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        elapsed = aiopim.current_emulator().now_ps - t0
        assert err.value.code == DPU_ERR_WRAM_FIFO_FULL
        assert "still full" in str(err.value)
        dpu_prepare_xfer(dpus, np.zeros(1, np.uint64))
        await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)
        await dpu_sync(dpus)
        d = dpus.dpu_list[0]
        s = prog.address_of("fin")
        data = prog.address_of("__fin_data")
        ring = d.wram[data : data + 32].view(np.uint64).tolist()
        return elapsed, u64(d, s), u64(d, s + 8), ring

    elapsed, rd, wr, ring = aiopim.run(main, backend=backend, machine=machine(1, 2))
    n = timing.FIFO_PUSH_MAX_RETRIES if retries is None else retries
    us = timing.FIFO_TIME_FOR_RETRY_US if interval_us is None else interval_us
    # n + 1 attempts, each a pointer read followed by a sleep (the SDK sleeps, then compares)
    assert elapsed == (n + 1) * (pass_read_ps(2) + us * US)
    assert (rd, wr) == (0, 4) and ring == [100, 101, 102, 103]


def test_partial_success_keeps_the_elements_that_fit(backend: str) -> None:
    prog, _ = hold_program(ptr_size=1)

    async def main() -> tuple[int, list[tuple[int, int]], list[int]]:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        dpu_fifo_set_push_max_retries(link, dpus, 2)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        first = dpus.dpus[0]
        for v in (1, 2):  # fill DPU 0 only, through a single-DPU set
            dpu_fifo_prepare_xfer(first, link, np.array([v], np.uint64))
            await dpu_fifo_push_xfer(first, link, DPU_XFER_DEFAULT)
        dpu_fifo_prepare_xfer(dpus, link, np.array([7], np.uint64))
        t0 = aiopim.current_emulator().now_ps
        with pytest.raises(DpuError) as err:
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        assert err.value.code == DPU_ERR_WRAM_FIFO_FULL
        assert "DPU(s) 0.0.0 " in str(err.value)
        elapsed = aiopim.current_emulator().now_ps - t0
        sizes = [get_fifo_size(link, d) for d in dpus.dpus]
        dpus_ptrs = [
            (u64(d, prog.address_of("fin")), u64(d, prog.address_of("fin") + 8))
            for d in dpus.dpu_list
        ]
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpu_sync(dpus)
        second = dpus.dpu_list[1]
        data = prog.address_of("__fin_data")
        assert sizes == [2, 1]
        return elapsed, dpus_ptrs, second.wram[data : data + 16].view(np.uint64).tolist()

    elapsed, ptrs, ring = aiopim.run(main, backend=backend, machine=machine(1, 2))
    assert ptrs == [(0, 2), (0, 1)]
    assert ring == [7, 0]  # DPU 1 had room and kept its element
    element_write = timing.parallel_wram_access_ps(8) * 2  # element, then pointer
    assert elapsed == 3 * (pass_read_ps(2) + 10 * US) + element_write


def test_sticky_retry_reports_full_although_the_last_pass_pushed(backend: str) -> None:
    """QUIRK reproduced (sdk-reference.md §4.3 step 4): success on pass max_retries+1 still
    reports FULL."""
    prog = aiopim.Program("late_pop", nr_tasklets=1)
    fin = prog.input_fifo("fin", 1, 8)
    active = prog.host("active", np.uint64, 1, init=[1])

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        s = prog.address_of("fin")
        await t.poll_until(lambda: u64(t.dpu, s + 8) == 2, fin)  # full
        t.compute(1000)  # 27.5 µs, inside the host's first 100 µs sleep
        await t.flush()
        t.input_fifo_pop(fin)
        a = t.view(active)
        await t.poll_until(lambda: not a[0], active)

    async def main() -> tuple[int, str]:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        dpu_fifo_set_push_max_retries(link, dpus, 1)
        dpu_fifo_set_time_for_push_retries(link, dpus, 100)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        for v in (1, 2, 3):
            dpu_fifo_prepare_xfer(dpus, link, np.array([v], np.uint64))
            try:
                await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
            except DpuError as exc:
                message = str(exc)
                code = exc.code
        d = dpus.dpu_list[0]
        wr = u64(d, prog.address_of("fin") + 8)
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpu_sync(dpus)
        assert code == DPU_ERR_WRAM_FIFO_FULL
        return wr, message

    wr, message = aiopim.run(main, backend=backend, machine=machine(1, 1))
    assert wr == 3  # the third element did go in
    assert "pushed on the last pass" in message


def test_async_push_failure_is_sticky(backend: str) -> None:
    prog, _ = hold_program(ptr_size=1)

    async def main() -> int:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        dpu_fifo_set_push_max_retries(link, dpus, 0)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        dpu_fifo_prepare_xfer(dpus, link, np.zeros(1, np.uint64))
        for _ in range(3):
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_ASYNC | 1)
        await aiopim.current_emulator().delay(100 * US)
        with pytest.raises(DpuError) as err:
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_ASYNC | 1)
        return err.value.value

    value = aiopim.run(main, backend=backend, machine=machine(1, 1))
    assert value == 0x80000000 | 7 << 16 | 15  # PARALLEL_FIFO_PUSH, WRAM_FIFO_FULL


# --- output flush ---------------------------------------------------------------------------------
def test_flush_copies_the_ring_and_moves_only_the_read_pointer(backend: str) -> None:
    prog = aiopim.Program("producer", nr_tasklets=1)
    fout = prog.output_fifo("out", 2, 8)

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        for v in range(1, 7):
            await t.poll_until(lambda: not t.is_output_fifo_full(fout), fout)
            t.output_fifo_push(fout, np.array([v * 11], np.uint64))
            t.compute(50)
            await t.flush()

    async def main() -> list[list[int]]:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        link = dpu_link_output_fifo(dpus, "out")
        ring = np.zeros(link.ring_bytes, np.uint8)
        dpu_fifo_prepare_xfer(dpus, link, ring)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        seen: list[list[int]] = []
        d = dpus.dpu_list[0]
        s = prog.address_of("out")
        while sum(len(b) for b in seen) < 6:
            await aiopim.current_emulator().delay(3 * US)
            before_wr = u64(d, s + 8)
            await dpu_fifo_push_xfer(dpus, link, 1)
            one = dpus.dpus[0]
            got = [
                int(get_fifo_elem(link, one, ring, i).view(np.uint64)[0])
                for i in range(get_fifo_size(link, one))
            ]
            assert u64(d, s) == int(link.rank_fifo(d.rank).ptrs[0][1])  # rd := snapshot wr
            assert u64(d, s + 8) >= before_wr  # the DPU-owned write_ptr is not touched
            if got:
                seen.append(got)
        await dpu_sync(dpus)
        await dpu_fifo_push_xfer(dpus, link, 0)
        seen.append(
            [
                int(get_fifo_elem(link, dpus.dpus[0], ring, i).view(np.uint64)[0])
                for i in range(get_fifo_size(link, dpus.dpus[0]))
            ]
        )
        return seen

    seen = aiopim.run(main, backend=backend, machine=machine(1, 1))
    flat = [v for batch in seen for v in batch]
    assert flat == [11, 22, 33, 44, 55, 66]
    assert len(seen) >= 3 and seen[-1] == []  # several partial drains, nothing left at the end


def test_fifo_elements_read_from_any_buffer_layout(backend: str) -> None:
    # a flat byte ring is sliced as it is; other buffers go through the transfer checks
    prog = aiopim.Program("producer", nr_tasklets=1)
    fout = prog.output_fifo("out", 2, 8)

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        for v in (7, 8, 9):
            t.output_fifo_push(fout, np.array([v], np.uint64))
        await t.flush()

    async def main() -> tuple[list[list[int]], bool, int]:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        await dpu_launch(dpus, DPU_SYNCHRONOUS)
        link = dpu_link_output_fifo(dpus, "out")
        ring = np.zeros(link.ring_bytes, np.uint8)
        dpu_fifo_prepare_xfer(dpus, link, ring)
        await dpu_fifo_push_xfer(dpus, link, 0)
        one = dpus.dpus[0]
        wide = np.zeros(2 * link.ring_bytes, np.uint8)
        wide[::2] = ring  # a strided view of the same bytes
        layouts = [ring, ring.view(np.uint64), bytearray(ring.tobytes()), wide[::2]]
        seen = [
            [int(get_fifo_elem(link, one, buf, i).view(np.uint64)[0]) for i in range(3)]
            for buf in layouts
        ]
        in_ring = np.shares_memory(get_fifo_elem(link, one, ring, 0), ring)
        with pytest.raises(DpuError) as short:
            get_fifo_elem(link, one, ring[:-1], 0)
        return seen, in_ring, short.value.code

    seen, in_ring, code = aiopim.run(main, backend=backend, machine=machine(1, 1))
    assert seen == [[7, 8, 9]] * 4
    assert in_ring  # the element is read in the ring itself, not copied
    assert code == DPU_ERR_INVALID_MEMORY_TRANSFER


def test_output_stream_yields_every_element(backend: str) -> None:
    async def main() -> list[tuple[int, int, int]]:
        dpus = await DpuSet.alloc(3)
        await dpus.load(echo_program(2, "all", ptr_in=2, ptr_out=2))
        fin = dpus.link_input_fifo("fin", np.uint64)
        fout = dpus.link_output_fifo("fout", np.uint64)
        await dpus.launch(wait=False)
        got: list[tuple[int, int, int]] = []

        async def consume() -> None:
            async for i, pair in fout.stream(poll_us=5):
                got.append((i, int(pair[0]), int(pair[1])))

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            for x in range(10):
                await fin.push([x, 100 + x, 200 + x])
            await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        return got

    got = aiopim.run(main, backend=backend, machine=machine(1, 3))
    for i in range(3):
        mine = [(x, y) for j, x, y in got if j == i]
        assert mine == [(100 * i + x, 3 * (100 * i + x) + 1) for x in range(10)]


@pytest.mark.parametrize("cancel_after_us", [0, 1, 3])
def test_a_cancelled_drain_keeps_what_its_flush_took_out(
    backend: str, cancel_after_us: int
) -> None:
    """The flush jobs of a cancelled drain still run and move the read pointers: their
    elements are kept, and the next drain returns them (none is lost, none comes twice)."""

    async def main() -> tuple[list[list[int]], list[list[int]]]:
        dpus = await DpuSet.alloc(4)
        await dpus.load(echo_program(2, "all"))
        fin = dpus.link_input_fifo("fin", np.uint64)
        fout = dpus.link_output_fifo("fout", np.uint64)
        await dpus.launch(wait=False)
        for k in range(3):
            await fin.push([10 * i + k for i in range(4)])
        await anyio.sleep(100e-6)  # every result is in the output FIFOs
        early: list[np.ndarray] = []

        async def drain() -> None:
            early.extend(await fout.drain())

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            await anyio.sleep(cancel_after_us * 1e-6)
            tg.cancel_scope.cancel()  # from another task, at some await of the drain
        assert early == []
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpus.sync()
        batches = await fout.drain()
        return [[int(x) for x in b[:, 0]] for b in batches], [
            [int(x) for x in b[:, 0]] for b in await fout.drain()
        ]

    got, after = aiopim.run(main, backend=backend, machine=machine(1, 4))
    assert got == [[10 * i + k for k in range(3)] for i in range(4)]  # 12 of 12
    assert after == [[], [], [], []]


# --- errors ---------------------------------------------------------------------------------------
def test_link_errors(backend: str) -> None:
    prog = aiopim.Program("errs")
    prog.input_fifo("good", 2, 8)
    prog.host("plain", np.uint8, 64)
    prog.mram("inmram", np.uint8, 64)
    prog.mram("__inmram_data", np.uint8, 64)

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        pass

    async def main() -> dict[str, int]:
        dpus = await dpu_alloc(1, "")
        codes: dict[str, int] = {}
        for what, name in [
            ("unloaded", "good"),
            ("missing", "nope"),
            ("mram", "inmram"),
            ("no_data", "plain"),
        ]:
            if what == "missing":
                await dpu_load(dpus, prog)
            try:
                dpu_link_input_fifo(dpus, name)
            except DpuError as exc:
                codes[what] = exc.code
        link = dpu_link_input_fifo(dpus, "good")
        with pytest.raises(DpuError) as small:
            dpu_fifo_prepare_xfer(dpus, link, np.zeros(4, np.uint8))
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        codes["small_buffer"] = small.value.code
        dpu_fifo_link_free(link)
        with pytest.raises(DpuError) as freed:
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        codes["freed"] = freed.value.code
        other = await dpu_alloc(1, "")
        await dpu_load(other, prog)
        link2 = dpu_link_input_fifo(dpus, "good")
        with pytest.raises(DpuError) as foreign:
            dpu_fifo_prepare_xfer(other, link2, np.zeros(1, np.uint64))
        codes["foreign"] = foreign.value.code
        return codes

    codes = aiopim.run(main, backend=backend, machine=machine(2, 1))
    assert codes == {
        "unloaded": DPU_ERR_NO_PROGRAM_LOADED,
        "missing": DPU_ERR_UNKNOWN_SYMBOL,
        "mram": DPU_ERR_INVALID_WRAM_ACCESS,
        "no_data": DPU_ERR_UNKNOWN_SYMBOL,
        "small_buffer": DPU_ERR_INVALID_MEMORY_TRANSFER,
        "freed": DPU_ERR_INTERNAL,
        "foreign": DPU_ERR_INVALID_DPU_SET,
    }


def test_v1a_has_no_parallel_wram_access(backend: str) -> None:
    prog, _ = hold_program()

    async def main() -> tuple[int, int]:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")  # linking only reads WRAM: allowed
        dpu_fifo_prepare_xfer(dpus, link, np.zeros(1, np.uint64))
        with pytest.raises(DpuError) as fifo:
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        dpu_prepare_xfer(dpus, np.zeros(1, np.uint64))
        with pytest.raises(DpuError) as xfer:
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)
        return fifo.value.code, xfer.value.code

    codes = aiopim.run(main, backend=backend, machine=machine(1, 1, chip="v1A"))
    assert codes == (DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER,) * 2


def test_ptr_size_above_8_warns_about_the_sdk() -> None:
    prog = aiopim.Program("big")
    prog.input_fifo("q", 9, 8)

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        pass

    async def main() -> int:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        with pytest.warns(aiopim.DpuQuirkWarning, match="uint8"):
            link = dpu_link_input_fifo(dpus, "q")
        return link.capacity

    assert aiopim.run(main, machine=machine(1, 1)) == 512


def test_fast_path_quirk_pushes_garbage_to_dpus_without_a_buffer(backend: str) -> None:
    prog, _ = hold_program(ptr_size=2)

    async def main() -> list[int]:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        dpu_fifo_prepare_xfer(dpus.dpus[0], link, np.array([5], np.uint64))
        with pytest.warns(aiopim.DpuQuirkWarning, match="garbage"):
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        wrs = [u64(d, prog.address_of("fin") + 8) for d in dpus.dpu_list]
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpu_sync(dpus)
        return wrs

    assert aiopim.run(main, backend=backend, machine=machine(1, 2)) == [1, 1]


def test_fast_path_advances_each_dpus_own_write_pointer(backend: str) -> None:
    # DPU 0 takes two elements that DPU 1 (full) refuses, so their write pointers differ by 2
    # (4 and 2) while their slots agree; then both are empty and the push takes the fast path.
    # The SDK broadcasts DPU 0's pointer + 1 and moves DPU 1's from 2 to 5: three elements in
    # a two-slot FIFO. aiopim warns and advances each DPU's own pointer (QUIRK fixed).
    prog, _ = hold_program(ptr_size=1)

    async def main() -> tuple[list[int], list[int], list[int]]:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        dpu_fifo_set_push_max_retries(link, dpus, 0)
        d0, d1 = dpus.dpus

        async def push(a: int, b: int) -> None:
            dpu_fifo_prepare_xfer(d0, link, np.array([a], np.uint64))
            dpu_fifo_prepare_xfer(d1, link, np.array([b], np.uint64))
            await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)

        async def set_read_ptr(d: Any, rd: int) -> None:  # what popping would do
            await d.copy_to("fin", np.array([rd], np.uint64))

        await push(1, 1)
        await push(2, 2)  # both full
        for rd0, value in [(2, 3), (3, 4)]:
            await set_read_ptr(d0, rd0)
            with pytest.raises(DpuError) as info:
                await push(value, value)  # DPU 0 takes it, DPU 1 is full
            assert info.value.code == DPU_ERR_WRAM_FIFO_FULL
        await set_read_ptr(d0, 4)
        await set_read_ptr(d1, 2)
        wr = prog.address_of("fin") + 8
        before = [u64(d, wr) for d in dpus.dpu_list]
        with pytest.warns(aiopim.DpuQuirkWarning, match="from 2 to 5"):
            await push(5, 6)
        after = [u64(d, wr) for d in dpus.dpu_list]
        sizes = [get_fifo_size(link, d) for d in dpus.dpus]
        return before, after, sizes

    before, after, sizes = aiopim.run(main, backend=backend, machine=machine(1, 2))
    assert before == [4, 2]
    assert after == [5, 3]  # the SDK would leave [5, 5]
    assert sizes == [1, 1]


def test_toolkit_program_with_skewed_write_pointers_is_conserved(backend: str) -> None:
    # aiopim.testing's echo program: DPU 1 needs three times as long per element as DPU 0, so
    # with no retries it refuses two of the pushes DPU 0 takes; once both are empty their
    # write pointers are 4 and 2 and the last push takes the fast path. With the SDK's
    # broadcast DPU 1's pointer went from 2 to 5 and the toolkit's log failed with
    # "cannot attribute 2 write-pointer increment(s)".
    from aiopim.testing import (
        FifoDelay,
        FifoGeometry,
        FifoPush,
        FifoRetries,
        FifoStop,
        FifoStream,
        FifoSync,
        Pim,
        fifo_host,
    )

    m = machine(1, 2)
    stream = FifoStream(FifoGeometry(1, 8), FifoGeometry(4, 16), 1, "all", 2000)
    ops: list[Any] = [FifoRetries(0, 0)]
    for j in range(6):
        ops += [FifoPush((3 * j, 3 * j + 2)), FifoDelay(20)]
    ops += [FifoDelay(2000), FifoPush((100, 101)), FifoStop(), FifoSync()]
    log = Pim(backend).run(fifo_host, m, stream, ops, machine=m)
    assert [i for i, e in enumerate(log.errors) if e] == [5, 7, 9, 11]
    assert log.errors[5] == DPU_ERR_WRAM_FIFO_FULL
    assert any("moving DPU 0.0.1's from 2 to 5" in q for q in log.quirks)
    assert log.drained == [(0, 0), (0, 3), (0, 9), (0, 15), (1, 2), (1, 5), (0, 100), (1, 101)]
    log.assert_conserved()


def test_generated_fifo_program_with_a_pointer_the_sdk_moves_back(backend: str) -> None:
    # found by aiopim.testing.fifo_scenarios against the SDK's broadcast: the asynchronous
    # push of op 9 takes the fast path on rank 0, where DPU 0 is at 4 and DPU 1 at 6; the SDK
    # would move DPU 1's write pointer from 6 back to 5 (the toolkit then failed with
    # "cannot attribute -1 write-pointer increment(s)")
    from aiopim.testing import (
        FifoDrain,
        FifoGeometry,
        FifoPush,
        FifoStop,
        FifoStream,
        FifoSync,
        Pim,
        assert_never_deadlocks,
        fifo_host,
    )

    m = machine(2, 3)
    stream = FifoStream(FifoGeometry(1, 8), FifoGeometry(1, 8), 1, "all", 20)
    n = None
    ops: list[Any] = [
        FifoPush((0, 0, 0, 0, 0, n)),
        FifoPush((0, 0, 0, 0, 0, n)),
        FifoPush((0, 0, 1, n, n, n)),
        FifoPush((0, n, n, n, n, n)),
        FifoPush((0, 0, 0, 0, n, n)),
        FifoDrain(),
        FifoPush((n, 0, n, 0, 0, n)),
        FifoDrain(),
        FifoPush((n, 0, n, 0, 0, 0)),
        FifoPush((0, 0, 0, 0, 0, 0), wait=False),
        FifoStop(wait=False),
        FifoSync(safe=True),
        FifoDrain(),
    ]
    log = assert_never_deadlocks(Pim(backend).execute(fifo_host, m, stream, ops, machine=m))
    assert log.errors == [None] * 4 + [DPU_ERR_WRAM_FIFO_FULL] + [None] * 8
    assert any("moving DPU 0.0.1's from 6 to 5" in q for q in log.quirks)
    assert len(log.drained) == 38 and sum(log.accepted) == 38
    log.assert_conserved()


# --- polling, wake-ups and deadlocks --------------------------------------------------------------
def test_polling_tasklets_take_pipeline_slots_without_python_steps(backend: str) -> None:
    n = 20_000  # 0.6 ms at 1/12 of the pipeline: done before the host stops the pollers
    prog = aiopim.Program("pollers", nr_tasklets=12)
    active = prog.host("active", np.uint64, 1, init=[1])
    done_at = prog.host("done_at", np.uint64, 1)

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            t.compute(n)
            await t.flush()
            t.view(done_at)[0] = t.dpu.kernel.now - t.dpu.boot_time
        else:
            a = t.view(active)
            await t.poll_until(lambda: not a[0], active)

    async def main() -> tuple[int, int]:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        await aiopim.current_emulator().delay(1000 * US)
        steps = aiopim.current_emulator().kernel.events_processed
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpu_sync(dpus)
        (t_done,) = (await dpus.copy_from("done_at", np.uint64))[0]
        return int(t_done), steps

    t_done, steps = aiopim.run(main, backend=backend, machine=machine(1, 1))
    assert t_done == n * 12 * V1B_CYCLE_PS  # 11 pollers + 1 worker share the revolver
    assert steps < 200  # 1 ms of polling by 11 tasklets costs no per-poll events


def test_poll_wakes_at_the_host_write(backend: str) -> None:
    prog = aiopim.Program("waker", nr_tasklets=1)
    fin = prog.input_fifo("fin", 2, 8)
    woke = prog.host("woke", np.uint64, 1)

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        await t.poll_until(lambda: not t.is_input_fifo_empty(fin), fin)
        await t.flush()
        t.view(woke)[0] = t.dpu.kernel.now

    async def main() -> tuple[int, int]:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        link = dpu_link_input_fifo(dpus, "fin")
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        await aiopim.current_emulator().delay(50 * US)
        t0 = aiopim.current_emulator().now_ps
        dpu_fifo_prepare_xfer(dpus, link, np.ones(1, np.uint64))
        await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
        await dpu_sync(dpus)
        return t0, int((await dpus.copy_from("woke", np.uint64))[0][0])

    t0, woke_at = aiopim.run(main, backend=backend, machine=machine(1, 1))
    # fast path: pointer read, element write, pointer broadcast; then one poll iteration
    write_done = t0 + pass_read_ps(1) + 2 * timing.parallel_wram_access_ps(8)
    check = (timing.FIFO_POLL_LOOP_INSTRUCTIONS + timing.FIFO_CHECK_INSTRUCTIONS) * 11
    assert woke_at == write_done + check * V1B_CYCLE_PS


def test_sync_before_the_stop_write_is_a_reported_deadlock(backend: str) -> None:
    async def main() -> None:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, keysum.build_program(4, "all"))
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        await dpu_sync(dpus)  # the classic mistake: the DPU waits for "active" forever
        dpu_prepare_xfer(dpus, np.zeros(1, np.uint64))
        await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)

    with pytest.raises(aiopim.DeadlockError) as e:
        aiopim.run(main, backend=backend, machine=machine(1, 1))
    text = str(e.value)
    assert "SYNC job(s) on rank(s) [0]" in text
    assert "rank 0: head job SYNC waiting for the rank's DPUs to stop" in text
    assert "DPU 0.0.0 tasklets 0-3 waiting on input FIFO 'input_fifo'" in text


def test_fault_inside_the_fifo_loop_reaches_the_host(backend: str) -> None:
    prog = aiopim.Program("fifo_fault", nr_tasklets=2)
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("fin", 2, 8)
    fout = prog.output_fifo("fout", 2, 8)
    mutex = prog.mutex("m")

    async def process(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        t.dpu_assert(element.view(np.uint64)[0] != 13, "unlucky input")
        out[:] = element

    @prog.main
    async def main_dpu(t: aiopim.Tasklet) -> None:
        await t.process_inputs_each_tasklet(fin, fout, process, mutex, active)

    async def main() -> int:
        dpus = await DpuSet.alloc(1)
        await dpus.load(prog)
        q = dpus.link_input_fifo("fin", np.uint64)
        await dpus.launch(wait=False)
        await q.push(13)
        with pytest.raises(DpuError) as err:
            await dpus.sync()
        assert dpus.faults[0] is not None and dpus.faults[0].reason == "unlucky input"
        return err.value.code

    assert aiopim.run(main, backend=backend, machine=machine(1, 1)) == DPU_ERR_DPU_FAULT


# --- conservation: a property over geometries, tasklets, drain patterns and schedules -------------
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    ptr_in=st.integers(1, 3),
    ptr_out=st.integers(1, 3),
    count=st.integers(0, 14),
    tasklets=st.integers(1, 4),
    nr_dpus=st.integers(1, 3),
    mode=st.sampled_from(["all", "each"]),
    drain_gap_us=st.integers(1, 40),
    explore=st.booleans(),
    seed=st.integers(0, 2**16),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_every_pushed_element_comes_back_exactly_once(
    ptr_in: int,
    ptr_out: int,
    count: int,
    tasklets: int,
    nr_dpus: int,
    mode: str,
    drain_gap_us: int,
    explore: bool,
    seed: int,
    backend: str,
) -> None:
    async def main() -> tuple[list[tuple[int, int]], list[list[int]], list[list[int]]]:
        dpus = await DpuSet.alloc(nr_dpus)
        await dpus.load(echo_program(tasklets, mode, ptr_in, ptr_out))
        fin: InputFifo = dpus.link_input_fifo("fin", np.uint64)
        fout: OutputFifo = dpus.link_output_fifo("fout", np.uint64)
        fin.max_retries, fin.time_for_retry_us = 3, 2  # let back-pressure fail pushes
        pushed: list[list[int]] = [[] for _ in range(nr_dpus)]
        back: list[list[int]] = [[] for _ in range(nr_dpus)]
        bad: list[tuple[int, int]] = []  # (x, y) with y != 3x + 1
        await dpus.launch(wait=False)
        done = anyio.Event()

        async def drainer() -> None:
            while True:  # a sync would queue behind the DPUs, which may wait for a drain
                finished = done.is_set() and not any(r.dpus_running for r in dpus.rank_list)
                try:
                    drained = await fout.drain()
                # a failed push flushed the queued drain (sdk-reference.md §2.2)
                except DpuError as exc:
                    assert exc.code == DPU_ERR_WRAM_FIFO_FULL
                    continue
                for i, pairs in enumerate(drained):
                    for x, y in pairs.tolist():
                        back[i].append(x)
                        if y != 3 * x + 1:
                            bad.append((x, y))
                if finished:
                    return
                await aiopim.current_emulator().delay(drain_gap_us * US)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drainer)
            link = fin.link
            for k in range(count):
                values = [1000 * i + k for i in range(nr_dpus)]
                before = [_wr(link, d) for d in dpus.dpu_list]
                try:
                    await fin.push(values)
                except DpuError as exc:
                    assert exc.code == DPU_ERR_WRAM_FIFO_FULL
                for i, d in enumerate(dpus.dpu_list):
                    if _wr(link, d) > before[i]:
                        pushed[i].append(values[i])
            await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
            done.set()
        await dpus.sync()
        return bad, pushed, back

    bad, pushed, back = aiopim.run(
        main, backend=backend, seed=seed, explore=explore, machine=machine(1, 3)
    )
    assert bad == []
    for mine, returned in zip(pushed, back, strict=True):
        assert Counter(returned) == Counter(mine)  # nothing lost, nothing duplicated
        if mode == "all":
            assert returned == mine  # one output per input, in order


def _wr(link: Any, d: Any) -> int:
    return u64(d, link.struct.offset + 8)


def test_blocking_callback_drains_inline_on_its_own_rank(backend: str) -> None:
    """A synchronous flush from a blocking callback runs inline (sdk-reference.md §3.4), not
    behind it."""

    async def main() -> list[int]:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, echo_program(2, "all", ptr_in=3, ptr_out=3))
        fin = dpu_link_input_fifo(dpus, "fin")
        fout = dpu_link_output_fifo(dpus, "fout")
        rings = [np.zeros(fout.ring_bytes, np.uint8) for _ in range(2)]
        got: list[int] = []

        async def drain(rank: DpuSet, rank_id: int, _: Any) -> int:
            for (dpu, _i), ring in zip(dpu_foreach(rank), rings, strict=True):
                dpu_fifo_prepare_xfer(dpu, fout, ring)
            await dpu_fifo_push_xfer(rank, fout, DPU_XFER_DEFAULT)  # inline: we hold the rank
            for dpu, i in dpu_foreach(rank):
                n = get_fifo_size(fout, dpu)
                got.extend(
                    int(get_fifo_elem(fout, dpu, rings[i], k).view(np.uint64)[1]) for k in range(n)
                )
            return 0

        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        for x in range(5):
            dpu_fifo_prepare_xfer(dpus, fin, np.array([x], np.uint64))
            await dpu_fifo_push_xfer(dpus, fin, DPU_XFER_DEFAULT)
        await aiopim.current_emulator().delay(200 * US)
        await dpu_callback(dpus, drain, None, DPU_CALLBACK_PARALLEL)
        await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpu_sync(dpus)
        return got

    got = aiopim.run(main, backend=backend, machine=machine(1, 2))
    assert sorted(got) == sorted([3 * x + 1 for x in range(5)] * 2)
