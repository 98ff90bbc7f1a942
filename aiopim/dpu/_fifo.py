"""WRAM FIFOs on the DPU side (``wramfifo.h``): declarations, operations and the loop helpers.

The FIFO lives in emulated WRAM exactly as the SDK lays it out (sdk-reference.md §4.1): free-running
64-bit read/write pointers at offsets 0 and 8, the data and scratch pointers at 16 and 20,
``ptr_size`` and ``data_size`` at 24 and 28, and ``nb_reserved`` at 32 for output FIFOs. The host
reads and writes the same bytes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import timing
from .._machine._wramfifo import (
    DATA_PTR,
    DATA_SIZE,
    MAX_PTR_SIZE,
    NB_RESERVED,
    OUTPUT_STRUCT_SIZE,
    PTR_SIZE,
    READ_PTR,
    TMP_DATA_PTR,
    WRITE_PTR,
    is_full,
    read_ptrs,
    read_u32,
    read_u64,
    struct_size,
    write_u64,
)
from ._base import TaskletBase
from ._runner import SpinCommand

if TYPE_CHECKING:
    from ._program import BarrierDecl, MutexDecl, Var


def check_fifo_geometry(name: str, ptr_size: int, data_size: int) -> None:
    """The static asserts of ``INPUT_FIFO_INIT`` / ``OUTPUT_FIFO_INIT``."""
    if not isinstance(ptr_size, int) or not 1 <= ptr_size <= MAX_PTR_SIZE:
        raise ValueError(
            f"FIFO {name!r}: ptr_size is log2 of the capacity and must be in "
            f"1..{MAX_PTR_SIZE}, not {ptr_size}"
        )
    if not isinstance(data_size, int) or data_size <= 0 or data_size % 8:
        raise ValueError(
            f"FIFO {name!r}: data_size must be a positive multiple of 8 bytes, not {data_size}"
        )


@dataclass(frozen=True)
class FifoDecl:
    """``INPUT_FIFO_INIT`` / ``OUTPUT_FIFO_INIT``: the struct, its ring and its scratch area."""

    name: str
    ptr_size: int
    data_size: int
    output: bool
    struct: Var
    data: Var
    tmp_data: Var

    @property
    def capacity(self) -> int:
        """``2**ptr_size`` elements."""
        return 1 << self.ptr_size

    @property
    def mask(self) -> int:
        """Slot index mask."""
        return (1 << self.ptr_size) - 1

    def struct_image(self, data_addr: int, tmp_addr: int) -> bytes:
        """Initial bytes of the struct (``{0, 0, data, tmp_data, PTR_SIZE, DATA_SIZE[, 0]}``)."""
        size = struct_size(self.output)
        raw = np.zeros(size, dtype=np.uint8)
        raw[DATA_PTR : DATA_PTR + 4].view(np.uint32)[0] = data_addr
        raw[TMP_DATA_PTR : TMP_DATA_PTR + 4].view(np.uint32)[0] = tmp_addr
        raw[PTR_SIZE : PTR_SIZE + 4].view(np.uint32)[0] = self.ptr_size
        raw[DATA_SIZE : DATA_SIZE + 4].view(np.uint32)[0] = self.data_size
        return raw.tobytes()


#: ``process(t, input)`` of ``process_inputs_all_tasklets``
ProcessAllFn = Callable[[Any, np.ndarray], Awaitable[None]]
#: ``reduce(t, input, output)`` of ``process_inputs_all_tasklets`` (tasklet 0 only)
ReduceFn = Callable[[Any, np.ndarray, np.ndarray], Awaitable[None]]
#: ``process(t, input, output)`` of ``process_inputs_each_tasklet``
ProcessEachFn = Callable[[Any, np.ndarray, np.ndarray], Awaitable[None]]


class FifoOps(TaskletBase):
    """The ``wramfifo.h`` functions, mixed into :class:`~aiopim.dpu.Tasklet`."""

    if TYPE_CHECKING:  # provided by Tasklet

        def barrier_wait(self, barrier: BarrierDecl) -> Awaitable[None]: ...
        async def mutex_lock(self, m: MutexDecl) -> None: ...
        def mutex_unlock(self, m: MutexDecl) -> None: ...

    # -- raw struct access -----------------------------------------------------------------------
    def _slot(self, fifo: FifoDecl, ptr: int) -> np.ndarray:
        base = read_u32(self.wram, self._address(fifo.struct) + DATA_PTR)
        start = base + (ptr & fifo.mask) * fifo.data_size
        return self.wram[start : start + fifo.data_size]

    def _empty(self, fifo: FifoDecl) -> bool:
        s = self._address(fifo.struct)
        return read_u64(self.wram, s + READ_PTR) == read_u64(self.wram, s + WRITE_PTR)

    def _full(self, fifo: FifoDecl) -> bool:
        s = self._address(fifo.struct)
        wr = read_u64(self.wram, s + WRITE_PTR) + read_u32(self.wram, s + NB_RESERVED)
        return is_full(read_u64(self.wram, s + READ_PTR), wr, fifo.mask)

    # -- input FIFO --------------------------------------------------------------------------------
    def is_input_fifo_empty(self, fifo: FifoDecl) -> bool:
        """``read_ptr == write_ptr``."""
        self._pending += timing.FIFO_CHECK_INSTRUCTIONS
        return self._empty(fifo)

    def input_fifo_peek(self, fifo: FifoDecl) -> np.ndarray:
        """The head element as a WRAM view of ``data_size`` bytes (no emptiness check)."""
        self._pending += timing.FIFO_PEEK_INSTRUCTIONS
        return self._slot(fifo, read_u64(self.wram, self._address(fifo.struct) + READ_PTR))

    def input_fifo_pop(self, fifo: FifoDecl) -> None:
        """``read_ptr++`` (no emptiness check)."""
        at = self._address(fifo.struct) + READ_PTR
        self._pending += timing.FIFO_POP_INSTRUCTIONS
        write_u64(self.dpu, at, read_u64(self.wram, at) + 1)

    # -- output FIFO -------------------------------------------------------------------------------
    def is_output_fifo_full(self, fifo: FifoDecl) -> bool:
        """Full when ``write_ptr + nb_reserved - read_ptr`` reaches the capacity."""
        self._pending += timing.FIFO_CHECK_INSTRUCTIONS
        return self._full(fifo)

    def output_fifo_push(self, fifo: FifoDecl, element: Any) -> None:
        """Copy ``data_size`` bytes into slot ``write_ptr``, then ``write_ptr++`` (no check)."""
        data = np.frombuffer(bytes(np.asarray(element).tobytes()), dtype=np.uint8)
        if len(data) < fifo.data_size:
            raise ValueError(
                f"output FIFO {fifo.name!r} elements are {fifo.data_size} bytes; got {len(data)}"
            )
        at = self._address(fifo.struct) + WRITE_PTR
        wr = read_u64(self.wram, at)
        self._slot(fifo, wr)[:] = data[: fifo.data_size]
        self._pending += timing.FIFO_PUSH_INSTRUCTIONS + timing.memcpy_instructions(fifo.data_size)
        write_u64(self.dpu, at, wr + 1)

    def _reserve(self, fifo: FifoDecl, delta: int) -> None:
        at = self._address(fifo.struct) + NB_RESERVED
        self.wram[at : at + 4].view(np.uint32)[0] = read_u32(self.wram, at) + delta
        self._pending += timing.FIFO_POP_INSTRUCTIONS

    def tmp_data(self, fifo: FifoDecl) -> np.ndarray:
        """This tasklet's scratch element of ``fifo`` (``tmp_data + me() * data_size``)."""
        base = read_u32(self.wram, self._address(fifo.struct) + TMP_DATA_PTR)
        start = base + self._id * fifo.data_size
        return self.wram[start : start + fifo.data_size]

    # -- polling -----------------------------------------------------------------------------------
    def _ranges(self, watched: tuple[Any, ...]) -> list[tuple[int, int]]:
        from ._program import Var

        ranges: list[tuple[int, int]] = []
        for w in watched:
            if isinstance(w, FifoDecl):
                s = self._address(w.struct)
                ranges.append((s, s + OUTPUT_STRUCT_SIZE if w.output else s + READ_PTR + 16))
            elif isinstance(w, Var):
                a = self._address(w)
                ranges.append((a, a + w.size))
            elif isinstance(w, tuple):
                ranges.append((int(w[0]), int(w[0]) + int(w[1])))
            else:
                ranges.append((int(w), int(w) + 8))
        return ranges

    async def poll_until(
        self,
        condition: Callable[[], bool],
        *watched: Any,
        instructions: int = timing.FIFO_POLL_LOOP_INSTRUCTIONS,
        label: str = "a polled WRAM condition",
    ) -> None:
        """Busy-wait until ``condition()`` holds, re-checking when ``watched`` WRAM is written.

        Each check costs ``instructions``; between checks the tasklet keeps its pipeline slot.
        ``watched`` are variables, FIFOs, addresses (8 bytes) or ``(address, size)`` ranges that
        the host (or a FIFO operation) writes; writes by plain tasklet stores are not watched, so
        use the synchronisation primitives for tasklet-to-tasklet signals. Waiting while a
        watched output FIFO is full is recorded as a stall of the DPU (drawn in Gantt plots).
        """
        outputs = [w for w in watched if isinstance(w, FifoDecl) and w.output]

        def full() -> FifoDecl | None:
            return next((f for f in outputs if self._full(f)), None)

        await self._poll(
            condition, self._ranges(watched), instructions, label, full if outputs else None
        )

    async def _poll(
        self,
        condition: Callable[[], bool],
        ranges: list[tuple[int, int]],
        instructions: int,
        label: str,
        stall: Callable[[], FifoDecl | None] | None = None,
    ) -> None:
        while True:
            self._pending += instructions
            if condition():
                return
            await self.flush()
            if condition():
                return
            self._pending = 0  # this re-check is part of the spinning, which is accounted for
            await self._spin(ranges, label, stall)

    async def _spin(
        self,
        ranges: list[tuple[int, int]],
        label: str,
        stall: Callable[[], FifoDecl | None] | None,
    ) -> None:
        """Park until ``ranges`` are written. When recording, a wait that starts while
        ``stall()`` names a full output FIFO is recorded as a stall on it: ``dpu_stall`` now,
        ``dpu_stall_end`` when the tasklet resumes (none if the DPU stops first)."""
        rec = None if stall is None else self.dpu.rank.machine.recorder
        full = None if rec is None or stall is None else stall()
        if rec is None or full is None:
            await SpinCommand(self.runner, ranges, label)
            return
        dpu = self.dpu
        where = {"rank": dpu.rank.index, "dpu": dpu.index, "tasklet": self._id}
        rec.add("dpu_stall", **where, fifo=full.name)
        await SpinCommand(self.runner, ranges, label)
        rec.add("dpu_stall_end", **where)

    def _loop_state(self, fin: FifoDecl, fout: FifoDecl, active: Var) -> int:
        """0: process the head, 1: wait, 2: return (the helpers' loop test)."""
        key = (fin.name, fout.name, active.name)
        where = self._loops.get(key)
        if where is None:
            a = self._address(active)
            where = self._loops[key] = (
                self._address(fin.struct),
                self._address(fout.struct),
                fout.mask,
                a,
                a + active.size,
            )
        fin_struct, s, mask, a, end = where
        wram = self.wram
        rd, wr = read_ptrs(wram, fin_struct)
        if rd != wr:  # not empty: wait while the output FIFO is full
            rd, wr = read_ptrs(wram, s)
            return 1 if is_full(rd, wr + read_u32(wram, s + NB_RESERVED), mask) else 0
        if end - a == 8:
            return 2 if not read_u64(wram, a) else 1
        return 2 if not wram[a:end].any() else 1

    def _input_state(self, fin: FifoDecl, fout: FifoDecl, active: Var) -> int:
        """The loop helpers' first test of an iteration (charged like a poll check)."""
        self._pending += timing.FIFO_POLL_LOOP_INSTRUCTIONS
        return self._loop_state(fin, fout, active)

    async def _wait_input(self, fin: FifoDecl, fout: FifoDecl, active: Var) -> int:
        """After a first test that said "wait": poll on until the state is 0 or 2."""
        state = 1

        def settled() -> bool:
            nonlocal state
            state = self._loop_state(fin, fout, active)
            return state != 1

        def stalled() -> FifoDecl | None:  # an input to process, no room for its output
            return fout if not self._empty(fin) and self._full(fout) else None

        key = (fin.name, fout.name, active.name)
        known = self._polls.get(key)
        if known is None:
            label = f"input FIFO {fin.name!r} / output FIFO {fout.name!r} (empty or full)"
            known = self._polls[key] = (self._ranges((fin, fout, active)), label)
        # the rest of poll_until's first round, then poll_until itself
        await self.flush()
        if settled():
            return state
        self._pending = 0
        await self._spin(known[0], known[1], stalled)
        await self._poll(settled, known[0], timing.FIFO_POLL_LOOP_INSTRUCTIONS, known[1], stalled)
        return state

    # -- the loop helpers --------------------------------------------------------------------------
    async def process_inputs_all_tasklets(
        self,
        fin: FifoDecl,
        fout: FifoDecl,
        process: ProcessAllFn,
        reduce: ReduceFn,
        barrier: BarrierDecl,
        active: Var,
    ) -> None:
        """Every tasklet processes each input; tasklet 0 reduces and pushes one output per input.

        Returns once ``active`` is zero and the input FIFO is empty. ``barrier`` must count every
        tasklet. ``process(t, input)`` and ``reduce(t, input, output)`` are coroutines (the C
        ``ctx`` argument is a closure here).
        """
        while True:
            self._pending += timing.FIFO_POLL_LOOP_INSTRUCTIONS  # _input_state(), inline
            state = self._loop_state(fin, fout, active)
            if state == 1:
                state = await self._wait_input(fin, fout, active)
            if state != 0:
                return
            await self.barrier_wait(barrier)
            head = self.input_fifo_peek(fin)
            await process(self, head)
            await self.barrier_wait(barrier)
            if self._id == 0:
                out = self.tmp_data(fout)
                await reduce(self, head, out)
                self.output_fifo_push(fout, out)
                self.input_fifo_pop(fin)
            await self.barrier_wait(barrier)

    async def process_inputs_each_tasklet(
        self,
        fin: FifoDecl,
        fout: FifoDecl,
        process: ProcessEachFn,
        mutex: MutexDecl,
        active: Var,
    ) -> None:
        """Each tasklet takes the next input alone; outputs may come out of input order.

        ``process(t, input, output)`` fills ``output`` from ``input`` (both scratch views).
        """
        while True:
            state = self._input_state(fin, fout, active)
            if state == 1:
                state = await self._wait_input(fin, fout, active)
            if state != 0:
                return
            await self.mutex_lock(mutex)
            self._pending += timing.FIFO_POLL_LOOP_INSTRUCTIONS
            if self._loop_state(fin, fout, active) != 0:
                self.mutex_unlock(mutex)
                continue
            mine = self.tmp_data(fin)
            mine[:] = self.input_fifo_peek(fin)
            self._pending += timing.memcpy_instructions(fin.data_size)
            self.input_fifo_pop(fin)
            self._reserve(fout, +1)
            self.mutex_unlock(mutex)
            out = self.tmp_data(fout)
            await process(self, mine, out)
            await self.mutex_lock(mutex)
            self.output_fifo_push(fout, out)
            self._reserve(fout, -1)
            self.mutex_unlock(mutex)
