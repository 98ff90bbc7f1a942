"""The ``dpu.h`` vocabulary over aiopim's core: ``from aiopim.sdk import *``.

Calls that enqueue work are ``async``; immediate ones (prepare, counts, symbols, iteration)
are plain functions. Where C returns an error code, these raise :class:`DpuError` whose
``.code`` is the :class:`DpuErrorCode` member (``.value`` holds the async encoding, if any).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from . import _ops
from ._emulator import current_emulator
from ._errors import DpuError, DpuErrorCode, JobType, dpu_error_to_string
from ._machine._program import DPU_MRAM_HEAP_POINTER_NAME, DpuProgram, Symbol
from ._ops import CallbackMode, XferMode, _fifo
from ._ops._set import DpuSetKind
from ._ops._validate import UINT32_MAX, check_flags, check_int, check_set
from .elf import Model, load_elf
from .host._dpuset import DpuSet

if TYPE_CHECKING:
    from ._machine._dpu import Dpu

# enums and flags (SDK 2025.1.0 values) --------------------------------------------------------
DPU_ASYNCHRONOUS = _ops.DPU_ASYNCHRONOUS
DPU_SYNCHRONOUS = _ops.DPU_SYNCHRONOUS
DPU_XFER_TO_DPU = _ops.DPU_XFER_TO_DPU
DPU_XFER_FROM_DPU = _ops.DPU_XFER_FROM_DPU
DPU_XFER_DEFAULT = _ops.DPU_XFER_DEFAULT
DPU_XFER_NO_RESET = _ops.DPU_XFER_NO_RESET
DPU_XFER_ASYNC = _ops.DPU_XFER_ASYNC
DPU_XFER_PARALLEL = _ops.DPU_XFER_PARALLEL
DPU_SG_XFER_DEFAULT = 0
DPU_SG_XFER_ASYNC = 2
DPU_SG_XFER_DISABLE_LENGTH_CHECK = 4
DPU_CALLBACK_DEFAULT = _ops.DPU_CALLBACK_DEFAULT
DPU_CALLBACK_ASYNC = _ops.DPU_CALLBACK_ASYNC
DPU_CALLBACK_NONBLOCKING = _ops.DPU_CALLBACK_NONBLOCKING
DPU_CALLBACK_SINGLE_CALL = _ops.DPU_CALLBACK_SINGLE_CALL
DPU_CALLBACK_PARALLEL = _ops.DPU_CALLBACK_PARALLEL
DPU_SET_RANKS = DpuSetKind.DPU_SET_RANKS
DPU_SET_DPU = DpuSetKind.DPU_SET_DPU
DPU_INPUT_FIFO = _fifo.DPU_INPUT_FIFO
DPU_OUTPUT_FIFO = _fifo.DPU_OUTPUT_FIFO
DPU_ALLOCATE_ALL = _ops.DPU_ALLOCATE_ALL
DPU_ERROR_ASYNC_JOB_TYPE_SHIFT = 16
DPU_MAX_NR_CIS = 8
DPU_MAX_NR_DPUS_PER_CI = 8
MAX_NR_DPUS_PER_RANK = 64
DPU_BOOT_THREAD = 0

# dpu_error_t names (tests/test_misuse.py checks they are exactly DpuErrorCode's members) ------
DPU_OK = DpuErrorCode.DPU_OK
DPU_ERR_INTERNAL = DpuErrorCode.DPU_ERR_INTERNAL
DPU_ERR_SYSTEM = DpuErrorCode.DPU_ERR_SYSTEM
DPU_ERR_DRIVER = DpuErrorCode.DPU_ERR_DRIVER
DPU_ERR_ALLOCATION = DpuErrorCode.DPU_ERR_ALLOCATION
DPU_ERR_INVALID_DPU_SET = DpuErrorCode.DPU_ERR_INVALID_DPU_SET
DPU_ERR_INVALID_THREAD_ID = DpuErrorCode.DPU_ERR_INVALID_THREAD_ID
DPU_ERR_INVALID_NOTIFY_ID = DpuErrorCode.DPU_ERR_INVALID_NOTIFY_ID
DPU_ERR_INVALID_WRAM_ACCESS = DpuErrorCode.DPU_ERR_INVALID_WRAM_ACCESS
DPU_ERR_INVALID_IRAM_ACCESS = DpuErrorCode.DPU_ERR_INVALID_IRAM_ACCESS
DPU_ERR_INVALID_MRAM_ACCESS = DpuErrorCode.DPU_ERR_INVALID_MRAM_ACCESS
DPU_ERR_INVALID_SYMBOL_ACCESS = DpuErrorCode.DPU_ERR_INVALID_SYMBOL_ACCESS
DPU_ERR_MRAM_BUSY = DpuErrorCode.DPU_ERR_MRAM_BUSY
DPU_ERR_TRANSFER_ALREADY_SET = DpuErrorCode.DPU_ERR_TRANSFER_ALREADY_SET
DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER = DpuErrorCode.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER
DPU_ERR_WRAM_FIFO_FULL = DpuErrorCode.DPU_ERR_WRAM_FIFO_FULL
DPU_ERR_NO_PROGRAM_LOADED = DpuErrorCode.DPU_ERR_NO_PROGRAM_LOADED
DPU_ERR_DIFFERENT_DPU_PROGRAMS = DpuErrorCode.DPU_ERR_DIFFERENT_DPU_PROGRAMS
DPU_ERR_CORRUPTED_MEMORY = DpuErrorCode.DPU_ERR_CORRUPTED_MEMORY
DPU_ERR_DPU_DISABLED = DpuErrorCode.DPU_ERR_DPU_DISABLED
DPU_ERR_DPU_ALREADY_RUNNING = DpuErrorCode.DPU_ERR_DPU_ALREADY_RUNNING
DPU_ERR_INVALID_MEMORY_TRANSFER = DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER
DPU_ERR_INVALID_LAUNCH_POLICY = DpuErrorCode.DPU_ERR_INVALID_LAUNCH_POLICY
DPU_ERR_DPU_FAULT = DpuErrorCode.DPU_ERR_DPU_FAULT
DPU_ERR_ELF_INVALID_FILE = DpuErrorCode.DPU_ERR_ELF_INVALID_FILE
DPU_ERR_ELF_NO_SUCH_FILE = DpuErrorCode.DPU_ERR_ELF_NO_SUCH_FILE
DPU_ERR_ELF_NO_SUCH_SECTION = DpuErrorCode.DPU_ERR_ELF_NO_SUCH_SECTION
DPU_ERR_TIMEOUT = DpuErrorCode.DPU_ERR_TIMEOUT
DPU_ERR_INVALID_PROFILE = DpuErrorCode.DPU_ERR_INVALID_PROFILE
DPU_ERR_UNKNOWN_SYMBOL = DpuErrorCode.DPU_ERR_UNKNOWN_SYMBOL
DPU_ERR_LOG_FORMAT = DpuErrorCode.DPU_ERR_LOG_FORMAT
DPU_ERR_LOG_CONTEXT_MISSING = DpuErrorCode.DPU_ERR_LOG_CONTEXT_MISSING
DPU_ERR_LOG_BUFFER_TOO_SMALL = DpuErrorCode.DPU_ERR_LOG_BUFFER_TOO_SMALL
DPU_ERR_VPD_INVALID_FILE = DpuErrorCode.DPU_ERR_VPD_INVALID_FILE
DPU_ERR_VPD_NO_REPAIR = DpuErrorCode.DPU_ERR_VPD_NO_REPAIR
DPU_ERR_NO_THREAD_PER_RANK = DpuErrorCode.DPU_ERR_NO_THREAD_PER_RANK
DPU_ERR_INVALID_BUFFER_SIZE = DpuErrorCode.DPU_ERR_INVALID_BUFFER_SIZE
DPU_ERR_NONBLOCKING_SYNC_CALLBACK = DpuErrorCode.DPU_ERR_NONBLOCKING_SYNC_CALLBACK
DPU_ERR_TOO_MANY_TASKLETS = DpuErrorCode.DPU_ERR_TOO_MANY_TASKLETS
DPU_ERR_SG_TOO_MANY_BLOCKS = DpuErrorCode.DPU_ERR_SG_TOO_MANY_BLOCKS
DPU_ERR_SG_LENGTH_MISMATCH = DpuErrorCode.DPU_ERR_SG_LENGTH_MISMATCH
DPU_ERR_SG_NOT_ACTIVATED = DpuErrorCode.DPU_ERR_SG_NOT_ACTIVATED
DPU_ERR_SG_NOT_MRAM_SYMBOL = DpuErrorCode.DPU_ERR_SG_NOT_MRAM_SYMBOL
DPU_ERR_ASYNC_JOBS = DpuErrorCode.DPU_ERR_ASYNC_JOBS


# allocation -------------------------------------------------------------------------------------
async def dpu_alloc(nr_dpus: int, profile: str | None = "") -> DpuSet:
    """Allocate whole ranks holding at least ``nr_dpus`` DPUs (surplus DPUs disabled)."""
    check_int(nr_dpus, "nr_dpus", DpuErrorCode.DPU_ERR_ALLOCATION, high=UINT32_MAX)
    return await _ops.alloc(current_emulator(), DpuSet, nr_dpus, None, profile)


async def dpu_alloc_ranks(nr_ranks: int, profile: str | None = "") -> DpuSet:
    """Allocate exactly ``nr_ranks`` full ranks."""
    check_int(nr_ranks, "nr_ranks", DpuErrorCode.DPU_ERR_ALLOCATION, high=UINT32_MAX)
    return await _ops.alloc(current_emulator(), DpuSet, None, nr_ranks, profile)


async def dpu_free(dpu_set: DpuSet) -> None:
    """Free a set returned by ``dpu_alloc``."""
    await _ops.free(dpu_set)


def dpu_get_nr_ranks(dpu_set: DpuSet) -> int:
    """Number of ranks (1 for a single-DPU set)."""
    return len(check_set(dpu_set).rank_list)


def dpu_get_nr_dpus(dpu_set: DpuSet) -> int:
    """Number of enabled DPUs."""
    return len(check_set(dpu_set).dpu_list)


def dpu_foreach(dpu_set: DpuSet) -> Iterator[tuple[DpuSet, int]]:
    """``DPU_FOREACH(set, dpu, i)``: ``(dpu, i)`` pairs."""
    check_set(dpu_set)
    return ((d, i) for i, d in enumerate(dpu_set.iter_dpus()))


def dpu_rank_foreach(dpu_set: DpuSet) -> Iterator[tuple[DpuSet, int]]:
    """``DPU_RANK_FOREACH(set, rank, i)``: ``(rank, i)`` pairs."""
    check_set(dpu_set)
    return ((r, i) for i, r in enumerate(dpu_set.iter_ranks()))


# programs ---------------------------------------------------------------------------------------
async def dpu_load(dpu_set: DpuSet, program: DpuProgram | str | os.PathLike[str]) -> DpuProgram:
    """Load ``program`` (always synchronous); a path is loaded as a DPU ELF binary."""
    check_set(dpu_set)
    if isinstance(program, str | os.PathLike):
        program = load_elf(program)
    return await _ops.load(dpu_set, program)


async def dpu_load_from_memory(
    dpu_set: DpuSet,
    buffer: Any,
    size: int | None = None,
    *,
    name: str | None = None,
    model: Model | None = None,
) -> DpuProgram:
    """Load a DPU ELF binary held in ``buffer[:size]`` (bytes-like)."""
    check_set(dpu_set)
    if size is not None:
        size = check_int(size, "size", DpuErrorCode.DPU_ERR_ELF_INVALID_FILE)
    view = memoryview(buffer).cast("B")
    data = bytes(view if size is None else view[:size])
    return await _ops.load(dpu_set, load_elf(data, name=name, model=model))


def dpu_get_symbol(program: DpuProgram, name: str) -> Symbol:
    """Look up a host-visible symbol."""
    return _ops.get_symbol(program, name)


# execution --------------------------------------------------------------------------------------
async def dpu_launch(dpu_set: DpuSet, policy: int) -> None:
    """``DPU_SYNCHRONOUS`` waits for the DPUs; any other value returns once queued."""
    check_set(dpu_set)
    policy = check_int(
        policy, "policy", DpuErrorCode.DPU_ERR_INVALID_LAUNCH_POLICY, low=-UINT32_MAX
    )
    await _ops.launch(dpu_set, policy == DPU_SYNCHRONOUS)


async def dpu_sync(dpu_set: DpuSet) -> None:
    """Wait for every queued job and for the DPUs to stop."""
    await _ops.sync(dpu_set)


async def dpu_status(dpu_set: DpuSet) -> tuple[bool, bool]:
    """``(done, fault)``; like the SDK, it syncs first (so it blocks)."""
    return await _ops.status(dpu_set)


# transfers --------------------------------------------------------------------------------------
def dpu_prepare_xfer(dpu_set: DpuSet, buffer: Any) -> None:
    """Record ``buffer`` as the host buffer of every DPU of the set (None clears)."""
    _ops.prepare_xfer(dpu_set, buffer)


async def dpu_push_xfer(
    dpu_set: DpuSet, xfer: int, symbol_name: str, offset: int, length: int, flags: int
) -> None:
    """Transfer ``length`` bytes between each DPU's symbol and its prepared buffer."""
    to_dpu, mode = _to_dpu(dpu_set, xfer), _xfer_mode(flags)
    await _ops.push_xfer(dpu_set, to_dpu, symbol_name, offset, length, mode)


async def dpu_push_xfer_symbol(
    dpu_set: DpuSet, xfer: int, symbol: Symbol, offset: int, length: int, flags: int
) -> None:
    """``dpu_push_xfer`` with a symbol (address, size) instead of a name."""
    to_dpu, mode = _to_dpu(dpu_set, xfer), _xfer_mode(flags)
    await _ops.push_xfer(dpu_set, to_dpu, symbol, offset, length, mode)


async def dpu_broadcast_to(
    dpu_set: DpuSet, symbol_name: str, offset: int, src: Any, length: int, flags: int
) -> None:
    """Write the same buffer to every DPU (PARALLEL is ignored, as in the SDK)."""
    check_set(dpu_set)
    await _ops.broadcast_to(dpu_set, symbol_name, offset, src, length, _xfer_mode(flags))


async def dpu_broadcast_to_symbol(
    dpu_set: DpuSet, symbol: Symbol, offset: int, src: Any, length: int, flags: int
) -> None:
    """``dpu_broadcast_to`` with a symbol."""
    check_set(dpu_set)
    await _ops.broadcast_to(dpu_set, symbol, offset, src, length, _xfer_mode(flags))


async def dpu_copy_to(
    dpu_set: DpuSet, symbol_name: str, offset: int, src: Any, length: int
) -> None:
    """Synchronous broadcast."""
    await _ops.broadcast_to(dpu_set, symbol_name, offset, src, length, XferMode())


async def dpu_copy_to_symbol(
    dpu_set: DpuSet, symbol: Symbol, offset: int, src: Any, length: int
) -> None:
    """``dpu_copy_to`` with a symbol."""
    await _ops.broadcast_to(dpu_set, symbol, offset, src, length, XferMode())


async def dpu_copy_from(
    dpu_set: DpuSet, symbol_name: str, offset: int, dst: Any, length: int
) -> None:
    """Synchronous read from a single DPU."""
    await _ops.copy_from(dpu_set, symbol_name, offset, dst, length)


async def dpu_copy_from_symbol(
    dpu_set: DpuSet, symbol: Symbol, offset: int, dst: Any, length: int
) -> None:
    """``dpu_copy_from`` with a symbol."""
    await _ops.copy_from(dpu_set, symbol, offset, dst, length)


# WRAM FIFOs (lowlevel/dpu_fifo.h) ---------------------------------------------------------------
dpu_fifo_link_t = _fifo.FifoLink


def dpu_link_input_fifo(dpu_set: DpuSet, fifo_name: str) -> dpu_fifo_link_t:
    """Link the input FIFO ``fifo_name`` of the set's DPUs (returns the link)."""
    return _fifo.link_fifo(dpu_set, fifo_name, DPU_INPUT_FIFO)


def dpu_link_output_fifo(dpu_set: DpuSet, fifo_name: str) -> dpu_fifo_link_t:
    """Link the output FIFO ``fifo_name`` of the set's DPUs (returns the link)."""
    return _fifo.link_fifo(dpu_set, fifo_name, DPU_OUTPUT_FIFO)


def dpu_fifo_link_free(link: dpu_fifo_link_t) -> None:
    """Release a FIFO link."""
    _fifo.link_free(link)


def dpu_fifo_prepare_xfer(dpu_set: DpuSet, link: dpu_fifo_link_t, buffer: Any) -> None:
    """Record ``buffer`` for every DPU of the set: the element to push, or the ring to fill."""
    _fifo.fifo_prepare_xfer(dpu_set, link, buffer)


async def dpu_fifo_push_xfer(dpu_set: DpuSet, link: dpu_fifo_link_t, flags: int) -> None:
    """Push one element per DPU (input link) or drain every DPU's FIFO (output link)."""
    check_set(dpu_set)
    await _fifo.fifo_push_xfer(dpu_set, link, _xfer_mode(flags))


def dpu_fifo_set_push_max_retries(link: dpu_fifo_link_t, dpu_set: DpuSet, n: int) -> None:
    """Retries before a push fails with ``DPU_ERR_WRAM_FIFO_FULL`` (default 1000)."""
    _fifo.set_push_max_retries(link, dpu_set, n)


def dpu_fifo_set_time_for_push_retries(
    link: dpu_fifo_link_t, dpu_set: DpuSet, microseconds: int
) -> None:
    """Microseconds between two push attempts (default 10)."""
    _fifo.set_time_for_push_retries(link, dpu_set, microseconds)


def get_fifo_size(link: dpu_fifo_link_t, dpu: DpuSet) -> int:
    """Elements of ``dpu``'s FIFO as captured by the last push/flush."""
    return _fifo.fifo_size(link, _one_dpu(dpu))


def get_fifo_elem(link: dpu_fifo_link_t, dpu: DpuSet, buffer: Any, i: int) -> Any:
    """Element ``i`` (oldest first) of the ring that the last flush copied into ``buffer``."""
    return _fifo.fifo_elem(link, _one_dpu(dpu), buffer, i)


def get_fifo_max_size(link: dpu_fifo_link_t, rank: DpuSet) -> int:
    """The largest ``get_fifo_size`` over the DPUs of ``rank``."""
    check_set(rank, "rank")
    return max((_fifo.fifo_size(link, d) for d in rank.dpu_list), default=0)


def _xfer_mode(flags: int) -> XferMode:
    """Decode ``dpu_xfer_flags_t`` (a ``uint32_t``)."""
    return XferMode.from_flags(
        check_flags(flags, "flags", DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER)
    )


def _to_dpu(dpu_set: DpuSet, xfer: int) -> bool:
    """Decode ``dpu_xfer_t``."""
    check_set(dpu_set)
    xfer = check_int(xfer, "xfer", DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER, low=-UINT32_MAX)
    if xfer not in (DPU_XFER_TO_DPU, DPU_XFER_FROM_DPU):
        raise DpuError(
            DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
            f"xfer must be DPU_XFER_TO_DPU or DPU_XFER_FROM_DPU, not {xfer}",
        )
    return xfer == DPU_XFER_TO_DPU


def _one_dpu(dpu: DpuSet) -> Dpu:
    check_set(dpu, "dpu")
    one = dpu.single_dpu
    if one is None:
        raise DpuError(DpuErrorCode.DPU_ERR_INVALID_DPU_SET, "pass a single DPU (dpu_foreach)")
    return one


# callbacks and logs -----------------------------------------------------------------------------
async def dpu_callback(
    dpu_set: DpuSet, callback: Callable[[DpuSet, int, Any], Any], args: Any, flags: int
) -> None:
    """Schedule ``callback(set, rank_id, args)`` between the queued jobs (see the flag table)."""
    check_set(dpu_set)
    # any int is a flag word, converted to uint32 as the C enum parameter would be
    flags = check_int(flags, "flags", DpuErrorCode.DPU_ERR_INTERNAL, low=-(1 << 63)) & UINT32_MAX
    await _ops.callback(dpu_set, callback, args, CallbackMode.from_flags(flags))


def dpu_log_read(dpu_set: DpuSet, stream: TextIO | None = None) -> None:
    """Print a single DPU's log (header ``=== DPU#0x... ===``) to ``stream`` (stdout)."""
    _ops.log_read(dpu_set, sys.stdout if stream is None else stream)


__all__ = [
    "DPU_ALLOCATE_ALL",
    "DPU_ASYNCHRONOUS",
    "DPU_BOOT_THREAD",
    "DPU_CALLBACK_ASYNC",
    "DPU_CALLBACK_DEFAULT",
    "DPU_CALLBACK_NONBLOCKING",
    "DPU_CALLBACK_PARALLEL",
    "DPU_CALLBACK_SINGLE_CALL",
    "DPU_ERROR_ASYNC_JOB_TYPE_SHIFT",
    "DPU_ERR_ALLOCATION",
    "DPU_ERR_ASYNC_JOBS",
    "DPU_ERR_CORRUPTED_MEMORY",
    "DPU_ERR_DIFFERENT_DPU_PROGRAMS",
    "DPU_ERR_DPU_ALREADY_RUNNING",
    "DPU_ERR_DPU_DISABLED",
    "DPU_ERR_DPU_FAULT",
    "DPU_ERR_DRIVER",
    "DPU_ERR_ELF_INVALID_FILE",
    "DPU_ERR_ELF_NO_SUCH_FILE",
    "DPU_ERR_ELF_NO_SUCH_SECTION",
    "DPU_ERR_INTERNAL",
    "DPU_ERR_INVALID_BUFFER_SIZE",
    "DPU_ERR_INVALID_DPU_SET",
    "DPU_ERR_INVALID_IRAM_ACCESS",
    "DPU_ERR_INVALID_LAUNCH_POLICY",
    "DPU_ERR_INVALID_MEMORY_TRANSFER",
    "DPU_ERR_INVALID_MRAM_ACCESS",
    "DPU_ERR_INVALID_NOTIFY_ID",
    "DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER",
    "DPU_ERR_INVALID_PROFILE",
    "DPU_ERR_INVALID_SYMBOL_ACCESS",
    "DPU_ERR_INVALID_THREAD_ID",
    "DPU_ERR_INVALID_WRAM_ACCESS",
    "DPU_ERR_LOG_BUFFER_TOO_SMALL",
    "DPU_ERR_LOG_CONTEXT_MISSING",
    "DPU_ERR_LOG_FORMAT",
    "DPU_ERR_MRAM_BUSY",
    "DPU_ERR_NONBLOCKING_SYNC_CALLBACK",
    "DPU_ERR_NO_PROGRAM_LOADED",
    "DPU_ERR_NO_THREAD_PER_RANK",
    "DPU_ERR_SG_LENGTH_MISMATCH",
    "DPU_ERR_SG_NOT_ACTIVATED",
    "DPU_ERR_SG_NOT_MRAM_SYMBOL",
    "DPU_ERR_SG_TOO_MANY_BLOCKS",
    "DPU_ERR_SYSTEM",
    "DPU_ERR_TIMEOUT",
    "DPU_ERR_TOO_MANY_TASKLETS",
    "DPU_ERR_TRANSFER_ALREADY_SET",
    "DPU_ERR_UNKNOWN_SYMBOL",
    "DPU_ERR_VPD_INVALID_FILE",
    "DPU_ERR_VPD_NO_REPAIR",
    "DPU_ERR_WRAM_FIFO_FULL",
    "DPU_INPUT_FIFO",
    "DPU_MAX_NR_CIS",
    "DPU_MAX_NR_DPUS_PER_CI",
    "DPU_MRAM_HEAP_POINTER_NAME",
    "DPU_OK",
    "DPU_OUTPUT_FIFO",
    "DPU_SET_DPU",
    "DPU_SET_RANKS",
    "DPU_SG_XFER_ASYNC",
    "DPU_SG_XFER_DEFAULT",
    "DPU_SG_XFER_DISABLE_LENGTH_CHECK",
    "DPU_SYNCHRONOUS",
    "DPU_XFER_ASYNC",
    "DPU_XFER_DEFAULT",
    "DPU_XFER_FROM_DPU",
    "DPU_XFER_NO_RESET",
    "DPU_XFER_PARALLEL",
    "DPU_XFER_TO_DPU",
    "DpuError",
    "DpuErrorCode",
    "DpuProgram",
    "DpuSet",
    "JobType",
    "MAX_NR_DPUS_PER_RANK",
    "Symbol",
    "dpu_alloc",
    "dpu_alloc_ranks",
    "dpu_broadcast_to",
    "dpu_broadcast_to_symbol",
    "dpu_callback",
    "dpu_copy_from",
    "dpu_copy_from_symbol",
    "dpu_copy_to",
    "dpu_copy_to_symbol",
    "dpu_error_to_string",
    "dpu_fifo_link_free",
    "dpu_fifo_link_t",
    "dpu_fifo_prepare_xfer",
    "dpu_fifo_push_xfer",
    "dpu_fifo_set_push_max_retries",
    "dpu_fifo_set_time_for_push_retries",
    "dpu_foreach",
    "dpu_free",
    "dpu_get_nr_dpus",
    "dpu_get_nr_ranks",
    "dpu_get_symbol",
    "dpu_launch",
    "dpu_link_input_fifo",
    "dpu_link_output_fifo",
    "dpu_load",
    "dpu_load_from_memory",
    "dpu_log_read",
    "dpu_prepare_xfer",
    "dpu_push_xfer",
    "dpu_push_xfer_symbol",
    "dpu_rank_foreach",
    "dpu_status",
    "dpu_sync",
    "get_fifo_elem",
    "get_fifo_max_size",
    "get_fifo_size",
]
