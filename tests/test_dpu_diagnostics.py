"""Faults (sdk-reference.md §5.8), the performance counter (§5.9), printf and dpu_log_read
(§5.10)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers import emu, run_time_ps
from runtime_helpers import dma_ps, mram_bytes, run_dpu

import aiopim
from aiopim import timing
from aiopim._machine._dpulog import encode_printf
from aiopim.dpu import (
    COUNT_CYCLES,
    COUNT_ENABLE_BOTH,
    COUNT_INSTRUCTIONS,
    COUNT_NOTHING,
    FAULT_ASSERT,
    FAULT_DIVISION_BY_ZERO,
    FAULT_HALT,
    FAULT_PERFCOUNTER_CONFIG,
    FAULT_PRINTF_OVERFLOW,
    decode_log,
)
from aiopim.sdk import (
    DPU_ERR_DPU_FAULT,
    DPU_ERR_LOG_BUFFER_TOO_SMALL,
    DPU_ERR_LOG_CONTEXT_MISSING,
    DpuError,
    dpu_log_read,
)


# --- faults ---------------------------------------------------------------------------------
def _faulting(body: str) -> aiopim.Program:
    prog = aiopim.Program(f"fault-{body}", nr_tasklets=2)
    m = prog.mram("m", np.uint8, 64)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() != 1:
            return
        buf = t.mem_alloc(16)
        if body == "div":
            t.view(buf, np.int32, 2)[0] = 7 // int(t.view(buf, np.int32, 2)[1])
        elif body == "assert":
            t.dpu_assert(t.me() == 0, "me() == 0")
        elif body == "halt":
            t.halt()
        elif body == "memory":
            t.view(70000, np.uint32)
        elif body == "unaligned":
            t.view(buf + 2, np.uint32)
        elif body == "dma-size":
            await t.mram_read(m, buf, 12)
        elif body == "dma-range":
            await t.mram_read(t.mram_address(m, 64 << 20), buf, 8)

    return prog


@pytest.mark.parametrize(
    ("body", "code", "reason"),
    [
        ("div", FAULT_DIVISION_BY_ZERO, "division by zero"),
        ("assert", FAULT_ASSERT, "me() == 0"),
        ("halt", FAULT_HALT, "halt"),
        ("memory", None, "memory fault"),
        ("unaligned", None, "memory fault"),
        ("dma-size", None, "DMA fault"),
        ("dma-range", None, "DMA fault"),
    ],
)
def test_faults_stop_the_dpu_with_their_code(body: str, code: int | None, reason: str) -> None:
    out = run_dpu(_faulting(body))
    assert out.error is not None and out.error.code == DPU_ERR_DPU_FAULT
    assert out.fault is not None
    assert out.fault.code == code and out.fault.tasklet == 1
    assert reason in out.fault.reason


# --- performance counter ----------------------------------------------------------------------
def test_perfcounter_cycles_and_instructions_are_multiples_of_16() -> None:
    prog = aiopim.Program("perf", nr_tasklets=1)
    got: dict[str, int] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.perfcounter_config(COUNT_CYCLES, True)
        t.compute(1000)
        got["cycles"] = await t.perfcounter_get()
        await t.perfcounter_config(COUNT_INSTRUCTIONS, True)
        t.compute(1001)
        got["instructions"] = await t.perfcounter_get()
        got["frozen_from"] = await t.perfcounter_config(COUNT_NOTHING, False)
        t.compute(500)
        got["frozen"] = await t.perfcounter_get()

    out = run_dpu(prog)
    assert out.fault is None
    cycles = (1000 + timing.PERFCOUNTER_GET_INSTRUCTIONS) * timing.REVOLVER_CYCLES
    assert got["cycles"] == cycles & ~15
    instr = 1001 + timing.PERFCOUNTER_GET_INSTRUCTIONS
    assert got["instructions"] == instr & ~15
    frozen = (instr + timing.PERFCOUNTER_CONFIG_INSTRUCTIONS) & ~15
    assert got["frozen_from"] == frozen and got["frozen"] == frozen
    assert all(v % 16 == 0 for v in got.values())


def test_perfcounter_both_is_v1b_only() -> None:
    prog = aiopim.Program("perf", nr_tasklets=1)
    got: list[tuple[int, int]] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.perfcounter_config(COUNT_ENABLE_BOTH, True)
        t.compute(160)
        got.append(await t.perfcounter_get_both())

    assert run_dpu(prog, chip="v1B").fault is None
    n = 160 + timing.PERFCOUNTER_GET_INSTRUCTIONS
    assert got == [((n * timing.REVOLVER_CYCLES) & ~15, n & ~15)]
    out = run_dpu(prog, chip="v1A")
    assert out.fault is not None and out.fault.code == FAULT_PERFCOUNTER_CONFIG


# --- printf ---------------------------------------------------------------------------------
def test_printf_encoding_matches_the_runtime() -> None:
    raw = encode_printf("x=%d s=%s%%\n", (-2, "ab"))
    assert raw == b"%s%d%s%s%s\0x=\0" + (-2 & 0xFFFFFFFF).to_bytes(4, "little") + (
        b" s=\0ab\0%\n\0"
    )
    assert encode_printf("%i %lu", (1, 2))[:8] == b"%d%s%lu\0"


@pytest.mark.parametrize(
    ("fmt", "args", "text"),
    [
        ("hello %d\n", (42,), "hello 42\n"),
        ("%u|%x|%X|%o", (-1, 255, 255, 8), "4294967295|ff|FF|10"),
        ("%lu %ld", (2**40, -(2**40)), f"{2**40} {-(2**40)}"),
        ("%5d|%-4s|%c", (7, "ab", "z"), "    7|ab  |z"),
        ("%.3f %e", (3.14159, 1e10), "3.142 1.000000e+10"),
        ("100%%", (), "100%"),
        ("%p", (0x40,), "0x40"),
    ],
)
def test_printf_round_trip(fmt: str, args: tuple[object, ...], text: str) -> None:
    assert decode_log(encode_printf(fmt, args) + bytes(8)) == text


def test_printf_g_is_not_understood_by_the_host_reader() -> None:
    # QUIRK (dpu_log.c): the DPU stores 8 bytes for %g but the host prints "%g" itself and
    # consumes 4, so the rest of the message is read out of step
    out = decode_log(encode_printf("%g then %d", (1.5, 3)) + bytes(8))
    assert out.startswith("%g") and "then 3" not in out


def test_printf_log_read_over_boots(backend: str) -> None:
    prog = aiopim.Program("hello", nr_tasklets=2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.printf("tasklet %d of %d says %s\n", t.me(), t.nr_tasklets, "hi")

    out = run_dpu(prog, launches=2, log=True, backend=backend)
    # the write pointer is reset at each boot: only the last boot's messages remain
    assert out.log == ("=== DPU#0x0 ===\ntasklet 0 of 2 says hi\ntasklet 1 of 2 says hi\n")
    # the bytes are really in MRAM, where the SDK's reader finds them
    assert mram_bytes(out, prog, "__stdout_buffer", 8).tobytes() == b"%s%d%s%d"
    assert prog.symbols()["__stdout_buffer"].size == 1 << 20


def test_printf_costs_instructions_and_8_byte_dmas() -> None:
    prog = aiopim.Program("cost", nr_tasklets=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        # "%s\0abc\n\0" is 8 bytes: one cache flush, then the closing flush of the (empty,
        # zero-filled) cache -> two 8-byte writes, one after the other
        t.printf("abc\n")

    out = run_dpu(prog)
    instr = timing.PRINTF_INSTRUCTIONS + 8 * timing.PRINTF_PER_BYTE_INSTRUCTIONS
    assert out.run_ps == [run_time_ps(instr) + 2 * dma_ps(8, write=True)]
    assert out.runner.dma.requests == 2


def test_log_buffer_wrapped_and_printf_overflow() -> None:
    small = aiopim.Program("small", nr_tasklets=1, stdout_buffer_size=32)

    @small.main
    async def fill(t: aiopim.Tasklet) -> None:
        for i in range(3):
            t.printf("%d\n", i)  # 16 bytes each: the third wraps the 32-byte ring

    async def host() -> str:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(small)
        await dpus.launch()
        stream = io.StringIO()
        with pytest.raises(DpuError) as e:
            dpu_log_read(dpus.dpus[0], stream)
        assert e.value.code == DPU_ERR_LOG_BUFFER_TOO_SMALL
        return stream.getvalue()

    # the header is written before the error
    assert emu(ranks=1, dpus=1).run(host) == "=== DPU#0x0 ===\n"

    tiny = aiopim.Program("tiny", nr_tasklets=1, stdout_buffer_size=16)

    @tiny.main
    async def big(t: aiopim.Tasklet) -> None:
        t.printf("a message longer than sixteen bytes\n")

    out = run_dpu(tiny)
    assert out.fault is not None and out.fault.code == FAULT_PRINTF_OVERFLOW


def test_log_context_missing_without_stdio() -> None:
    prog = aiopim.Program("quiet", nr_tasklets=1, stdio=False)
    prog.main(_quiet)
    assert "__stdout_buffer" not in prog.symbols()

    async def host() -> None:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        await dpus.launch()
        with pytest.raises(DpuError) as e:
            dpus.log()  # the Pythonic API reads each DPU
        assert e.value.code == DPU_ERR_LOG_CONTEXT_MISSING

    emu(ranks=1, dpus=1).run(host)


async def _quiet(t: aiopim.Tasklet) -> None:
    t.compute(1)
