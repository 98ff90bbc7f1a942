"""Property: random vud call sequences never raise, never hang; a set error freezes the rank."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memclave_helpers import ADD, KEY, N, run

import aiopim
from aiopim import memclave as mc

E = mc.VudError
MRAM_END = 64 << 20
BAD_ADDRS = [MRAM_END - 8, 4, MRAM_END]
GOOD_ADDRS = [0, 0x1000, mc.MSG_BUFFER, mc.IME_LOAD_BUFFER]

op = st.one_of(
    st.tuples(st.just("broadcast"), st.sampled_from(GOOD_ADDRS + BAD_ADDRS), st.integers(0, 3)),
    st.tuples(st.just("transfer"), st.sampled_from(GOOD_ADDRS + BAD_ADDRS), st.integers(0, 3)),
    st.tuples(st.just("gather"), st.sampled_from(GOOD_ADDRS + BAD_ADDRS), st.integers(0, 3)),
    st.tuples(st.just("broadcast_to"), st.sampled_from(["a", "b", "flag", "nope"])),
    st.tuples(st.just("gather_from"), st.sampled_from(["c", "flag", "nope"])),
    st.tuples(st.just("load"), st.sampled_from(["add", "auth", "missing"])),
    st.tuples(st.just("launch")),
    st.tuples(st.just("launch_default"), st.sampled_from(list(mc.VudImeSk))),
    st.tuples(st.just("wait")),
    st.tuples(st.just("qry")),
    st.tuples(st.just("rel")),
    st.tuples(st.just("workers"), st.integers(0, 10)),
    st.tuples(st.just("log"), st.integers(0, 64)),
    st.tuples(st.just("install_key"), st.sampled_from(["plain", "bad_pin"])),
    st.tuples(st.just("clear")),
)


async def apply(r: mc.VudRank, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "broadcast":
        await mc.vud_broadcast_transfer(r, step[2], np.full(step[2], 3, np.uint64), step[1])
    elif kind == "transfer":
        await mc.vud_simple_transfer(r, step[2], np.ones((64, step[2]), np.uint64), step[1])
    elif kind == "gather":
        await mc.vud_simple_gather(r, step[2], step[1], np.zeros((64, step[2]), np.uint64))
    elif kind == "broadcast_to":
        await mc.vud_broadcast_to(r, N, np.arange(N, dtype=np.uint64), step[1])
    elif kind == "gather_from":
        await mc.vud_gather_from(r, 2, step[1], np.zeros((64, 2), np.uint64))
    elif kind == "load":
        if step[1] == "auth":
            await mc.vud_ime_load_auth_only(r, ADD)
        else:
            await mc.vud_ime_load(r, ADD if step[1] == "add" else "/no/such/subkernel.dpu")
    elif kind == "launch":
        await mc.vud_ime_launch(r)
    elif kind == "launch_default":
        await mc.vud_ime_launch_default(r, step[1])
    elif kind == "wait":
        await mc.vud_ime_wait(r)
    elif kind == "qry":
        await mc.vud_rank_qry_mux(r)
    elif kind == "rel":
        await mc.vud_rank_rel_mux(r)
    elif kind == "workers":
        mc.vud_rank_nr_workers(r, step[1])
    elif kind == "log":
        await mc.vud_log_read(r, step[1], np.zeros((step[1], 8), np.uint64))
    elif kind == "install_key":
        pin = np.zeros(32, np.uint64) if step[1] == "bad_pin" else None
        await mc.vud_ime_install_key(r, KEY, common_pk=pin)


def snapshot(r: mc.VudRank) -> tuple[Any, ...]:
    """Everything the calls could change: the rank struct, time, jobs, MRAM, enclave states."""
    emu = aiopim.current_emulator()
    assert emu.recorder is not None
    rank = emu.rank(0)
    mram = hashlib.sha256()
    for d in rank.dpus:
        for page in sorted(d.mram.pages):
            mram.update(page.to_bytes(4, "little") + d.mram.pages[page].tobytes())
    enc = mc.machine_of(emu).rank_enclave(rank)
    states = [(s.counter, s.user_key, s.host_facing, s.xchg_stage) for s in enc.dpus]
    return (
        r.err,
        r.key,
        r.next_sk,
        r.nr_workers,
        r.detail,
        emu.now_ps,
        len(emu.recorder.events),
        mram.hexdigest(),
        states,
    )


def check_sequence(backend: str, steps: list[tuple[Any, ...]]) -> None:
    async def main() -> None:
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        frozen: tuple[Any, ...] | None = None
        for step in steps:
            if step[0] == "clear":
                r.err, frozen = E.VUD_OK, None
                # let anything still running finish before the next comparison
                await mc.vud_ime_wait(r)
                continue
            await apply(r, step)  # only the library's own errors: no exception escapes
            assert isinstance(r.err, E)
            if frozen is not None:
                assert snapshot(r) == frozen, step
            elif r.err != E.VUD_OK:
                emu = aiopim.current_emulator()
                if not mc.machine_of(emu).rank_enclave(emu.rank(0)).all_host_facing:
                    # DPUs still running change their own memory (not the host's doing): let
                    # them finish, then set the error again
                    err, detail = r.err, r.detail
                    r.err = E.VUD_OK
                    await mc.vud_ime_wait(r)
                    r.err, r.detail = err, detail
                frozen = snapshot(r)
        await mc.vud_rank_free(r)

    run(backend, main, ranks=1)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(op, max_size=12), backend=st.sampled_from(["asyncio", "trio"]))
def test_random_vud_sequences_keep_the_sticky_rule(
    steps: list[tuple[Any, ...]], backend: str
) -> None:
    check_sequence(backend, steps)


@pytest.mark.long
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(op, max_size=30), backend=st.sampled_from(["asyncio", "trio"]))
def test_random_vud_sequences_long(steps: list[tuple[Any, ...]], backend: str) -> None:
    check_sequence(backend, steps)
