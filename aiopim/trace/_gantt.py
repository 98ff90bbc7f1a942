"""Gantt plots of timelines with matplotlib (optional extra: ``pip install aiopim[plot]``)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from .. import timing
from ._timeline import HOST_PID, Instant, Slice, Timeline, dpu_name, merge, process_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: colour of each category (job types, DPU runs and stalls, host activity)
COLOURS: dict[str, str] = {
    "load": "#7f7f7f",
    "launch": "#9467bd",
    "sync": "#c7c7c7",
    "to_dpu": "#1f77b4",
    "from_dpu": "#17becf",
    "parallel_xfer": "#ff7f0e",
    "fifo": "#bcbd22",
    "callback": "#e377c2",
    "dpu_run": "#2ca02c",
    "dpu_stall": "#fdd835",
    "dpu_fault": "#d62728",
    "host_wait": "#fdd0a2",
    "wait_load": "#d9d9d9",
    "wait_launch": "#c5b0d5",
    "wait_sync": "#fdd0a2",
    "wait_transfer": "#aec7e8",
    "wait_fifo_push": "#fdae6b",
    "wait_fifo_retry": "#e6550d",
    "wait_fifo_flush": "#9ecae1",
    "wait_callback": "#de9ed6",
    "wait_job_slot": "#fee391",
    "wait_other": "#e7cb94",
    "host_work": "#8c564b",
    "host_callback": "#f7b6d2",
    "fifo_push": "#dbdb8d",
    "fifo_flush": "#9edae5",
    "fifo_full": "#d62728",
    "fifo_retry": "#ff9896",
}
LABELS: dict[str, str] = {
    "load": "load",
    "launch": "launch job",
    "sync": "sync job",
    "to_dpu": "transfer to DPUs",
    "from_dpu": "transfer from DPUs",
    "parallel_xfer": "parallel transfer",
    "fifo": "FIFO transfer",
    "callback": "callback job",
    "dpu_run": "DPUs running",
    "dpu_stall": "DPUs stalled (output FIFO full)",
    "dpu_fault": "DPU fault",
    "host_wait": "host waits",
    "wait_load": "host waits: load",
    "wait_launch": "host waits: launch (DPUs run)",
    "wait_sync": "host waits: sync",
    "wait_transfer": "host waits: transfer",
    "wait_fifo_push": "host waits: FIFO push",
    "wait_fifo_retry": "host waits: FIFO push retries",
    "wait_fifo_flush": "host waits: FIFO flush",
    "wait_callback": "host waits: callback",
    "wait_job_slot": "host waits: a job slot",
    "wait_other": "host waits: other",
    "host_work": "host work",
    "host_callback": "callback (host)",
    "fifo_push": "FIFO push",
    "fifo_flush": "FIFO flush",
    "fifo_full": "FIFO full (push failed)",
    "fifo_retry": "FIFO push retry",
}
#: hatch of the categories drawn with one (stalls: not running though the run goes on)
HATCHES: dict[str, str] = {"dpu_stall": "///"}
#: marker of instant events per category (others: a thin vertical tick)
MARKERS: dict[str, str] = {"fifo_retry": "x", "fifo_full": "X"}
Lanes = Literal["rank", "dpu"]
#: units of the time axis, largest first: (name, picoseconds)
UNITS: tuple[tuple[str, int], ...] = (
    ("s", timing.PS_PER_S),
    ("ms", 1_000_000_000),
    ("µs", timing.PS_PER_US),
    ("ns", 1_000),
)
#: the host calls of host waits (``wait: <call>``), by the category they are drawn in
_WAIT_KINDS = {
    "load": "wait_load",
    "launch": "wait_launch",
    "sync": "wait_sync",
    "push_xfer to DPUs": "wait_transfer",
    "push_xfer from DPUs": "wait_transfer",
    "broadcast": "wait_transfer",
    "copy_from": "wait_transfer",
    "fifo_push": "wait_fifo_push",
    "fifo_flush": "wait_fifo_flush",
    "callback": "wait_callback",
}
#: a text label is written in a bar at least this share of the time axis wide
LABEL_MIN_WIDTH = 0.04


def _pyplot() -> ModuleType:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Gantt plots need matplotlib: pip install 'aiopim[plot]'") from exc
    return plt


Lane = tuple[str, list[Slice], list[Instant]]
#: a bar as drawn: start, end (ps), category, text label ("" for none)
Bar = tuple[int, int, str, str]

#: share of the time span left empty right of the last bar or marker, so neither touches the
#: frame (a marker centred on the axis limit would be cut in half)
RIGHT_MARGIN = 0.02


def axis_unit(end_ps: int) -> tuple[str, int]:
    """``(name, picoseconds)`` of the time-axis unit for a plot ending at ``end_ps``: the
    largest unit the span reaches (a 10 s run in s, a 192 µs one in µs)."""
    for name, scale in UNITS:
        if end_ps >= scale:
            return name, scale
    return UNITS[-1]


def _least_ps(tl: Timeline) -> int:
    """Drawn width of a zero-length bar: instant jobs stay visible as thin bars."""
    return max(tl.end_ps, 1) // 400


def _drawn_end_ps(tl: Timeline, rows: list[Lane]) -> int:
    """Where the last drawn thing ends: the timeline's end, the end of every bar as drawn
    (zero-length bars are widened to :func:`_least_ps`) and every instant marker."""
    least = _least_ps(tl)
    end = max(tl.end_ps, 1)
    for _, items, points in rows:
        for s in items:
            end = max(end, s.start + max(s.end - s.start, least))
        for i in points:
            end = max(end, i.time)
    return end


def _x_limit(end_ps: int, scale: int) -> float:
    """Right limit of the time axis (in ``scale`` units) for content ending at ``end_ps``."""
    return end_ps * (1 + RIGHT_MARGIN) / scale


def _lanes(tl: Timeline, lanes: Lanes) -> list[Lane]:
    """The lanes drawn, top to bottom: ``(label, slices, instants)``."""
    return [lane for _, _, lane in _keyed_lanes(tl, lanes)]


def _keyed_lanes(tl: Timeline, lanes: Lanes) -> list[tuple[int, str, Lane]]:
    """The lanes drawn, each with its process id and track."""
    out: list[tuple[int, str, Lane]] = []
    by_key: dict[tuple[int, int, str], tuple[list[Slice], list[Instant]]] = {}

    def keep(pid: int, track: str) -> bool:
        if pid != HOST_PID:
            if lanes == "rank" and track.startswith("DPU "):
                return False
            if lanes == "dpu" and track == "DPUs":
                return False
        return True

    for s in tl.slices:
        if keep(s.pid, s.track):
            by_key.setdefault((s.pid, s.order, s.track), ([], []))[0].append(s)
    for i in tl.instants:
        if keep(i.pid, i.track):
            by_key.setdefault((i.pid, i.order, i.track), ([], []))[1].append(i)
    for pid, order, track in sorted(by_key):
        slices, instants = by_key[pid, order, track]
        items = sorted(slices, key=lambda s: (s.start, s.end, s.name))
        points = sorted(instants, key=lambda i: (i.time, i.name))
        if pid == HOST_PID:
            label = f"host: {track}"
        elif track.startswith("DPU "):
            label = track
        else:
            label = f"{process_name(pid)}: {track}"
        out.append((pid, track, (label, items, points)))
    return out


# ================================================================================================
# what the bars show: host waits by what they wait on, DPU runs minus their stalls
# ================================================================================================
def _retries_by_rank(tl: Timeline) -> dict[int, list[int]]:
    """Times of the FIFO push retries of each rank, sorted."""
    out: dict[int, list[int]] = {}
    for i in tl.instants:
        if i.cat == "fifo_retry" and i.pid != HOST_PID:
            out.setdefault(i.pid - 1, []).append(i.time)
    for times in out.values():
        times.sort()
    return out


def _wait_bar(s: Slice, retries: dict[int, list[int]]) -> Bar:
    """A host wait as drawn: its category from the host call it waited in (a FIFO push that
    retried has its own), labelled with that call."""
    if not s.name.startswith("wait: "):
        return s.start, s.end, s.cat, ""
    what = s.name.removeprefix("wait: ")
    cat = "wait_job_slot" if what.endswith(": job slot") else _WAIT_KINDS.get(what, "wait_other")
    if cat == "wait_fifo_push":
        ranks = dict(s.args).get("ranks", ())
        n = sum(
            bisect.bisect_right(times, s.end) - bisect.bisect_right(times, s.start)
            for r in ranks
            if (times := retries.get(r))
        )
        if n:
            cat = "wait_fifo_retry"
            what = f"{what}, {n} {'retry' if n == 1 else 'retries'}"
    return s.start, s.end, cat, what


def _minus(start: int, end: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` without the (merged, sorted) ``holes``."""
    out = []
    at = start
    for s, e in holes:
        if e <= at or s >= end:
            continue
        if s > at:
            out.append((at, s))
        at = max(at, e)
    if at < end:
        out.append((at, end))
    return out


def _rank_stalls(tl: Timeline, rank: int) -> list[tuple[int, int]]:
    """When every running DPU of ``rank`` was stalled (its "DPUs" lane shows them stalled)."""
    deltas: list[tuple[int, int, int]] = []
    for r in tl.dpu_runs:
        if r.rank == rank:
            deltas += [(r.start, 1, 0), (r.end, -1, 0)]
    for rk, dpu in sorted({(s.rank, s.dpu) for s in tl.dpu_stalls if s.rank == rank}):
        for s, e in tl.stall_spans(rk, dpu):
            deltas += [(s, 0, 1), (e, 0, -1)]
    deltas.sort()
    out: list[tuple[int, int]] = []
    running = stalled = 0
    for k, (t, dr, ds) in enumerate(deltas):
        running += dr
        stalled += ds
        nxt = deltas[k + 1][0] if k + 1 < len(deltas) else t
        if nxt > t and running > 0 and stalled >= running:
            out.append((t, nxt))
    return merge(out)


def _stall_holes(tl: Timeline, pid: int, track: str) -> list[tuple[int, int]]:
    """The stalled spans of a rank's "DPUs" lane or of a "DPU r.c.m" lane."""
    if pid == HOST_PID or not tl.dpu_stalls:
        return []
    rank = pid - 1
    if track == "DPUs":
        return _rank_stalls(tl, rank)
    for r in tl.dpu_runs:
        if r.rank == rank and track == f"DPU {dpu_name(rank, r.dpu)}":
            return tl.stall_spans(rank, r.dpu)
    return []


def _bars(tl: Timeline, pid: int, track: str, items: list[Slice]) -> list[Bar]:
    """The bars of one lane: host waits by what they wait on, DPU runs split where stalled."""
    if pid == HOST_PID:
        retries = _retries_by_rank(tl)
        return [
            _wait_bar(s, retries) if s.cat == "host_wait" else (s.start, s.end, s.cat, "")
            for s in items
        ]
    holes = _stall_holes(tl, pid, track)
    out: list[Bar] = []
    for s in items:
        if s.cat != "dpu_run" or not holes:
            out.append((s.start, s.end, s.cat, ""))
            continue
        out += [(a, b, "dpu_run", "") for a, b in _minus(s.start, s.end, holes)]
        out += [(max(a, s.start), min(b, s.end), "dpu_stall", "") for a, b in holes]
    return [b for b in out if b[1] > b[0] or b[2] != "dpu_stall"]


# ================================================================================================
# drawing
# ================================================================================================
def gantt(
    tl: Timeline,
    ax: Axes | None = None,
    *,
    lanes: Lanes = "rank",
    title: str | None = None,
    legend: bool | Iterable[str] = True,
    unit: str | None = None,
) -> Axes:
    """Draw ``tl`` as horizontal bars: host lanes on top, then each rank (jobs, DPUs).

    Host waits are coloured and labelled by the host call they waited in (sync, transfer, FIFO
    push, a push that retried, ...); DPUs waiting on a full output FIFO are drawn stalled
    (hatched), not running: on a rank's "DPUs" lane when all its running DPUs are.
    ``lanes="dpu"`` draws one lane per DPU instead of one "DPUs" lane per rank. ``legend``
    is True (the categories drawn), False, or the categories to list. ``unit`` (``"ns"``,
    ``"µs"``, ``"ms"``, ``"s"``) fixes the time axis's unit, by default chosen from the span.
    """
    plt = _pyplot()
    from matplotlib.ticker import ScalarFormatter

    keyed = _keyed_lanes(tl, lanes)
    rows = [lane for _, _, lane in keyed]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1 + 0.35 * max(1, len(rows))))
    end = _drawn_end_ps(tl, rows)
    unit, scale = axis_unit(end) if unit is None else (unit, dict(UNITS)[unit])
    used: set[str] = set()
    least = _least_ps(tl)
    for y, (pid, track, (_, items, points)) in enumerate(keyed):
        bars = _bars(tl, pid, track, items)
        used.update(cat for _, _, cat, _ in bars)
        for hatch in sorted({HATCHES.get(cat, "") for _, _, cat, _ in bars}):
            mine = [b for b in bars if HATCHES.get(b[2], "") == hatch]
            ax.broken_barh(
                [(a / scale, max(b - a, least) / scale) for a, b, _, _ in mine],
                (y - 0.4, 0.8),
                facecolors=[COLOURS.get(cat, "#aec7e8") for _, _, cat, _ in mine],
                edgecolor="black",
                linewidth=0.3,
                hatch=hatch or None,
            )
        for a, b, _, text in bars:
            if text and b - a >= LABEL_MIN_WIDTH * end:
                ax.text(
                    (a + b) / 2 / scale,
                    y,
                    text,
                    ha="center",
                    va="center",
                    fontsize="x-small",
                    clip_on=True,
                )
        by_cat: dict[str, list[float]] = {}
        for i in points:
            by_cat.setdefault(i.cat, []).append(i.time / scale)
        for cat, xs in sorted(by_cat.items()):
            used.add(cat)
            ax.scatter(
                xs,
                [y] * len(xs),
                marker=MARKERS.get(cat, "|"),
                color=COLOURS.get(cat, "black"),
                s=30,
                linewidths=1.2,
                zorder=3,
            )
    ax.set_yticks(range(len(rows)), labels=[label for label, _, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, _x_limit(end, scale))
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)  # no "1e7" beside the axis: the unit says it
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlabel(f"virtual time ({unit})")
    ax.grid(axis="x", linewidth=0.3)
    if title:
        ax.set_title(title)
    if legend is not False:
        from matplotlib.patches import Patch

        wanted = used if legend is True else set(legend)
        cats = [c for c in COLOURS if c in wanted and c in LABELS]
        ax.legend(
            handles=[
                Patch(facecolor=COLOURS[c], label=LABELS[c], hatch=HATCHES.get(c)) for c in cats
            ],
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
            fontsize="small",
        )
    return ax


def plot_timelines(
    items: Sequence[tuple[str, Timeline]], *, lanes: Lanes = "rank", sharex: bool = True
) -> Figure:
    """One Gantt per ``(title, timeline)``, stacked on a shared time axis for comparison."""
    plt = _pyplot()
    heights = [max(1, len(_lanes(tl, lanes))) for _, tl in items]
    fig, axes = plt.subplots(
        len(items),
        1,
        figsize=(11, 1.2 * len(items) + 0.35 * sum(heights)),
        sharex=sharex,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    used = {i.cat for _, tl in items for i in tl.instants}
    used |= {cat for _, tl in items for cat in _drawn_categories(tl, lanes)}
    end = max(_drawn_end_ps(tl, _lanes(tl, lanes)) for _, tl in items)
    shared = axis_unit(end)[0] if sharex else None
    for i, ((title, tl), ax) in enumerate(zip(items, axes[:, 0], strict=True)):
        gantt(tl, ax, lanes=lanes, title=title, legend=used if i == 0 else False, unit=shared)
    if sharex:
        axes[0, 0].set_xlim(0, _x_limit(end, dict(UNITS)[axis_unit(end)[0]]))
    fig.tight_layout()
    return fig  # type: ignore[no-any-return]


def _drawn_categories(tl: Timeline, lanes: Lanes) -> set[str]:
    """The categories of the bars :func:`gantt` draws for ``tl``."""
    out: set[str] = set()
    for pid, track, (_, items, _) in _keyed_lanes(tl, lanes):
        out.update(cat for _, _, cat, _ in _bars(tl, pid, track, items))
    return out


def save_gantt(
    tl: Timeline,
    path: str | os.PathLike[str],
    *,
    lanes: Lanes = "rank",
    title: str | None = None,
) -> None:
    """Write the Gantt plot of ``tl`` as a PNG (an :class:`OSError` names ``path``)."""
    plt = _pyplot()
    ax = gantt(tl, lanes=lanes, title=title)
    fig = ax.figure
    fig.tight_layout()  # type: ignore[union-attr]
    try:
        fig.savefig(os.fspath(path), dpi=120, metadata={"Software": None})  # type: ignore[union-attr]
    finally:
        plt.close(fig)
