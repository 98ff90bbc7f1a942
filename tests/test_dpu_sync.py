"""Tasklet synchronisation (sdk-reference.md §5.5): mutexes, barriers, semaphores, handshakes,
mutex pools, virtual mutexes; NR_TASKLETS limits; what survives a reboot."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import run_time_ps
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_helpers import host_array, run_dpu

import aiopim
from aiopim import timing
from aiopim.dpu import EALREADY, MutexPoolDecl, VMutexDecl
from aiopim.sdk import DPU_ERR_ELF_INVALID_FILE, DPU_ERR_TOO_MANY_TASKLETS, DpuError


# --- NR_TASKLETS -------------------------------------------------------------------------------
@pytest.mark.parametrize(("chip", "limit"), [("v1A", 24), ("v1B", 16)])
def test_too_many_tasklets_at_load(chip: str, limit: int) -> None:
    ok = aiopim.Program("ok", nr_tasklets=limit)
    ok.main(_noop)
    assert run_dpu(ok, chip=chip).error is None
    bad = aiopim.Program("bad", nr_tasklets=limit + 1)
    bad.main(_noop)
    with pytest.raises(DpuError) as e:
        run_dpu(bad, chip=chip)
    assert e.value.code == DPU_ERR_TOO_MANY_TASKLETS
    assert f"{limit} hardware threads" in str(e.value)


async def _noop(t: aiopim.Tasklet) -> None:
    return None


@pytest.mark.parametrize(("chip", "budget"), [("v1A", 56), ("v1B", 64)])
def test_atomic_bit_budget_at_load(chip: str, budget: int) -> None:
    """Mutexes, pool mutexes and the locks of barriers, semaphores and printf share the bits."""
    fits = aiopim.Program("fits", stdio=True)
    fits.barrier("b")
    fits.semaphore("s", 1)
    fits.mutex_pool("pool", 16)
    for i in range(budget - 16 - 3):
        fits.mutex(f"m{i}")
    fits.main(_noop)
    assert fits.atomic_bits() == budget
    assert run_dpu(fits, chip=chip).error is None
    fits.mutex("one_too_many")
    with pytest.raises(DpuError) as e:
        run_dpu(fits, chip=chip)
    assert e.value.code == DPU_ERR_ELF_INVALID_FILE
    assert f"needs {budget + 1} atomic bits" in str(e.value)


# --- persistence across boots ------------------------------------------------------------------
def test_mutexes_reset_at_boot_wram_persists() -> None:
    prog = aiopim.Program("boots", nr_tasklets=1)
    seen = prog.host("seen", np.uint32, 4)
    m = prog.mutex("m")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        v = t.view(seen)
        v[v[3]] = t.mutex_trylock(m)  # the atomic bit was released by the bootstrap
        v[3] += 1  # WRAM keeps its value from the previous boot
        # exit while holding the mutex

    out = run_dpu(prog, launches=3)
    assert host_array(out, prog, "seen").tolist() == [1, 1, 1, 3]


# --- mutexes ----------------------------------------------------------------------------------
def _counter_program(nr: int, rounds: int, guarded: bool) -> aiopim.Program:
    prog = aiopim.Program("count", nr_tasklets=nr)
    total = prog.host("total", np.uint32)
    m = prog.mutex("m")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        for _ in range(rounds):
            if guarded:
                await t.mutex_lock(m)
            v = int(t.view(total)[0])  # load
            t.compute(3)
            await t.flush()  # other tasklets run between the load and the store
            t.view(total)[0] = v + 1
            if guarded:
                t.mutex_unlock(m)

    return prog


@settings(max_examples=25, deadline=None)
@given(nr=st.integers(1, 16), rounds=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_mutex_no_lost_increment(nr: int, rounds: int, seed: int) -> None:
    prog = _counter_program(nr, rounds, guarded=True)
    out = run_dpu(prog, seed=seed)  # exploration mode: ties broken at random
    assert int(host_array(out, prog, "total")[0]) == nr * rounds


def test_unguarded_increments_are_lost() -> None:
    prog = _counter_program(4, 5, guarded=False)
    assert int(host_array(run_dpu(prog), prog, "total")[0]) == 5  # all 4 read the same value


def test_mutex_unlock_has_no_owner_check() -> None:
    prog = aiopim.Program("owner", nr_tasklets=2)
    got = prog.host("got", np.uint32, 2)
    m = prog.mutex("m")
    b = prog.barrier("b")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            await t.mutex_lock(m)
        await t.barrier_wait(b)
        if t.me() == 1:
            t.mutex_unlock(m)  # releases tasklet 0's lock
            t.view(got)[1] = t.mutex_trylock(m)

    assert host_array(run_dpu(prog), prog, "got").tolist() == [0, 1]


# --- barriers ---------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(nr=st.integers(1, 16), rounds=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_barrier_phases_never_mix(nr: int, rounds: int, seed: int) -> None:
    prog = aiopim.Program("phases", nr_tasklets=nr)
    b = prog.barrier("b")
    events: list[tuple[str, int, int]] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        for r in range(rounds):
            t.compute(1 + (t.me() * 7 + r * 3) % 5)
            await t.flush()
            events.append(("arrive", r, t.me()))
            await t.barrier_wait(b)
            events.append(("leave", r, t.me()))

    out = run_dpu(prog, seed=seed)
    assert out.fault is None
    for r in range(rounds):
        arrivals = [i for i, e in enumerate(events) if e[:2] == ("arrive", r)]
        leaves = [i for i, e in enumerate(events) if e[:2] == ("leave", r)]
        assert len(arrivals) == len(leaves) == nr
        assert max(arrivals) < min(leaves)  # nobody leaves round r before all arrived
        if r + 1 < rounds:
            nxt = [i for i, e in enumerate(events) if e[:2] == ("arrive", r + 1)]
            assert min(nxt) > min(leaves)


def test_barrier_count_must_fit_a_signed_byte() -> None:
    prog = aiopim.Program("b", nr_tasklets=1)
    with pytest.raises(ValueError, match="signed byte"):
        prog.barrier("b", 128)


# --- semaphores -------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(nr=st.integers(1, 16), slots=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_semaphore_never_over_admits(nr: int, slots: int, seed: int) -> None:
    prog = aiopim.Program("sem", nr_tasklets=nr)
    s = prog.semaphore("s", slots)
    inside = [0]
    peak = [0]
    final: list[int] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.sem_take(s)
        assert t.sem_count(s) >= slots - nr  # never more waiters than tasklets
        inside[0] += 1
        peak[0] = max(peak[0], inside[0])
        t.compute(20 + t.me())
        await t.flush()
        inside[0] -= 1
        t.sem_give(s)
        final.append(t.sem_count(s))

    out = run_dpu(prog, seed=seed)
    assert out.fault is None
    assert peak[0] == min(slots, nr)
    assert inside[0] == 0
    assert final[-1] == slots  # every take was given back


def test_semaphore_fifo_wakeup_and_count() -> None:
    prog = aiopim.Program("sem", nr_tasklets=4)
    s = prog.semaphore("s", 0)
    order: list[int] = []
    counts: list[int] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            t.compute(100)
            await t.flush()
            counts.append(t.sem_count(s))  # three takers wait: -3
            for _ in range(3):
                t.sem_give(s)
            counts.append(t.sem_count(s))
        else:
            t.compute(t.me())  # tasklet 1 queues first, then 2, then 3
            await t.sem_take(s)
            order.append(t.me())

    run_dpu(prog)
    assert counts == [-3, 0]
    assert order == [1, 2, 3]


def test_semaphore_count_persists_across_boots() -> None:
    prog = aiopim.Program("sem", nr_tasklets=1)
    s = prog.semaphore("s", 2)
    seen: list[int] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.sem_take(s)  # never given back: WRAM data, not an atomic bit
        seen.append(t.sem_count(s))

    with pytest.raises(aiopim.DeadlockError, match="waiting on semaphore 's'"):
        run_dpu(prog, launches=3)  # the third boot blocks forever
    assert seen == [1, 0]


# --- handshakes -------------------------------------------------------------------------------


def _rendezvous(notify_delay: int, wait_delay: int) -> dict[str, int]:
    prog = aiopim.Program("hs", nr_tasklets=2)
    log: dict[str, int] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            t.compute(notify_delay)
            await t.handshake_notify()
            log["notifier"] = t.dpu.kernel.now - t.dpu.boot_time
        else:
            t.compute(wait_delay)
            rc = await t.handshake_wait_for(0)
            log[f"waiter rc={rc}"] = t.dpu.kernel.now - t.dpu.boot_time

    run_dpu(prog)
    return log


@pytest.mark.parametrize(("notify_delay", "wait_delay"), [(500, 100), (100, 500)])
def test_handshake_waiter_first_and_notifier_first(notify_delay: int, wait_delay: int) -> None:
    times = _rendezvous(notify_delay, wait_delay)
    meet = run_time_ps(max(notify_delay, wait_delay) + timing.HANDSHAKE_INSTRUCTIONS)
    # both leave at the rendez-vous: the later arrival's time
    assert times == {"notifier": meet, "waiter rc=0": meet}


def test_handshake_second_waiter_gets_ealready() -> None:
    prog = aiopim.Program("hs", nr_tasklets=3)
    got: dict[int, tuple[int, int]] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            t.compute(1000)
            await t.handshake_notify()
        else:
            t.compute(10 * t.me())
            rc = await t.handshake_wait_for(0)
            got[t.me()] = (rc, t.errno)

    out = run_dpu(prog)
    assert out.fault is None
    assert got == {2: (EALREADY, EALREADY), 1: (0, 0)}
    assert EALREADY == 7  # the DPU C library's value, not Linux's


def test_handshake_waiting_for_yourself_blocks_forever() -> None:
    prog = aiopim.Program("hs", nr_tasklets=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.handshake_wait_for(0)

    with pytest.raises(aiopim.DeadlockError, match="handshake_wait_for"):
        run_dpu(prog)


# --- mutex pools --------------------------------------------------------------------------------
def test_mutex_pool_hashes_ids_onto_hardware_mutexes() -> None:
    prog = aiopim.Program("pool", nr_tasklets=2)
    pool = prog.mutex_pool("pool", 4)
    got: dict[tuple[int, int], int] = {}

    for other in (5, 2):  # 5 & 3 == 1: same hardware mutex as id 1; 2: another one

        @prog.main
        async def main(t: aiopim.Tasklet, other: int = other) -> None:
            ident = 1 if t.me() == 0 else other
            t.compute(t.me())  # tasklet 0 locks first
            await t.mutex_pool_lock(pool, ident)
            got[(other, t.me())] = t.dpu.kernel.now - t.dpu.boot_time
            t.compute(1000)
            await t.flush()
            t.mutex_pool_unlock(pool, ident)

        run_dpu(prog)
    assert got[(5, 1)] >= got[(5, 0)] + run_time_ps(1000)  # waited for 0's critical section
    assert got[(2, 1)] < got[(2, 0)] + run_time_ps(1000)
    with pytest.raises(ValueError, match="power of 2"):
        MutexPoolDecl("p", 3)


# --- virtual mutexes --------------------------------------------------------------------------
def test_vmutex_serialises_one_id_not_its_neighbours() -> None:
    prog = aiopim.Program("vm", nr_tasklets=3)
    vm = prog.vmutex("vm", 64, 2)
    got: dict[int, int] = {}

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        ident = [9, 9, 10][t.me()]  # 9 and 10 share a byte and a hardware mutex
        t.compute(t.me())
        await t.vmutex_lock(vm, ident)
        got[t.me()] = t.dpu.kernel.now - t.dpu.boot_time
        t.compute(1000)
        await t.flush()
        t.vmutex_unlock(vm, ident)

    run_dpu(prog)
    assert got[1] >= got[0] + run_time_ps(1000)
    assert got[2] < got[0] + run_time_ps(1000)


def test_vmutex_bits_are_wram_data_and_survive_a_reboot() -> None:
    prog = aiopim.Program("vm", nr_tasklets=1)
    vm = prog.vmutex("vm", 8, 1)
    seen: list[bool] = []

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        seen.append(t.vmutex_is_locked(vm, 3))
        if not seen[-1]:
            await t.vmutex_lock(vm, 3)  # exit holding it

    run_dpu(prog, launches=2)
    assert seen == [False, True]
    with pytest.raises(ValueError, match="multiple of 8"):
        VMutexDecl("v", 12, 1)
    with pytest.raises(ValueError, match="power of 2"):
        VMutexDecl("v", 16, 3)
