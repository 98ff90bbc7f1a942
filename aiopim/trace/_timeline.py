"""A timeline: the recorder's events turned into jobs, runs, slices, instants and counters.

Every exporter (Chrome trace JSON, Gantt plot, text summary) reads a :class:`Timeline`, so
they all show the same thing. Process 0 is the host; process ``r + 1`` is rank ``r``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import PARALLEL_JOB_TYPES, JobType
from .._machine._recorder import _DECODERS, Recorder

if TYPE_CHECKING:
    from .._emulator import Emulator

HOST_PID = 0

#: drawing order of tracks inside a process
TRACK_JOBS = 0
TRACK_DPUS = 1
TRACK_DPU = 2  # + DPU index
TRACK_HOST = 0
TRACK_CALLBACKS = 1 << 20
TRACK_EXTENSION = 1 << 21

#: job type -> category (colour in plots, ``cat`` in Chrome traces)
JOB_CATEGORIES: dict[JobType, str] = {
    JobType.LOAD: "load",
    JobType.LAUNCH_RANK: "launch",
    JobType.LAUNCH_DPU: "launch",
    JobType.SYNC: "sync",
    JobType.SYNC_PARALLEL: "sync",
    JobType.COPY_WRAM_TO_MATRIX: "to_dpu",
    JobType.COPY_IRAM_TO_MATRIX: "to_dpu",
    JobType.COPY_MRAM_TO_MATRIX: "to_dpu",
    JobType.COPY_WRAM_TO_RANK: "to_dpu",
    JobType.COPY_IRAM_TO_RANK: "to_dpu",
    JobType.COPY_MRAM_TO_RANK: "to_dpu",
    JobType.COPY_WRAM_FROM_MATRIX: "from_dpu",
    JobType.COPY_IRAM_FROM_MATRIX: "from_dpu",
    JobType.COPY_MRAM_FROM_MATRIX: "from_dpu",
    JobType.PARALLEL_COPY_WRAM_TO_MATRIX: "parallel_xfer",
    JobType.PARALLEL_COPY_WRAM_FROM_MATRIX: "parallel_xfer",
    JobType.PARALLEL_FIFO_PUSH: "fifo",
    JobType.PARALLEL_FIFO_FLUSH: "fifo",
    JobType.CALLBACK: "callback",
    JobType.CALLBACK_PARALLEL: "callback",
}
#: categories that move data between host and DPUs
TRANSFER_CATEGORIES = frozenset({"to_dpu", "from_dpu", "parallel_xfer", "fifo"})


def rank_pid(rank: int) -> int:
    """Process id of rank ``rank``."""
    return rank + 1


def process_name(pid: int) -> str:
    """``host`` or ``rank N``."""
    return "host" if pid == HOST_PID else f"rank {pid - 1}"


def dpu_name(rank: int, dpu: int) -> str:
    """``rank.ci.member`` of DPU ``dpu`` of rank ``rank``, as the SDK prints it."""
    ci, member = divmod(dpu, 8)
    return f"{rank}.{ci}.{member}"


@dataclass(frozen=True)
class Slice:
    """Something that lasted: drawn as a bar (Chrome ``X`` event)."""

    pid: int
    track: str
    order: int  # track position inside the process
    name: str
    cat: str
    start: int  # ps
    end: int  # ps
    args: tuple[tuple[str, Any], ...] = ()

    @property
    def duration(self) -> int:
        """Length in ps."""
        return self.end - self.start


@dataclass(frozen=True)
class Instant:
    """Something that happened at one time (Chrome ``i`` event)."""

    pid: int
    track: str
    order: int
    name: str
    cat: str
    time: int
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class JobRecord:
    """One job of one rank, with its timing (ps); ``start``/``end`` are -1 if it never did."""

    rank: int
    seq: int
    type: JobType
    submit: int
    start: int
    end: int
    flushed: bool
    error: int
    info: tuple[tuple[str, Any], ...]

    @property
    def category(self) -> str:
        """Category of the job type."""
        return JOB_CATEGORIES.get(self.type, "other")

    @property
    def ran(self) -> bool:
        """True if the job started and ended (it was not flushed)."""
        return self.start >= 0 and self.end >= 0 and not self.flushed

    @property
    def parallel(self) -> bool:
        """True for jobs that may run while the rank's DPUs run."""
        return self.type in PARALLEL_JOB_TYPES


@dataclass(frozen=True)
class DpuRun:
    """One DPU ran its program from ``start`` to ``end`` (ps)."""

    rank: int
    dpu: int
    start: int
    end: int
    program: str | None
    fault: str | None
    #: the DPU had not stopped when the run ended (``end`` is the end of the run)
    running: bool = False


@dataclass(frozen=True)
class DpuStall:
    """A tasklet of a DPU waited from ``start`` to ``end`` (ps) with work to do and no room in
    its output FIFO ``fifo`` (recorded by the Python-kernel runtime's FIFO waits)."""

    rank: int
    dpu: int
    tasklet: int
    fifo: str
    start: int
    end: int


@dataclass(frozen=True)
class HostWait:
    """A host task was blocked on the machine from ``start`` to ``end`` (ps)."""

    task: str
    what: str
    start: int
    end: int
    ranks: tuple[int, ...]


@dataclass
class Timeline:
    """Everything the exporters draw, in deterministic order."""

    jobs: list[JobRecord] = field(default_factory=list)
    dpu_runs: list[DpuRun] = field(default_factory=list)
    host_waits: list[HostWait] = field(default_factory=list)
    #: DPU waits on a full output FIFO (drawn by the Gantt plot, not part of Chrome traces)
    dpu_stalls: list[DpuStall] = field(default_factory=list)
    slices: list[Slice] = field(default_factory=list)
    instants: list[Instant] = field(default_factory=list)
    #: (pid, counter name) -> [(time ps, value)], one sample per time
    counters: dict[tuple[int, str], list[tuple[int, int]]] = field(default_factory=dict)
    #: ranks that appear in the events
    ranks: list[int] = field(default_factory=list)
    end_ps: int = 0

    # -- building ---------------------------------------
    @classmethod
    def from_recorder(
        cls,
        recorder: Recorder,
        *,
        end_ps: int | None = None,
        running: Iterable[tuple[int, int, int, str | None]] = (),
    ) -> Timeline:
        """Build the timeline of everything ``recorder`` holds.

        ``running`` lists DPUs that had not stopped at ``end_ps``: ``(rank, dpu, boot ps,
        program)``; their runs end at ``end_ps``.
        """
        return _build(recorder.iter_events(), end_ps, list(running))

    @classmethod
    def from_emulator(cls, emulator: Emulator) -> Timeline:
        """The timeline of a finished :class:`~aiopim.Emulator` run (its recorder must be on).

        DPUs still running at the end (a host that gave up on them) run until the end.
        """
        if emulator.recorder is None:
            raise ValueError("this emulator was created with record=False: nothing to show")
        running = [
            (r.index, d.index, d.boot_time, None if d.program is None else d.program.name)
            for r in sorted(emulator.machine.ranks(), key=lambda r: r.index)
            for d in r.dpus
            if d.running
        ]
        return cls.from_recorder(emulator.recorder, end_ps=emulator.now_ps, running=running)

    def add_slice(
        self,
        pid: int,
        track: str,
        name: str,
        cat: str,
        start: int,
        end: int,
        *,
        order: int = TRACK_EXTENSION,
        args: dict[str, Any] | None = None,
    ) -> None:
        """Add a bar (for event-kind renderers)."""
        self.slices.append(
            Slice(pid, track, order, name, cat, start, end, _freeze(args)),
        )

    def add_instant(
        self,
        pid: int,
        track: str,
        name: str,
        cat: str,
        time: int,
        *,
        order: int = TRACK_EXTENSION,
        args: dict[str, Any] | None = None,
    ) -> None:
        """Add a point event (for event-kind renderers)."""
        self.instants.append(Instant(pid, track, order, name, cat, time, _freeze(args)))

    def add_counter(self, pid: int, name: str, time: int, value: int) -> None:
        """Set counter ``name`` of process ``pid`` to ``value`` at ``time``."""
        samples = self.counters.setdefault((pid, name), [])
        if samples and samples[-1][0] == time:
            samples[-1] = (time, value)
        else:
            samples.append((time, value))

    # -- reading ---------------------------------------
    @property
    def pids(self) -> list[int]:
        """Every process that has something to show, host first."""
        seen = {s.pid for s in self.slices} | {i.pid for i in self.instants}
        seen |= {pid for pid, _ in self.counters}
        seen |= {rank_pid(r) for r in self.ranks}
        return sorted(seen)

    def rank_busy(self, rank: int) -> list[tuple[int, int]]:
        """Merged intervals during which rank ``rank`` ran a job or a DPU."""
        spans = [(j.start, j.end) for j in self.jobs if j.rank == rank and j.ran]
        spans += [(r.start, r.end) for r in self.dpu_runs if r.rank == rank]
        return merge(spans)

    def rank_dpu_spans(self, rank: int) -> list[tuple[int, int]]:
        """Merged intervals during which at least one DPU of ``rank`` ran."""
        return merge((r.start, r.end) for r in self.dpu_runs if r.rank == rank)

    def stall_spans(self, rank: int, dpu: int) -> list[tuple[int, int]]:
        """Merged intervals during which some tasklet of DPU ``rank``.``dpu`` was stalled on a
        full output FIFO."""
        return merge((s.start, s.end) for s in self.dpu_stalls if (s.rank, s.dpu) == (rank, dpu))


#: renders one recorded event of an extension kind: ``fn(timeline, time_ps, fields)``
EventRenderer = Callable[[Timeline, int, dict[str, Any]], None]
_RENDERERS: dict[str, EventRenderer] = {}


def register_event_kind(kind: str, renderer: EventRenderer) -> None:
    """Tell the exporters how to draw recorded events of ``kind`` (e.g. FIFO pushes).

    Without a renderer, an unknown kind is drawn as an instant on its rank (field ``rank``)
    or on the host.
    """
    if kind in _BUILTIN_KINDS:
        raise ValueError(f"{kind!r} is a built-in event kind")
    _RENDERERS[kind] = renderer


#: the recorder's own kinds, which the timeline draws itself
_BUILTIN_KINDS = frozenset(_DECODERS) | {"dpu_stall", "dpu_stall_end"}


def _freeze(args: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    if not args:
        return ()
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in args.items()))


def merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of intervals, sorted; touching intervals are joined."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def total(spans: Iterable[tuple[int, int]]) -> int:
    """Summed length of (already merged) intervals."""
    return sum(e - s for s, e in spans)


def _build(
    events: list[tuple[int, str, dict[str, Any]]],
    end_ps: int | None,
    running: list[tuple[int, int, int, str | None]],
) -> Timeline:
    tl = Timeline()
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    #: stalls not ended yet: (rank, DPU, tasklet) -> (start, FIFO)
    stalls: dict[tuple[int, int, int], tuple[int, str]] = {}
    depth: dict[int, int] = {}
    ranks: set[int] = set()
    last = 0
    for t, kind, f in events:
        last = max(last, t)
        if kind.startswith("job_"):
            rank = f["rank"]
            ranks.add(rank)
            key = (rank, f["seq"])
            if kind == "job_submit":
                info = {k: v for k, v in f.items() if k not in ("rank", "seq", "type")}
                rows[key] = {
                    "type": JobType[f["type"]],
                    "submit": t,
                    "start": -1,
                    "end": -1,
                    "flushed": False,
                    "error": 0,
                    "info": info,
                }
                depth[rank] = depth.get(rank, 0) + 1
                tl.add_counter(rank_pid(rank), "queue depth", t, depth[rank])
                continue
            row = rows[key]
            if kind == "job_start":
                row["start"] = t
                continue
            row["end"] = t
            row["error"] = f["error"]
            row["flushed"] = kind == "job_flush"
            depth[rank] -= 1
            tl.add_counter(rank_pid(rank), "queue depth", t, depth[rank])
        elif kind == "dpu_run":
            ranks.add(f["rank"])
            tl.dpu_runs.append(
                DpuRun(f["rank"], f["dpu"], f["start"], t, f["program"], f["fault"]),
            )
            for open_stall in [k for k in stalls if k[:2] == (f["rank"], f["dpu"])]:
                _end_stall(tl, stalls, open_stall, t)  # the DPU stopped while stalled
        elif kind == "dpu_stall":
            stalls[f["rank"], f["dpu"], f["tasklet"]] = (t, f["fifo"])
        elif kind == "dpu_stall_end":
            _end_stall(tl, stalls, (f["rank"], f["dpu"], f["tasklet"]), t)
        elif kind == "host_wait":
            tl.host_waits.append(HostWait(f["task"], f["what"], f["start"], t, tuple(f["ranks"])))
        elif kind == "callback":
            ranks_txt = ",".join(str(r) for r in f["ranks"])
            args: dict[str, Any] = {"ranks": list(f["ranks"])}
            if f["error"]:
                args["error"] = f["error"]
            tl.add_slice(
                HOST_PID,
                "callbacks",
                f"callback (rank {ranks_txt})",
                "host_callback",
                f["start"],
                t,
                order=TRACK_CALLBACKS,
                args=args,
            )
        elif kind == "host_work":
            tl.add_slice(
                HOST_PID, f["task"], f["name"], "host_work", f["start"], t, order=TRACK_HOST
            )
        elif kind == "counter":
            pid = HOST_PID if f["track"] < 0 else rank_pid(f["track"])
            tl.add_counter(pid, f["name"], t, f["value"])
        else:
            renderer = _RENDERERS.get(kind)
            if renderer is not None:
                renderer(tl, t, f)
            else:
                rank = f.get("rank")
                pid = rank_pid(rank) if isinstance(rank, int) else HOST_PID
                tl.add_instant(pid, kind, kind, kind, t, args=f)
    end = max(end_ps or 0, last)
    for open_stall in list(stalls):  # still stalled when the run ended
        _end_stall(tl, stalls, open_stall, end)
    tl.dpu_stalls.sort(key=lambda s: (s.start, s.rank, s.dpu, s.tasklet))
    for rank, dpu, boot, program in running:
        ranks.add(rank)
        tl.dpu_runs.append(DpuRun(rank, dpu, boot, end, program, None, running=True))
    for (rank, seq), row in rows.items():
        tl.jobs.append(
            JobRecord(
                rank,
                seq,
                row["type"],
                row["submit"],
                row["start"],
                row["end"],
                row["flushed"],
                row["error"],
                _freeze(row["info"]),
            )
        )
    tl.jobs.sort(key=lambda j: (j.submit, j.rank, j.seq))
    tl.dpu_runs.sort(key=lambda r: (r.start, r.rank, r.dpu, r.end))
    tl.ranks = sorted(ranks)
    _job_slices(tl)
    _dpu_slices(tl)
    _host_slices(tl)
    tl.end_ps = max([end, *(s.end for s in tl.slices)])
    return tl


def _end_stall(
    tl: Timeline,
    stalls: dict[tuple[int, int, int], tuple[int, str]],
    key: tuple[int, int, int],
    t: int,
) -> None:
    """Close the open stall of ``key`` (rank, DPU, tasklet) at ``t``."""
    opened = stalls.pop(key, None)
    if opened is not None and t > opened[0]:
        tl.dpu_stalls.append(DpuStall(*key, opened[1], opened[0], t))


def _job_slices(tl: Timeline) -> None:
    for j in tl.jobs:
        pid = rank_pid(j.rank)
        args: dict[str, Any] = {"seq": j.seq, "submit_ps": j.submit}
        args.update(dict(j.info))
        if j.error:
            args["error"] = j.error
        if not j.ran:
            t = j.end if j.end >= 0 else j.submit
            tl.instants.append(
                Instant(
                    pid, "jobs", TRACK_JOBS, f"{j.type.name} flushed", j.category, t, _freeze(args)
                )
            )
            continue
        tl.slices.append(
            Slice(pid, "jobs", TRACK_JOBS, j.type.name, j.category, j.start, j.end, _freeze(args))
        )


def _dpu_slices(tl: Timeline) -> None:
    by_rank: dict[int, list[DpuRun]] = {}
    for r in tl.dpu_runs:
        by_rank.setdefault(r.rank, []).append(r)
        args: dict[str, Any] = {"program": r.program}
        if r.running:
            args["still_running"] = True
        cat = "dpu_run"
        if r.fault is not None:
            args["fault"] = r.fault
            cat = "dpu_fault"
        tl.slices.append(
            Slice(
                rank_pid(r.rank),
                f"DPU {dpu_name(r.rank, r.dpu)}",
                TRACK_DPU + r.dpu,
                r.program or "run",
                cat,
                r.start,
                r.end,
                _freeze(args),
            )
        )
    for rank, runs in by_rank.items():
        spans = merge((r.start, r.end) for r in runs)
        # runs are sorted by start and the merged spans are disjoint: one pass counts each span's
        counts = [[0, 0] for _ in spans]  # runs, faults
        i = 0
        for r in runs:
            while spans[i][1] < r.start:
                i += 1
            counts[i][0] += 1
            counts[i][1] += r.fault is not None
        for (s, e), (n, faults) in zip(spans, counts, strict=True):
            args = {"dpu_runs": n}
            if faults:
                args["faults"] = faults
            tl.slices.append(
                Slice(
                    rank_pid(rank),
                    "DPUs",
                    TRACK_DPUS,
                    "DPUs running",
                    "dpu_fault" if faults else "dpu_run",
                    s,
                    e,
                    _freeze(args),
                )
            )


def _host_slices(tl: Timeline) -> None:
    for w in tl.host_waits:
        tl.slices.append(
            Slice(
                HOST_PID,
                w.task,
                TRACK_HOST,
                f"wait: {w.what}",
                "host_wait",
                w.start,
                w.end,
                _freeze({"ranks": list(w.ranks)}),
            )
        )
