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
