"""The foundry, its basic assemblies of DPUs, and the workers that call a DPU's functions."""

from __future__ import annotations

import enum
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

import anyio
import numpy as np

from .. import DpuError, DpuErrorCode, DpuProgram, DpuSet, Emulator, Program, Symbol
from ..dpu import MailboxLayout
from ..elf import load_elf
from ._coreapi import MRAM_SIZE
from ._didl import MEMORY_COPY, Function, check_resources
from ._errors import DpuFoundryError, DpuLowLevelError
from ._interface import (
    KeloniaInterface,
    StubbedInterface,
    bind_arguments,
    from_words,
    result_value,
    to_words,
)
from ._mram import MramLayout, mram_read, mram_write

WORD = 4


class DpuBackend(enum.Enum):
    """What runs behind the workers: emulated DPUs, or the interface's stub factories."""

    EMULATED = "emulated"
    STUBBED = "stubbed"


class Target(enum.Enum):
    """The host language of the foundry (the original also targeted Java)."""

    PYTHON = "python"


PYTHON = Target.PYTHON


@dataclass(frozen=True)
class DpuDeviceDescription:
    """A device: an interface and the DPU program that implements it, on a backend.

    ``program`` is a :class:`~aiopim.DpuProgram` (a Python kernel) or the path of a DPU ELF
    binary; the stubbed backend needs none."""

    interface: KeloniaInterface
    program: DpuProgram | str | os.PathLike[str] | None = None
    backend: DpuBackend = DpuBackend.EMULATED

    def __post_init__(self) -> None:
        if not isinstance(self.interface, KeloniaInterface):
            raise TypeError(f"interface must be a KeloniaInterface, not {self.interface!r}")
        if not isinstance(self.backend, DpuBackend):
            raise TypeError(f"backend must be a DpuBackend, not {self.backend!r}")
        if self.backend is DpuBackend.STUBBED and not isinstance(self.interface, StubbedInterface):
            raise DpuFoundryError(
                f"the stubbed backend needs a stubbed interface (Stubbed…, or "
                f"interface.stubbed(factories)); got {self.interface!r}"
            )
        if self.backend is DpuBackend.EMULATED and self.program is None:
            raise DpuFoundryError("the emulated backend needs the DPU program")

    def resolve_program(self) -> DpuProgram:
        """The program, loading an ELF path."""
        if isinstance(self.program, DpuProgram):
            return self.program
        if self.program is None:
            raise DpuFoundryError("no DPU program")
        return load_elf(self.program)

    def check(self, program: DpuProgram) -> None:
        """Check every mapping of the interface against ``program``'s resources."""
        layout = getattr(program, "mailbox_layout", None)
        layout = layout if isinstance(layout, MailboxLayout) else None
        name = f"program {getattr(program, 'name', '?')!r}"
        mram = MramLayout.of(program)
        check_resources(self.interface.didl, layout, MRAM_SIZE, name, mram.refusal)


@dataclass(frozen=True)
class BasicDpuAssemblyLine:
    """How many DPUs of which device: ``using_dpu(device)`` / ``using_dpus(n, device)``."""

    nr_dpus: int
    device: DpuDeviceDescription

    @classmethod
    def using_dpu(cls, device: DpuDeviceDescription) -> BasicDpuAssemblyLine:
        """One DPU."""
        return cls(1, device)

    @classmethod
    def using_dpus(cls, nr_dpus: int, device: DpuDeviceDescription) -> BasicDpuAssemblyLine:
        """``nr_dpus`` DPUs, each running the device's program."""
        return cls(check_nr_dpus(nr_dpus), device)

    def check(self, program: DpuProgram) -> None:
        """Check the interface against ``program`` before any DPU is allocated."""
        self.device.check(program)

    def assemble(self, dpus: DpuSet | None, program: DpuProgram | None) -> BasicDpuAssembly:
        """The assembly over loaded ``dpus`` (None, None on the stubbed backend)."""
        return BasicDpuAssembly(self, dpus, program)


def check_nr_dpus(nr_dpus: object) -> int:
    """``nr_dpus`` if it is a DPU count (TypeError / DpuFoundryError otherwise)."""
    if isinstance(nr_dpus, bool) or not isinstance(nr_dpus, int):
        raise TypeError(f"nr_dpus must be an int, not {type(nr_dpus).__name__}")
    if nr_dpus < 1:
        raise DpuFoundryError(f"an assembly needs at least one DPU, not {nr_dpus}")
    return nr_dpus


A = TypeVar("A", bound="BasicDpuAssembly", covariant=True)


class AssemblyLine(Protocol[A]):
    """What the foundry builds from: a device on ``nr_dpus`` DPUs, checked and assembled."""

    @property
    def nr_dpus(self) -> int: ...

    @property
    def device(self) -> DpuDeviceDescription: ...

    def check(self, program: DpuProgram) -> None: ...

    def assemble(self, dpus: DpuSet | None, program: DpuProgram | None) -> A: ...


class DpuFoundry:
    """Builds assemblies: ``await DpuFoundry.targeting(PYTHON).build(line)``."""

    def __init__(self, target: Target) -> None:
        self.target = target

    @classmethod
    def targeting(cls, target: Target = PYTHON) -> DpuFoundry:
        """A foundry for ``target`` (only Python here)."""
        if target is not Target.PYTHON:
            raise DpuFoundryError(f"aiopim's foundry targets Python, not {target!r}")
        return cls(target)

    async def build(
        self, line: AssemblyLine[A], *, emulator: Emulator | None = None, profile: str = ""
    ) -> A:
        """Allocate, load and check the DPUs of ``line`` (none on the stubbed backend)."""
        device = line.device
        if device.backend is DpuBackend.STUBBED:
            return line.assemble(None, None)
        program = device.resolve_program()
        line.check(program)
        dpus = await DpuSet.alloc(line.nr_dpus, emulator=emulator, profile=profile)
        try:
            await dpus.load(program)
            return line.assemble(dpus, program)
        except BaseException:
            await dpus.free()
            raise


class _Slot:
    """One DPU of an assembly: its single-DPU set, the lock that orders its calls and the
    program's MRAM sections."""

    def __init__(self, number: int, dset: DpuSet, mram: MramLayout) -> None:
        self.number = number
        self.dset = dset
        self.mram = mram
        self.lock = anyio.Lock()


class BasicDpuAssembly:
    """A fleet of DPUs running one device; hands out workers per DPU and task.

    Clear it when done (``await assembly.clear()``, or ``async with``)."""

    def __init__(
        self, line: BasicDpuAssemblyLine, dpus: DpuSet | None, program: DpuProgram | None = None
    ) -> None:
        self.line = line
        layout = getattr(program, "mailbox_layout", None)
        self._layout = layout if isinstance(layout, MailboxLayout) else None
        self._symbols = program.mailbox_symbols() if isinstance(program, Program) else None
        self._classes: dict[str, type[FunctionWorker]] = {}
        self.device = line.device
        self.interface = line.device.interface
        self._dpus = dpus
        mram = MramLayout.of(program) if program is not None else MramLayout()
        self._slots = [_Slot(i, d, mram) for i, d in enumerate(dpus)] if dpus is not None else []
        self._workers: dict[tuple[int, str], Any] = {}
        self._cleared = False

    @property
    def nr_dpus(self) -> int:
        """DPUs in the assembly."""
        return self.line.nr_dpus

    @property
    def dpu_set(self) -> DpuSet | None:
        """The emulated DPUs (None on the stubbed backend)."""
        return self._dpus

    @property
    def free_mram(self) -> int:
        """The first MRAM byte past the program's own sections (``DPU_MRAM_HEAP_POINTER``):
        where ``copy_to_device`` may write (0 on the stubbed backend)."""
        return self._slots[0].mram.free_start if self._slots else 0

    def worker(self, *args: Any) -> Any:
        """``worker(task)`` (DPU 0) or ``worker(dpu_number, task)``: the worker of a task."""
        if len(args) == 1:
            dpu_number, task = 0, args[0]
        elif len(args) == 2:
            dpu_number, task = args
        else:
            raise TypeError("worker(task) or worker(dpu_number, task)")
        if self._cleared:
            raise DpuFoundryError("the assembly is cleared")
        if isinstance(dpu_number, bool) or not isinstance(dpu_number, int):
            raise TypeError(f"dpu_number must be an int, not {type(dpu_number).__name__}")
        if not 0 <= dpu_number < self.nr_dpus:
            raise DpuFoundryError(f"DPU {dpu_number} is not in the assembly of {self.nr_dpus}")
        name = self.interface.task_name(task)
        key = (dpu_number, name)
        w = self._workers.get(key)
        if w is None:
            w = self._workers[key] = self._make_worker(dpu_number, name)
        return w

    def _make_worker(self, dpu_number: int, task: str) -> Any:
        iface = self.interface
        if isinstance(iface, StubbedInterface) and self._dpus is None:
            factory = iface.worker_factories().get(task)
            if factory is None:
                raise DpuFoundryError(
                    f"the stubbed interface {iface.name!r} has no worker for {task}"
                )
            return factory(dpu_number)
        slot = self._slots[dpu_number]
        if task == MEMORY_COPY:
            return MemoryCopyWorker(slot)
        f = iface.didl.function(task)
        cls = self._classes.get(task)
        if cls is None:
            cls = self._classes[task] = _worker_class(f)
        return cls(slot, f, self._layout, self._symbols or (None, None))

    async def clear(self) -> None:
        """Free the DPUs; the workers stop working."""
        if self._cleared:
            return
        self._cleared = True
        if self._dpus is not None:
            await self._dpus.free()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.clear()


def _low_level(slot: _Slot, task: str, exc: DpuError) -> DpuLowLevelError:
    detail = exc.detail or str(exc)
    fault = slot.dset.faults[0]
    fault_code = exc.code is DpuErrorCode.DPU_ERR_DPU_FAULT
    if fault is not None and fault_code and fault.reason not in detail:  # say why, once
        code = "" if fault.code is None else f"fault {fault.code}: "
        where = "" if fault.tasklet is None else f" in tasklet {fault.tasklet}"
        detail = f"{detail} ({code}{fault.reason}{where})"
    return DpuLowLevelError(exc.value, slot.number, task, detail)


class _Worker:
    def __init__(self, slot: _Slot) -> None:
        self._slot = slot

    @property
    def dpu_number(self) -> int:
        """The DPU this worker drives."""
        return self._slot.number


class FunctionWorker(_Worker):
    """Calls one DIDL function on one DPU: post the inputs, boot, collect the outputs."""

    def __init__(
        self,
        slot: _Slot,
        function: Function,
        layout: MailboxLayout | None,
        symbols: tuple[Symbol | None, Symbol | None],
    ) -> None:
        super().__init__(slot)
        self.function = function
        self._layout = layout
        self._sys_symbol, self._mbox_symbol = symbols

    async def invoke(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function with these ``in`` values; return its ``out`` values."""
        f = self.function
        inputs = bind_arguments(f, args, kwargs)
        slot = self._slot
        async with slot.lock:
            try:
                return await self._call(inputs)
            except DpuError as exc:
                if isinstance(exc, DpuLowLevelError):
                    raise
                raise _low_level(slot, f.python_name, exc) from exc

    async def _call(self, inputs: Sequence[np.ndarray]) -> Any:
        f, dset = self.function, self._slot.dset
        sys_bytes: dict[int, int] = {}
        mbox_bytes: dict[int, int] = {}
        for p, elems in zip(f.inputs, inputs, strict=True):
            m = f.mapping(p.name)
            if m.kind == "dram":
                await mram_write(
                    dset, m.offset, elems.astype(p.dtype.newbyteorder("<")).view(np.uint8)
                )
                continue
            for (t, w), word in zip(m.word_slots(), to_words(p, elems), strict=True):
                if t < 0:
                    sys_bytes[WORD * w] = int(word)
                else:
                    mbox_bytes[self._mbox_offset(t, w)] = int(word)
        for symbol, words in ((self._sys_symbol, sys_bytes), (self._mbox_symbol, mbox_bytes)):
            for offset, run in _runs(words):
                assert symbol is not None  # the mappings were checked against the program
                await dset.copy_to(symbol, run, offset=offset)
        await dset.launch()
        return result_value(f, await self._collect())

    def _mbox_offset(self, tasklet: int, word: int) -> int:
        assert isinstance(self._layout, MailboxLayout)
        return self._layout.mbox_offset(tasklet) + WORD * word

    async def _collect(self) -> list[np.ndarray]:
        f, dset = self.function, self._slot.dset
        slots = {
            self._mbox_offset(t, w)
            for p in f.outputs
            if f.mapping(p.name).kind == "mbox"
            for t, w in f.mapping(p.name).word_slots()
        }
        box = np.zeros(0, np.uint32)
        lo = min(slots, default=0)
        if slots:
            span = (max(slots) - lo) // WORD + 1
            assert self._mbox_symbol is not None
            box = (await dset.copy_from(self._mbox_symbol, np.uint32, span, offset=lo))[0]
        outs: list[np.ndarray] = []
        for p in f.outputs:
            m = f.mapping(p.name)
            if m.kind == "dram":
                raw = await mram_read(dset, m.offset, p.count * p.dtype.itemsize)
                outs.append(raw.view(p.dtype.newbyteorder("<")).astype(p.dtype))
                continue
            idx = [(self._mbox_offset(t, w) - lo) // WORD for t, w in m.word_slots()]
            try:
                outs.append(from_words(p, box[idx]))
            except ValueError as exc:
                raise DpuError(DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER, str(exc)) from None
        return outs


def _runs(words: dict[int, int]) -> list[tuple[int, np.ndarray]]:
    """Contiguous runs of ``{byte offset: word}`` as ``(offset, uint32 array)``."""
    runs: list[tuple[int, list[int]]] = []
    for off in sorted(words):
        if runs and runs[-1][0] + WORD * len(runs[-1][1]) == off:
            runs[-1][1].append(words[off])
        else:
            runs.append((off, [words[off]]))
    return [(off, np.array(ws, dtype=np.uint32)) for off, ws in runs]


def _worker_class(f: Function) -> type[FunctionWorker]:
    async def method(self: FunctionWorker, *args: Any, **kwargs: Any) -> Any:
        return await self.invoke(*args, **kwargs)

    method.__name__ = f.python_name
    method.__doc__ = f"Call ``{f.name}`` on this worker's DPU."
    name = "".join(p[:1].upper() + p[1:] for p in f.python_name.split("_")) + "Worker"
    return type(name, (FunctionWorker,), {f.python_name: method})


class MemoryCopyWorker(_Worker):
    """Copies bytes to and from one DPU's MRAM (the ``memoryCopy`` task)."""

    async def copy_to_device(self, destination: int, data: Any) -> None:
        """Write ``data`` (bytes-like or a NumPy array, copied as raw bytes) at MRAM byte
        ``destination``, which must leave the program's own MRAM sections alone."""
        dst = _address("destination", destination)
        if isinstance(data, np.ndarray):
            raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        elif isinstance(data, bytes | bytearray | memoryview):
            raw = np.frombuffer(data, np.uint8)
        else:
            raise TypeError(f"data must be bytes-like or a NumPy array, not {type(data).__name__}")
        slot = self._slot
        what = f"copy_to_device({dst:#x}, {raw.size} bytes)"
        refusal = slot.mram.refusal(what, dst, dst + raw.size)
        if refusal is not None:
            raise DpuLowLevelError(
                DpuErrorCode.DPU_ERR_INVALID_MRAM_ACCESS, slot.number, "memory_copy", refusal
            )
        await self._run(lambda: mram_write(slot.dset, dst, raw))

    async def copy_from_device(self, source: int, length: int) -> np.ndarray:
        """``length`` bytes of MRAM from byte ``source``, as a ``uint8`` array."""
        src = _address("source", source)
        n = _address("length", length)
        out: list[np.ndarray] = []

        async def read() -> None:
            out.append(await mram_read(self._slot.dset, src, n))

        await self._run(read)
        return out[0]

    async def _run(self, job: Callable[[], Awaitable[None]]) -> None:
        slot = self._slot
        async with slot.lock:
            try:
                await job()
            except DpuError as exc:
                raise _low_level(slot, "memory_copy", exc) from exc


def _address(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    v = int(value)
    if v < 0:
        raise ValueError(f"{name} must be >= 0, not {v}")
    return v
