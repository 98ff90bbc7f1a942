"""Records what the emulated machine did, as timed events (cheap when on, absent when off).

Events are tuples ``(time_ps, kind, ...)`` appended in kernel order. Frequent kinds are flat
tuples (cheap, untracked by the garbage collector) decoded by :meth:`Recorder.iter_events`;
any other kind is ``(time_ps, kind, fields)`` from :meth:`Recorder.add`.

Kinds: ``job_submit``/``job_start``/``job_end``/``job_flush`` (every job of every rank),
``dpu_run`` (one DPU ran from ``start`` to the event time), ``host_wait`` (a host task was
blocked from ``start`` on the machine), ``callback`` (a callback's host function ran from
``start``), ``host_work`` (a host task computed from ``start``), ``counter`` (a named value
changed). Extensions use :meth:`Recorder.add` or :meth:`Recorder.counter`;
``aiopim.trace.register_event_kind`` tells the exporters how to draw them. The WRAM FIFOs
(``_fifo.py``) add ``fifo_push``, ``fifo_retry``, ``fifo_full``, ``fifo_flush`` and
``fifo_ptrs`` (the pointer pairs the host read or wrote; ``aiopim.scenario.record`` uses them);
the Python-kernel runtime adds ``dpu_stall`` / ``dpu_stall_end`` (a tasklet waited on a full
output FIFO; Gantt plots draw it).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import JobType

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._jobs import Job
    from ._rank import Rank


class _Clock(Protocol):
    @property
    def now(self) -> int: ...


class _ZeroClock:
    now = 0


#: the label of the running host task in traces (host lanes); inherited by child tasks
host_task_label: contextvars.ContextVar[str] = contextvars.ContextVar(
    "aiopim_host_task_label", default="main"
)


@contextmanager
def host_task(label: str) -> Iterator[None]:
    """Label the host waits of the calling task (and of tasks it starts) in traces."""
    token = host_task_label.set(label)
    try:
        yield
    finally:
        host_task_label.reset(token)


def _job_fields(ev: tuple[Any, ...]) -> dict[str, Any]:
    return {"rank": ev[2], "seq": ev[3], "type": JobType(ev[4]).name}


def _decode_submit(ev: tuple[Any, ...]) -> dict[str, Any]:
    f = _job_fields(ev)
    f.update(ev[5] or {})
    return f


def _decode_end(ev: tuple[Any, ...]) -> dict[str, Any]:
    f = _job_fields(ev)
    f["error"] = ev[5]
    return f


def _decode_dpu_run(ev: tuple[Any, ...]) -> dict[str, Any]:
    return {"rank": ev[2], "dpu": ev[3], "start": ev[4], "program": ev[5], "fault": ev[6]}


def _indices(ranks: int | tuple[int, ...]) -> list[int]:
    return [ranks] if isinstance(ranks, int) else list(ranks)


def _decode_host_wait(ev: tuple[Any, ...]) -> dict[str, Any]:
    return {"task": ev[2], "what": ev[3], "start": ev[4], "ranks": _indices(ev[5])}


def _decode_callback(ev: tuple[Any, ...]) -> dict[str, Any]:
    return {"task": ev[2], "ranks": list(ev[3]), "start": ev[4], "error": ev[5]}


def _decode_host_work(ev: tuple[Any, ...]) -> dict[str, Any]:
    return {"task": ev[2], "name": ev[3], "start": ev[4]}


def _decode_counter(ev: tuple[Any, ...]) -> dict[str, Any]:
    return {"name": ev[2], "track": ev[3], "value": ev[4]}


_DECODERS: dict[str, Callable[[tuple[Any, ...]], dict[str, Any]]] = {
    "job_submit": _decode_submit,
    "job_start": _job_fields,
    "job_end": _decode_end,
    "job_flush": _decode_end,
    "dpu_run": _decode_dpu_run,
    "host_wait": _decode_host_wait,
    "callback": _decode_callback,
    "host_work": _decode_host_work,
    "counter": _decode_counter,
}


class Recorder:
    """An append-only list of timed events in kernel order."""

    def __init__(self, clock: _Clock | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._clock: _Clock = clock if clock is not None else _ZeroClock()

    def add(self, kind: str, **fields: Any) -> None:
        """Record an event of any other kind at the current virtual time."""
        self.events.append((self._clock.now, kind, fields))

    # -- jobs ---------------------------------------
    def job_submitted(self, job: Job) -> None:
        ev = (
            self._clock.now,
            "job_submit",
            job.rank.index,
            job.seq,
            int(job.type),
            job.info or None,
        )
        self.events.append(ev)

    def job_started(self, job: Job) -> None:
        self.events.append((self._clock.now, "job_start", job.rank.index, job.seq, int(job.type)))

    def job_finished(self, job: Job, error: int) -> None:
        ev = (self._clock.now, "job_end", job.rank.index, job.seq, int(job.type), error)
        self.events.append(ev)

    def job_flushed(self, job: Job, error: int) -> None:
        ev = (self._clock.now, "job_flush", job.rank.index, job.seq, int(job.type), error)
        self.events.append(ev)

    # -- DPUs, host, counters ---------------------------------------
    def dpu_stopped(self, dpu: Dpu) -> None:
        """``dpu`` stopped: one run from its boot until now."""
        prog = dpu.program
        fault = dpu.fault
        self.events.append(
            (
                self._clock.now,
                "dpu_run",
                dpu.rank.index,
                dpu.index,
                dpu.boot_time,
                None if prog is None else prog.name,
                None if fault is None else fault.reason,
            )
        )

    def host_wait(self, what: str, start: int, ranks: Sequence[Rank]) -> None:
        """The calling host task waited from ``start`` until now for ``what`` on ``ranks``."""
        # one rank: a plain int (no second container for the garbage collector to track)
        idx = ranks[0].index if len(ranks) == 1 else tuple([r.index for r in ranks])
        self.events.append((self._clock.now, "host_wait", host_task_label.get(), what, start, idx))

    def callback_ran(self, ranks: Sequence[Rank], start: int, error: int) -> None:
        """A callback's host function ran from ``start`` until now."""
        idx = tuple([r.index for r in ranks])
        self.events.append((self._clock.now, "callback", host_task_label.get(), idx, start, error))

    def host_work(self, name: str, start: int) -> None:
        """The calling host task computed ``name`` from ``start`` until now."""
        self.events.append((self._clock.now, "host_work", host_task_label.get(), name, start))

    def counter(self, name: str, track: int, value: int) -> None:
        """Counter ``name`` of ``track`` (a rank index, or -1 for the host) is now ``value``."""
        self.events.append((self._clock.now, "counter", name, track, value))

    # -- reading ---------------------------------------
    def iter_events(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every event as ``(time_ps, kind, fields)``."""
        out: list[tuple[int, str, dict[str, Any]]] = []
        decoders = _DECODERS
        for ev in self.events:
            kind = ev[1]
            decode = decoders.get(kind)
            out.append((ev[0], kind, decode(ev) if decode is not None else dict(ev[2])))
        return out

    def to_jsonl(self) -> str:
        """One JSON object per line: ``{"t": ps, "kind": ..., ...}``; byte-stable."""
        lines = [
            json.dumps({"t": t, "kind": kind, **fields}, sort_keys=True, default=str)
            for t, kind, fields in self.iter_events()
        ]
        return "\n".join(lines) + ("\n" if lines else "")

    def jobs(self) -> list[dict[str, Any]]:
        """Per job: rank, seq, type, submit/start/end times (ps) and error, in submit order."""
        table: dict[tuple[int, int], dict[str, Any]] = {}
        for t, kind, f in self.iter_events():
            if not kind.startswith("job_"):
                continue
            key = (f["rank"], f["seq"])
            row = table.setdefault(
                key,
                {
                    "rank": f["rank"],
                    "seq": f["seq"],
                    "type": f["type"],
                    "submit": None,
                    "start": None,
                    "end": None,
                    "error": 0,
                    "flushed": False,
                    "info": {},
                },
            )
            if kind == "job_submit":
                row["submit"] = t
                row["info"] = {k: v for k, v in f.items() if k not in ("rank", "seq", "type")}
            elif kind == "job_start":
                row["start"] = t
            elif kind == "job_end":
                row["end"] = t
                row["error"] = f["error"]
            else:
                row["flushed"] = True
                row["end"] = t
        return sorted(table.values(), key=lambda r: (r["submit"], r["rank"], r["seq"]))
