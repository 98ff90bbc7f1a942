"""aiopim.memclave: the vud host library, its errors, sticky errors, timing and traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import script_outputs
from memclave_helpers import ADD, KEY, N, machine, ready_rank, run, run_add

import aiopim
from aiopim import memclave as mc
from aiopim import timing
from aiopim.sdk import dpu_alloc_ranks, dpu_free
from aiopim.trace import Timeline, chrome_trace, summarize

ROOT = Path(__file__).resolve().parent.parent
E = mc.VudError


def test_error_values_and_strings() -> None:
    assert [e.name for e in E][:3] == ["VUD_OK", "VUD_RANK_BUSY", "VUD_NOT_FOUND"]
    assert len(E) == 15 and [int(e) for e in E] == list(range(15))
    assert mc.vud_error_str(E.VUD_OK) == "success"
    assert mc.vud_error_str(E.VUD_EXPECTED_FAULT) == "DPUs are not all in fault"
    assert mc.vud_error_str(E.VUD_SK_TAG) == "cannot encrypt and tag subkernel"
    assert len({mc.vud_error_str(e) for e in E}) == 15
    assert mc.vud_error_str(99) == "unknown error"


def test_seed_example_flow(backend: str) -> None:
    async def main() -> tuple[np.ndarray, int, int]:
        r = await ready_rank()
        t0 = aiopim.current_emulator().now_ps
        c = await run_add(r)
        t1 = aiopim.current_emulator().now_ps
        await mc.vud_rank_free(r)
        return c, t1 - t0, r.err

    c, dt, err = run(backend, main)
    assert err == E.VUD_OK
    assert (c == 3 * np.arange(N, dtype=np.uint64)).all()
    # the authenticated load dominates the launch
    assert timing.MEMCLAVE_AUTH_LOAD_PS < dt < timing.MEMCLAVE_AUTH_LOAD_PS * 11 // 10


def test_key_exchange_takes_about_ten_seconds(backend: str) -> None:
    async def main() -> tuple[int, int, bytes]:
        r = await mc.vud_rank_alloc(mc.VUD_ALLOC_ANY)
        await mc.vud_ime_wait(r)
        t0 = aiopim.current_emulator().now_ps
        await mc.vud_ime_install_key(r, KEY)
        return aiopim.current_emulator().now_ps - t0, r.err, r.key

    dt, err, key = run(backend, main)
    assert err == E.VUD_OK and key == KEY
    vci = timing.MEMCLAVE_VCI_ROUND_TRIP_PS

    def xfer(kind: str, nbytes: int) -> int:  # bytes per DPU, one worker
        return timing.memclave_transfer_ps(kind, 64 * nbytes, 1)

    assert dt == (
        xfer("broadcast", 8) + vci  # LOAD_SK XCHG_1 message, release the MUX
        + timing.MEMCLAVE_XCHG1_PS + vci  # XCHG_1 runs, the host sees it
        + xfer("gather", 16 + 256)  # counter and public key
        + xfer("transfer", 48) + xfer("broadcast", 256) + vci  # wrapped keys, host key
        + timing.MEMCLAVE_KEY_EXCHANGE_PS + vci  # XCHG_2/3
        + xfer("gather", 64)  # confirmations
    )  # fmt: skip


@pytest.mark.parametrize("workers", [1, 3, 8, 16])
def test_transfer_times_follow_the_memclave_rates(backend: str, workers: int) -> None:
    sz = 4096

    async def main() -> list[int]:
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        mc.vud_rank_nr_workers(r, workers)
        emu = aiopim.current_emulator()
        times = []
        t = emu.now_ps
        await mc.vud_broadcast_transfer(r, sz, np.ones(sz, dtype=np.uint64), 0)
        times.append(emu.now_ps - t)
        t = emu.now_ps
        await mc.vud_simple_transfer(r, sz, np.ones((64, sz), dtype=np.uint64), 0)
        times.append(emu.now_ps - t)
        t = emu.now_ps
        await mc.vud_simple_gather(r, sz, 0, np.zeros((64, sz), dtype=np.uint64))
        times.append(emu.now_ps - t)
        assert r.err == E.VUD_OK
        return times

    total = 8 * sz * 64
    assert run(backend, main) == [
        timing.memclave_transfer_ps(kind, total, workers)
        for kind in ("broadcast", "transfer", "gather")
    ]


def test_rates_scale_with_workers() -> None:
    for kind in ("broadcast", "transfer", "gather"):
        rates = [timing.memclave_rate_bps(kind, n) for n in range(1, 10)]
        assert rates == sorted(rates) and rates[7] == rates[8]
    assert timing.memclave_rate_bps("broadcast", 8) == timing.MEMCLAVE_BROADCAST_BPS_8
    assert timing.memclave_rate_bps("gather", 1) == timing.MEMCLAVE_GATHER_BPS_1


def test_raw_transfers_round_trip_per_dpu(backend: str) -> None:
    async def main() -> tuple[np.ndarray, np.ndarray, int]:
        r = await mc.vud_rank_alloc(1)
        await mc.vud_ime_wait(r)
        src = np.arange(64 * 5, dtype=np.uint64).reshape(64, 5)
        await mc.vud_simple_transfer(r, 5, list(src), 0x1000)
        await mc.vud_broadcast_transfer(r, 2, np.array([7, 9], dtype=np.uint64), 0x2000)
        out = [np.zeros(5, dtype=np.uint64) for _ in range(64)]
        await mc.vud_simple_gather(r, 5, 0x1000, out)
        bc = np.zeros((64, 2), dtype=np.uint64)
        await mc.vud_simple_gather(r, 2, 0x2000, bc)
        return np.array(out), bc, r.err

    out, bc, err = run(backend, main)
    assert err == E.VUD_OK
    assert (out == np.arange(64 * 5).reshape(64, 5)).all()
    assert (bc == [7, 9]).all()


def test_qry_mux_counts_host_facing_dpus(backend: str) -> None:
    async def main() -> list[int]:
        r = await mc.vud_rank_alloc(0)
        seen = [await mc.vud_rank_qry_mux(r)]  # the loader is still starting
        await mc.vud_ime_wait(r)
        seen.append(await mc.vud_rank_qry_mux(r))
        await mc.vud_ime_launch_default(r, mc.VUD_IME_SK_XCHG_1)  # runs for 1 ms
        seen.append(await mc.vud_rank_qry_mux(r))
        await mc.vud_ime_wait(r)
        seen.append(await mc.vud_rank_qry_mux(r))
        seen.append(int(r.err))
        return seen

    assert run(backend, main) == [0, 64, 0, 64, 0]


def test_ping_pong_through_the_message_buffer(backend: str) -> None:
    async def main() -> tuple[list[int], int]:
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        ping = np.frombuffer(int(mc.Msg.PING).to_bytes(8, "little"), dtype=np.uint64).copy()
        await mc.vud_broadcast_transfer(r, 1, ping, mc.MSG_BUFFER)
        await mc.vud_rank_rel_mux(r)
        await mc.vud_ime_wait(r)
        out = np.zeros((64, 1), dtype=np.uint64)
        await mc.vud_simple_gather(r, 1, mc.MSG_BUFFER, out)
        return sorted({int(x) & 0xFFFF for x in out[:, 0]}), r.err

    types, err = run(backend, main)
    assert err == E.VUD_OK and types == [mc.Msg.PONG]


def test_log_read_reads_the_debug_words(backend: str) -> None:
    async def main() -> np.ndarray:
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        src = np.arange(64 * 8, dtype=np.uint64).reshape(64, 8)
        await mc.vud_simple_transfer(r, 8, src, mc.DEBUG_OUT)
        logs = np.zeros((3, 8), dtype=np.uint64)
        await mc.vud_log_read(r, 3, logs)
        assert r.err == E.VUD_OK
        return logs

    assert (run(backend, main) == np.arange(24).reshape(3, 8)).all()


# --- every error the emulated library returns ----------------------------------------------------
def test_alloc_errors(backend: str) -> None:
    async def main() -> list[E]:
        errs = []
        r0 = await mc.vud_rank_alloc(0)
        errs.append((await mc.vud_rank_alloc(0)).err)  # Memclave holds it
        sdk = await dpu_alloc_ranks(1)  # rank 1, the last free one
        errs.append((await mc.vud_rank_alloc(1)).err)  # the SDK holds it
        errs.append((await mc.vud_rank_alloc(mc.VUD_ALLOC_ANY)).err)
        errs.append((await mc.vud_rank_alloc(40)).err)
        errs.append(r0.err)
        await dpu_free(sdk)
        await mc.vud_rank_free(r0)
        await mc.vud_ime_wait(r0)  # use after free
        errs.append(r0.err)
        return errs

    assert run(backend, main) == [
        E.VUD_RANK_BUSY,
        E.VUD_RANK_BUSY,
        E.VUD_NOT_FOUND,
        E.VUD_SYSTEM_ERR,
        E.VUD_OK,
        E.VUD_SYSTEM_ERR,
    ]


def test_alloc_needs_ranks_of_64_dpus(backend: str) -> None:
    async def main() -> E:
        return (await mc.vud_rank_alloc(0)).err

    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=8))
    assert emu.run(main, backend=backend) == E.VUD_NOT_FOUND


async def _fresh() -> mc.VudRank:
    r = await mc.vud_rank_alloc(0)
    await mc.vud_ime_wait(r)
    return r


async def _err_memory() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_broadcast_transfer(r, 2, np.zeros(2, dtype=np.uint64), (64 << 20) - 8)
    return r


async def _err_memory_unaligned() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_simple_gather(r, 1, 4, np.zeros((64, 1), dtype=np.uint64))
    return r


async def _err_expected_fault() -> mc.VudRank:
    r = await mc.vud_rank_alloc(0)  # the loader has not faulted back yet
    await mc.vud_broadcast_transfer(r, 1, np.zeros(1, dtype=np.uint64), 0)
    return r


async def _err_sk_not_found() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_ime_load(r, ROOT / "no_such_subkernel.dpu")
    return r


async def _err_launch_without_load() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_ime_launch(r)
    return r


async def _err_not_waiting() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_ime_launch_default(r, mc.VUD_IME_SK_XCHG_1)  # waits for stage 2 afterwards
    await mc.vud_ime_wait(r)
    await mc.vud_ime_load(r, ADD)
    return r


async def _err_symbol_not_found() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_ime_load(r, ADD)
    await mc.vud_broadcast_to(r, 1, np.zeros(1, dtype=np.uint64), "nope")
    return r


async def _err_symbol_not_mram() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_ime_load(r, ADD)
    await mc.vud_broadcast_to(r, 1, np.zeros(1, dtype=np.uint64), "flag")
    return r


async def _err_symbol_without_subkernel() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_gather_from(r, 1, "c", np.zeros((64, 1), dtype=np.uint64))
    return r


async def _err_system_thread() -> mc.VudRank:
    r = await _fresh()
    mc.vud_rank_nr_workers(r, 0)
    return r


async def _err_key_pinned_common() -> mc.VudRank:
    r = await _fresh()
    await mc.vud_ime_install_key(r, KEY, common_pk=np.zeros(32, dtype=np.uint64))
    return r


async def _err_key_pinned_per_dpu() -> mc.VudRank:
    r = await _fresh()
    pk = mc.enclave_public_keys(0)
    pk[17, 3] ^= np.uint64(1)
    await mc.vud_ime_install_key(r, KEY, pk=pk)
    return r


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_err_memory, E.VUD_MEMORY_ERR),
        (_err_memory_unaligned, E.VUD_MEMORY_ERR),
        (_err_expected_fault, E.VUD_EXPECTED_FAULT),
        (_err_sk_not_found, E.VUD_SK_NOT_FOUND),
        (_err_launch_without_load, E.VUD_SK_NOT_FOUND),
        (_err_not_waiting, E.VUD_NOT_WAITING),
        (_err_symbol_not_found, E.VUD_SYMBOL_NOT_FOUND),
        (_err_symbol_not_mram, E.VUD_SYMBOL_NOT_MRAM),
        (_err_symbol_without_subkernel, E.VUD_SK_NOT_FOUND),
        (_err_system_thread, E.VUD_SYSTEM_THREAD),
        (_err_key_pinned_common, E.VUD_KEY_XCHG),
        (_err_key_pinned_per_dpu, E.VUD_KEY_XCHG),
    ],
)
def test_error_paths(backend: str, scenario: object, expected: E) -> None:
    r = run(backend, scenario)  # type: ignore[arg-type]
    assert r.err == expected, r.detail
    assert r.detail


def test_pinned_keys_that_match_are_accepted(backend: str) -> None:
    async def main() -> tuple[E, E]:
        r = await _fresh()
        await mc.vud_ime_install_key(r, KEY, pk=mc.enclave_public_keys(0))
        mc.configure_enclave(shared_static_key=True)
        r2 = await mc.vud_rank_alloc(1)
        await mc.vud_ime_wait(r2)
        common = mc.enclave_public_keys(1)[0]
        await mc.vud_ime_install_key(r2, KEY, common_pk=common)
        return r.err, r2.err

    assert run(backend, main) == (E.VUD_OK, E.VUD_OK)


def test_sk_tag_error_when_sealing_fails() -> None:
    assert mc.vud_enc_auth_sk(bytearray(64), KEY) == E.VUD_SK_TAG  # no magic
    err, sk = mc.vud_sk_from_elf(ADD)
    assert err == E.VUD_OK
    assert mc.vud_enc_auth_sk(bytearray(sk[:100]), KEY) == E.VUD_SK_TAG  # truncated


def test_python_misuse_raises_type_and_value_errors(backend: str) -> None:
    async def main() -> E:
        r = await _fresh()
        with pytest.raises(TypeError, match="src"):
            await mc.vud_broadcast_transfer(r, 2, [1, 2], 0)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="src"):
            await mc.vud_broadcast_transfer(r, 3, np.zeros(2, dtype=np.uint64), 0)
        with pytest.raises(ValueError, match="tgt"):
            await mc.vud_simple_gather(r, 2, 0, np.zeros((63, 2), dtype=np.uint64))
        with pytest.raises(TypeError, match="key"):
            await mc.vud_ime_install_key(r, "k" * 32)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="key"):
            await mc.vud_ime_install_key(r, b"short")
        with pytest.raises(TypeError, match="path"):
            await mc.vud_ime_load(r, 42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="sk"):
            await mc.vud_ime_launch_default(r, 9)
        return r.err

    assert run(backend, main) == E.VUD_OK


# --- sticky errors -------------------------------------------------------------------------------
def test_sticky_error_makes_every_call_a_no_op(backend: str) -> None:
    async def main() -> None:
        r = await ready_rank()
        await mc.vud_ime_load(r, ADD)
        await mc.vud_broadcast_to(r, 1, np.zeros(1, dtype=np.uint64), "nope")
        assert r.err == E.VUD_SYMBOL_NOT_FOUND
        emu = aiopim.current_emulator()
        assert emu.recorder is not None
        before = (emu.now_ps, len(emu.recorder.events), r.key, r.next_sk, r.nr_workers, r.detail)
        mram = [bytes(d.mram.read(0, 4096)) for d in emu.rank(0).dpus]
        ones = np.ones(N, dtype=np.uint64)
        await mc.vud_broadcast_transfer(r, N, ones, 0)
        await mc.vud_simple_transfer(r, N, np.ones((64, N), dtype=np.uint64), 0)
        out = np.zeros((64, N), dtype=np.uint64)
        await mc.vud_simple_gather(r, N, 0, out)
        await mc.vud_broadcast_to(r, N, ones, "a")
        await mc.vud_transfer_to(r, N, np.ones((64, N), dtype=np.uint64), "a")
        await mc.vud_gather_from(r, N, "a", out)
        mc.vud_rank_nr_workers(r, 8)
        assert await mc.vud_rank_qry_mux(r) == 0
        await mc.vud_rank_rel_mux(r)
        await mc.vud_ime_wait(r)
        await mc.vud_ime_load(r, add_other())
        await mc.vud_ime_load_auth_only(r, add_other())
        await mc.vud_ime_launch(r)
        await mc.vud_ime_launch_default(r, mc.VUD_IME_SK_MSG)
        await mc.vud_ime_install_key(r, bytes(32))
        await mc.vud_log_read(r, 64, np.zeros((64, 8), dtype=np.uint64))
        after = (emu.now_ps, len(emu.recorder.events), r.key, r.next_sk, r.nr_workers, r.detail)
        assert after == before
        assert not out.any()
        assert [bytes(d.mram.read(0, 4096)) for d in emu.rank(0).dpus] == mram
        assert r.err == E.VUD_SYMBOL_NOT_FOUND
        r.err = E.VUD_OK  # the caller clears the error: the rank works again
        assert (await run_add(r) == 3 * np.arange(N, dtype=np.uint64)).all()

    run(backend, main)


def add_other() -> aiopim.Program:
    from memclave_helpers import add_program

    return add_program("add2")


# --- integration with the emulator ---------------------------------------------------------------
def test_memclave_jobs_are_rank_jobs_in_traces_and_summaries() -> None:
    traces = {}
    for backend in ("asyncio", "trio"):
        emu = aiopim.Emulator(machine())

        async def main() -> None:
            r = await ready_rank()
            await run_add(r)
            await mc.vud_rank_free(r)

        emu.run(main, backend=backend)
        assert emu.recorder is not None
        traces[backend] = emu.recorder.to_jsonl()
        jobs = emu.recorder.jobs()
        ops = {j["info"].get("vud") for j in jobs}
        assert {"vud_rank_rel_mux", "vud_broadcast_to", "vud_gather_from", "vud_ime_load"} <= ops
        types = {j["type"] for j in jobs}
        assert {"LAUNCH_RANK", "COPY_MRAM_TO_RANK", "COPY_MRAM_FROM_MATRIX"} <= types
        tl = Timeline.from_emulator(emu)
        events = emu.recorder.iter_events()
        ran = {f["program"] for _, kind, f in events if kind == "dpu_run"}
        assert {"memclave:TL", "memclave:XCHG_1", "memclave:XCHG_2", "add"} <= ran
        summary = summarize(tl)
        assert summary.ranks[0].jobs == len([j for j in jobs if not j["flushed"]])
        assert summary.ranks[0].dpu > timing.MEMCLAVE_KEY_EXCHANGE_PS
        assert "vud_ime_wait" in json.dumps(chrome_trace(tl))
        assert summary.text()
    assert traces["asyncio"] == traces["trio"]


def test_example_script_output_identical_on_both_backends() -> None:
    outs = script_outputs(ROOT / "examples" / "memclave_add.py")
    assert outs[0] == outs[1]
    assert "c[i][j] == 3*j on 64 DPUs: ok" in outs[0]
    lines = {line.split()[0]: line for line in outs[0].splitlines()}
    assert float(lines["key"].split()[2]) > 10.0


# --- subkernels as aiopim runs DPU programs ------------------------------------------------------
def test_elf_subkernel_by_path_with_a_registered_model(backend: str, tmp_path: Path) -> None:
    from aiopim.isa.elfwriter import sample_dpu_elf

    data, _ = sample_dpu_elf(nr_tasklets=1, mram_vars={"x": bytes(16), "y": bytes(16)})
    path = tmp_path / "double.dpu"
    path.write_bytes(data)
    prog = aiopim.load_elf(data)

    async def model(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(16)
        await t.mram_read(prog.address_of("x"), buf, 16)
        t.view(buf, np.uint64, 2)[:] *= 2
        await t.mram_write(buf, prog.address_of("y"), 16)

    aiopim.register_model("double", model)

    async def main() -> np.ndarray:
        r = await ready_rank()
        await mc.vud_ime_load(r, str(path))
        src = np.arange(128, dtype=np.uint64).reshape(64, 2)
        await mc.vud_transfer_to(r, 2, src, "x")
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        out = np.zeros((64, 2), dtype=np.uint64)
        await mc.vud_gather_from(r, 2, "y", out)
        assert r.err == E.VUD_OK, r.detail
        return out

    try:
        assert (run(backend, main) == 2 * np.arange(128).reshape(64, 2)).all()
    finally:
        from aiopim.elf import unregister_model

        unregister_model("double")


def test_data_section_is_loaded_into_wram(backend: str) -> None:
    prog = aiopim.Program("data-check", nr_tasklets=1)
    init = prog.host("init", np.uint64, 2, init=[0xABC, 0xDEF])
    out = prog.mram("out", np.uint64, 2)

    @prog.main
    async def main_(t: aiopim.Tasklet) -> None:
        await t.mram_write(prog.address_of(init), t.mram_address(out), 16)

    async def main() -> list[int]:
        r = await ready_rank()
        await mc.vud_ime_load(r, prog)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        got = np.zeros((64, 2), dtype=np.uint64)
        await mc.vud_gather_from(r, 2, "out", got)
        assert r.err == E.VUD_OK, r.detail
        return sorted({tuple(int(x) for x in row) for row in got})  # type: ignore[misc]

    assert run(backend, main) == [(0xABC, 0xDEF)]


def test_faulting_subkernel_is_reported_by_ime_wait(backend: str) -> None:
    prog = aiopim.Program("faulty", nr_tasklets=1)

    @prog.main
    async def main_(t: aiopim.Tasklet) -> None:
        t.compute(100)
        t.fault(7, "assert failed")

    async def main() -> tuple[E, str, E]:
        r = await ready_rank()
        await mc.vud_ime_load(r, prog)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        err, detail = r.err, r.detail
        r.err = E.VUD_OK
        await mc.vud_rank_rel_mux(r)  # the host recovers the DPUs
        await mc.vud_ime_wait(r)
        await run_add(r)
        return err, detail, r.err

    err, detail, after = run(backend, main)
    assert err == E.VUD_NOT_WAITING and "subkernel faulted" in detail and "assert failed" in detail
    assert after == E.VUD_OK


def test_waiting_for_a_subkernel_that_never_stops_raises_instead_of_hanging(
    backend: str,
) -> None:
    prog = aiopim.Program("stuck", nr_tasklets=2)
    barrier = prog.barrier("b", count=3)  # one more than the tasklets: never released

    @prog.main
    async def main_(t: aiopim.Tasklet) -> None:
        await t.barrier_wait(barrier)

    async def main() -> None:
        r = await ready_rank()
        await mc.vud_ime_load(r, prog)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)

    with pytest.raises(aiopim.DeadlockError, match="vud_ime_wait"):
        run(backend, main)


def test_free_waits_for_running_dpus_and_gives_the_rank_back(backend: str) -> None:
    async def main() -> tuple[int, bool]:
        r = await ready_rank()
        await mc.vud_ime_load(r, ADD)
        await mc.vud_ime_launch(r)
        t0 = aiopim.current_emulator().now_ps
        await mc.vud_rank_free(r)
        waited = aiopim.current_emulator().now_ps - t0
        again = await mc.vud_rank_alloc(0)
        return waited, again.err == E.VUD_OK and r.fd == -1

    waited, ok = run(backend, main)
    assert ok and waited >= timing.MEMCLAVE_AUTH_LOAD_PS


def test_loader_start_and_launch_times(backend: str) -> None:
    async def main() -> tuple[int, int]:
        emu = aiopim.current_emulator()
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        t_alloc = emu.now_ps
        await mc.vud_ime_install_key(r, KEY)
        await mc.vud_ime_load(r, ADD)
        t0 = emu.now_ps
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        rec = emu.recorder
        assert rec is not None and r.err == E.VUD_OK
        (add_run,) = [f for _, k, f in rec.iter_events() if k == "dpu_run" and f["dpu"] == 0
                      and f["program"] == "add"]  # fmt: skip
        runs = [t for t, k, f in rec.iter_events() if k == "dpu_run" and f["dpu"] == 0]
        return t_alloc, emu.now_ps - t0 - (runs[-2] - add_run["start"])

    t_alloc, launch_overhead = run(backend, main)
    vci = timing.MEMCLAVE_VCI_ROUND_TRIP_PS
    assert t_alloc == timing.LAUNCH_BOOT_LATENCY_PS + timing.MEMCLAVE_AUTH_LOAD_PS + vci
    # message + MUX release, the loader, (the subkernel itself), MSG, the host's poll
    assert launch_overhead == (
        timing.memclave_transfer_ps("broadcast", 8 * 64, 1)
        + vci
        + timing.MEMCLAVE_AUTH_LOAD_PS
        + timing.MEMCLAVE_MSG_PS
        + vci
    )


# --- scenario files ----------------------------------------------------------------------------
def test_memclave_scenario_replays_with_summary() -> None:
    from aiopim.scenario import load_scenario, replay

    sc = load_scenario(ROOT / "scenarios" / "memclave_add.toml")
    runs = {b: replay(sc, backend=b) for b in ("asyncio", "trio")}
    assert runs["asyncio"].chrome_trace() == runs["trio"].chrome_trace()
    res = runs["trio"]
    assert (res.buffers["c"].view(np.uint64) == 3 * np.arange(N, dtype=np.uint64)).all()
    summary = res.summary()
    assert summary.ranks[0].jobs == 28 and summary.ranks[0].transfer > 0
    assert res.end_ps > timing.MEMCLAVE_KEY_EXCHANGE_PS


def test_memclave_scenario_step_fails_with_the_vud_error() -> None:
    from aiopim.scenario import ScenarioError, parse_scenario, replay

    text = (ROOT / "scenarios" / "memclave_add.toml").read_text(encoding="utf-8")
    text = text.replace('symbol = "a"', 'symbol = "nope"')
    sc = parse_scenario(text)
    with pytest.raises(ScenarioError, match="VUD_SYMBOL_NOT_FOUND"):
        replay(sc)
