"""The private core names Kelonia uses (one place, to re-point when the core moves)."""

from .._machine._program import MRAM_BIT, MRAM_SIZE

__all__ = ["MRAM_BIT", "MRAM_SIZE"]
