"""The toolkit's FIFO parts: echo program, operation interpreter, strategies, conservation,
deadlocks and the shrinking of a lost-element bug."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim.host import OutputFifo
from aiopim.sdk import (
    DPU_ERR_WRAM_FIFO_FULL,
    DPU_XFER_DEFAULT,
    DpuError,
    dpu_fifo_prepare_xfer,
    dpu_fifo_push_xfer,
    get_fifo_elem,
    get_fifo_size,
)
from aiopim.testing import (
    FifoDelay,
    FifoDrain,
    FifoGeometry,
    FifoOp,
    FifoPush,
    FifoRetries,
    FifoStop,
    FifoStream,
    FifoSync,
    Pim,
    assert_deadlocks,
    assert_never_deadlocks,
    element_value,
    element_words,
    explore_seeds,
    fifo_echo_program,
    fifo_geometries,
    fifo_host,
    fifo_scenarios,
    fifo_sequences,
    fifo_streams,
    machines,
)

ASYNC_FULL = 0x80000000 | 7 << 16 | DPU_ERR_WRAM_FIFO_FULL  # PARALLEL_FIFO_PUSH, sticky


def machine(ranks: int = 1, dpus: int = 2) -> aiopim.MachineConfig:
    return aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=dpus, chip="v1B")


def stream(
    ptr_in: int = 2, ptr_out: int = 2, tasklets: int = 2, mode: str = "all", work: int = 0
) -> FifoStream:
    return FifoStream(FifoGeometry(ptr_in, 8), FifoGeometry(ptr_out, 16), tasklets, mode, work)


# --- building blocks ---------------------------------------------------------------------------
def test_geometry_and_stream_validation() -> None:
    assert FifoGeometry(3, 16).capacity == 8 and FifoGeometry(3, 16).ring_bytes == 128
    with pytest.raises(ValueError, match="ptr_size"):
        FifoGeometry(11, 8)
    with pytest.raises(ValueError, match="data_size"):
        FifoGeometry(2, 12)
    with pytest.raises(ValueError, match="must hold an input element"):
        FifoStream(FifoGeometry(2, 16), FifoGeometry(2, 8))
    with pytest.raises(ValueError, match="mode"):
        FifoStream(FifoGeometry(2, 8), FifoGeometry(2, 8), mode="some")


def test_element_encoding_round_trips() -> None:
    words = element_words(2**64 - 3, 24)
    assert words.tolist() == [2**64 - 3, 2**64 - 6, 2**64 - 9]
    assert element_value(words) == (2**64 - 3, True)
    words[2] ^= 1
    assert element_value(words) == (2**64 - 3, False)
    assert element_value(np.zeros(2, np.uint64)) == (0, True)  # a never-written slot


@settings(max_examples=30, deadline=None)
@given(geometry=fifo_geometries(max_ptr_size=10, data_sizes=(8, 16, 64)))
def test_generated_geometries_are_accepted_by_the_dpu_side(geometry: FifoGeometry) -> None:
    prog = aiopim.Program("geo")
    fifo = prog.input_fifo("q", geometry.ptr_size, geometry.data_size)
    assert fifo.capacity == geometry.capacity
    assert prog.symbols()["__q_data"].size == geometry.ring_bytes


@settings(max_examples=30, deadline=None)
@given(s=fifo_streams(max_tasklets=6))
def test_generated_streams_build_echo_programs(s: FifoStream) -> None:
    assert s.output.data_size >= s.input.data_size
    prog = fifo_echo_program(s)
    syms = prog.symbols()
    assert syms["fin"].size == 32 and syms["fout"].size == 40
    assert syms["__fout_data"].size == s.output.ring_bytes
    assert prog.nr_tasklets == s.nr_tasklets


@settings(max_examples=40, deadline=None)
@given(
    case=machines(max_ranks=2, max_dpus_per_rank=3, chips=("v1B",)).flatmap(
        lambda m: st.tuples(st.just(m), fifo_sequences(m))
    )
)
def test_generated_sequences_place_the_sync_after_the_stop(
    case: tuple[aiopim.MachineConfig, list[FifoOp]],
) -> None:
    m, ops = case
    stop = next(i for i, op in enumerate(ops) if isinstance(op, FifoStop))
    assert ops[-2:] == [FifoSync(), FifoDrain()]
    assert not any(isinstance(op, FifoSync) for op in ops[:stop])
    assert not any(isinstance(op, FifoPush) for op in ops[stop:])
    for op in ops:
        if isinstance(op, FifoPush):
            assert len(op.values) == m.nr_ranks * m.nr_dpus_per_rank
            assert op.wait or None not in op.values


# --- the interpreter on known programs ---------------------------------------------------------
def test_every_element_comes_back_in_order(pim: Pim) -> None:
    ops: list[FifoOp] = [FifoPush((10 * k, 10 * k + 1), wait=k % 2 == 0) for k in range(9)]
    ops[5:5] = [FifoDelay(20), FifoDrain()]  # 4 + 4 elements fit in the two FIFOs
    ops += [FifoStop(), FifoSync(), FifoDrain()]
    log = pim.run(fifo_host, machine(), stream(work=20), ops, machine=machine())
    assert log.errors == [None] * len(ops)
    assert Counter(d for d, _ in log.drained) == {0: 9, 1: 9}
    assert [v for d, v in log.drained if d == 1] == [10 * k + 1 for k in range(9)]
    assert log.report().ok and log.garbage == [] and log.broken_ranks == set()
    log.assert_conserved()


def test_partial_success_counts_for_the_dpus_that_had_room(pim: Pim) -> None:
    # one element every 60 µs: DPU 0 needs 55 µs for it, DPU 1 three times as long
    # (value % 3 == 2), so DPU 1 falls behind until its input FIFO is full (no retries)
    ops: list[FifoOp] = [FifoRetries(0, 0)]
    for k in range(10):
        ops += [FifoPush((3 * k, 3 * k + 2)), FifoDelay(60)]
    ops += [FifoStop(), FifoSync(), FifoDrain()]
    log = pim.run(
        fifo_host, machine(), stream(ptr_out=4, tasklets=1, work=2000), ops, machine=machine()
    )
    assert DPU_ERR_WRAM_FIFO_FULL in log.errors
    refused = [e for e, ok in zip(log.pushed, log.accepted, strict=True) if not ok]
    assert refused and all(d == 1 for d, _ in refused)  # DPU 0 always had room
    assert sorted(v for d, v in log.drained if d == 0) == [3 * k for k in range(10)]
    assert Counter(log.drained) == Counter(
        e for e, ok in zip(log.pushed, log.accepted, strict=True) if ok
    )
    log.assert_conserved()


def test_fast_path_garbage_is_accounted_for(pim: Pim) -> None:
    ops: list[FifoOp] = [FifoPush((5, 6)), FifoPush((7, None)), FifoStop(), FifoSync()]
    log = pim.run(fifo_host, machine(), stream(), ops, machine=machine())
    # the SDK's rank-wide push advances DPU 1's pointer: it reads the never-written slot 1
    assert log.garbage == [(1, 0)]
    assert any("garbage element" in q for q in log.quirks)
    assert [v for d, v in log.drained if d == 1] == [6, 0]
    log.assert_conserved()


def test_an_asynchronous_failure_breaks_the_rank(pim: Pim) -> None:
    ops: list[FifoOp] = [FifoRetries(0, 0)]
    ops += [FifoPush((k, 100 + k), wait=False) for k in range(8)]
    ops += [FifoDelay(100), FifoPush((50, 150), wait=False), FifoStop(), FifoSync()]
    log = pim.run(
        fifo_host, machine(), stream(ptr_in=1, ptr_out=1, tasklets=1, work=500), ops,
        machine=machine(),
    )  # fmt: skip
    assert log.errors[10] == ASYNC_FULL  # refused at the call: the rank stays broken
    assert log.broken_ranks == {0}
    assert log.drained == []  # nothing could be drained from the broken rank
    assert sum(log.accepted) >= 4  # 2 in the input FIFO, 1 processed, 1 in the output FIFO
    assert log.broken_rank_problems() == []
    log.assert_conserved()


def test_a_drain_flushed_on_one_rank_keeps_the_other_ranks_elements(pim: Pim) -> None:
    # rank 0's DPU takes 165 µs per element (values % 3 == 2), rank 1's 55 µs: at t = 121 µs
    # rank 0's input FIFO is full, so the asynchronous push fails there (after one 1 µs retry)
    # and flushes the drain queued behind it, while rank 1's flush job runs and takes the
    # two elements rank 1 has finished; OutputFifo.drain raises and would drop them
    m = machine(2, 1)
    ops: list[FifoOp] = [FifoRetries(0, 1), FifoPush((2, 0)), FifoDelay(60), FifoPush((5, 3))]
    ops += [FifoDelay(60), FifoPush((8, 6)), FifoDelay(1), FifoPush((11, 9), wait=False)]
    ops += [FifoDrain(), FifoStop(), FifoSync()]
    s = stream(ptr_in=1, ptr_out=3, tasklets=1, mode="each", work=2000)
    log = pim.run(fifo_host, m, s, ops, machine=m)
    assert log.errors[8] == DPU_ERR_WRAM_FIFO_FULL and log.broken_ranks == set()
    assert log.drained[:2] == [(1, 0), (1, 3)]  # recovered from the failed drain
    assert [v for d, v in log.drained if d == 1] == [0, 3, 6, 9]
    assert [v for d, v in log.drained if d == 0] == [2, 5, 8]
    log.assert_conserved()


# --- the default property -------------------------------------------------------------------------
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=fifo_scenarios(min_size=4), explore_seed=explore_seeds())
def test_fifo_conservation_under_any_program_and_schedule(
    pim: Pim,
    scenario: tuple[aiopim.MachineConfig, FifoStream, list[FifoOp]],
    explore_seed: int | None,
) -> None:
    m, s, ops = scenario
    run = pim.execute(fifo_host, m, s, ops, machine=m, explore_seed=explore_seed)
    log = assert_never_deadlocks(run)
    log.assert_conserved()
    assert len(log.results) == len(ops)


# --- the property with cancelled pushes and drains ------------------------------------------------
def check_conserved_with_cancels(
    pim: Pim,
    scenario: tuple[aiopim.MachineConfig, FifoStream, list[FifoOp]],
    explore_seed: int | None,
) -> None:
    """Whatever push or drain the host cancels, at whatever point: every element accepted
    comes back once, from a later drain if the flush of a cancelled one took it out."""
    m, s, ops = scenario
    run = pim.execute(fifo_host, m, s, ops, machine=m, explore_seed=explore_seed)
    log = assert_never_deadlocks(run)
    log.assert_conserved()
    assert len(log.results) == len(ops)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=fifo_scenarios(min_size=4, cancels=True), explore_seed=explore_seeds())
def test_fifo_conservation_when_pushes_and_drains_are_cancelled(
    pim: Pim,
    scenario: tuple[aiopim.MachineConfig, FifoStream, list[FifoOp]],
    explore_seed: int | None,
) -> None:
    check_conserved_with_cancels(pim, scenario, explore_seed)


@pytest.mark.long
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=fifo_scenarios(min_size=4, cancels=True), explore_seed=explore_seeds())
def test_fifo_conservation_when_pushes_and_drains_are_cancelled_long(
    pim: Pim,
    scenario: tuple[aiopim.MachineConfig, FifoStream, list[FifoOp]],
    explore_seed: int | None,
) -> None:
    check_conserved_with_cancels(pim, scenario, explore_seed)


def test_a_drain_cancelled_before_its_flush_ran_returns_with_the_next(pim: Pim) -> None:
    # the reproduction as operations: 3 elements per DPU, then a drain cancelled at
    # its first wait (its flush still runs), then the stop, the sync and a last drain
    m = machine(1, 4)
    ops: list[FifoOp] = [FifoPush(tuple(10 * i + k for i in range(4))) for k in range(3)]
    ops += [FifoDelay(200), FifoDrain(cancel_us=0), FifoStop(), FifoSync(), FifoDrain()]
    log = pim.run(fifo_host, m, stream(ptr_in=2, ptr_out=3), ops, machine=m)
    assert Counter(d for d, _ in log.drained) == {0: 3, 1: 3, 2: 3, 3: 3}  # 12 of 12
    log.assert_conserved()


@settings(max_examples=30, deadline=None)
@given(ops=fifo_sequences(machine(1, 2), cancels=True))
def test_generated_cancels_are_on_pushes_and_drains_only(ops: list[FifoOp]) -> None:
    for op in ops:
        if not isinstance(op, FifoPush | FifoDrain):
            assert getattr(op, "cancel_us", None) is None
    assert ops[-2:] == [FifoSync(), FifoDrain()]


# --- deadlock property -----------------------------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.tuples(
        machines(max_ranks=2, max_dpus_per_rank=2, chips=("v1B",)),
        fifo_streams(max_tasklets=3),
    ).flatmap(
        lambda ms: st.tuples(
            st.just(ms[0]),
            st.just(ms[1]),
            fifo_sequences(ms[0], max_size=6, asynchronous=False, sync_before_stop=True),
        )
    ),
    explore_seed=explore_seeds(),
)
def test_a_sync_queued_before_the_stop_deadlocks(
    pim: Pim,
    scenario: tuple[aiopim.MachineConfig, FifoStream, list[FifoOp]],
    explore_seed: int | None,
) -> None:
    m, s, ops = scenario
    assert ops[-2:] == [FifoSync(safe=False), FifoStop()]
    run = pim.execute(fifo_host, m, s, ops, machine=m, explore_seed=explore_seed)
    ranks = list(range(m.nr_ranks))
    tasklets = [
        f"DPU {r}.0.{d} tasklet {t} waiting on input FIFO 'fin'"
        for r in ranks
        for d in range(m.nr_dpus_per_rank)
        for t in range(s.nr_tasklets)
    ]
    dead = assert_deadlocks(run, f"host task waiting for SYNC job(s) on rank(s) {ranks}", *tasklets)
    heads = [f"rank {r}: head job SYNC waiting for the rank's DPUs to stop" for r in ranks]
    assert all(any(h in line for line in dead.blocked) for h in heads)
    assert len(dead.blocked) == 1 + len(ranks) + len(tasklets)  # nothing else is blocked


# --- shrinking a lost-element bug ------------------------------------------------------------
async def rectangular_drain(fout: OutputFifo) -> list[np.ndarray]:
    """BUG (on purpose): reads min(get_fifo_size) elements from every DPU, to get a
    rectangular array, and so ignores the real element count of the fuller DPUs."""
    link, dpus = fout.link, fout.dpus
    rings = [np.zeros(link.ring_bytes, np.uint8) for _ in range(len(dpus))]
    for one, ring in zip(dpus.iter_dpus(), rings, strict=True):
        dpu_fifo_prepare_xfer(one, link, ring)
    await dpu_fifo_push_xfer(dpus, link, DPU_XFER_DEFAULT)
    n = min(get_fifo_size(link, one) for one in dpus.iter_dpus())
    return [
        np.array(
            [get_fifo_elem(link, one, ring, i).view(np.uint64) for i in range(n)], np.uint64
        ).reshape(n, fout.items_per_element)
        for one, ring in zip(dpus.iter_dpus(), rings, strict=True)
    ]


@pytest.mark.long  # shrinking takes about 8 s of CPU
def test_a_lost_element_bug_is_found_and_shrunk() -> None:
    pim, m = Pim("asyncio"), machine(1, 2)  # shrinking is the slow part: one backend
    s = stream(ptr_in=1, ptr_out=1, tasklets=1, work=40)
    failing: list[tuple[list[FifoOp], str]] = []

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(ops=fifo_sequences(m, max_size=8, asynchronous=False))
    def drain_keeps_everything(ops: list[FifoOp]) -> None:
        log = pim.run(fifo_host, m, s, ops, rectangular_drain, machine=m)
        report = log.report()
        if not report.ok:
            failing.append((ops, str(report)))
        assert report.ok, str(report)

    with pytest.raises(AssertionError, match="lost"):
        drain_keeps_everything()
    ops, report = failing[-1]  # Hypothesis reports the shrunk example last
    # a single push whose two elements take different times (the work depends on the value)
    # is enough: a drain while only one DPU has finished reads min(1, 0) = 0 elements
    assert report.startswith("lost (accepted, never drained)")
    assert sum(isinstance(op, FifoPush) for op in ops) == 1 and isinstance(ops[0], FifoPush)
    assert len(ops) <= 6 and FifoDrain() in ops[1:-2]
    # the same host program with OutputFifo.drain keeps everything
    pim.run(fifo_host, m, s, ops, machine=m).assert_conserved()


# --- a bug in OutputFifo.drain ---------------------------------------------------------------
def slow_rank0_program() -> aiopim.Program:
    """Echo; the DPU of rank 0 takes 1 ms per element, the others are quick."""
    prog = aiopim.Program("slow_rank0", nr_tasklets=1)
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("fin", 1, 8)
    fout = prog.output_fifo("fout", 3, 8)
    mutex = prog.mutex("m")

    async def process(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        if t.dpu.rank.index == 0:
            t.compute(40_000)
            await t.flush()
        out[:] = element

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.process_inputs_each_tasklet(fin, fout, process, mutex, active)

    return prog


def test_output_drain_keeps_what_healthy_ranks_flushed(backend: str) -> None:
    async def main() -> tuple[list[int], list[int]]:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=2)
        await dpus.load(slow_rank0_program())
        fin = dpus.link_input_fifo("fin", np.uint64)
        fout = dpus.link_output_fifo("fout", np.uint64)
        fin.max_retries, fin.time_for_retry_us = 0, 1
        await dpus.launch(wait=False)
        for k in range(4):  # rank 0: 2 in its FIFO + 1 in process; the 4th push fails
            await fin.push([k, 100 + k], wait=False)
        with pytest.raises(DpuError) as err:  # queued behind the failing push on rank 0
            await fout.drain()
        assert err.value.code == DPU_ERR_WRAM_FIFO_FULL
        await dpus.ranks[1].copy_to("active", np.zeros(1, np.uint64), parallel=True)
        await dpus.ranks[1].sync()
        # the failed drain returned nothing; the next one returns what rank 1's flush took,
        # before anything newer
        got: list[int] = []
        batches = await OutputFifo(dpus.ranks[1], fout.link, np.uint64).drain()
        assert [len(b) for b in batches] == [0]  # another link object holds nothing
        for batch in await fout.drain():
            got += [int(x) for x in batch[:, 0]]
        return got, [100 + k for k in range(4)]

    got, want = aiopim.run(main, backend=backend, machine=machine(2, 1))
    assert got == want
