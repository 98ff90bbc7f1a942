"""Rank job-queue rules against a small sequential reference model (Hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from helpers import emu, run_time_ps, spin_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim import timing
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_DEFAULT,
    DPU_CALLBACK_PARALLEL,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_PARALLEL,
    DPU_XFER_TO_DPU,
    dpu_alloc,
    dpu_callback,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_rank_foreach,
    dpu_sync,
)

NR_RANKS = 3
DPUS_PER_RANK = 2
RUN_INSTR = 400  # each launch runs 400 instructions on one tasklet
RUN_PS = run_time_ps(RUN_INSTR)
XFER_BYTES = 16


@dataclass(frozen=True)
class Op:
    kind: str  # launch | push | ppush | cb | pcb | sync
    rank: int  # -1: every rank
    wait: bool


ops_strategy = st.lists(
    st.builds(
        Op,
        st.sampled_from(["launch", "push", "ppush", "cb", "pcb", "sync"]),
        st.integers(-1, NR_RANKS - 1),
        st.booleans(),
    ),
    min_size=1,
    max_size=14,
)


def model(ops: list[Op]) -> dict[int, list[tuple[str, int, int]]]:
    """Reference: per rank, (job type, start, end) from the spec's rule, sequentially."""
    prev_end = [0] * NR_RANKS
    dpus_free = [0] * NR_RANKS
    jobs: dict[int, list[tuple[str, int, int]]] = {r: [] for r in range(NR_RANKS)}
    now = 0
    load = timing.load_time_ps(sum(len(im.data) for im in spin_program(RUN_INSTR).images()))
    for r in range(NR_RANKS):  # dpu_load: LOAD + SYNC on every rank at t=0
        jobs[r] += [("LOAD", 0, load), ("SYNC", load, load)]
        prev_end[r] = load
    now = load

    def job(r: int, name: str, dur: int, parallel: bool, submit: int) -> int:
        start = max(submit, prev_end[r])
        if not parallel:
            start = max(start, dpus_free[r])
        end = start + dur
        prev_end[r] = end
        jobs[r].append((name, start, end))
        if name == "LAUNCH_RANK":
            dpus_free[r] = end + RUN_PS + timing.COMPLETION_POLL_LATENCY_PS
        return end

    for op in ops:
        ranks = range(NR_RANKS) if op.rank < 0 else [op.rank]
        ends = []
        for r in ranks:
            if op.kind == "launch":
                job(r, "LAUNCH_RANK", timing.LAUNCH_BOOT_LATENCY_PS, False, now)
                par = False
            elif op.kind == "push":
                dur = timing.transfer_time_ps("to", [XFER_BYTES] * DPUS_PER_RANK)
                job(r, "COPY_WRAM_TO_MATRIX", dur, False, now)
                par = False
            elif op.kind == "ppush":
                dur = timing.transfer_time_ps("parallel", [XFER_BYTES] * DPUS_PER_RANK)
                job(r, "PARALLEL_COPY_WRAM_TO_MATRIX", dur, True, now)
                par = True
            elif op.kind in ("cb", "pcb"):
                par = op.kind == "pcb"
                job(r, "CALLBACK_PARALLEL" if par else "CALLBACK", 0, par, now)
            else:
                par = False
            if op.kind == "sync" or op.wait:
                ends.append(job(r, "SYNC_PARALLEL" if par else "SYNC", 0, par, now))
        if ends:
            now = max(ends)
    return jobs


async def host(ops: list[Op]) -> None:
    dpus = await dpu_alloc(NR_RANKS * DPUS_PER_RANK, "")
    await dpu_load(dpus, spin_program(RUN_INSTR))
    ranks = [r for r, _ in dpu_rank_foreach(dpus)]
    data = np.zeros(4, np.uint32)
    for op in ops:
        target = dpus if op.rank < 0 else ranks[op.rank]
        if op.kind == "launch":
            await dpu_launch(target, DPU_SYNCHRONOUS if op.wait else DPU_ASYNCHRONOUS)
        elif op.kind in ("push", "ppush"):
            dpu_prepare_xfer(target, data)
            flags = (0 if op.wait else DPU_XFER_ASYNC) | (
                DPU_XFER_PARALLEL if op.kind == "ppush" else 0
            )
            await dpu_push_xfer(target, DPU_XFER_TO_DPU, "x", 0, XFER_BYTES, flags)
        elif op.kind in ("cb", "pcb"):
            flags = (DPU_CALLBACK_DEFAULT if op.wait else DPU_CALLBACK_ASYNC) | (
                DPU_CALLBACK_PARALLEL if op.kind == "pcb" else 0
            )
            await dpu_callback(target, lambda s, r, a: None, None, flags)
        else:
            await dpu_sync(target)
    await dpu_sync(dpus)


def observed(e: aiopim.Emulator) -> dict[int, list[tuple[str, int, int]]]:
    assert e.recorder is not None
    out: dict[int, list[tuple[str, int, int]]] = {r: [] for r in range(NR_RANKS)}
    for row in e.recorder.jobs():
        out[row["rank"]].append((row["type"], row["start"], row["end"]))
    for r in out:
        out[r] = out[r][:-1]  # drop the final dpu_sync added by host()
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_strategy, backend=st.sampled_from(["asyncio", "trio"]))
def test_rank_queue_matches_reference_model(ops: list[Op], backend: str) -> None:
    check_against_model(ops, backend)


def check_against_model(ops: list[Op], backend: str) -> None:
    e = emu(ranks=NR_RANKS, dpus=DPUS_PER_RANK)
    e.run(host, ops, backend=backend)
    assert observed(e) == model(ops)


@settings(max_examples=25, deadline=None)
@given(ops=ops_strategy)
def test_trace_identical_across_runs_and_backends(ops: list[Op]) -> None:
    traces = []
    for backend in ("asyncio", "trio", "asyncio"):
        e = emu(ranks=NR_RANKS, dpus=DPUS_PER_RANK)
        e.run(host, ops, backend=backend)
        assert e.recorder is not None
        traces.append(e.recorder.to_jsonl())
    assert traces[0] == traces[1] == traces[2]


def test_parallel_job_never_overtakes_waiting_job() -> None:
    ops = [Op("launch", 0, False), Op("push", 0, False), Op("ppush", 0, True)]
    e = emu(ranks=NR_RANKS, dpus=DPUS_PER_RANK)
    e.run(host, ops)
    jobs = observed(e)[0]
    push = next(j for j in jobs if j[0] == "COPY_WRAM_TO_MATRIX")
    ppush = next(j for j in jobs if j[0] == "PARALLEL_COPY_WRAM_TO_MATRIX")
    assert ppush[1] >= push[2]  # waited for the earlier non-parallel push (after the DPUs)
    assert push[1] >= RUN_PS


@pytest.mark.long
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_strategy, backend=st.sampled_from(["asyncio", "trio"]))
def test_rank_queue_matches_reference_model_long(ops: list[Op], backend: str) -> None:
    check_against_model(ops, backend)
