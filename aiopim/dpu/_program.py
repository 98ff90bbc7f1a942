"""Declaring a DPU program in Python: variables, synchronisation objects and the entry point."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import DpuError, DpuErrorCode
from .._machine._dpulog import STDOUT_BUFFER, STDOUT_BUFFER_STATE, LogBuffer
from .._machine._program import (
    DPU_MRAM_HEAP_POINTER_NAME,
    MRAM_BIT,
    MRAM_SIZE,
    DpuProgram,
    MemoryImage,
    MemorySpace,
    Symbol,
    mram_heap_pointer_symbol,
)
from .._machine._wramfifo import struct_size
from ._fifo import FifoDecl, check_fifo_geometry
from ._mailbox import MailboxConfig
from ._mram import DEFAULT_SEQREAD_CACHE_SIZE, SEQREAD_CACHE_SIZES
from ._stdio import DEFAULT_STDOUT_BUFFER_SIZE
from ._sync import MutexPoolDecl, SemaphoreDecl, VMutexDecl

if TYPE_CHECKING:
    from .._machine._dpu import Dpu
    from ..timing import ChipProfile
    from ._tasklet import Tasklet

MainFn = Callable[["Tasklet"], Awaitable[None]]
DEFAULT_STACK_SIZE = 1024


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass(frozen=True)
class Var:
    """A program variable: where it lives and how to view it."""

    name: str
    section: str  # ".data", ".data.__sys_host", ".mram", ".mram.noinit"
    dtype: np.dtype[Any]
    count: int
    init: bytes | None

    @property
    def size(self) -> int:
        """Size in bytes."""
        return int(self.dtype.itemsize * self.count)

    @property
    def space(self) -> MemorySpace:
        """WRAM or MRAM."""
        return MemorySpace.MRAM if self.section.startswith(".mram") else MemorySpace.WRAM


@dataclass(frozen=True)
class BarrierDecl:
    """``BARRIER_INIT(name, count)``."""

    name: str
    count: int | None

    def __post_init__(self) -> None:
        if self.count is not None and not -127 <= self.count <= 127:
            raise ValueError("a barrier count must fit a signed byte")


@dataclass(frozen=True)
class MutexDecl:
    """``MUTEX_INIT(name)``."""

    name: str


class Program(MailboxConfig, DpuProgram):
    """A DPU program written in Python: declare variables, then decorate ``main``.

    >>> prog = Program("demo", nr_tasklets=4)
    >>> counter = prog.host("counter", np.uint32)
    >>> @prog.main
    ... async def main(t): ...
    """

    def __init__(
        self,
        name: str,
        *,
        nr_tasklets: int = 1,
        stack_size: int | list[int] = DEFAULT_STACK_SIZE,
        chip: str | None = None,
        stdio: bool = True,
        stdout_buffer_size: int = DEFAULT_STDOUT_BUFFER_SIZE,
        seqread_cache_size: int = DEFAULT_SEQREAD_CACHE_SIZE,
    ) -> None:
        """``stdio``: link ``printf`` (its MRAM ``__stdout_buffer`` of ``stdout_buffer_size``
        bytes and WRAM state); ``seqread_cache_size``: ``SEQREAD_CACHE_SIZE``."""
        if nr_tasklets < 1:
            raise ValueError("nr_tasklets must be at least 1")
        self.name = name
        self._nr_tasklets = nr_tasklets
        sizes = stack_size if isinstance(stack_size, list) else [stack_size] * nr_tasklets
        if len(sizes) != nr_tasklets or any(s <= 0 or s % 8 for s in sizes):
            raise ValueError("stack sizes must be positive multiples of 8, one per tasklet")
        self.stack_sizes = sizes
        self._chip = chip
        if stdout_buffer_size < 8 or stdout_buffer_size % 8:
            raise ValueError("stdout_buffer_size must be a positive multiple of 8")
        if seqread_cache_size not in SEQREAD_CACHE_SIZES:
            raise ValueError(f"seqread_cache_size must be one of {SEQREAD_CACHE_SIZES}")
        self.stdio = stdio
        self.stdout_buffer_size = stdout_buffer_size
        self.seqread_cache_size = seqread_cache_size
        self._vars: dict[str, Var] = {}
        self._main: MainFn | None = None
        self._layout: dict[str, int] | None = None
        self._symbols: dict[str, Symbol] | None = None
        self._fifos: list[FifoDecl] = []
        self._atomic_bits = 0
        self.heap_start = 0
        self.host("CLOCKS_PER_SEC", np.uint32)

    # -- declaration ----------------------------------------------------------------------------
    def _declare(self, name: str, section: str, dtype: npt.DTypeLike, count: int, init: Any) -> Var:
        if self._layout is not None:
            raise RuntimeError(f"{self.name!r} is already laid out; declare variables first")
        if name in self._vars:
            raise ValueError(f"variable {name!r} is declared twice")
        if count < 1:
            raise ValueError("count must be at least 1")
        dt = np.dtype(dtype)
        raw = None
        if init is not None:
            arr = np.asarray(init, dtype=dt).reshape(-1)
            if arr.size > count:
                raise ValueError(f"initial value of {name!r} has {arr.size} > {count} elements")
            full = np.zeros(count, dtype=dt)
            full[: arr.size] = arr
            raw = full.tobytes()
        v = Var(name, section, dt, count, raw)
        self._vars[name] = v
        return v

    def host(
        self, name: str, dtype: npt.DTypeLike = np.uint32, count: int = 1, init: Any = None
    ) -> Var:
        """A ``__host`` WRAM variable (host-visible)."""
        return self._declare(name, ".data.__sys_host", dtype, count, init)

    def wram(
        self, name: str, dtype: npt.DTypeLike = np.uint32, count: int = 1, init: Any = None
    ) -> Var:
        """A WRAM global without ``__host`` (not visible to the host)."""
        return self._declare(name, ".data", dtype, count, init)

    def mram(
        self, name: str, dtype: npt.DTypeLike = np.uint8, count: int = 1, init: Any = None
    ) -> Var:
        """An ``__mram`` variable, initialised by ``dpu_load``."""
        return self._declare(name, ".mram", dtype, count, init)

    def mram_noinit(self, name: str, dtype: npt.DTypeLike = np.uint8, count: int = 1) -> Var:
        """An ``__mram_noinit`` variable (not loaded)."""
        return self._declare(name, ".mram.noinit", dtype, count, None)

    def barrier(self, name: str, count: int | None = None) -> BarrierDecl:
        """``BARRIER_INIT(name, count)``; ``count`` defaults to NR_TASKLETS."""
        self._atomic_bits += 1  # its lock
        return BarrierDecl(name, count)

    def mutex(self, name: str) -> MutexDecl:
        """``MUTEX_INIT(name)``."""
        self._atomic_bits += 1
        return MutexDecl(name)

    def input_fifo(self, name: str, ptr_size: int, data_size: int) -> FifoDecl:
        """``INPUT_FIFO_INIT(name, ptr_size, data_size)``: filled by the host, read by tasklets."""
        return self._fifo(name, ptr_size, data_size, output=False)

    def output_fifo(self, name: str, ptr_size: int, data_size: int) -> FifoDecl:
        """``OUTPUT_FIFO_INIT(name, ptr_size, data_size)``: filled by tasklets, drained by host."""
        return self._fifo(name, ptr_size, data_size, output=True)

    def _fifo(self, name: str, ptr_size: int, data_size: int, *, output: bool) -> FifoDecl:
        check_fifo_geometry(name, ptr_size, data_size)
        data = self.host(f"__{name}_data", np.uint8, (1 << ptr_size) * data_size)
        tmp = self.wram(f"__{name}_tmp_data", np.uint8, self._nr_tasklets * data_size)
        struct = self.host(name, np.uint8, struct_size(output))
        decl = FifoDecl(name, ptr_size, data_size, output, struct, data, tmp)
        self._fifos.append(decl)
        return decl

    def semaphore(self, name: str, count: int) -> SemaphoreDecl:
        """``SEMAPHORE_INIT(name, count)``."""
        decl = SemaphoreDecl(name, count)
        self._atomic_bits += 1  # its lock
        return decl

    def mutex_pool(self, name: str, nb_mutexes: int) -> MutexPoolDecl:
        """``MUTEX_POOL_INIT(name, nb_mutexes)`` (a power of 2)."""
        decl = MutexPoolDecl(name, nb_mutexes)
        self._atomic_bits += nb_mutexes
        return decl

    def vmutex(self, name: str, nb_vmutexes: int, nb_mutexes: int) -> VMutexDecl:
        """``VMUTEX_INIT(name, nb_vmutexes, nb_mutexes)``."""
        decl = VMutexDecl(name, nb_vmutexes, nb_mutexes)
        self._atomic_bits += nb_mutexes
        return decl

    def main(self, fn: MainFn) -> MainFn:
        """Decorator: the entry point every tasklet runs."""
        self._main = fn
        return fn

    # -- DpuProgram -------------------------------------------------------------------------------
    @property
    def nr_tasklets(self) -> int:
        return self._nr_tasklets

    @property
    def chip(self) -> str | None:
        return self._chip

    def _lay_out(self) -> dict[str, int]:
        if self._layout is not None:
            return self._layout
        layout: dict[str, int] = {}
        # WRAM, in the order of UPMEM's linker script (sdk-reference.md §5.3)
        addr = 8  # __sys_zero
        if self.stdio:  # __lower_data: the printf state sits in the immediate area
            layout[STDOUT_BUFFER_STATE] = addr
            addr += 8
        for section in (".data", ".data.__sys_host"):
            for v in self._vars.values():
                if v.section == section:
                    addr = _align(addr, 8)
                    layout[v.name] = addr
                    addr += v.size
        addr = _align(addr, 8)
        addr += sum(self.stack_sizes)
        layout["__sw_cache_buffer"] = addr
        addr += 8 * self._nr_tasklets  # software cache
        self.heap_start = _align(addr, 8)
        # MRAM: .mram.noinit then .mram, then DPU_MRAM_HEAP_POINTER
        maddr = 0
        for section in (".mram.noinit", ".mram"):
            for v in self._vars.values():
                if v.section == section:
                    maddr = _align(maddr, 8)
                    layout[v.name] = MRAM_BIT | maddr
                    maddr += v.size
        if self.stdio:
            # aiopim places the weak __stdout_buffer after the program's own MRAM variables
            maddr = _align(maddr, 8)
            layout[STDOUT_BUFFER] = MRAM_BIT | maddr
            maddr += self.stdout_buffer_size
        maddr = _align(maddr, 8)
        if maddr > MRAM_SIZE:
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_MRAM_ACCESS,
                f"{self.name!r} declares {maddr} bytes of MRAM variables; a DPU has 64 MiB",
            )
        layout[DPU_MRAM_HEAP_POINTER_NAME] = MRAM_BIT | maddr
        self._layout = layout
        return layout

    def address_of(self, var: Var | str) -> int:
        """DPU address of a variable (WRAM byte address or 0x08000000 | MRAM offset)."""
        layout = self._layout
        if layout is None:
            layout = self._lay_out()
        return layout[var if type(var) is str else var.name]  # type: ignore[union-attr]

    def symbols(self) -> Mapping[str, Symbol]:
        if self._symbols is None:
            layout = self._lay_out()
            syms: dict[str, Symbol] = {}
            for v in self._vars.values():
                if v.section != ".data":  # only __host WRAM data is visible (sdk-reference.md §1.4)
                    syms[v.name] = Symbol(v.name, layout[v.name], v.size)
            if self.stdio:
                syms[STDOUT_BUFFER] = Symbol(
                    STDOUT_BUFFER, layout[STDOUT_BUFFER], self.stdout_buffer_size
                )
            heap = layout[DPU_MRAM_HEAP_POINTER_NAME]
            syms[DPU_MRAM_HEAP_POINTER_NAME] = mram_heap_pointer_symbol(heap)
            self._symbols = syms
        return self._symbols

    def log_buffer(self) -> LogBuffer | None:
        """Where ``printf`` writes (None without stdio)."""
        if not self.stdio:
            return None
        layout = self._lay_out()
        return LogBuffer(
            layout[STDOUT_BUFFER], self.stdout_buffer_size, layout[STDOUT_BUFFER_STATE]
        )

    def images(self) -> list[MemoryImage]:
        layout = self._lay_out()
        images = [
            MemoryImage(layout[v.name], v.init)
            for v in self._vars.values()
            if v.init is not None and v.section != ".mram.noinit"
        ]
        for f in self._fifos:
            at = layout[f.struct.name]
            images.append(
                MemoryImage(at, f.struct_image(layout[f.data.name], layout[f.tmp_data.name]))
            )
        return images

    def zeroed_mram(self) -> list[tuple[int, int]]:
        layout = self._lay_out()
        return [
            (layout[v.name] & ~MRAM_BIT, v.size)
            for v in self._vars.values()
            if v.section == ".mram" and v.init is None
        ]

    def atomic_bits(self) -> int:
        """Atomic bits the program's mutexes and locks take."""
        return self._atomic_bits + (1 if self.stdio else 0)  # printf's lock

    def check_fits(self, chip: ChipProfile) -> None:
        self._lay_out()
        if self.heap_start > chip.wram_size:
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_WRAM_ACCESS,
                f"{self.name!r} needs {self.heap_start} bytes of WRAM before its heap "
                f"(variables, {self._nr_tasklets} stacks, cache) but the DPU has "
                f"{chip.wram_size}",
            )
        if self.atomic_bits() > chip.user_atomic_bits:
            raise DpuError(
                DpuErrorCode.DPU_ERR_ELF_INVALID_FILE,
                f"{self.name!r} needs {self.atomic_bits()} atomic bits (mutexes, barrier and "
                f"semaphore locks, printf) but {chip.name} programs have "
                f"{chip.user_atomic_bits}; it would not link",
            )

    def boot(self, dpu: Dpu) -> None:
        from ._tasklet import start_tasklets

        if self._main is None:
            raise DpuError(
                DpuErrorCode.DPU_ERR_INTERNAL, f"{self.name!r} has no entry point (@prog.main)"
            )
        self._lay_out()
        start_tasklets(dpu, self, self._main)
