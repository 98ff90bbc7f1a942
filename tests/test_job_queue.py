"""Rank job-queue rules against the toolkit's sequential reference model (Hypothesis).

``aiopim.testing.RankQueueModel`` computes, from the SDK's queue rules alone, the start and
end of every job, each host call's return time, every callback call and every byte read
back; the emulator must agree on both backends and under any exploration seed.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import aiopim
from aiopim import timing
from aiopim.sdk import DPU_XFER_ASYNC, DPU_XFER_PARALLEL
from aiopim.testing import (
    Launch,
    Op,
    OpsLog,
    Pim,
    RankQueueModel,
    Transfer,
    assert_deterministic,
    assert_no_overtaking,
    assert_sync_semantics,
    explore_seeds,
    observed_jobs,
    ops_program,
    run_ops,
    run_time_ps,
    scenarios,
)

INSTRUCTIONS = 400


async def host(machine: aiopim.MachineConfig, ops: list[Op]) -> OpsLog:
    dpus = await aiopim.DpuSet.alloc(nr_ranks=machine.nr_ranks)
    await dpus.load(ops_program(INSTRUCTIONS))
    return await run_ops(dpus, ops)


def check_against_model(
    pim: Pim, machine: aiopim.MachineConfig, ops: list[Op], explore_seed: int | None
) -> None:
    run = pim.execute(host, machine, ops, machine=machine, explore_seed=explore_seed)
    log = run.unwrap()
    RankQueueModel(machine, instructions=INSTRUCTIONS).check(run.emulator, log, ops)
    assert_sync_semantics(run)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), explore_seed=explore_seeds())
def test_rank_queue_matches_reference_model(
    pim: Pim, scenario: tuple[aiopim.MachineConfig, list[Op]], explore_seed: int | None
) -> None:
    machine, ops = scenario
    check_against_model(pim, machine, ops, explore_seed)


@settings(max_examples=15, deadline=None)
@given(scenario=scenarios(), explore_seed=explore_seeds())
def test_trace_identical_across_runs_and_backends(
    scenario: tuple[aiopim.MachineConfig, list[Op]], explore_seed: int | None
) -> None:
    machine, ops = scenario
    assert_deterministic(host, machine, ops, machine=machine, explore_seed=explore_seed, repeat=2)


def test_parallel_job_never_overtakes_waiting_job(pim: Pim) -> None:
    machine = aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=2)
    data = (bytes(16), bytes(16))
    ops: list[Op] = [
        Launch(0, wait=False),
        Transfer(0, True, "x", 0, 16, DPU_XFER_ASYNC, data),
        Transfer(0, True, "x", 0, 16, DPU_XFER_PARALLEL, data),
    ]
    run = pim.execute(host, machine, ops, machine=machine)
    run.unwrap()
    assert_no_overtaking(run)
    jobs = observed_jobs(run.emulator)[0]
    push = next(j for j in jobs if j.type == "COPY_WRAM_TO_MATRIX")
    ppush = next(j for j in jobs if j.type == "PARALLEL_COPY_WRAM_TO_MATRIX")
    assert ppush.start == push.end  # waited for the earlier non-parallel push ...
    launch = next(j for j in jobs if j.type == "LAUNCH_RANK")
    run_end = launch.end + run_time_ps("v1B", INSTRUCTIONS) + timing.COMPLETION_POLL_LATENCY_PS
    assert push.start == run_end  # ... which waited for the DPUs to stop


@pytest.mark.long
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), explore_seed=explore_seeds())
def test_rank_queue_matches_reference_model_long(
    pim: Pim, scenario: tuple[aiopim.MachineConfig, list[Op]], explore_seed: int | None
) -> None:
    machine, ops = scenario
    check_against_model(pim, machine, ops, explore_seed)
