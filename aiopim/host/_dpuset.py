"""``DpuSet``: the Pythonic face of the host API (async methods, NumPy, context manager)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _ops
from .._emulator import Emulator, current_emulator
from .._errors import DpuError, DpuErrorCode
from .._machine._dpu import FaultInfo
from .._machine._program import DpuProgram, Symbol
from .._ops import CallbackMode, XferMode, _fifo
from .._ops._set import DpuSetBase
from .._ops._validate import check_callable, check_int
from ._fifo import InputFifo, OutputFifo


class DpuSet(DpuSetBase):
    """A set of DPUs: whole ranks, or one DPU. Also what ``aiopim.sdk`` functions take.

    >>> async with await DpuSet.alloc(128) as dpus:      # doctest: +SKIP
    ...     await dpus.load(program)
    ...     await dpus.copy_to("a", parts)             # one array per DPU
    ...     await dpus.launch()
    ...     c = await dpus.copy_from("c", np.int32, n)  # shape (128, n)
    """

    # -- allocation ---------------------------------------
    @classmethod
    async def alloc(
        cls,
        nr_dpus: int | None = None,
        *,
        nr_ranks: int | None = None,
        profile: str = "",
        emulator: Emulator | None = None,
    ) -> DpuSet:
        """Allocate ``nr_dpus`` DPUs (whole ranks) or ``nr_ranks`` ranks; neither = all."""
        if nr_dpus is not None and nr_ranks is not None:
            raise ValueError("give nr_dpus or nr_ranks, not both")
        emu = emulator or current_emulator()
        if nr_dpus is None and nr_ranks is None:
            nr_dpus = _ops.DPU_ALLOCATE_ALL
        return await _ops.alloc(emu, cls, nr_dpus, nr_ranks, profile)

    async def free(self) -> None:
        """Release the ranks (queued jobs are abandoned, running DPUs finish first)."""
        await _ops.free(self)

    async def __aenter__(self) -> DpuSet:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._root and not self._freed:
            await self.free()

    # -- structure ---------------------------------------
    def __len__(self) -> int:
        self.check_owned()
        return len(self.dpu_list)

    def __iter__(self) -> Iterator[DpuSet]:
        return self.iter_dpus()

    def __getitem__(self, i: int) -> DpuSet:
        self.check_owned()
        return self._child_dpu(self.dpu_list[i])

    @property
    def dpus(self) -> list[DpuSet]:
        """One single-DPU set per enabled DPU, in DPU_FOREACH order."""
        return list(self.iter_dpus())

    @property
    def ranks(self) -> list[DpuSet]:
        """One set per rank."""
        return list(self.iter_ranks())

    @property
    def nr_ranks(self) -> int:
        """Number of ranks."""
        self.check_owned()
        return len(self.rank_list)

    # -- programs ---------------------------------------
    async def load(self, program: DpuProgram) -> DpuProgram:
        """Load ``program`` on every DPU (synchronous)."""
        return await _ops.load(self, program)

    @property
    def program(self) -> DpuProgram:
        """The program loaded on every DPU of the set."""
        return _ops.common_program(self)

    def symbol(self, name: str) -> Symbol:
        """A host-visible symbol of the loaded program."""
        return _ops.get_symbol(self.program, name)

    # -- execution ---------------------------------------
    async def launch(self, *, wait: bool = True) -> None:
        """Boot the DPUs; with ``wait=False`` return once the launch is queued."""
        await _ops.launch(self, wait)

    async def sync(self) -> None:
        """Wait for every queued job and for the DPUs to stop."""
        await _ops.sync(self)

    async def status(self) -> tuple[bool, bool]:
        """``(done, fault)`` — blocks until the DPUs stop, like ``dpu_status``."""
        return await _ops.status(self)

    @property
    def faults(self) -> list[FaultInfo | None]:
        """Fault information of each DPU (None when it is not in fault)."""
        self.check_owned()
        return [d.fault for d in self.dpu_list]

    # -- transfers ---------------------------------------
    async def copy_to(
        self,
        symbol: str | Symbol,
        data: Any,
        *,
        offset: int = 0,
        wait: bool = True,
        parallel: bool = False,
    ) -> None:
        """Write ``data`` to ``symbol`` on every DPU.

        ``data`` is one buffer (broadcast to every DPU), or one buffer per DPU (a sequence, or
        an array whose first dimension is the number of DPUs); ``None`` entries skip a DPU.
        On a single DPU's handle ``parallel`` is ignored and the write waits for the rank's DPUs
        to stop, as the SDK's ``dpu_push_xfer`` does (docs/quirks.md).
        """
        mode = XferMode(wait=wait, parallel=parallel)
        per_dpu = _per_dpu_buffers(data, len(self))
        if per_dpu is None:
            length = _nbytes(data)
            if not parallel or self.is_single_dpu:
                await _ops.broadcast_to(self, symbol, offset, data, length, mode)
                return
            _ops.prepare_xfer(self, data)  # a parallel broadcast: the same buffer for each DPU
        else:
            lengths = {_nbytes(b) for b in per_dpu if b is not None}
            if len(lengths) > 1:
                raise DpuError(
                    DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
                    f"per-DPU buffers must all have the same size, got {sorted(lengths)}",
                )
            for one, buf in zip(self.iter_dpus(), per_dpu, strict=True):
                _ops.prepare_xfer(one, buf)
            length = lengths.pop() if lengths else 0
        await _ops.push_xfer(self, True, symbol, offset, length, mode)

    async def copy_from(
        self,
        symbol: str | Symbol,
        dtype: npt.DTypeLike = np.uint8,
        count: int | None = None,
        *,
        offset: int = 0,
        wait: bool = True,
        parallel: bool = False,
    ) -> np.ndarray:
        """Read ``count`` items of ``dtype`` from ``symbol`` on every DPU: ``(len(self), count)``.

        With ``wait=False`` the array is returned at once and filled when the job runs.
        """
        self.check_owned()
        offset = check_int(offset, "offset", DpuErrorCode.DPU_ERR_INVALID_SYMBOL_ACCESS)
        dt = np.dtype(dtype)
        sym = symbol if isinstance(symbol, Symbol) else self.symbol(symbol)
        if count is None:
            count = max(0, (sym.size - offset) // dt.itemsize)
        count = check_int(count, "count", DpuErrorCode.DPU_ERR_INVALID_SYMBOL_ACCESS)
        if offset + count * dt.itemsize > sym.size:  # before allocating the result
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_SYMBOL_ACCESS,
                f"offset {offset} + {count} x {dt.itemsize} bytes exceeds symbol {sym.name!r} "
                f"of {sym.size} bytes",
            )
        out = np.zeros((len(self), count), dtype=dt)
        mode = XferMode(wait=wait, parallel=parallel)
        for d, row in zip(self.iter_dpus(), out, strict=True):
            _ops.prepare_xfer(d, row)
        await _ops.push_xfer(self, False, symbol, offset, count * dt.itemsize, mode)
        return out

    # -- WRAM FIFOs ---------------------------------------
    def link_input_fifo(self, name: str, dtype: npt.DTypeLike = np.uint8) -> InputFifo:
        """Link the input FIFO ``name`` of every DPU (elements viewed as ``dtype`` items)."""
        return InputFifo(self, _fifo.link_fifo(self, name, _fifo.DPU_INPUT_FIFO), dtype)

    def link_output_fifo(self, name: str, dtype: npt.DTypeLike = np.uint8) -> OutputFifo:
        """Link the output FIFO ``name`` of every DPU (elements viewed as ``dtype`` items)."""
        return OutputFifo(self, _fifo.link_fifo(self, name, _fifo.DPU_OUTPUT_FIFO), dtype)

    # -- callbacks and logs ---------------------------------------
    async def call(
        self,
        fn: Callable[[DpuSet, int, Any], Any],
        args: Any = None,
        *,
        wait: bool = True,
        blocking: bool = True,
        single_call: bool = False,
        parallel: bool = False,
    ) -> None:
        """Run ``fn(rank_set, rank_id, args)`` (sync or async) between the queued jobs."""
        self.check_owned()
        check_callable(fn, "fn")
        mode = CallbackMode(wait, blocking, single_call, parallel)
        await _ops.callback(self, fn, args, mode)

    def log(self) -> str:
        """Every DPU's printf output, each under its ``=== DPU#0x... ===`` header."""
        return "".join(_ops.log_read(d) for d in self.iter_dpus())


def _nbytes(buf: Any) -> int:
    if isinstance(buf, np.ndarray):
        return int(buf.nbytes)
    if isinstance(buf, bytes | bytearray):
        return len(buf)
    if isinstance(buf, memoryview):
        return buf.nbytes
    raise DpuError(
        DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
        f"a transfer buffer must be bytes-like or a NumPy array, not {type(buf).__name__}",
    )


def _per_dpu_buffers(data: Any, n: int) -> Sequence[Any] | None:
    if isinstance(data, np.ndarray):
        return list(data) if data.ndim >= 2 and data.shape[0] == n and n > 1 else None
    if isinstance(data, bytes | bytearray | memoryview):
        return None
    if isinstance(data, Sequence):
        if len(data) != n:
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
                f"{len(data)} buffers for {n} DPUs; give one per DPU (None skips a DPU)",
            )
        return data
    return None
