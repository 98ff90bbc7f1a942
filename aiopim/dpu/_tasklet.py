"""What a tasklet sees while it runs: ``me()``, WRAM, DMA, compute charges, synchronisation."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from .. import timing
from .._machine._program import MRAM_BIT
from .._runtime._kernel import Command, Process, WaitQueue
from ._alloc import AllocMixin
from ._fifo import FifoOps
from ._mailbox import MailboxOps
from ._mram import MramMixin
from ._perfcounter import PerfcounterMixin
from ._program import Var
from ._runner import (
    ComputeCommand,
    DmaCommand,
    DpuFault,
    MramDmaCommand,
    Pipeline,
    TaskletRunner,
)
from ._stdio import StdioMixin, reset_stdio

if TYPE_CHECKING:
    from .._machine._dpu import Dpu
    from .._machine._dpulog import LogBuffer
    from ._program import BarrierDecl, MainFn

#: software fault codes of dpufault.h (sdk-reference.md §5.8)
FAULT_HEAP_FULL = 1
FAULT_DIVISION_BY_ZERO = 2
FAULT_ASSERT = 3
FAULT_HALT = 4


class _Barrier:
    __slots__ = ("count", "initial", "queue")

    def __init__(self, count: int, label: str) -> None:
        self.initial = count
        self.count = count
        self.queue = WaitQueue(label)


class TaskletProgram(Protocol):
    """What a tasklet needs from its program (a Python ``Program`` or a bound ELF binary)."""

    @property
    def nr_tasklets(self) -> int: ...

    heap_start: int

    def address_of(self, where: Var | str) -> int: ...

    def log_buffer(self) -> LogBuffer | None: ...


class _Shared:
    """What the tasklets of one program on every DPU with one WRAM size look up alike: symbol
    addresses, checked WRAM views and poll ranges (the layout is fixed once a program is laid
    out). One copy for the whole machine stays in the processor's caches, where one per
    tasklet (thousands of DPUs) would not."""

    __slots__ = ("addrs", "loops", "polls", "views", "whole")

    def __init__(self) -> None:
        self.addrs: dict[str, int] = {}
        self.loops: dict[tuple[str, str, str], tuple[int, int, int, int, int]] = {}
        self.views: dict[tuple[str, Any, int | None], tuple[int, int, np.dtype[Any]]] = {}
        self.whole: dict[str, tuple[int, int, np.dtype[Any]]] = {}
        self.polls: dict[tuple[str, str, str], tuple[list[tuple[int, int]], str]] = {}


_SHARED: weakref.WeakKeyDictionary[Any, dict[int, _Shared]] = weakref.WeakKeyDictionary()

#: (address, NumPy scalar type, count) -> (end, dtype) of ``view`` calls that passed the
#: alignment check; the end is still checked against each DPU's WRAM size
_CHECKED: dict[tuple[int, Any, int | None], tuple[int, np.dtype[Any]]] = {}


def _shared(program: TaskletProgram, wram_size: int) -> _Shared:
    try:
        by_size = _SHARED.get(program)
        if by_size is None:
            by_size = _SHARED[program] = {}
    except TypeError:  # not weakly referenceable: the tasklet keeps its own
        return _Shared()
    shared = by_size.get(wram_size)
    if shared is None:
        shared = by_size[wram_size] = _Shared()
    return shared


def start_tasklets(dpu: Dpu, program: TaskletProgram, main: MainFn) -> None:
    """Boot: reset the printf state, spawn one :class:`Tasklet` running ``main`` per
    ``NR_TASKLETS``."""
    runner = dpu.runner_of(TaskletRunner)
    reset_stdio(dpu, program.log_buffer())
    for tid in range(program.nr_tasklets):
        runner.spawn(tid, Tasklet(runner, program, tid)._run(main))


class _BarrierCommand(Command):
    """``barrier_wait``: issue its instructions, then arrive (one tasklet step, not two)."""

    __slots__ = ("barrier", "instructions", "pipeline")

    def __init__(self, pipeline: Pipeline, instructions: int, barrier: _Barrier) -> None:
        self.pipeline = pipeline
        self.instructions = instructions
        self.barrier = barrier

    def arm(self, proc: Process) -> None:
        proc.blocked_on = "compute"
        self.pipeline.compute(proc, self.instructions, self._arrive, proc)

    def _arrive(self, proc: Process) -> None:
        # runs in the event where the tasklet would have resumed after its instructions
        if proc.done:
            return
        b = self.barrier
        if b.count == 1:
            b.count = b.initial
            b.queue.wake_all()
            proc.resume(None)
            return
        b.count -= 1
        b.queue.arm(proc)


#: np.dtype of the NumPy scalar types (the usual ``dtype`` arguments of ``view``)
_DTYPES: dict[Any, np.dtype[Any]] = {
    t: np.dtype(t)
    for t in (
        np.uint8,
        np.int8,
        np.uint16,
        np.int16,
        np.uint32,
        np.int32,
        np.uint64,
        np.int64,
        np.float32,
        np.float64,
    )
}


_NO_DEFERRED_DMA: list[int] = []


def _no_copy() -> None:
    """Bytes already in place (a DMA whose effect a synchronous runtime call applied)."""


class Tasklet(FifoOps, MailboxOps, MramMixin, AllocMixin, StdioMixin, PerfcounterMixin):
    """The runtime of one tasklet, passed to the program's ``main``."""

    def __init__(self, runner: TaskletRunner, program: TaskletProgram, tasklet_id: int) -> None:
        dpu = runner.dpu
        self.runner = runner
        self.dpu = dpu
        self.program = program
        self._id = tasklet_id
        self._pending = 0
        #: sizes of DMAs issued later (``printf``); the shared empty list is never appended
        #: to (``printf`` gives the tasklet a list of its own)
        self._deferred_dma: list[int] = _NO_DEFERRED_DMA
        self.wram = dpu.wram
        self._wram_size = len(dpu.wram)
        self._mram_size = dpu.chip.mram_size
        shared = _shared(program, self._wram_size)
        #: DPU addresses of the program's symbols by name (the layout is fixed)
        self._addrs = shared.addrs
        #: WRAM views of variables by (name, dtype, count): (start, end, dtype)
        self._views = shared.views
        #: the same for ``view(var)`` (its declared type, all of it), by name
        self._whole = shared.whole
        self._polls = shared.polls
        self._loops = shared.loops

    async def _run(self, main: MainFn) -> None:
        try:
            await main(self)
        except ZeroDivisionError as exc:  # the runtime's division routines trap: fault 2
            raise DpuFault(f"division by zero: {exc}", FAULT_DIVISION_BY_ZERO) from exc
        await self.flush()

    def _address(self, where: Var | str) -> int:
        """``program.address_of(where)``, cached by name."""
        name = where if type(where) is str else where.name  # type: ignore[union-attr]
        addr = self._addrs.get(name)
        if addr is None:
            addr = self._addrs[name] = self.program.address_of(where)
        return addr

    # -- identity ---------------------------------------
    def me(self) -> int:
        """This tasklet's id (0 … NR_TASKLETS-1)."""
        return self._id

    @property
    def nr_tasklets(self) -> int:
        """NR_TASKLETS of the program."""
        return self.program.nr_tasklets

    # -- compute ---------------------------------------
    def compute(self, instructions: int) -> None:
        """Charge ``instructions`` of computation; they issue at the next runtime call."""
        self._pending += int(instructions)

    async def flush(self) -> None:
        """Issue the charged instructions now (waits for the pipeline)."""
        n = self._pending
        if n:
            self._pending = 0
            await ComputeCommand(self.runner.pipeline, n)
        while self._deferred_dma:
            await DmaCommand(self.runner.dma, self._deferred_dma.pop(0), True, _no_copy)

    # -- WRAM ---------------------------------------
    def view(
        self, where: Var | int, dtype: npt.DTypeLike = np.uint8, count: int | None = None
    ) -> np.ndarray:
        """A NumPy view of WRAM: a ``__host``/WRAM variable, or ``count`` items at an address."""
        if type(where) is int:  # the common case first: an address
            known_dt = _DTYPES.get(dtype) if type(dtype) is type else None
            if known_dt is not None:
                checked = _CHECKED.get((where, dtype, count))
                if checked is not None and checked[0] <= self._wram_size:
                    return self.wram[where : checked[0]].view(checked[1])
            dt = known_dt if known_dt is not None else np.dtype(dtype)
            end = where + (1 if count is None else count) * dt.itemsize
            if where < 0 or end > len(self.wram) or where % dt.itemsize:
                raise DpuFault(
                    f"memory fault: WRAM access [{where:#x}, {end:#x}) out of range or unaligned"
                )
            if known_dt is not None and len(_CHECKED) < 1 << 16:
                _CHECKED[where, dtype, count] = (end, dt)
            return self.wram[where:end].view(dt)
        if isinstance(where, Var):
            if dtype is np.uint8 and count is None:  # the whole variable as declared
                known = self._whole.get(where.name)
                if known is not None:
                    return self.wram[known[0] : known[1]].view(known[2])
            key = (where.name, dtype, count)
            cacheable = True
            try:
                known = self._views.get(key)
            except TypeError:  # an unhashable dtype spec (a list of fields): not cached
                known = None
                cacheable = False
            if known is not None:
                return self.wram[known[0] : known[1]].view(known[2])
            if where.section.startswith(".mram"):
                raise TypeError(f"{where.name!r} is in MRAM; use mram_read to bring it to WRAM")
            addr = self._address(where)
            dt = where.dtype if dtype is np.uint8 and where.dtype != np.uint8 else np.dtype(dtype)
            n = count if count is not None else where.size // dt.itemsize
            end = addr + n * dt.itemsize
            if addr < 0 or end > len(self.wram) or addr % dt.itemsize:
                raise DpuFault(
                    f"memory fault: WRAM access [{addr:#x}, {end:#x}) out of range or unaligned"
                )
            if cacheable:
                self._views[key] = (addr, end, dt)
                if dtype is np.uint8 and count is None:
                    self._whole[where.name] = (addr, end, dt)
            return self.wram[addr:end].view(dt)
        else:
            addr = int(where)
            known_dt = _DTYPES.get(dtype) if type(dtype) is type else None
            dt = known_dt if known_dt is not None else np.dtype(dtype)
            n = 1 if count is None else count
        end = addr + n * dt.itemsize
        if addr < 0 or end > len(self.wram) or addr % dt.itemsize:
            raise DpuFault(
                f"memory fault: WRAM access [{addr:#x}, {end:#x}) out of range or unaligned"
            )
        return self.wram[addr:end].view(dt)

    def mem_alloc(self, size: int) -> int:
        """``mem_alloc``: ``size`` bytes of WRAM heap at an 8-byte aligned address (the
        pointer is aligned, then advanced by ``size``); size 0 returns the current pointer
        unchanged; fault 1 when the end would reach the end of WRAM. Atomic (thread-safe)."""
        state = self.dpu.persistent
        ptr = int(state.get("heap_pointer", self.program.heap_start))
        self._pending += timing.MEM_ALLOC_INSTRUCTIONS
        size = int(size)
        if size == 0:
            return ptr
        ptr = (ptr + 7) & ~7
        new = ptr + size
        if size < 0 or new >= len(self.wram):  # alloc.c: fault unless new < end of WRAM
            raise DpuFault(
                f"heap full: mem_alloc({size}) at {ptr:#x} reaches the end of WRAM "
                f"({len(self.wram):#x})",
                FAULT_HEAP_FULL,
            )
        state["heap_pointer"] = new
        return ptr

    def mem_reset(self) -> int:
        """Reset the WRAM heap to its start; returns the start."""
        self._pending += timing.MEM_RESET_INSTRUCTIONS
        self.dpu.persistent["heap_pointer"] = self.program.heap_start
        return self.program.heap_start

    # -- MRAM DMA ---------------------------------------
    def _dma_checks(self, mram: int, wram: int, size: int) -> int:
        if isinstance(mram, int) and mram & MRAM_BIT:
            mram &= ~MRAM_BIT
        if size < 8 or size > 2048 or size % 8:
            raise DpuFault(f"DMA fault: size {size} must be a multiple of 8 in [8, 2048]")
        if mram % 8 or wram % 8:
            raise DpuFault(f"DMA fault: MRAM {mram:#x} and WRAM {wram:#x} must be 8-byte aligned")
        if mram < 0 or mram + size > self._mram_size:
            raise DpuFault(f"DMA fault: MRAM range [{mram:#x}, {mram + size:#x}) out of bounds")
        if wram < 0 or wram + size > self._wram_size:
            raise DpuFault(f"DMA fault: WRAM range [{wram:#x}, {wram + size:#x}) out of bounds")
        return mram

    def mram_read(self, mram: int, wram: int, size: int) -> Awaitable[None]:
        """``mram_read(from, to, size)``: MRAM → WRAM by DMA (blocks this tasklet)."""
        off = self._dma_checks(mram if type(mram) is int else self._mram_addr(mram), wram, size)
        if self._deferred_dma:
            return self._flush_then(MramDmaCommand(self.runner, 0, off, wram, size, False))
        n = self._pending  # issued in the same tasklet step: see MramDmaCommand
        self._pending = 0
        # a fresh command (not one kept per tasklet: a new object is in the processor's
        # caches, a kept one of thousands of tasklets is not)
        return MramDmaCommand(self.runner, n, off, wram, size, False)

    def mram_write(self, wram: int, mram: int, size: int) -> Awaitable[None]:
        """``mram_write(from, to, size)``: WRAM → MRAM by DMA (blocks this tasklet)."""
        off = self._dma_checks(mram if type(mram) is int else self._mram_addr(mram), wram, size)
        if self._deferred_dma:
            return self._flush_then(MramDmaCommand(self.runner, 0, off, wram, size, True))
        n = self._pending
        self._pending = 0
        return MramDmaCommand(self.runner, n, off, wram, size, True)

    async def _flush_then(self, command: Command) -> None:
        await self.flush()
        await command

    def _mram_addr(self, where: Var | int) -> int:
        if type(where) is int:
            return where
        if isinstance(where, Var):
            return self._address(where)
        return int(where)

    def mram_address(self, var: Var, offset: int = 0) -> int:
        """MRAM address (0x08000000 | offset) of an ``__mram`` variable plus ``offset``."""
        addr = self._addrs.get(var.name)
        if addr is None:
            addr = self._address(var)
        return addr + offset

    @property
    def mram_heap_pointer(self) -> int:
        """``DPU_MRAM_HEAP_POINTER``."""
        return self.program.address_of("__sys_used_mram_end")

    # -- synchronisation ---------------------------------------
    def barrier_wait(self, barrier: BarrierDecl) -> Awaitable[None]:
        """``barrier_wait``: the last arrival resumes every waiter and resets the count."""
        self._pending += timing.BARRIER_WAIT_INSTRUCTIONS
        if self._deferred_dma:
            return self._barrier_after_flush(barrier)
        # one tasklet step: the arrival is counted when the instructions have issued
        cmd = _BarrierCommand(self.runner.pipeline, self._pending, self._barrier(barrier))
        self._pending = 0
        return cmd

    async def _barrier_after_flush(self, barrier: BarrierDecl) -> None:
        await self.flush()
        b = self._barrier(barrier)
        if b.count == 1:
            b.count = b.initial
            b.queue.wake_all()
            return
        b.count -= 1
        await b.queue

    def _barrier(self, barrier: BarrierDecl) -> _Barrier:
        state: dict[str, _Barrier] = self.dpu.persistent.setdefault("barriers", {})
        b = state.get(barrier.name)
        if b is None:
            count = barrier.count if barrier.count is not None else self.nr_tasklets
            b = state[barrier.name] = _Barrier(count, f"barrier {barrier.name!r}")
        return b

    # -- faults and logs ---------------------------------------
    def fault(self, code: int, reason: str = "software fault") -> None:
        """Stop the DPU with software fault ``code``."""
        raise DpuFault(reason, code)

    def halt(self) -> None:
        """``halt()``: fault 4."""
        raise DpuFault("halt", FAULT_HALT)

    def dpu_assert(self, condition: Any, message: str = "assertion failed") -> None:
        """DPU ``assert``: fault 3 when ``condition`` is false."""
        if not condition:
            raise DpuFault(message, FAULT_ASSERT)
