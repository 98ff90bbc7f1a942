"""The rank job queue as a sequential reference model (sdk-reference.md §3), for op sequences.

The model replays the host's operations in program order and computes, from the queue rules
alone, the start and end of every job, when each host call returns, every callback call and
the bytes every transfer from the DPUs reads. It knows nothing of the kernel, so comparing it
with a recorded run checks the emulator (and an exploration seed must not change the result).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import timing
from .._emulator import Emulator
from .._errors import DpuErrorCode
from .._machine._config import MachineConfig
from .._machine._program import DpuProgram, MemorySpace
from .._ops._flags import ALL_RANKS_ID
from ..sdk import (
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_NONBLOCKING,
    DPU_CALLBACK_PARALLEL,
    DPU_CALLBACK_SINGLE_CALL,
    DPU_XFER_ASYNC,
    DPU_XFER_PARALLEL,
)
from ._harness import recorder_of
from ._jobs import (
    Broadcast,
    Callback,
    CallbackCall,
    Launch,
    Op,
    OpResult,
    OpsLog,
    Target,
    Transfer,
    ops_program,
    run_time_ps,
    target_dpus,
)


class NotModelled(Exception):
    """The operation sequence uses something the sequential model does not cover."""


@dataclass(frozen=True)
class ModelJob:
    """One job of a rank queue: its type name, start and end (picoseconds)."""

    type: str
    start: int
    end: int


@dataclass
class Prediction:
    """What the model says a run of an operation sequence must show."""

    jobs: dict[int, list[ModelJob]] = field(default_factory=dict)
    results: list[OpResult] = field(default_factory=list)
    calls: list[CallbackCall] = field(default_factory=list)
    reads: dict[int, np.ndarray] = field(default_factory=dict)


class RankQueueModel:
    """Sequential reference model of the rank queues of ``machine`` running ``program``.

    ``program`` must behave like :func:`~aiopim.testing.ops_program`: one tasklet issuing
    ``instructions``, symbols ``x`` (WRAM) and ``m`` (MRAM) untouched by the DPU. Not modelled
    (raise :class:`NotModelled`): a synchronous ``DPU_CALLBACK_SINGLE_CALL`` on several ranks
    (it locks other ranks mid-queue) and job-slot back-pressure.
    """

    def __init__(
        self,
        machine: MachineConfig,
        program: DpuProgram | None = None,
        *,
        instructions: int = 400,
        nr_job_slots: int = 16,
    ) -> None:
        self.machine = machine
        self.program = program if program is not None else ops_program(instructions)
        self.run_ps = run_time_ps(machine.chip, instructions)
        self.load_ps = timing.load_time_ps(sum(len(im.data) for im in self.program.images()))
        self.nr_job_slots = nr_job_slots
        self.symbols = dict(self.program.symbols())

    # -- public -------------------------------------------------------------------------------
    def predict(self, ops: Sequence[Op], *, final_sync: bool = True) -> Prediction:
        """Jobs, host results, callback calls and reads of ``ops`` after ``dpu_load`` at t=0."""
        return _Run(self, ops, final_sync).prediction

    def check(self, emulator: Emulator, log: OpsLog, ops: Sequence[Op]) -> Prediction:
        """Assert that a recorded run of ``ops`` (``run_ops`` with ``final_sync``) matches."""
        expected = self.predict(ops)
        assert_run_matches(emulator, log, expected)
        return expected


def observed_jobs(emulator: Emulator) -> dict[int, list[ModelJob]]:
    """Per rank, the recorded jobs in queue order, in the model's terms."""
    out: dict[int, list[ModelJob]] = {}
    for row in sorted(recorder_of(emulator).jobs(), key=lambda r: (r["rank"], r["seq"])):
        out.setdefault(row["rank"], []).append(ModelJob(row["type"], row["start"], row["end"]))
    return out


def assert_run_matches(emulator: Emulator, log: OpsLog, expected: Prediction) -> None:
    """Compare a recorded run with a :class:`Prediction`; the message names the first mismatch."""
    seen = observed_jobs(emulator)
    for rank in sorted(set(seen) | set(expected.jobs)):
        got, want = seen.get(rank, []), expected.jobs.get(rank, [])
        if got != want:
            i = next(
                (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                min(len(got), len(want)),
            )
            raise AssertionError(
                f"rank {rank}: job #{i} differs from the reference model: "
                f"observed {got[i] if i < len(got) else None}, "
                f"expected {want[i] if i < len(want) else None}\n"
                f"  observed: {got}\n  expected: {want}"
            )
    for got_r, want_r in zip(log.results, expected.results, strict=True):
        if got_r != want_r:
            raise AssertionError(f"op {got_r.index}: observed {got_r}, expected {want_r}")
    key = _call_key
    if sorted(log.calls, key=key) != sorted(expected.calls, key=key):
        raise AssertionError(
            f"callback calls differ:\n  observed {sorted(log.calls, key=key)}\n"
            f"  expected {sorted(expected.calls, key=key)}"
        )
    for i, want_a in expected.reads.items():
        got_a = log.reads.get(i)
        if got_a is None or not np.array_equal(got_a, want_a):
            raise AssertionError(f"op {i}: read {got_a!r}, expected {want_a!r}")


def _call_key(c: CallbackCall) -> tuple[int, int, int, int]:
    return (c.time_ps, c.op, c.rank_id, c.nr_dpus)


def _nr_on(members: list[tuple[int, int]], rank: int) -> int:
    """How many of the ``(rank, DPU)`` pairs ``members`` are on ``rank``."""
    return sum(1 for r, _ in members if r == rank)


class _Run:
    """One prediction: per-rank timelines advanced operation by operation."""

    def __init__(self, model: RankQueueModel, ops: Sequence[Op], final_sync: bool) -> None:
        self.m = model
        machine = model.machine
        n = machine.nr_ranks
        self.prev_end = [0] * n
        self.dpus_free = [0] * n
        self.prediction = Prediction(jobs={r: [] for r in range(n)})
        initial = self._initial_memory()
        self.memory: dict[tuple[int, int], dict[str, bytearray]] = {
            (r, d): {name: bytearray(data) for name, data in initial.items()}
            for r in range(n)
            for d in range(machine.nr_dpus_per_rank)
        }
        self.now = 0
        for r in range(n):  # dpu_load: LOAD + SYNC on every rank
            self.job(r, "LOAD", model.load_ps, parallel=False)
            self.job(r, "SYNC", 0, parallel=False)
        self.now = model.load_ps
        for i, op in enumerate(ops):
            called = self.now
            error = self.play(i, op)
            self.prediction.results.append(OpResult(i, called, self.now, error))
        if final_sync:
            self.sync_ranks(list(range(n)), parallel=False)

    def _initial_memory(self) -> dict[str, bytes]:
        """Contents of each WRAM/MRAM symbol after ``dpu_load`` (zeros, then the images)."""
        out: dict[str, bytes] = {}
        images = self.m.program.images()
        for name, sym in self.m.symbols.items():
            if sym.space is MemorySpace.IRAM or sym.size > 1 << 20:
                continue  # IRAM and the MRAM heap are never transfer targets here
            mem = bytearray(sym.size)
            for im in images:
                lo = im.address - sym.address
                if 0 <= lo < sym.size:
                    chunk = im.data[: sym.size - lo]
                    mem[lo : lo + len(chunk)] = chunk
            out[name] = bytes(mem)
        return out

    # -- timeline -----------------------------------------------------------------------------
    def job(self, r: int, name: str, duration: int, *, parallel: bool) -> tuple[int, int]:
        start = max(self.now, self.prev_end[r])
        if not parallel:
            start = max(start, self.dpus_free[r])
        end = start + duration
        self.prev_end[r] = end
        self.prediction.jobs[r].append(ModelJob(name, start, end))
        return start, end

    def set_end(self, r: int, end: int) -> None:
        last = self.prediction.jobs[r][-1]
        self.prediction.jobs[r][-1] = ModelJob(last.type, last.start, end)
        self.prev_end[r] = end

    def sync_ranks(self, ranks: list[int], *, parallel: bool) -> None:
        name = "SYNC_PARALLEL" if parallel else "SYNC"
        self.now = max(self.job(r, name, 0, parallel=parallel)[1] for r in ranks)

    def check_slots(self, ranks: list[int], need: int) -> None:
        for r in ranks:
            busy = sum(1 for j in self.prediction.jobs[r] if j.end >= self.now)
            if busy + need > self.m.nr_job_slots:
                raise NotModelled(
                    f"rank {r} may run out of its {self.m.nr_job_slots} job slots "
                    "(back-pressure is not modelled); use shorter sequences"
                )

    # -- operations ---------------------------------------------------------------------------
    def ranks_of(self, target: Target) -> list[int]:
        if target is None:
            return list(range(self.m.machine.nr_ranks))
        return [target] if isinstance(target, int) else [target[0]]

    def play(self, i: int, op: Op) -> int | None:
        if isinstance(op, Launch):
            return self.launch(op)
        if isinstance(op, Transfer):
            return self.transfer(i, op)
        if isinstance(op, Broadcast):
            return self.broadcast(op)
        if isinstance(op, Callback):
            return self.callback(i, op)
        ranks = self.ranks_of(op.target)
        self.check_slots(ranks, 2)  # dpu_sync waits for 2 free slots, like any sync call
        self.sync_ranks(ranks, parallel=False)
        return None

    def launch(self, op: Launch) -> int | None:
        ranks = self.ranks_of(op.target)
        self.check_slots(ranks, 2 if op.wait else 1)
        name = "LAUNCH_DPU" if isinstance(op.target, tuple) else "LAUNCH_RANK"
        for r in ranks:
            _, end = self.job(r, name, timing.LAUNCH_BOOT_LATENCY_PS, parallel=False)
            self.dpus_free[r] = end + self.m.run_ps + timing.COMPLETION_POLL_LATENCY_PS
        if op.wait:
            self.sync_ranks(ranks, parallel=False)
        return None

    def space(self, symbol: str) -> MemorySpace:
        if symbol not in self.m.symbols:
            raise NotModelled(f"unknown symbol {symbol!r}")
        return self.m.symbols[symbol].space

    def transfer(self, i: int, op: Transfer) -> int | None:
        space = self.space(op.symbol)
        single = isinstance(op.target, tuple)
        no_parallel_path = self.m.machine.chip != "v1B" or space is not MemorySpace.WRAM
        if op.flags & DPU_XFER_PARALLEL and not single and no_parallel_path:
            return int(DpuErrorCode.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER)
        parallel = bool(op.flags & DPU_XFER_PARALLEL) and not single
        wait = not op.flags & DPU_XFER_ASYNC
        ranks = self.ranks_of(op.target)
        self.check_slots(ranks, 2 if wait else 1)
        sp = space.name
        if parallel:
            name = "PARALLEL_COPY_WRAM_TO_MATRIX" if op.to_dpu else "PARALLEL_COPY_WRAM_FROM_MATRIX"
            kind = "parallel"
        else:
            name = f"COPY_{sp}_TO_MATRIX" if op.to_dpu else f"COPY_{sp}_FROM_MATRIX"
            kind = "to" if op.to_dpu else "from"
        members = target_dpus(self.m.machine, op.target)
        for r in ranks:
            n = _nr_on(members, r)
            self.job(r, name, timing.transfer_time_ps(kind, [op.length] * n), parallel=parallel)
        lo, hi = op.offset, op.offset + op.length
        if op.to_dpu:
            assert op.data is not None
            for key, data in zip(members, op.data, strict=True):
                self.memory[key][op.symbol][lo:hi] = data[: op.length]
        else:
            rows = [
                np.frombuffer(bytes(self.memory[k][op.symbol][lo:hi]), np.uint8) for k in members
            ]
            self.prediction.reads[i] = np.array(rows, dtype=np.uint8).reshape(
                len(members), op.length
            )
        if wait:
            self.sync_ranks(ranks, parallel=parallel)
        return None

    def broadcast(self, op: Broadcast) -> int | None:
        space = self.space(op.symbol)
        single = isinstance(op.target, tuple)
        wait = not op.flags & DPU_XFER_ASYNC
        ranks = self.ranks_of(op.target)
        self.check_slots(ranks, 2 if wait else 1)
        members = target_dpus(self.m.machine, op.target)
        name = f"COPY_{space.name}_TO_{'MATRIX' if single else 'RANK'}"
        kind = "to" if single else "broadcast"
        for r in ranks:
            n = _nr_on(members, r)
            self.job(r, name, timing.transfer_time_ps(kind, [len(op.data)] * n), parallel=False)
        for key in members:
            self.memory[key][op.symbol][op.offset : op.offset + len(op.data)] = op.data
        if wait:
            self.sync_ranks(ranks, parallel=False)
        return None

    def callback(self, i: int, op: Callback) -> int | None:
        flags = op.flags
        if flags & DPU_CALLBACK_NONBLOCKING and not flags & DPU_CALLBACK_ASYNC:
            return int(DpuErrorCode.DPU_ERR_NONBLOCKING_SYNC_CALLBACK)
        is_async = bool(flags & DPU_CALLBACK_ASYNC)
        blocking = not flags & DPU_CALLBACK_NONBLOCKING
        single_call = bool(flags & DPU_CALLBACK_SINGLE_CALL)
        parallel = bool(flags & DPU_CALLBACK_PARALLEL)
        name = "CALLBACK_PARALLEL" if parallel else "CALLBACK"
        single_dpu = isinstance(op.target, tuple)
        ranks = self.ranks_of(op.target)
        members = target_dpus(self.m.machine, op.target)
        dur = op.duration_ps if blocking else 0
        calls = self.prediction.calls
        self.check_slots(ranks, 1 if is_async else 2)
        if single_call and not is_async and not single_dpu:
            if len(ranks) > 1:
                raise NotModelled("a synchronous SINGLE_CALL callback on several ranks")
            start, _ = self.job(ranks[0], name, 0, parallel=parallel)
            calls.append(CallbackCall(i, ALL_RANKS_ID, len(members), start))
            self.set_end(ranks[0], start + dur)
            self.sync_ranks(ranks, parallel=parallel)
            return None
        if single_call and len(ranks) > 1:
            starts = [self.job(r, name, 0, parallel=parallel)[0] for r in ranks]
            last = max(starts)
            calls.append(CallbackCall(i, ALL_RANKS_ID, len(members), last))
            for r, s in zip(ranks, starts, strict=True):
                self.set_end(r, last + dur if blocking else s)
            return None
        for k, r in enumerate(ranks):
            start, _ = self.job(r, name, 0, parallel=parallel)
            if single_dpu:
                calls.append(CallbackCall(i, ALL_RANKS_ID, 1, start))
            else:
                calls.append(CallbackCall(i, k, _nr_on(members, r), start))
            self.set_end(r, start + dur)
        if not is_async:
            self.sync_ranks(ranks, parallel=parallel)
        return None
