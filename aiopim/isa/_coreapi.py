"""The private core names the ``aiopim.isa`` package uses (one place to re-point them)."""

from __future__ import annotations

from .._machine._program import ATOMIC_BASE, IRAM_BIT, MRAM_BIT

__all__ = ["ATOMIC_BASE", "IRAM_BIT", "MRAM_BIT"]
