"""Virtual time, deadlocks, callbacks, job slots, cancellation and the Pythonic API."""

from __future__ import annotations

import time

import anyio
import numpy as np
import pytest
import trio
from helpers import emu, run_time_ps, spin_program

import aiopim
from aiopim import timing
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_DEFAULT,
    DPU_CALLBACK_NONBLOCKING,
    DPU_CALLBACK_SINGLE_CALL,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_TO_DPU,
    DpuError,
    dpu_alloc,
    dpu_callback,
    dpu_copy_from,
    dpu_copy_to,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_sync,
)


# --- virtual time ----------------------------------------------------------------------------
def test_host_sleep_and_timeouts_run_in_virtual_time(backend: str) -> None:
    n = 4_000_000  # 4e6 * 11 cycles * 2.5 ns = 0.11 s of DPU time

    async def main() -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []
        dpus = await dpu_alloc(4, "")
        await dpu_load(dpus, spin_program(n))

        async def ticker() -> None:
            for _ in range(3):
                await anyio.sleep(0.05)
                seen.append(("tick", aiopim.now()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await dpu_launch(dpus, DPU_ASYNCHRONOUS)
            with anyio.move_on_after(0.01) as scope:
                await dpu_sync(dpus)
            seen.append(("moved_on", aiopim.now()))
            assert scope.cancelled_caught
            with pytest.raises(TimeoutError):
                with anyio.fail_after(0.02):
                    await dpu_sync(dpus)
            seen.append(("failed", aiopim.now()))
            await dpu_sync(dpus)
            seen.append(("synced", aiopim.now()))
        return seen

    t0 = time.perf_counter()
    seen = emu(ranks=1).run(main, backend=backend)
    assert time.perf_counter() - t0 < 5  # 0.15 virtual seconds, not real ones
    load = seen[0][1] - 0.01
    names = [s for s, _ in seen]
    assert names == ["moved_on", "failed", "tick", "tick", "synced", "tick"]
    times = dict(zip(names, (t for _, t in seen), strict=False))
    assert times["moved_on"] == pytest.approx(load + 0.01, abs=1e-12)
    assert times["failed"] == pytest.approx(load + 0.03, abs=1e-12)
    run_end = (
        load
        + (timing.LAUNCH_BOOT_LATENCY_PS + run_time_ps(n) + timing.COMPLETION_POLL_LATENCY_PS)
        / 1e12
    )
    assert times["synced"] == pytest.approx(run_end, abs=1e-12)


def test_trio_sleep_uses_virtual_clock() -> None:
    async def main() -> float:
        await trio.sleep(3600)
        return aiopim.now()

    t0 = time.perf_counter()
    assert emu().run(main, backend="trio") == 3600.0
    assert time.perf_counter() - t0 < 2


# --- deadlocks -------------------------------------------------------------------------------
def _stuck_program() -> aiopim.Program:
    prog = aiopim.Program("stuck", nr_tasklets=2)
    prog.host("x", np.uint32, 2)
    b = prog.barrier("three", 3)  # only 2 tasklets will ever arrive

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.barrier_wait(b)

    return prog


def test_deadlock_is_reported_with_blocked_actors(backend: str) -> None:
    async def main() -> None:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, _stuck_program())
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        await dpu_sync(dpus)

    t0 = time.perf_counter()
    with pytest.raises(aiopim.DeadlockError) as e:
        emu(ranks=1).run(main, backend=backend)
    assert time.perf_counter() - t0 < 2
    text = str(e.value)
    assert "SYNC job(s) on rank(s) [0]" in text
    assert "DPU 0.0.0 tasklets 0-1 waiting on barrier 'three' at test_runtime_behaviour.py:" in text
    assert "DPU 0.0.0 tasklet 0 waiting on barrier 'three'" in e.value.blocked[2]
    assert "rank 0: head job SYNC waiting for the rank's DPUs to stop" in text


def test_deadlock_on_plain_event(backend: str) -> None:
    async def main() -> None:
        await anyio.Event().wait()

    with pytest.raises(aiopim.DeadlockError):
        emu().run(main, backend=backend)


def test_slot_backpressure_deadlock_when_dpu_never_stops(backend: str) -> None:
    async def main() -> None:
        dpus = await dpu_alloc(1, "nrJobsPerRank=4")
        await dpu_load(dpus, _stuck_program())
        await dpu_launch(dpus, DPU_ASYNCHRONOUS)
        for _ in range(10):  # non-parallel jobs pile up behind the never-ending DPU
            dpu_prepare_xfer(dpus, np.zeros(2, np.uint32))
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 8, DPU_XFER_ASYNC)

    with pytest.raises(aiopim.DeadlockError) as e:
        emu(ranks=1).run(main, backend=backend)
    assert "a free job slot on rank 0" in str(e.value)


# --- job slots -------------------------------------------------------------------------------
def test_job_slots_block_the_caller() -> None:
    n = 10_000

    async def main() -> list[float]:
        dpus = await dpu_alloc(1, "nrJobsPerRank=3")
        await dpu_load(dpus, spin_program(n))
        t0 = aiopim.now()
        times = []
        for _ in range(4):  # 3 slots: the 4th async launch waits for the first to finish
            await dpu_launch(dpus, DPU_ASYNCHRONOUS)
            times.append(aiopim.now() - t0)
        return times

    times = emu(ranks=1).run(main)
    assert times[:3] == [0.0, 0.0, 0.0]
    assert round(times[3] * 1e12) == timing.LAUNCH_BOOT_LATENCY_PS


# --- callbacks -------------------------------------------------------------------------------
def test_callback_flags(backend: str) -> None:
    async def main() -> list[tuple[str, int, int, float]]:
        calls: list[tuple[str, int, int, float]] = []
        dpus = await dpu_alloc(8, "")  # 2 ranks of 4

        def record(tag: str):
            async def cb(s: aiopim.DpuSet, rank_id: int, args: object) -> None:
                calls.append((tag, rank_id, len(s), aiopim.now()))
                await anyio.sleep(0.001)

            return cb

        await dpu_callback(dpus, record("default"), None, DPU_CALLBACK_DEFAULT)
        await dpu_callback(dpus, record("single"), None, DPU_CALLBACK_SINGLE_CALL)
        await dpu_callback(
            dpus, record("async-single"), None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_SINGLE_CALL
        )
        await dpu_callback(
            dpus, record("nonblocking"), None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING
        )
        await dpu_callback(dpus.dpus[5], record("dpu"), None, DPU_CALLBACK_DEFAULT)
        await dpu_sync(dpus)
        await anyio.sleep(0.01)
        return calls

    calls = emu(ranks=2, dpus=4).run(main, backend=backend)
    tags = [(t, r, n) for t, r, n, _ in calls]
    assert tags[:2] == [("default", 0, 4), ("default", 1, 4)]
    assert tags[2] == ("single", 0xFFFFFFFF, 8)
    assert tags[3] == ("async-single", 0xFFFFFFFF, 8)
    assert sorted(tags[4:6]) == [("nonblocking", 0, 4), ("nonblocking", 1, 4)]
    assert tags[6] == ("dpu", 0xFFFFFFFF, 1)
    # default callbacks run concurrently on both ranks; the blocking ones hold their rank
    assert calls[0][3] == calls[1][3]
    assert calls[2][3] == pytest.approx(calls[0][3] + 0.001)


def test_callback_error_fails_the_job_and_inline_calls_work(backend: str) -> None:
    async def main() -> bytes:
        dpus = await dpu_alloc(4, "")
        await dpu_load(dpus, spin_program(100))

        async def bad(s: aiopim.DpuSet, rank_id: int, args: object) -> None:
            raise DpuError(aiopim.DpuErrorCode.DPU_ERR_INVALID_MRAM_ACCESS, "my check")

        with pytest.raises(DpuError) as e:
            await dpu_callback(dpus, bad, None, DPU_CALLBACK_DEFAULT)
        assert e.value.value == 10
        got = bytearray(4)

        async def inline(s: aiopim.DpuSet, rank_id: int, args: object) -> None:
            # synchronous calls on the callback's own rank run inline (no deadlock)
            await dpu_copy_to(s, "x", 0, b"\x01\x02\x03\x04", 4)
            await dpu_launch(s, DPU_SYNCHRONOUS)
            await dpu_copy_from(s.dpus[2], "x", 0, got, 4)

        await dpu_callback(dpus, inline, None, DPU_CALLBACK_DEFAULT)
        return bytes(got)

    assert emu(ranks=1).run(main, backend=backend) == b"\x01\x02\x03\x04"


def test_callback_python_exception_is_not_lost() -> None:
    async def main() -> None:
        dpus = await dpu_alloc(4, "")

        def cb(s: object, r: int, a: object) -> None:
            raise ValueError("bug in my callback")

        await dpu_callback(dpus, cb, None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING)
        await anyio.sleep(1)

    with pytest.raises(ValueError, match="bug in my callback"):
        emu(ranks=1).run(main)


# --- cancellation ----------------------------------------------------------------------------
def test_cancelled_sync_call_leaves_work_running_and_error_sticky(backend: str) -> None:
    from helpers import fault_program

    async def main() -> None:
        dpus = await dpu_alloc(4, "")
        await dpu_load(dpus, spin_program(10_000))
        with anyio.move_on_after(20e-6):  # boot takes 10 us, the run 275 us
            await dpu_launch(dpus, DPU_SYNCHRONOUS)  # cancelled while the DPUs run
        assert all(d.running for d in dpus.dpu_list)  # enqueued work still runs
        await dpu_sync(dpus)
        assert not any(d.running for d in dpus.dpu_list)
        await dpu_load(dpus, fault_program())
        with anyio.move_on_after(5e-6):
            await dpu_launch(dpus, DPU_SYNCHRONOUS)
        await anyio.sleep(1e-3)
        with pytest.raises(DpuError) as e:  # the cancelled caller did not recover the rank
            await dpu_sync(dpus)
        assert e.value.value == 0x80010017

    emu(ranks=1).run(main, backend=backend)


# --- Pythonic API ----------------------------------------------------------------------------
def test_pythonic_dpuset(backend: str) -> None:
    async def main() -> tuple[np.ndarray, float]:
        async with await aiopim.DpuSet.alloc(6) as dpus:
            assert len(dpus) == 6 and dpus.nr_ranks == 2
            await dpus.load(spin_program(50))
            parts = np.arange(24, dtype=np.uint32).reshape(6, 4)
            await dpus.copy_to("x", parts)
            await dpus.copy_to("x", np.array([7, 7], np.uint32), offset=8)  # broadcast
            await dpus.launch()
            out = await dpus.copy_from("x", np.uint32)
            assert dpus.symbol("x").size == 16
            assert [len(r) for r in dpus.ranks] == [3, 3]
            return out, aiopim.now()

    out, _ = emu(ranks=2, dpus=4).run(main, backend=backend)
    expected = np.arange(24, dtype=np.uint32).reshape(6, 4)
    expected[:, 2:] = 7
    assert np.array_equal(out, expected)


def test_mram_costs_memory_only_where_written() -> None:
    async def main() -> int:
        dpus = await dpu_alloc(64, "")
        await dpus.load(spin_program())
        await dpus.copy_to("__sys_used_mram_end", np.ones(8, np.uint8), offset=32 << 20)
        return sum(d.mram.resident_bytes for d in dpus.dpu_list)

    resident = aiopim.Emulator().run(main)
    assert resident == 64 * 65536  # one 64 KiB page per DPU, not 64 MiB


# --- test-framework integration ----------------------------------------------------------------
@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=4)).anyio_backend(
        "trio"
    )


@pytest.mark.anyio
async def test_inside_anyio_pytest_plugin() -> None:
    dpus = await dpu_alloc(4, "")
    await dpu_load(dpus, spin_program(100))
    t0 = aiopim.now()
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    await anyio.sleep(10)
    expected = timing.LAUNCH_BOOT_LATENCY_PS + run_time_ps(100) + timing.COMPLETION_POLL_LATENCY_PS
    assert round((aiopim.now() - t0 - 10) * 1e12) == expected


@pytest.fixture
def aiopim_trio_clock() -> trio.abc.Clock:
    return aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=4)).trio_clock()


@pytest.mark.trio
async def test_inside_pytest_trio(aiopim_trio_clock: trio.abc.Clock) -> None:
    dpus = await dpu_alloc(4, "")
    await dpu_load(dpus, spin_program(100))
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    await trio.sleep(5)
    assert aiopim.now() > 5


def test_single_call_sync_on_one_rank_gets_whole_set() -> None:
    async def main() -> list[tuple[int, int]]:
        calls: list[tuple[int, int]] = []
        dpus = await dpu_alloc(4, "")
        await dpu_callback(
            dpus, lambda s, r, a: calls.append((r, len(s))), None, DPU_CALLBACK_SINGLE_CALL
        )
        await dpu_callback(
            dpus,
            lambda s, r, a: calls.append((r, len(s))),
            None,
            DPU_CALLBACK_ASYNC | DPU_CALLBACK_SINGLE_CALL,
        )
        await dpu_sync(dpus)
        return calls

    assert emu(ranks=1).run(main) == [(0xFFFFFFFF, 4), (0, 4)]
