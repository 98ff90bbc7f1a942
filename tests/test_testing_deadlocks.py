"""Deadlock reports name every blocked actor; property tests can assert 'never deadlocks'."""

from __future__ import annotations

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import aiopim
from aiopim.sdk import DPU_XFER_PARALLEL, DPU_XFER_TO_DPU, dpu_prepare_xfer, dpu_push_xfer
from aiopim.testing import (
    Op,
    OpsLog,
    Pim,
    assert_deadlocks,
    assert_never_deadlocks,
    explore_seeds,
    ops_program,
    run_ops,
    scenarios,
)

MACHINE = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=2)


def barrier_program() -> aiopim.Program:
    prog = aiopim.Program("stuck_at_barrier", nr_tasklets=2)
    prog.host("x", np.uint32, 2)
    b = prog.barrier("three", 3)  # only two tasklets will ever arrive

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.barrier_wait(b)

    return prog


def mutex_program() -> aiopim.Program:
    prog = aiopim.Program("lost_unlock", nr_tasklets=2)
    m = prog.mutex("lock")
    b = prog.barrier("both")

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me() == 0:
            await t.mutex_lock(m)  # and never unlocks
        await t.barrier_wait(b)
        if t.me() == 1:
            await t.mutex_lock(m)

    return prog


def test_report_names_host_task_rank_head_and_tasklets_at_a_barrier(pim: Pim) -> None:
    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=1)
        await dpus.load(barrier_program())
        await dpus.launch(wait=False)
        await dpus.sync()

    dead = assert_deadlocks(
        pim.execute(main, machine=MACHINE),
        "host task waiting for SYNC job(s) on rank(s) [0]",
        "rank 0: head job SYNC waiting for the rank's DPUs to stop; 1 job(s) queued",
        "DPU 0.0.0 tasklet 0 waiting on barrier 'three'",
        "DPU 0.0.0 tasklet 1 waiting on barrier 'three'",
        "DPU 0.0.1 tasklet 1 waiting on barrier 'three'",
    )
    assert len(dead.blocked) == 6


def test_report_names_a_tasklet_waiting_on_a_mutex(pim: Pim) -> None:
    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=1)
        await dpus.load(mutex_program())
        await dpus.launch()

    dead = assert_deadlocks(
        pim.execute(main, machine=MACHINE), "DPU 0.0.1 tasklet 1 waiting on mutex 'lock'"
    )
    assert not any("tasklet 0" in line for line in dead.blocked)  # it ended


def test_parallel_job_stuck_behind_sync_names_both_host_waits(pim: Pim) -> None:
    # sdk-reference.md §3.2 consequence 4: a parallel job enqueued after dpu_sync waits for the DPUs
    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=1)
        await dpus.load(barrier_program())
        await dpus.launch(wait=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(dpus.sync)
            await anyio.sleep(1e-6)  # the SYNC is queued first
            dpu_prepare_xfer(dpus, np.ones(2, np.uint32))
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 8, DPU_XFER_PARALLEL)

    dead = assert_deadlocks(
        pim.execute(main, machine=MACHINE),
        "host task waiting for SYNC job(s) on rank(s) [0]",
        "host task waiting for SYNC_PARALLEL job(s) on rank(s) [0]",
        "rank 0: head job SYNC waiting for the rank's DPUs to stop; 3 job(s) queued",
    )
    assert dead.now_ps > 0


def test_assert_never_deadlocks_reports_blocked_actors(pim: Pim) -> None:
    async def main() -> None:
        await anyio.Event().wait()

    with pytest.raises(AssertionError, match="deadlocked") as e:
        assert_never_deadlocks(pim.execute(main))
    assert isinstance(e.value.__cause__, aiopim.DeadlockError)
    with pytest.raises(AssertionError, match="expected a deadlock"):
        assert_deadlocks(pim.execute(anyio.sleep, 0))


async def host(machine: aiopim.MachineConfig, ops: list[Op]) -> OpsLog:
    dpus = await aiopim.DpuSet.alloc(nr_ranks=machine.nr_ranks)
    await dpus.load(ops_program())
    return await run_ops(dpus, ops)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), explore_seed=explore_seeds())
def test_job_sequences_never_deadlock(
    pim: Pim, scenario: tuple[aiopim.MachineConfig, list[Op]], explore_seed: int | None
) -> None:
    machine, ops = scenario
    log = assert_never_deadlocks(
        pim.execute(host, machine, ops, machine=machine, explore_seed=explore_seed)
    )
    assert len(log.results) == len(ops)
