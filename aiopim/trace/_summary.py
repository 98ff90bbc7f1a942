"""A compact text summary of a timeline: per-rank busy/idle, overlap, critical path."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from .. import timing
from ..timing import format_ps as fmt
from ._timeline import TRANSFER_CATEGORIES, JobRecord, Slice, Timeline, merge, total


@dataclass(frozen=True)
class RankStats:
    """How one rank spent the run (ps)."""

    rank: int
    busy: int  # a job or a DPU of the rank was running
    idle: int
    dpu: int  # at least one DPU running
    transfer: int  # a transfer job running
    jobs: int  # jobs that ran


@dataclass(frozen=True)
class FifoStats:
    """WRAM FIFO traffic of one rank."""

    rank: int
    pushes: int  # push calls that succeeded
    pushed: int  # elements they wrote (one per DPU with a buffer)
    retries: int  # passes that found some DPU full and slept
    full: int  # pushes that failed with DPU_ERR_WRAM_FIFO_FULL
    flushes: int
    drained: int  # elements the flushes took out of the output FIFOs


@dataclass(frozen=True)
class PathStep:
    """One link of the critical path."""

    what: str
    rank: int | None
    start: int
    end: int


@dataclass(frozen=True)
class Summary:
    """Figures of a timeline, all in picoseconds."""

    end: int
    ranks: tuple[RankStats, ...]
    transfer: int  # time during which some transfer ran
    overlap: int  # ... while some DPU also ran
    dpu: int  # time during which some DPU ran
    host_wait: int  # time during which some host task waited on the machine
    busy_ranks_avg: float  # mean number of busy ranks while any rank is busy
    critical_path: tuple[PathStep, ...]
    fifo: tuple[FifoStats, ...] = ()
    #: what the host did until the critical path starts, when it was waiting (e.g.
    #: "the host waited in vud_ime_wait from 0 s"): the path only covers rank jobs
    path_start: str = ""

    def text(self) -> str:
        """Human-readable report (deterministic); times in the unit their size calls for."""
        out = [f"virtual time {fmt(self.end)}"]
        out.append(
            f"{'rank':>4} {'busy':>13} {'idle':>13} {'busy':>6} "
            f"{'DPU':>13} {'xfer':>13} {'jobs':>5}"
        )
        for r in self.ranks:
            pct = 100.0 * r.busy / self.end if self.end else 0.0
            out.append(
                f"{r.rank:>4} {fmt(r.busy):>13} {fmt(r.idle):>13} {pct:>5.1f}% "
                f"{fmt(r.dpu):>13} {fmt(r.transfer):>13} {r.jobs:>5}"
            )
        share = 100.0 * self.overlap / self.transfer if self.transfer else 0.0
        out.append(
            f"overlap: transfers ran {fmt(self.transfer)}, {fmt(self.overlap)} of it "
            f"({share:.1f}%) while DPUs ran"
        )
        out.append(
            f"DPUs ran {fmt(self.dpu)}; {self.busy_ranks_avg:.2f} ranks busy on average "
            f"while any was; host waited {fmt(self.host_wait)}"
        )
        if self.fifo:
            out.append("WRAM FIFOs:")
            out.append(
                f"{'rank':>4} {'pushes':>8} {'elements':>9} {'retries':>8} {'FULL':>5} "
                f"{'flushes':>8} {'drained':>8}"
            )
            out.extend(
                f"{f.rank:>4} {f.pushes:>8} {f.pushed:>9} {f.retries:>8} {f.full:>5} "
                f"{f.flushes:>8} {f.drained:>8}"
                for f in self.fifo
            )
        path = self.critical_path
        length = sum(s.end - s.start for s in path)
        line = f"critical path: {len(path)} steps, {fmt(length)} busy"
        if path and path[0].start > 0:
            line += f", from {fmt(path[0].start)}"
            if self.path_start:
                line += f" ({self.path_start})"
        out.append(line)
        for s in path:
            where = "host" if s.rank is None else f"rank {s.rank}"
            took = "+" + fmt(s.end - s.start)
            out.append(f"  {fmt(s.start):>13} {took:<12} {where:<8} {s.what}")
        return "\n".join(out) + "\n"


def summarize(tl: Timeline) -> Summary:
    """Compute the :class:`Summary` of ``tl``."""
    end = tl.end_ps
    ran = [j for j in tl.jobs if j.ran]
    stats = []
    busy_sets = []
    for rank in tl.ranks:
        busy = tl.rank_busy(rank)
        busy_sets.append(busy)
        xfer = merge(
            (j.start, j.end) for j in ran if j.rank == rank and j.category in TRANSFER_CATEGORIES
        )
        stats.append(
            RankStats(
                rank,
                total(busy),
                end - total(busy),
                total(tl.rank_dpu_spans(rank)),
                total(xfer),
                sum(1 for j in ran if j.rank == rank),
            )
        )
    transfers = merge((j.start, j.end) for j in ran if j.category in TRANSFER_CATEGORIES)
    dpus = merge((r.start, r.end) for r in tl.dpu_runs)
    any_busy = merge(s for spans in busy_sets for s in spans)
    per_rank_busy = sum(total(b) for b in busy_sets)
    path = critical_path(tl)
    return Summary(
        end,
        tuple(stats),
        total(transfers),
        total(_intersect(transfers, dpus)),
        total(dpus),
        total(merge((w.start, w.end) for w in tl.host_waits)),
        per_rank_busy / total(any_busy) if any_busy else 0.0,
        tuple(path),
        fifo_stats(tl),
        _before_path(tl, path[0].start) if path else "",
    )


def _before_path(tl: Timeline, start: int) -> str:
    """The host wait that ended when the critical path starts, in words ("" if none)."""
    ended = [w for w in tl.host_waits if w.end == start and w.start < start]
    if not ended:
        return ""
    w = min(ended, key=lambda w: (w.start, w.task, w.what))
    return f"before it, the host waited in {w.what} from {fmt(w.start)}"


def fifo_stats(tl: Timeline) -> tuple[FifoStats, ...]:
    """Per rank with FIFO traffic: pushes, retries, FULL failures, flushes, drained elements."""
    rows: dict[int, list[int]] = {}
    for s in tl.slices:
        if s.cat not in ("fifo_push", "fifo_full", "fifo_flush"):
            continue
        row = rows.setdefault(s.pid - 1, [0] * 6)
        args = dict(s.args)
        if s.cat == "fifo_push":
            row[0] += 1
            row[1] += int(args["dpus"])
            row[2] += int(args["retries"])
        elif s.cat == "fifo_full":
            row[2] += int(args["retries"])
            row[3] += 1
        else:
            row[4] += 1
            row[5] += int(args["elements"])
    return tuple(FifoStats(rank, *row) for rank, row in sorted(rows.items()))


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def critical_path(tl: Timeline) -> list[PathStep]:
    """The chain of activities that set the end time, earliest first.

    Walk back from the job that finished last: a job waited for the previous job of its rank,
    for the rank's DPUs to stop (plus the completion poll), or for the host to submit it; the
    host submitted when some job it waited for ended, or when its own work ended.
    """
    ran = [j for j in tl.jobs if j.ran]
    if not ran:
        return []
    # lookups by time, so a long path costs O(steps), not O(steps x jobs)
    previous: dict[tuple[int, int], JobRecord | None] = {}
    launch_ending: dict[tuple[int, int], JobRecord] = {}
    last_rank: dict[int, JobRecord] = {}
    for j in sorted(ran, key=lambda j: (j.start, j.seq)):
        previous[j.rank, j.seq] = last_rank.get(j.rank)
        last_rank[j.rank] = j
        if j.category == "launch":
            launch_ending.setdefault((j.rank, j.end), j)
    ending: dict[int, list[JobRecord]] = {}
    for j in ran:
        ending.setdefault(j.end, []).append(j)
    runs = {rank: tl.rank_dpu_spans(rank) for rank in tl.ranks}
    run_ends = {rank: [e for _, e in spans] for rank, spans in runs.items()}
    work: dict[int, Slice] = {}
    for w in tl.slices:
        if w.cat == "host_work" and w.start < w.end:
            work.setdefault(w.end, w)
    steps: list[PathStep] = []
    seen: set[tuple[int, int]] = set()

    def host_pred(t: int) -> JobRecord | None:
        """What let the host act at ``t``: a job ending then, or host work (added to steps)."""
        while True:
            cands = [j for j in ending.get(t, ()) if (j.rank, j.seq) not in seen]
            if cands:
                return max(cands, key=lambda j: (j.start, -j.rank, j.seq))
            w = work.get(t)
            if w is None:
                return None
            steps.append(PathStep(w.name, None, w.start, w.end))
            t = w.start

    cur: JobRecord | None = max(ran, key=lambda j: (j.end, j.start, -j.rank, j.seq))
    while cur is not None and (cur.rank, cur.seq) not in seen:
        seen.add((cur.rank, cur.seq))
        steps.append(PathStep(cur.type.name, cur.rank, cur.start, cur.end))
        start = cur.start
        prev = previous[cur.rank, cur.seq]
        if prev is not None and prev.end == start:
            cur = prev
            continue
        run = _run_ending_before(runs.get(cur.rank, []), run_ends.get(cur.rank, []), start)
        if not cur.parallel and run is not None and (prev is None or prev.end <= run[1]):
            steps.append(PathStep("DPUs running", cur.rank, run[0], run[1]))
            cur = launch_ending.get((cur.rank, run[0]))
            continue
        cur = host_pred(start) if cur.submit == start else None
    steps.reverse()
    return steps


def _run_ending_before(
    spans: list[tuple[int, int]], ends: list[int], t: int
) -> tuple[int, int] | None:
    """The DPU run whose end (plus the completion poll) released a job starting at ``t``.

    ``spans`` are merged (sorted, disjoint), so the candidate is the last one ending by ``t``.
    """
    i = bisect.bisect_right(ends, t) - 1
    if i >= 0 and t - ends[i] <= timing.COMPLETION_POLL_LATENCY_PS:
        return spans[i]
    return None
