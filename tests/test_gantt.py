"""Gantt plots show everything they draw: the time axis covers the last bar and marker, in a
unit that suits the span; host waits say what they wait on; stalled DPUs are drawn stalled."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aiopim.scenario import load_scenario, replay
from aiopim.trace import COLOURS, Timeline, gantt, plot_timelines
from aiopim.trace._gantt import RIGHT_MARGIN
from aiopim.trace._timeline import HOST_PID, rank_pid

pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex
from matplotlib.ticker import ScalarFormatter

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def drawn_right_edge(ax: Any) -> tuple[float, float]:
    """Rightmost x (µs) of the bars and of the markers the axes hold."""
    bars, marks = 0.0, 0.0
    for c in ax.collections:
        if isinstance(c, PolyCollection):
            for path in c.get_paths():
                bars = max(bars, float(np.max(path.vertices[:, 0])))
        elif isinstance(c, PathCollection):
            offsets = np.asarray(c.get_offsets())
            if len(offsets):
                marks = max(marks, float(np.max(offsets[:, 0])))
    return bars, marks


def assert_covers(ax: Any, tl: Timeline) -> None:
    left, right = ax.get_xlim()
    bars, marks = drawn_right_edge(ax)
    assert left == 0
    assert bars > 0
    assert right >= bars and right > marks  # nothing is cut at the right edge
    assert right >= tl.end_ps / 1e6
    last = max(bars, marks, tl.end_ps / 1e6)
    assert right == pytest.approx(last * (1 + RIGHT_MARGIN))  # a small margin, not a gap
    # a marker needs room for half its width: the margin gives it at least 2 % of the span
    assert right - marks >= RIGHT_MARGIN * last * 0.99


def timeline_of(name: str) -> Timeline:
    return replay(load_scenario(ROOT / "scenarios" / name), backend="asyncio").timeline


def timeline_of_trio(name: str) -> Timeline:
    return replay(load_scenario(ROOT / "scenarios" / name), backend="trio").timeline


def test_a_last_job_of_zero_length_is_not_clipped() -> None:
    tl = timeline_of("async_vs_parallel_async.toml")
    last = max(tl.slices, key=lambda s: s.start)
    least = tl.end_ps // 400
    assert last.start + least > tl.end_ps  # drawn wider than the timeline: used to be cut
    ax = gantt(tl)
    assert_covers(ax, tl)
    bars, _ = drawn_right_edge(ax)
    assert bars == pytest.approx((last.start + least) / 1e6)


def test_a_marker_at_the_very_end_is_fully_visible() -> None:
    tl = timeline_of("fifo_backpressure.toml")
    at_end = [i for i in tl.instants if i.time == tl.end_ps]
    assert at_end  # the flushed SYNC of the failing push: a marker on the last instant
    for lanes in ("rank", "dpu"):
        ax = gantt(tl, lanes=lanes)  # type: ignore[arg-type]
        assert_covers(ax, tl)
        assert drawn_right_edge(ax)[1] == tl.end_ps / 1e6


def test_a_timeline_built_by_hand_without_end_ps() -> None:
    tl = Timeline()
    tl.add_slice(rank_pid(0), "jobs", "launch", "launch", 0, 5_000_000)
    tl.add_slice(rank_pid(0), "jobs", "sync", "sync", 9_000_000, 9_000_000)
    tl.add_slice(HOST_PID, "main", "wait", "host_wait", 1_000_000, 8_000_000)
    tl.add_instant(rank_pid(0), "jobs", "retry", "fifo_retry", 12_000_000)
    assert tl.end_ps == 0  # nobody computed it
    ax = gantt(tl)
    assert_covers(ax, tl)
    _, marks = drawn_right_edge(ax)
    assert marks == 12.0


def test_stacked_plots_share_an_axis_that_covers_the_longest() -> None:
    short = timeline_of("async_vs_parallel_parallel.toml")
    long = timeline_of("async_vs_parallel_async.toml")
    assert short.end_ps < long.end_ps
    fig = plot_timelines([("short", short), ("long", long)])
    first, second = fig.axes[:2]
    assert first.get_xlim() == second.get_xlim()
    assert_covers(second, long)
    assert first.get_xlim()[1] >= drawn_right_edge(first)[0]
    unshared = plot_timelines([("short", short), ("long", long)], sharex=False)
    assert_covers(unshared.axes[0], short)
    assert_covers(unshared.axes[1], long)


# ================================================================================================
# issue 35, item 20: the axis unit follows the span, host waits say what they wait on, DPUs
# stalled on a full FIFO are drawn stalled
# ================================================================================================
@functools.cache
def backpressure() -> Timeline:
    return timeline_of("fifo_backpressure.toml")


def spanning(end_ps: int) -> Timeline:
    tl = Timeline()
    tl.add_slice(rank_pid(0), "jobs", "launch", "launch", 0, end_ps)
    return tl


@pytest.mark.parametrize(
    ("end_ps", "unit", "scale"),
    [
        (10_201_248_129_769, "s", 10**12),  # the Memclave example: 10.2 s, not 1e7 µs
        (192_404_740, "µs", 10**6),
        (3_500_000_000, "ms", 10**9),
        (640_000, "ns", 10**3),
    ],
)
def test_the_time_axis_unit_follows_the_span(end_ps: int, unit: str, scale: int) -> None:
    ax = gantt(spanning(end_ps))
    assert ax.get_xlabel() == f"virtual time ({unit})"
    assert ax.get_xlim()[1] == pytest.approx(end_ps * (1 + RIGHT_MARGIN) / scale)
    formatter = ax.xaxis.get_major_formatter()
    assert isinstance(formatter, ScalarFormatter)
    assert not formatter.get_useOffset()
    ax.figure.canvas.draw()
    assert formatter.get_offset() == ""  # no "1e7" beside the axis
    labels = ax.get_xticklabels()
    assert all("e" not in t.get_text() for t in labels)
    # every tick reads its own position in the unit: no offset, no multiplier
    assert [float(t.get_text()) for t in labels] == pytest.approx(list(ax.get_xticks()))


def test_stacked_plots_share_one_unit() -> None:
    fig = plot_timelines([("short", spanning(640_000)), ("long", spanning(3_500_000_000))])
    assert [a.get_xlabel() for a in fig.axes] == ["virtual time (ms)"] * 2
    assert fig.axes[0].get_xlim()[1] == pytest.approx(3.5 * (1 + RIGHT_MARGIN))


def lane_bars(ax: Any, y: int) -> list[tuple[float, float, str, str | None]]:
    """``(start, end, colour, hatch)`` of the bars of lane ``y``, left to right."""
    out = []
    for c in ax.collections:
        if not isinstance(c, PolyCollection):
            continue
        for path, face in zip(c.get_paths(), c.get_facecolor(), strict=True):
            vertices = np.asarray(path.vertices)
            xs, ys = vertices[:, 0], vertices[:, 1]
            if float(ys.min()) == pytest.approx(y - 0.4):
                out.append((float(xs.min()), float(xs.max()), to_hex(face), c.get_hatch()))  # type: ignore[arg-type]
    return sorted(out)


def test_host_waits_are_labelled_with_what_they_wait_on() -> None:
    ax = gantt(backpressure())
    labels = [t.get_text() for t in ax.get_yticklabels()]
    host = lane_bars(ax, labels.index("host: host"))
    assert [colour for _, _, colour, _ in host] == [
        COLOURS["wait_load"],
        *[COLOURS["wait_fifo_push"]] * 8,
        COLOURS["wait_fifo_retry"],  # the ninth push: retried 4 times, then failed
    ]
    assert host[-1][:2] == pytest.approx((163.12474, 192.40474))
    assert [t.get_text() for t in ax.texts] == ["load", "fifo_push", "fifo_push, 4 retries"]
    box = ax.get_legend()
    assert box is not None
    legend = [t.get_text() for t in box.get_texts()]
    assert "host waits" not in legend
    for label in ("host waits: load", "host waits: FIFO push", "host waits: FIFO push retries"):
        assert label in legend


def test_dpus_stalled_on_a_full_fifo_are_drawn_stalled() -> None:
    tl = backpressure()
    # every DPU computed its fifth element and found its output FIFO (4 elements) full
    stalled_at, end = 147_329_740, 192_404_740
    assert [(s.rank, s.dpu, s.fifo, s.start, s.end) for s in tl.dpu_stalls] == [
        (0, d, "output_fifo", stalled_at, end) for d in range(4)
    ]
    assert timeline_of_trio("fifo_backpressure.toml").dpu_stalls == tl.dpu_stalls
    for lanes, lane in (("rank", "rank 0: DPUs"), ("dpu", "DPU 0.0.2")):
        ax = gantt(tl, lanes=lanes)  # type: ignore[arg-type]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        bars = lane_bars(ax, labels.index(lane))
        assert [(c, h) for _, _, c, h in bars] == [
            (COLOURS["dpu_run"], None),
            (COLOURS["dpu_stall"], "///"),
        ]
        edges = [x for a, b, _, _ in bars for x in (a, b)]
        assert edges == pytest.approx([110.00474, 147.32974, 147.32974, 192.40474])
        legend = ax.get_legend()
        assert legend is not None
        texts = [t.get_text() for t in legend.get_texts()]
        i = texts.index("DPUs stalled (output FIFO full)")
        assert legend.get_patches()[i].get_hatch() == "///"


def test_a_rank_lane_is_stalled_only_while_all_its_running_dpus_are() -> None:
    from aiopim._machine._recorder import Recorder

    rec = Recorder()
    stall = {"rank": 0, "dpu": 0, "tasklet": 0, "fifo": "out"}
    rec.events += [
        (10_000_000, "dpu_stall", stall),
        (20_000_000, "dpu_run", 0, 1, 0, "p", None),  # DPU 0.0.1 stops: only 0.0.0 runs
        (30_000_000, "dpu_run", 0, 0, 0, "p", None),  # 0.0.0 stops, stalled until then
    ]
    tl = Timeline.from_recorder(rec)
    assert [(s.dpu, s.start, s.end) for s in tl.dpu_stalls] == [(0, 10_000_000, 30_000_000)]
    ax = gantt(tl)
    assert [(a, b, c) for a, b, c, _ in lane_bars(ax, 0)] == [
        (0.0, 20.0, COLOURS["dpu_run"]),
        (20.0, 30.0, COLOURS["dpu_stall"]),
    ]
    ax = gantt(tl, lanes="dpu")
    assert [(a, b, c) for a, b, c, _ in lane_bars(ax, 0)] == [
        (0.0, 10.0, COLOURS["dpu_run"]),
        (10.0, 30.0, COLOURS["dpu_stall"]),
    ]
