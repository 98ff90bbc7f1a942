"""Lists of DPUs (or ranks) in messages, cut to a few names without hiding that they were cut."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def format_dpu_list(dpus: Iterable[str | int | _Named], limit: int = 8) -> str:
    """``"0.0.1, 0.0.2, 0.0.3"``, or the first ``limit`` names then ``"… and N more"``.

    Items are names, indices, or objects with a ``name`` (a ``Dpu``). An empty list gives
    ``""``, so callers can write ``format_dpu_list(x) or "(none)"``.
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    names = [d if isinstance(d, str) else str(d) if isinstance(d, int) else d.name for d in dpus]
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} … and {len(names) - limit} more"


def _position(name: str) -> tuple[int, int] | None:
    """``(rank, index in rank)`` of a ``rank.ci.member`` name (8 DPUs per CI), ``(0, n)`` of a
    rank index ``n``, else None."""
    if name.isdigit():  # a rank's index
        return 0, int(name)
    parts = name.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    rank, ci, member = map(int, parts)
    return rank, ci * 8 + member


def format_dpu_ranges(dpus: Iterable[str | _Named], limit: int = 8) -> str:
    """``"0.0.0-0.7.7, 1.0.3"``: runs of consecutive DPUs of a rank (or of rank indices) as
    ``first-last``, in machine order; past ``limit`` runs, ``"… and N more"`` (DPUs)."""
    names = {d if isinstance(d, str) else d.name for d in dpus}
    positions = {n: p for n in names if (p := _position(n)) is not None}
    if len(positions) < len(names):  # not DPU names: listed as they are
        return format_dpu_list(sorted(names), limit)
    runs: list[list[str]] = []
    for name in sorted(positions, key=positions.__getitem__):
        rank, i = positions[name]
        if runs and positions[runs[-1][-1]] == (rank, i - 1):
            runs[-1].append(name)
        else:
            runs.append([name])
    text = ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs[:limit])
    left = sum(len(r) for r in runs[limit:])
    return f"{text} … and {left} more" if left else text


def format_numbers(noun: str, ids: list[int]) -> str:
    """``tasklet 3`` or ``tasklets 0-2, 5``."""
    if len(ids) == 1:
        return f"{noun} {ids[0]}"
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return f"{noun}s {', '.join(str(r[0]) if len(r) == 1 else f'{r[0]}-{r[-1]}' for r in runs)}"


_DPU_LINE = re.compile(r"DPU (\d+\.\d+\.\d+) (?:tasklet (\d+) )?(.*)")
_RANK_LINE = re.compile(r"rank (\d+): (.*)")

#: a DPU's report: each state (in order of report) with the tasklets in it (none: the DPU's own)
_States = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass
class _Report:
    """The lines of a deadlock report sorted by what they are about."""

    dpus: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # name: state: tasklets
    ranks: dict[str, list[str]] = field(default_factory=dict)  # state: ranks in it
    others: dict[str, int] = field(default_factory=dict)  # line: how many times
    #: ("dpu", name), ("rank", state) or ("other", line), in order of first report
    order: list[tuple[str, str]] = field(default_factory=list)

    def add(self, line: str) -> None:
        if m := _DPU_LINE.fullmatch(line):
            name, tasklet, state = m.groups()
            if name not in self.dpus:
                self.dpus[name] = {}
                self.order.append(("dpu", name))
            tasklets = self.dpus[name].setdefault(state, [])
            if tasklet is not None:
                tasklets.append(int(tasklet))
        elif m := _RANK_LINE.fullmatch(line):
            rank, state = m.groups()
            if state not in self.ranks:
                self.order.append(("rank", state))
            self.ranks.setdefault(state, []).append(rank)
        else:
            if line not in self.others:
                self.order.append(("other", line))
            self.others[line] = self.others.get(line, 0) + 1

    def states(self, name: str) -> _States:
        return tuple((state, tuple(ts)) for state, ts in self.dpus[name].items())


def _dpu_lines(group: list[str], states: _States) -> list[str]:
    """One line per state of a group of DPUs in the same states."""
    out = []
    for state, tasklets in states:
        who = format_numbers("tasklet", list(tasklets)) if tasklets else ""
        if len(group) == 1:  # as reported, tasklets in one line: DPU 0.0.0 tasklets 0-3 ...
            out.append(f"DPU {group[0]} {who} {state}" if who else f"DPU {group[0]} {state}")
        else:
            dpus = f"{len(group)} DPUs ({format_dpu_ranges(group)})"
            out.append(f"{who} of {dpus} {state}" if who else f"{dpus} {state}")
    return out


def group_blocked(lines: list[str], limit: int = 24) -> list[str]:
    """The lines of a deadlock report with identical states grouped, at most ``limit`` of them.

    ``DPU r.c.m tasklet t STATE`` lines become one line per state and set of DPUs in the same
    states (``tasklets 0-15 of 64 DPUs (0.0.0-0.7.7) waiting on barrier 'b' at k.py:9 in
    main``), ``rank N: STATE`` lines one line per state (``ranks 0-3: STATE``), a repeated line
    one line (``LINE (3 times)``). Past ``limit`` lines, the rest is counted.
    """
    report = _Report()
    for line in lines:
        report.add(line)
    alike: dict[_States, list[str]] = {}
    for name in report.dpus:
        alike.setdefault(report.states(name), []).append(name)
    out: list[str] = []
    for kind, key in report.order:
        if kind == "other":
            n = report.others[key]
            out.append(key if n == 1 else f"{key} ({n} times)")
        elif kind == "rank":
            ranks = report.ranks[key]
            who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_dpu_ranges(ranks)}"
            out.append(f"{who}: {key}")
        elif (group := alike[report.states(key)])[0] == key:  # once, at the group's first DPU
            out.extend(_dpu_lines(group, report.states(key)))
    if len(out) > limit:
        out[limit - 1 :] = [
            f"… and {len(out) - limit + 1} more lines (DeadlockError.blocked lists all "
            f"{len(lines)} blocked actors)"
        ]
    return out
