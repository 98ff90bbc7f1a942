"""Kelonia for Python: DIDL device interfaces, a foundry of DPU fleets, workers per DPU and
task, actors that answer messages, and a stubbed backend for tests without DPUs. See
``docs/kelonia.md``."""

from ._actors import ActorDpuAssembly, ActorDpuAssemblyLine, Reply, ReplyStream
from ._build import DPU_PACKAGE, find_devices, generate_package
from ._didl import Function, Interface, Mapping, Param, Pos, load_didl, parse_didl
from ._errors import DidlError, DpuFoundryError, DpuLowLevelError
from ._foundry import (
    PYTHON,
    AssemblyLine,
    BasicDpuAssembly,
    BasicDpuAssemblyLine,
    DpuBackend,
    DpuDeviceDescription,
    DpuFoundry,
    FunctionWorker,
    MemoryCopyWorker,
    Target,
)
from ._generate import generate, generate_file
from ._interface import (
    KeloniaInterface,
    StubbedInterface,
    WorkerFactory,
    WorkerFactoryBuilder,
    load_interface,
)

__all__ = [
    "DPU_PACKAGE",
    "PYTHON",
    "ActorDpuAssembly",
    "ActorDpuAssemblyLine",
    "AssemblyLine",
    "BasicDpuAssembly",
    "BasicDpuAssemblyLine",
    "DidlError",
    "DpuBackend",
    "DpuDeviceDescription",
    "DpuFoundry",
    "DpuFoundryError",
    "DpuLowLevelError",
    "Function",
    "FunctionWorker",
    "Interface",
    "KeloniaInterface",
    "Mapping",
    "MemoryCopyWorker",
    "Param",
    "Pos",
    "Reply",
    "ReplyStream",
    "StubbedInterface",
    "Target",
    "WorkerFactory",
    "WorkerFactoryBuilder",
    "find_devices",
    "generate",
    "generate_file",
    "generate_package",
    "load_didl",
    "load_interface",
    "parse_didl",
]
