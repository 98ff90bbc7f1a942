"""Gantt plots show everything they draw: the time axis covers the last bar and marker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aiopim.scenario import load_scenario, replay
from aiopim.trace import Timeline, gantt, plot_timelines
from aiopim.trace._gantt import RIGHT_MARGIN
from aiopim.trace._timeline import HOST_PID, rank_pid

pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.collections import PathCollection, PolyCollection

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
