"""Aligned text tables for the benchmark scripts."""

from __future__ import annotations


def print_columns(cells: list[tuple[str, ...]]) -> None:
    """Print ``cells`` (the header row first) as left-aligned columns, a rule under the header."""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for i, row in enumerate(cells):
        print("  ".join(s.ljust(w) for s, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
