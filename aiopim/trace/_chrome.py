"""Chrome trace event JSON (Perfetto, chrome://tracing), byte-stable.

One process per rank plus the host; inside a process, overlapping slices of one track are
spread over extra threads ("jobs #2", ...) so every thread's ``X`` slices are disjoint.
Times are exact decimal microseconds (picosecond resolution); keys are sorted; one event per
line. Same timeline -> same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ._timeline import Instant, Slice, Timeline, process_name


class _Us:
    """A picosecond time printed as exact decimal microseconds."""

    __slots__ = ("ps",)

    def __init__(self, ps: int) -> None:
        self.ps = ps

    def text(self) -> str:
        q, r = divmod(self.ps, 1_000_000)
        return str(q) if r == 0 else f"{q}.{r:06d}".rstrip("0")


def _dump(value: Any) -> str:
    if isinstance(value, _Us):
        return value.text()
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_dump(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value))


def _pack(items: Iterable[Slice]) -> list[list[Slice]]:
    """Spread slices over as few lanes as possible so each lane's slices are disjoint."""
    lanes: list[list[Slice]] = []
    ends: list[int] = []
    for s in sorted(items, key=lambda s: (s.start, s.end, s.name, s.args)):
        for i, end in enumerate(ends):
            if end <= s.start:
                lanes[i].append(s)
                ends[i] = s.end
                break
        else:
            lanes.append([s])
            ends.append(s.end)
    return lanes


def chrome_events(tl: Timeline, *, per_dpu: bool = True) -> list[dict[str, Any]]:
    """The trace events of ``tl`` (metadata, slices, instants, counters) in output order."""
    groups: dict[tuple[int, int, str], list[Slice]] = {}
    for s in tl.slices:
        if not per_dpu and s.track.startswith("DPU "):
            continue
        groups.setdefault((s.pid, s.order, s.track), []).append(s)
    inst_groups: dict[tuple[int, int, str], list[Instant]] = {}
    for i in tl.instants:
        inst_groups.setdefault((i.pid, i.order, i.track), []).append(i)
        groups.setdefault((i.pid, i.order, i.track), [])
    meta: list[dict[str, Any]] = []
    body: list[dict[str, Any]] = []
    pids = sorted({pid for pid, _, _ in groups} | set(tl.pids))
    for pid in pids:
        meta.append(_meta(pid, 0, "process_name", {"name": process_name(pid)}))
        meta.append(_meta(pid, 0, "process_sort_index", {"sort_index": pid}))
    next_tid: dict[int, int] = {}
    for pid, _order, track in sorted(groups):
        lanes = _pack(groups[pid, _order, track]) or [[]]
        first_tid = next_tid.get(pid, 1)
        for k, lane in enumerate(lanes):
            tid = first_tid + k
            name = track if k == 0 else f"{track} #{k + 1}"
            meta.append(_meta(pid, tid, "thread_name", {"name": name}))
            meta.append(_meta(pid, tid, "thread_sort_index", {"sort_index": tid}))
            body.extend(_x_event(s, pid, tid) for s in lane)
        insts = inst_groups.get((pid, _order, track), [])
        body.extend(
            _i_event(i, pid, first_tid)
            for i in sorted(insts, key=lambda i: (i.time, i.name, i.args))
        )
        next_tid[pid] = first_tid + len(lanes)
    for (pid, name), samples in sorted(tl.counters.items()):
        key = "jobs" if name == "queue depth" else "elements" if " fill " in name else "value"
        for t, v in samples:
            body.append(
                {"args": {key: v}, "name": name, "ph": "C", "pid": pid, "tid": 0, "ts": _Us(t)}
            )
    return meta + body


def _x_event(s: Slice, pid: int, tid: int) -> dict[str, Any]:
    return {
        "args": dict(s.args),
        "cat": s.cat,
        "dur": _Us(s.end - s.start),
        "name": s.name,
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": _Us(s.start),
    }


def _i_event(i: Instant, pid: int, tid: int) -> dict[str, Any]:
    return {
        "args": dict(i.args),
        "cat": i.cat,
        "name": i.name,
        "ph": "i",
        "pid": pid,
        "s": "t",
        "tid": tid,
        "ts": _Us(i.time),
    }


def _meta(pid: int, tid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"args": args, "name": name, "ph": "M", "pid": pid, "tid": tid}


def chrome_trace(
    tl: Timeline, *, per_dpu: bool = True, metadata: dict[str, Any] | None = None
) -> str:
    """Chrome trace event JSON of ``tl`` (a ``{"traceEvents": [...]}`` object), byte-stable.

    ``per_dpu=False`` leaves out the one-track-per-DPU runs (each rank keeps its "DPUs" track).
    ``metadata`` goes to ``otherData`` (keep it free of wall-clock values for stable bytes).
    """
    events = chrome_events(tl, per_dpu=per_dpu)
    other = {"generator": "aiopim", "time_unit": "us", "end_us": _Us(tl.end_ps)}
    other.update(metadata or {})
    lines = [_dump(e) for e in events]
    return (
        '{"displayTimeUnit":"ns",\n"otherData":'
        + _dump(other)
        + ',\n"traceEvents":[\n'
        + ",\n".join(lines)
        + "\n]}\n"
    )


def write_chrome_trace(
    tl: Timeline,
    path: str | os.PathLike[str],
    *,
    per_dpu: bool = True,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Write :func:`chrome_trace` to ``path``."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(chrome_trace(tl, per_dpu=per_dpu, metadata=metadata))
