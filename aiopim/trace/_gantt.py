"""Gantt plots of timelines with matplotlib (optional extra: ``pip install aiopim[plot]``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from ._timeline import HOST_PID, Instant, Slice, Timeline, process_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: colour of each category (job types, DPU runs, host activity)
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
    "dpu_fault": "#d62728",
    "host_wait": "#fdd0a2",
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
    "dpu_fault": "DPU fault",
    "host_wait": "host waits",
    "host_work": "host work",
    "host_callback": "callback (host)",
    "fifo_push": "FIFO push",
    "fifo_flush": "FIFO flush",
    "fifo_full": "FIFO full (push failed)",
    "fifo_retry": "FIFO push retry",
}
#: marker of instant events per category (others: a thin vertical tick)
MARKERS: dict[str, str] = {"fifo_retry": "x", "fifo_full": "X"}
Lanes = Literal["rank", "dpu"]


def _pyplot() -> ModuleType:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Gantt plots need matplotlib: pip install 'aiopim[plot]'") from exc
    return plt


Lane = tuple[str, list[Slice], list[Instant]]

#: share of the time span left empty right of the last bar or marker, so neither touches the
#: frame (a marker centred on the axis limit would be cut in half)
RIGHT_MARGIN = 0.02


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


def _x_limit_us(end_ps: int) -> float:
    """Right limit of the time axis (µs) for drawn content ending at ``end_ps``."""
    return end_ps * (1 + RIGHT_MARGIN) / 1e6


def _lanes(tl: Timeline, lanes: Lanes) -> list[Lane]:
    out: list[Lane] = []
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
        out.append((label, items, points))
    return out


def gantt(
    tl: Timeline,
    ax: Axes | None = None,
    *,
    lanes: Lanes = "rank",
    title: str | None = None,
    legend: bool | Iterable[str] = True,
) -> Axes:
    """Draw ``tl`` as horizontal bars: host lanes on top, then each rank (jobs, DPUs).

    ``lanes="dpu"`` draws one lane per DPU instead of one "DPUs" lane per rank. ``legend``
    is True (the categories drawn), False, or the categories to list.
    """
    plt = _pyplot()
    rows = _lanes(tl, lanes)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1 + 0.35 * max(1, len(rows))))
    used: set[str] = set()
    least = _least_ps(tl)
    for y, (_, items, points) in enumerate(rows):
        bars = [(s.start / 1e6, max(s.end - s.start, least) / 1e6) for s in items]
        colours = [COLOURS.get(s.cat, "#aec7e8") for s in items]
        used.update(s.cat for s in items)
        ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=colours, edgecolor="black", linewidth=0.3)
        by_cat: dict[str, list[float]] = {}
        for i in points:
            by_cat.setdefault(i.cat, []).append(i.time / 1e6)
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
    ax.set_xlim(0, _x_limit_us(_drawn_end_ps(tl, rows)))
    ax.set_xlabel("virtual time (µs)")
    ax.grid(axis="x", linewidth=0.3)
    if title:
        ax.set_title(title)
    if legend is not False:
        from matplotlib.patches import Patch

        wanted = used if legend is True else set(legend)
        cats = [c for c in COLOURS if c in wanted and c in LABELS]
        ax.legend(
            handles=[Patch(facecolor=COLOURS[c], label=LABELS[c]) for c in cats],
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
    used = {s.cat for _, tl in items for s in tl.slices}
    used |= {i.cat for _, tl in items for i in tl.instants}
    for i, ((title, tl), ax) in enumerate(zip(items, axes[:, 0], strict=True)):
        gantt(tl, ax, lanes=lanes, title=title, legend=used if i == 0 else False)
    if sharex:
        end = max(_drawn_end_ps(tl, _lanes(tl, lanes)) for _, tl in items)
        axes[0, 0].set_xlim(0, _x_limit_us(end))
    fig.tight_layout()
    return fig  # type: ignore[no-any-return]


def save_gantt(
    tl: Timeline,
    path: str | os.PathLike[str],
    *,
    lanes: Lanes = "rank",
    title: str | None = None,
) -> None:
    """Write the Gantt plot of ``tl`` as a PNG."""
    plt = _pyplot()
    ax = gantt(tl, lanes=lanes, title=title)
    fig = ax.figure
    fig.tight_layout()  # type: ignore[union-attr]
    fig.savefig(os.fspath(path), dpi=120, metadata={"Software": None})  # type: ignore[union-attr]
    plt.close(fig)
