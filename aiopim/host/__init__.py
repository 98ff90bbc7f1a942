"""Pythonic host API."""

from ._dpuset import DpuSet

__all__ = ["DpuSet"]
