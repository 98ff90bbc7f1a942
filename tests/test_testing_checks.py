"""The toolkit's checkers: FIFO conservation, partial orders, queue invariants, the model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import aiopim
from aiopim.sdk import DPU_CALLBACK_SINGLE_CALL
from aiopim.testing import (
    Callback,
    NotModelled,
    RankQueueModel,
    Sync,
    Unordered,
    assert_fifo_conservation,
    assert_no_overtaking,
    assert_partial_order,
    assert_sync_semantics,
    fifo_conservation,
    partial_order_mismatch,
    project,
)


# --- FIFO conservation (pure) ---------------------------------------------------------------------
def test_fifo_conservation_accepts_a_faithful_fifo() -> None:
    report = fifo_conservation([1, 2, 3, 4], [True, False, True, True], [1, 3, 4])
    assert report.ok
    assert str(report) == "FIFO conservation holds"


def test_fifo_conservation_names_each_kind_of_violation() -> None:
    report = fifo_conservation(
        ["a", "b", "c", "d"], [True, True, False, True], ["b", "a", "a", "c", "z"]
    )
    assert report.lost == ["d"]
    assert report.duplicated == ["a"]
    assert report.refused_but_drained == ["c"]
    assert report.spurious == ["z"]
    assert not report.ok
    with pytest.raises(AssertionError, match=r"lost .*'d'"):
        assert_fifo_conservation(["a", "b", "c", "d"], [True, True, False, True], ["a"])


def test_fifo_conservation_order_per_channel() -> None:
    pushed = [(0, 1), (1, 1), (0, 2), (1, 2)]  # (dpu, value)
    accepted = [True] * 4
    interleaved = [(1, 1), (0, 1), (1, 2), (0, 2)]  # each DPU's FIFO in order
    assert fifo_conservation(pushed, accepted, interleaved, channel=lambda e: e[0]).ok
    assert not fifo_conservation(pushed, accepted, interleaved).ok  # one FIFO: reordered
    swapped = [(0, 2), (0, 1), (1, 1), (1, 2)]
    report = fifo_conservation(pushed, accepted, swapped, channel=lambda e: e[0])
    assert report.reordered == [(0, 0)]
    assert fifo_conservation(pushed, accepted, swapped, channel=lambda e: e[0], ordered=False).ok


def test_fifo_conservation_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="2 pushed elements but 1 push results"):
        fifo_conservation([1, 2], [True], [])


@given(
    pushes=st.lists(
        st.tuples(st.integers(0, 3), st.booleans()), max_size=30, unique_by=lambda p: p
    ),
    data=st.data(),
)
def test_fifo_conservation_detects_any_single_loss(
    pushes: list[tuple[int, bool]], data: st.DataObject
) -> None:
    pushed = [(i, v) for i, (v, _) in enumerate(pushes)]
    accepted = [ok for _, ok in pushes]
    drained = [e for e, ok in zip(pushed, accepted, strict=True) if ok]
    assert fifo_conservation(pushed, accepted, drained).ok
    if drained:
        k = data.draw(st.integers(0, len(drained) - 1))
        lossy = drained[:k] + drained[k + 1 :]
        assert fifo_conservation(pushed, accepted, lossy).lost == [drained[k]]


# --- partial orders ----------------------------------------------------------------------------
def test_partial_order_matching() -> None:
    template = ["load", Unordered("r0", "r1", "r1"), {"x", "y"}, "end"]
    assert partial_order_mismatch(["load", "r1", "r0", "r1", "y", "x", "end"], template) is None
    assert "elements 1..3" in str(
        partial_order_mismatch(["load", "r1", "r0", "r0", "y", "x", "end"], template)
    )
    assert "left after" in str(
        partial_order_mismatch(["load", "r0", "r1", "r1", "x", "y", "end", "?"], template)
    )
    assert "sequence ended" in str(
        partial_order_mismatch(["load", "r0", "r1", "r1", "x", "y"], template)
    )
    with pytest.raises(AssertionError, match="expected 'load' at 0"):
        assert_partial_order(["r0"], ["load"])


# --- queue invariants on synthetic traces ------------------------------------------------------
def _job(
    t: int, kind: str, seq: int, typ: str = "CALLBACK", rank: int = 0
) -> tuple[int, str, dict[str, object]]:
    return (t, kind, {"rank": rank, "seq": seq, "type": typ})


def test_no_overtaking_detects_a_job_starting_before_its_predecessor_ended() -> None:
    ok = [_job(0, "job_submit", 1), _job(0, "job_submit", 2), _job(0, "job_start", 1),
          _job(5, "job_end", 1), _job(5, "job_start", 2), _job(6, "job_end", 2)]  # fmt: skip
    assert_no_overtaking(ok)
    overtaking = [_job(0, "job_submit", 1), _job(0, "job_submit", 2), _job(0, "job_start", 1),
                  _job(3, "job_start", 2), _job(5, "job_end", 1)]  # fmt: skip
    with pytest.raises(AssertionError, match=r"job 2 .* started at 3 before job 1"):
        assert_no_overtaking(overtaking)
    skipped = [_job(0, "job_submit", 1), _job(0, "job_submit", 2), _job(1, "job_start", 2)]
    with pytest.raises(AssertionError, match=r"earlier job 1 .* never started"):
        assert_no_overtaking(skipped)


def test_sync_semantics_detects_a_sync_while_dpus_run() -> None:
    run = [(50, "dpu_run", {"rank": 0, "dpu": 3, "start": 10})]  # DPU 3 ran from 10 to 50
    good = [
        _job(0, "job_submit", 1, "SYNC"),
        _job(51, "job_start", 1, "SYNC"),
        _job(51, "job_end", 1, "SYNC"),
    ]
    assert_sync_semantics(run + good)
    bad = [
        _job(0, "job_submit", 1, "SYNC"),
        _job(20, "job_start", 1, "SYNC"),
        _job(20, "job_end", 1, "SYNC"),
    ]
    with pytest.raises(AssertionError, match="overlaps the run of DPU 3"):
        assert_sync_semantics(sorted(run + bad, key=lambda e: e[0]))
    parallel = [
        _job(0, "job_submit", 1, "SYNC_PARALLEL"),
        _job(20, "job_start", 1, "SYNC_PARALLEL"),
    ]
    assert_sync_semantics(run + parallel)  # a parallel job may run while DPUs run


def test_project_events() -> None:
    events = [_job(0, "job_submit", 1, "SYNC", rank=2), (1, "dpu_run", {"rank": 2, "dpu": 0})]
    assert project(events) == [("job_submit", 2, "SYNC"), ("dpu_run", 2, None)]
    assert project(events, "dpu_run", fields=("dpu",)) == [("dpu_run", 0)]


# --- model limits --------------------------------------------------------------------------------
def test_model_refuses_what_it_does_not_cover() -> None:
    model = RankQueueModel(aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=1))
    with pytest.raises(NotModelled, match="SINGLE_CALL"):
        model.predict([Callback(None, DPU_CALLBACK_SINGLE_CALL)])
    model.predict([Callback(0, DPU_CALLBACK_SINGLE_CALL)])  # one rank: modelled
    small = RankQueueModel(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=1), nr_job_slots=2)
    with pytest.raises(NotModelled, match="job slots"):
        small.predict([Callback(0, 1, 10**6), Sync(0)])
