"""Kelonia for Python: DIDL interfaces, a foundry of DPU fleets, workers, stubbed backends."""

from ._didl import Function, Interface, Mapping, Param, Pos, load_didl, parse_didl
from ._errors import DidlError, DpuFoundryError, DpuLowLevelError

__all__ = [
    "DidlError",
    "DpuFoundryError",
    "DpuLowLevelError",
    "Function",
    "Interface",
    "Mapping",
    "Param",
    "Pos",
    "load_didl",
    "parse_didl",
]
