"""Pythonic host API."""

from ._dpuset import DpuSet
from ._fifo import InputFifo, OutputFifo

__all__ = ["DpuSet", "InputFifo", "OutputFifo"]
