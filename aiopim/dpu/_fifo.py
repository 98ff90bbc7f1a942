"""WRAM FIFOs on the DPU side (``wramfifo.h``): declarations, operations and the loop helpers.

The FIFO lives in emulated WRAM exactly as the SDK lays it out (spec §4.1): free-running 64-bit
read/write pointers at offsets 0 and 8, the data and scratch pointers at 16 and 20, ``ptr_size``
and ``data_size`` at 24 and 28, and ``nb_reserved`` at 32 for output FIFOs. The host reads and
writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import timing
from .._core._dpu import SpinCommand

if TYPE_CHECKING:
    from .._core._dpu import Dpu
    from ._program import BarrierDecl, MutexDecl, Var
    from ._tasklet import TaskletProgram

MAX_FIFO_PTR_SIZE = 10
INPUT_FIFO_STRUCT_SIZE = 32
OUTPUT_FIFO_STRUCT_SIZE = 40  # 36 bytes of fields, padded to 8

# struct offsets (spec §4.1)
READ_PTR = 0
WRITE_PTR = 8
DATA_PTR = 16
TMP_DATA_PTR = 20
PTR_SIZE = 24
DATA_SIZE = 28
NB_RESERVED = 32


def check_fifo_geometry(name: str, ptr_size: int, data_size: int) -> None:
    """The static asserts of ``INPUT_FIFO_INIT`` / ``OUTPUT_FIFO_INIT``."""
    if not isinstance(ptr_size, int) or not 1 <= ptr_size <= MAX_FIFO_PTR_SIZE:
        raise ValueError(
            f"FIFO {name!r}: ptr_size is log2 of the capacity and must be in 1..10, not {ptr_size}"
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

    def struct_image(self, struct_addr: int, data_addr: int, tmp_addr: int) -> bytes:
        """Initial bytes of the struct (``{0, 0, data, tmp_data, PTR_SIZE, DATA_SIZE[, 0]}``)."""
        size = OUTPUT_FIFO_STRUCT_SIZE if self.output else INPUT_FIFO_STRUCT_SIZE
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


class FifoOps:
    """The ``wramfifo.h`` functions, mixed into :class:`~aiopim.dpu.Tasklet`."""

    if TYPE_CHECKING:  # provided by Tasklet
        dpu: Dpu
        wram: np.ndarray
        program: TaskletProgram
        _pending: int

        def me(self) -> int: ...
        async def flush(self) -> None: ...
        async def barrier_wait(self, barrier: BarrierDecl) -> None: ...
        async def mutex_lock(self, m: MutexDecl) -> None: ...
        def mutex_unlock(self, m: MutexDecl) -> None: ...

    def _address(self, where: Var | str) -> int:
        return self.program.address_of(where)

    # -- raw struct access -----------------------------------------------------------------------
    def _u64(self, addr: int) -> int:
        return int(self.wram[addr : addr + 8].view(np.uint64)[0])

    def _set_u64(self, addr: int, value: int) -> None:
        self.wram[addr : addr + 8].view(np.uint64)[0] = value & 0xFFFF_FFFF_FFFF_FFFF
        self.dpu.wram_written(addr, 8)

    def _u32(self, addr: int) -> int:
        return int(self.wram[addr : addr + 4].view(np.uint32)[0])

    def _set_u32(self, addr: int, value: int) -> None:
        self.wram[addr : addr + 4].view(np.uint32)[0] = value & 0xFFFF_FFFF

    def _slot(self, fifo: FifoDecl, ptr: int) -> np.ndarray:
        base = self._u32(self._address(fifo.struct) + DATA_PTR)
        start = base + (ptr & fifo.mask) * fifo.data_size
        return self.wram[start : start + fifo.data_size]

    # -- input FIFO --------------------------------------------------------------------------------
    def is_input_fifo_empty(self, fifo: FifoDecl) -> bool:
        """``read_ptr == write_ptr``."""
        s = self._address(fifo.struct)
        self._pending += timing.FIFO_CHECK_INSTRUCTIONS
        return self._u64(s + READ_PTR) == self._u64(s + WRITE_PTR)

    def input_fifo_peek(self, fifo: FifoDecl) -> np.ndarray:
        """The head element as a WRAM view of ``data_size`` bytes (no emptiness check)."""
        self._pending += timing.FIFO_PEEK_INSTRUCTIONS
        return self._slot(fifo, self._u64(self._address(fifo.struct) + READ_PTR))

    def input_fifo_pop(self, fifo: FifoDecl) -> None:
        """``read_ptr++`` (no emptiness check)."""
        s = self._address(fifo.struct)
        self._pending += timing.FIFO_POP_INSTRUCTIONS
        self._set_u64(s + READ_PTR, self._u64(s + READ_PTR) + 1)

    # -- output FIFO -------------------------------------------------------------------------------
    def is_output_fifo_full(self, fifo: FifoDecl) -> bool:
        """Full when ``write_ptr + nb_reserved - read_ptr`` reaches the capacity."""
        s = self._address(fifo.struct)
        self._pending += timing.FIFO_CHECK_INSTRUCTIONS
        rd = self._u64(s + READ_PTR)
        wr = self._u64(s + WRITE_PTR) + self._u32(s + NB_RESERVED)
        return (rd & fifo.mask) == (wr & fifo.mask) and rd != wr

    def output_fifo_push(self, fifo: FifoDecl, element: Any) -> None:
        """Copy ``data_size`` bytes into slot ``write_ptr``, then ``write_ptr++`` (no check)."""
        data = np.frombuffer(bytes(np.asarray(element).tobytes()), dtype=np.uint8)
        if len(data) < fifo.data_size:
            raise ValueError(
                f"output FIFO {fifo.name!r} elements are {fifo.data_size} bytes; got {len(data)}"
            )
        s = self._address(fifo.struct)
        wr = self._u64(s + WRITE_PTR)
        self._slot(fifo, wr)[:] = data[: fifo.data_size]
        self._pending += timing.FIFO_PUSH_INSTRUCTIONS + timing.memcpy_instructions(fifo.data_size)
        self._set_u64(s + WRITE_PTR, wr + 1)

    def _reserve(self, fifo: FifoDecl, delta: int) -> None:
        s = self._address(fifo.struct)
        self._set_u32(s + NB_RESERVED, self._u32(s + NB_RESERVED) + delta)
        self._pending += timing.FIFO_POP_INSTRUCTIONS

    def tmp_data(self, fifo: FifoDecl) -> np.ndarray:
        """This tasklet's scratch element of ``fifo`` (``tmp_data + me() * data_size``)."""
        base = self._u32(self._address(fifo.struct) + TMP_DATA_PTR)
        start = base + self.me() * fifo.data_size
        return self.wram[start : start + fifo.data_size]

    # -- polling -----------------------------------------------------------------------------------
    def _ranges(self, watched: tuple[Any, ...]) -> list[tuple[int, int]]:
        from ._program import Var

        ranges: list[tuple[int, int]] = []
        for w in watched:
            if isinstance(w, FifoDecl):
                s = self._address(w.struct)
                ranges.append((s, s + OUTPUT_FIFO_STRUCT_SIZE if w.output else s + 16))
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
        use the synchronisation primitives for tasklet-to-tasklet signals.
        """
        ranges = self._ranges(watched)
        while True:
            self._pending += instructions
            if condition():
                return
            await self.flush()
            if condition():
                return
            self._pending = 0  # this re-check is part of the spinning, which is accounted for
            await SpinCommand(self.dpu, ranges, label)

    def _loop_state(self, fin: FifoDecl, fout: FifoDecl, active: Var) -> int:
        """0: process the head, 1: wait, 2: return (the helpers' loop test, charged once)."""
        self._pending += timing.FIFO_POLL_LOOP_INSTRUCTIONS
        s_in, s_out = self._address(fin.struct), self._address(fout.struct)
        empty = self._u64(s_in + READ_PTR) == self._u64(s_in + WRITE_PTR)
        if not empty:
            rd = self._u64(s_out + READ_PTR)
            wr = self._u64(s_out + WRITE_PTR) + self._u32(s_out + NB_RESERVED)
            full = (rd & fout.mask) == (wr & fout.mask) and rd != wr
            return 1 if full else 0
        a = self._address(active)
        return 2 if not self.wram[a : a + active.size].any() else 1

    async def _next_input(self, fin: FifoDecl, fout: FifoDecl, active: Var) -> bool:
        """Poll until an input can be processed (True) or the loop must return (False)."""
        while True:
            state = self._loop_state(fin, fout, active)
            if state != 1:
                return state == 0
            await self._wait_loop_change(fin, fout, active)

    async def _wait_loop_change(self, fin: FifoDecl, fout: FifoDecl, active: Var) -> None:
        await self.flush()
        if self._loop_state(fin, fout, active) == 1:
            self._pending = 0  # the re-check is part of the spinning, which is accounted for
            label = f"input FIFO {fin.name!r} / output FIFO {fout.name!r} (empty or full)"
            await SpinCommand(self.dpu, self._ranges((fin, fout, active)), label)

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
        while await self._next_input(fin, fout, active):
            await self.barrier_wait(barrier)
            head = self.input_fifo_peek(fin)
            await process(self, head)
            await self.barrier_wait(barrier)
            if self.me() == 0:
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
        while await self._next_input(fin, fout, active):
            await self.mutex_lock(mutex)
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
