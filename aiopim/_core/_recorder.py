"""Records what the emulated machine did, as timed events (cheap when on, absent when off)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._rank import Job


class Recorder:
    """An append-only list of events ``(time_ps, kind, fields)`` in kernel order."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self._now: Callable[[], int] = lambda: 0

    def bind_clock(self, now: Callable[[], int]) -> None:
        """Read virtual time from ``now()``."""
        self._now = now

    def add(self, kind: str, **fields: Any) -> None:
        """Record an event at the current virtual time."""
        self.events.append((self._now(), kind, fields))

    def job_submitted(self, job: Job) -> None:
        self.add("job_submit", rank=job.rank.index, seq=job.seq, type=job.type.name, **job.info)

    def job_started(self, job: Job) -> None:
        self.add("job_start", rank=job.rank.index, seq=job.seq, type=job.type.name)

    def job_finished(self, job: Job, error: int) -> None:
        self.add("job_end", rank=job.rank.index, seq=job.seq, type=job.type.name, error=error)

    def job_flushed(self, job: Job, error: int) -> None:
        self.add("job_flush", rank=job.rank.index, seq=job.seq, type=job.type.name, error=error)

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
            for t, kind, fields in self.events
        ]
        return "\n".join(lines) + ("\n" if lines else "")

    def jobs(self) -> list[dict[str, Any]]:
        """Per job: rank, seq, type, submit/start/end times (ps) and error, in submit order."""
        table: dict[tuple[int, int], dict[str, Any]] = {}
        for t, kind, f in self.events:
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
