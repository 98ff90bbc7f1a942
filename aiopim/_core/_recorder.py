"""Records what the emulated machine did, as timed events (cheap when on, absent when off)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import JobType

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._rank import Job


class Recorder:
    """An append-only list of events ``(time_ps, kind, fields)`` in kernel order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._now: Callable[[], int] = lambda: 0

    def bind_clock(self, now: Callable[[], int]) -> None:
        """Read virtual time from ``now()``."""
        self._now = now

    def add(self, kind: str, **fields: Any) -> None:
        """Record an event at the current virtual time."""
        self.events.append((self._now(), kind, fields))

    # Job events are flat tuples of ints (cheap, untracked by the garbage collector);
    # fields are decoded on export.
    def job_submitted(self, job: Job) -> None:
        ev = (self._now(), "job_submit", job.rank.index, job.seq, int(job.type), job.info or None)
        self.events.append(ev)

    def job_started(self, job: Job) -> None:
        self.events.append((self._now(), "job_start", job.rank.index, job.seq, int(job.type)))

    def job_finished(self, job: Job, error: int) -> None:
        self.events.append((self._now(), "job_end", job.rank.index, job.seq, int(job.type), error))

    def job_flushed(self, job: Job, error: int) -> None:
        ev = (self._now(), "job_flush", job.rank.index, job.seq, int(job.type), error)
        self.events.append(ev)

    def iter_events(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every event as ``(time_ps, kind, fields)``."""
        out: list[tuple[int, str, dict[str, Any]]] = []
        for ev in self.events:
            t, kind = ev[0], ev[1]
            if kind.startswith("job_"):
                fields: dict[str, Any] = {
                    "rank": ev[2],
                    "seq": ev[3],
                    "type": JobType(ev[4]).name,
                }
                if kind == "job_submit":
                    fields.update(ev[5] or {})
                elif kind != "job_start":
                    fields["error"] = ev[5]
            else:
                fields = ev[2]
            out.append((t, kind, fields))
        return out

    def dpu_run(self, dpu: Dpu) -> None:
        self.add(
            "dpu_run",
            rank=dpu.rank.index,
            dpu=dpu.index,
            start=dpu.boot_time,
            fault=None if dpu.fault is None else dpu.fault.reason,
        )

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
                },
            )
            if kind == "job_submit":
                row["submit"] = t
            elif kind == "job_start":
                row["start"] = t
            elif kind == "job_end":
                row["end"] = t
                row["error"] = f["error"]
            else:
                row["flushed"] = True
                row["end"] = t
        return sorted(table.values(), key=lambda r: (r["submit"], r["rank"], r["seq"]))
