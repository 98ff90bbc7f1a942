"""Lists of DPUs (or ranks) in messages, cut to a few names without hiding that they were cut."""

from __future__ import annotations

from collections.abc import Iterable
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
    """``(rank, index in rank)`` of a ``rank.ci.member`` name (8 DPUs per CI), else None."""
    parts = name.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    rank, ci, member = map(int, parts)
    return rank, ci * 8 + member


def format_dpu_ranges(dpus: Iterable[str | _Named], limit: int = 8) -> str:
    """``"0.0.0-0.7.7, 1.0.3"``: runs of consecutive DPUs of a rank as ``first-last``, in
    machine order; past ``limit`` runs, ``"… and N more"`` (DPUs)."""
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
