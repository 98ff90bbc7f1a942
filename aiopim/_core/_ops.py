"""Host operations with the SDK's semantics (spec §1-§3), shared by ``aiopim.sdk`` and ``DpuSet``.

Checks the SDK makes in the calling thread raise :class:`DpuError` before anything is enqueued;
checks it makes inside the worker fail the job (plain code for synchronous calls, sticky
encoded error for asynchronous ones).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TextIO, TypeVar

import numpy as np

from .. import timing
from ._errors import DpuError, DpuErrorCode, JobType
from ._machine import parse_profile
from ._memory import Bytes, as_bytes
from ._program import DpuProgram, MemorySpace, Symbol, space_offset
from ._rank import Job, JobFailed, Rank, SyncGroup
from ._set import DpuSetBase

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._emulator import Emulator

E = DpuErrorCode
S = TypeVar("S", bound=DpuSetBase)
P = ParamSpec("P")
T = TypeVar("T")

# --- flags (dpu.h values) ------------------------------------------------------------------------
DPU_ASYNCHRONOUS = 0
DPU_SYNCHRONOUS = 1
DPU_XFER_TO_DPU = 0
DPU_XFER_FROM_DPU = 1
DPU_XFER_DEFAULT = 0
DPU_XFER_NO_RESET = 1
DPU_XFER_ASYNC = 2
DPU_XFER_PARALLEL = 4
DPU_CALLBACK_DEFAULT = 0
DPU_CALLBACK_ASYNC = 1
DPU_CALLBACK_NONBLOCKING = 2
DPU_CALLBACK_SINGLE_CALL = 4
DPU_CALLBACK_PARALLEL = 8
DPU_ALLOCATE_ALL = 0xFFFFFFFF
ALL_RANKS_ID = 0xFFFFFFFF

#: set inside a blocking callback's host task: the ranks it holds (inline execution, §3.4)
_callback_ranks: contextvars.ContextVar[frozenset[int] | None] = contextvars.ContextVar(
    "aiopim_callback_ranks", default=None
)


# ================================================================================================
# operation log (aiopim.scenario.record)
# ================================================================================================
class OpLog(Protocol):
    """Observes the host operations of an emulator (``Emulator.op_log``)."""

    def run(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Awaitable[Any]:
        """Run ``fn(*args, **kwargs)`` (the operation ``op``) and note what it did."""


def _logged(op: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Route the operation through ``Emulator.op_log`` when one is installed."""

    def deco(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Awaitable[T]:
            first = args[0]
            emu = first.emulator if isinstance(first, DpuSetBase) else first
            log: OpLog | None = emu.op_log  # type: ignore[attr-defined]
            if log is None:
                return fn(*args, **kwargs)  # the coroutine itself: no extra frame
            return log.run(op, fn, args, kwargs)

        wrapper.__name__ = fn.__name__
        wrapper.__qualname__ = fn.__qualname__
        wrapper.__doc__ = fn.__doc__
        return wrapper

    return deco


# ================================================================================================
# allocation
# ================================================================================================
@_logged("alloc")
async def alloc(
    emu: Emulator, cls: type[S], nr_dpus: int | None, nr_ranks: int | None, profile: str | None
) -> S:
    """``dpu_alloc`` / ``dpu_alloc_ranks``."""
    parsed = parse_profile(profile)
    emu.configure(parsed)
    if nr_dpus is not None:
        if nr_dpus == 0:
            raise DpuError(E.DPU_ERR_ALLOCATION, "cannot allocate 0 DPUs")
        if nr_dpus == DPU_ALLOCATE_ALL:
            ranks = emu.allocate_ranks(parsed, -1)
        else:
            needed = -(-nr_dpus // emu.config.nr_dpus_per_rank)
            ranks = emu.allocate_ranks(parsed, needed)
            enabled = sum(len(r.enabled_dpus) for r in ranks)
            if enabled < nr_dpus:
                for r in ranks:
                    r.allocated = False
                raise DpuError(
                    E.DPU_ERR_ALLOCATION,
                    f"asked for {nr_dpus} DPUs but the allocated ranks have only {enabled} enabled",
                )
            _disable_surplus(ranks, enabled - nr_dpus)
    else:
        assert nr_ranks is not None
        if nr_ranks == 0:
            raise DpuError(E.DPU_ERR_ALLOCATION, "cannot allocate 0 ranks")
        ranks = emu.allocate_ranks(parsed, -1 if nr_ranks == DPU_ALLOCATE_ALL else nr_ranks)
    return cls(emu, ranks, root=True)


def _disable_surplus(ranks: list[Rank], surplus: int) -> None:
    """Disable DPUs from the ranks with most enabled DPUs, a whole 'line' (member) at a time."""
    while surplus > 0:
        rank = max(ranks, key=lambda r: (len(r.enabled_dpus), -r.index))
        candidates = sorted(rank.enabled_dpus, key=lambda d: (-d.member, d.ci))
        candidates[0].enabled = False
        surplus -= 1


@_logged("free")
async def free(dset: DpuSetBase) -> None:
    """``dpu_free``: queued jobs are abandoned; waits for running DPUs to stop."""
    if not dset._root or dset._freed:
        raise DpuError(E.DPU_ERR_INVALID_DPU_SET, "only a set returned by dpu_alloc can be freed")
    check_owner(dset.rank_list)
    emu = dset.emulator
    dset._freed = True
    for r in dset.rank_list:
        r.fail_queue_on_free()
    rec = emu.recorder
    for r in dset.rank_list:
        while r.running_dpus or r.current is not None:
            w = emu.kernel.new_waiter(f"rank {r.index} to stop before dpu_free")
            r.stop_waiters.append(w)
            t0 = emu.kernel.now
            await emu.bridge.wait(w)
            if rec is not None:
                rec.host_wait("free", t0, (r,))
        r.allocated = False
        r.job_error = 0


# ================================================================================================
# programs and symbols
# ================================================================================================
def common_program(dset: DpuSetBase) -> DpuProgram:
    """The one program loaded on every DPU of the set (symbol-name APIs)."""
    progs = dset.programs()
    first = progs[0] if progs else None
    if first is None or any(p is None for p in progs):
        raise DpuError(E.DPU_ERR_NO_PROGRAM_LOADED, "load a program (dpu_load) first")
    if any(p is not first for p in progs):
        raise DpuError(
            E.DPU_ERR_DIFFERENT_DPU_PROGRAMS,
            "the DPUs of this set run different programs; use a symbol (address, size) instead",
        )
    return first


def get_symbol(program: DpuProgram, name: str) -> Symbol:
    """``dpu_get_symbol``."""
    sym = program.symbols().get(name)
    if sym is None:
        raise DpuError(
            E.DPU_ERR_UNKNOWN_SYMBOL,
            f"{program.name!r} has no host-visible symbol {name!r} "
            "(WRAM variables need __host; MRAM variables are always visible)",
        )
    return sym


@_logged("load")
async def load(dset: DpuSetBase, program: DpuProgram) -> DpuProgram:
    """``dpu_load``: always synchronous (LOAD + SYNC on each rank)."""
    if not isinstance(program, DpuProgram):
        raise TypeError(f"dpu_load needs a DPU program, not {type(program).__name__}")
    check_owner(dset.rank_list)
    emu = dset.emulator
    chip = emu.config.chip_profile
    if program.nr_tasklets > chip.nr_threads:
        raise DpuError(
            E.DPU_ERR_TOO_MANY_TASKLETS,
            f"{program.name!r} uses {program.nr_tasklets} tasklets; {chip.name} DPUs have "
            f"{chip.nr_threads} hardware threads",
        )
    if program.chip is not None and program.chip != chip.name:
        raise DpuError(
            E.DPU_ERR_INTERNAL,
            f"{program.name!r} was built for {program.chip} but the machine is {chip.name} "
            f"(use the profile chip={program.chip})",
        )
    program.check_fits(chip)
    images = program.images()
    size = sum(len(im.data) for im in images)

    def apply_to(dpus: list[Dpu]) -> None:
        for d in dpus:
            d.wram.fill(0)
            d.mram.clear()
            d.persistent.clear()
            for im in images:
                _write_image(d, im.address, im.data)
            _patch_clocks_per_sec(d, program)
            d.program = program

    if dset.is_single_dpu:
        dpu = dset.dpu_list[0]
        if dpu.running:
            raise DpuError(E.DPU_ERR_DPU_ALREADY_RUNNING, f"DPU {dpu.name} is running")
        await emu.delay(timing.load_time_ps(size), "a program load")
        apply_to([dpu])
        return program

    def make(rank: Rank) -> Job:
        job = Job(rank, JobType.LOAD, info={"program": program.name, "bytes": size})

        def body(j: Job) -> int:
            j.apply = lambda: apply_to(rank.enabled_dpus)
            return timing.load_time_ps(size)

        job.body = body
        return job

    await _submit(dset, make, wait=True, parallel=False, what="load")
    return program


def _write_image(d: Dpu, address: int, data: bytes) -> None:
    buf = np.frombuffer(data, dtype=np.uint8)
    space, off = MemorySpace.of(address), space_offset(address)
    if space is MemorySpace.WRAM:
        d.wram[off : off + len(buf)] = buf
    elif space is MemorySpace.MRAM:
        d.mram.write(off, buf)
    else:
        d.iram[off : off + len(buf)] = buf


def _patch_clocks_per_sec(d: Dpu, program: DpuProgram) -> None:
    sym = program.symbols().get("CLOCKS_PER_SEC")
    if sym is not None and sym.space is MemorySpace.WRAM and sym.size >= 4:
        d.wram[sym.offset : sym.offset + 4] = np.frombuffer(
            np.uint32(d.chip.frequency_hz).tobytes(), dtype=np.uint8
        )


# ================================================================================================
# job submission
# ================================================================================================
def _check_sticky(ranks: list[Rank]) -> None:
    for r in ranks:
        if r.job_error:
            raise DpuError(
                r.job_error,
                f"rank {r.index} is broken by an earlier asynchronous failure "
                f"({r.job_error_message or 'see the trace'}); only a synchronous wait that was "
                "queued before the failure recovers it",
            )


def check_owner(ranks: list[Rank], owner: str | None = None) -> None:
    """Refuse callers other than the library that owns a rank's control plane."""
    for r in ranks:
        if r.owner != owner:
            raise DpuError(
                E.DPU_ERR_DRIVER,
                f"rank {r.index} is owned by {r.owner or 'the SDK'}: its control plane is locked "
                f"for {owner or 'the SDK'}",
            )


def _inline_ranks(ranks: list[Rank]) -> bool:
    held = _callback_ranks.get()
    return held is not None and len(ranks) == 1 and ranks[0].index in held


async def _submit(
    dset: DpuSetBase,
    make: Callable[[Rank], Job | None],
    *,
    wait: bool,
    parallel: bool,
    what: str,
    ranks: list[Rank] | None = None,
    owner: str | None = None,
) -> None:
    """Enqueue one job per rank (+ SYNC / SYNC_PARALLEL when ``wait``), honouring slots.

    ``what`` names the host call in the trace (host waits); ``owner`` the calling library.
    """
    emu = dset.emulator
    rec = emu.recorder
    ranks = dset.rank_list if ranks is None else ranks
    check_owner(ranks, owner)
    if wait and _inline_ranks(ranks):
        await _run_inline(dset, make(ranks[0]))
        return
    _check_sticky(ranks)
    need = 2 if wait else 1
    group: SyncGroup | None = None
    if wait:
        waiter = emu.kernel.new_waiter(lambda: _describe_wait(ranks, parallel))
        group = SyncGroup(waiter, len(ranks))
    sync_type = JobType.SYNC_PARALLEL if parallel else JobType.SYNC
    for r in ranks:
        while r.free_slots < need:
            t0 = emu.kernel.now
            await emu.bridge.wait(r.slot_waiter())
            if rec is not None:
                rec.host_wait(f"{what}: job slot", t0, (r,))
            _check_sticky([r])
        job = make(r)
        if job is None:
            if group is not None:
                r.free_slots -= 1
                r.submit(Job(r, sync_type, sync_group=group))
            continue
        r.free_slots -= need
        r.submit(job)
        if group is not None:
            r.submit(Job(r, sync_type, sync_group=group))
    if group is not None:
        t0 = emu.kernel.now
        errors = await emu.bridge.wait(group.waiter)
        if rec is not None:
            rec.host_wait(what, t0, ranks)
        if errors:
            rank, encoded, message = errors[0]
            raise DpuError(encoded & 0xFFFF, f"rank {rank.index}: {message}")


def _describe_wait(ranks: list[Rank], parallel: bool) -> str:
    what = "SYNC_PARALLEL" if parallel else "SYNC"
    idx = [r.index for r in ranks]
    return f"{what} job(s) on rank(s) {idx if len(idx) <= 8 else f'{idx[:8]}...'}"


async def _run_inline(dset: DpuSetBase, job: Job | None) -> None:
    """A synchronous call from a blocking callback on its own rank runs inline (§3.4)."""
    if job is None:
        return
    emu = dset.emulator
    try:
        duration = job.body(job) if job.body is not None else 0
        if duration is None:
            raise DpuError(E.DPU_ERR_INTERNAL, "callbacks cannot be nested inline")
        await emu.delay(duration, f"inline {job.type.name}")
        if job.apply is not None:
            job.apply()
    except JobFailed as failure:
        raise DpuError(failure.code, failure.message) from None
    if job.type in (JobType.LAUNCH_RANK, JobType.LAUNCH_DPU):
        rank = job.rank
        while rank.running_dpus:
            w = emu.kernel.new_waiter(f"inline launch on rank {rank.index}")
            rank.dpu_stop_waiters.append(w)
            await emu.bridge.wait(w)
        if any(d.fault is not None for d in rank.dpus if d.enabled):
            raise DpuError(E.DPU_ERR_DPU_FAULT, f"a DPU of rank {rank.index} is in fault")


# ================================================================================================
# launch / sync / status
# ================================================================================================
@_logged("launch")
async def launch(dset: DpuSetBase, policy: int) -> None:
    """``dpu_launch``: ASYNCHRONOUS returns once enqueued (boot happens in the job)."""
    for d in dset.dpu_list:
        if d.program is None:
            raise DpuError(E.DPU_ERR_NO_PROGRAM_LOADED, f"DPU {d.name} has no program loaded")
    single = dset._dpu

    def make(rank: Rank) -> Job:
        jt = JobType.LAUNCH_DPU if single is not None else JobType.LAUNCH_RANK
        dpus = [single] if single is not None else rank.enabled_dpus
        job = Job(rank, jt, info={"dpus": len(dpus)})

        def body(j: Job) -> int:
            if any(d.running for d in dpus):
                raise JobFailed(E.DPU_ERR_DPU_ALREADY_RUNNING, "the DPUs are already running")
            j.apply = lambda: rank.boot_dpus(dpus, jt)
            return timing.LAUNCH_BOOT_LATENCY_PS

        job.body = body
        return job

    await _submit(dset, make, wait=policy == DPU_SYNCHRONOUS, parallel=False, what="launch")


@_logged("sync")
async def sync(dset: DpuSetBase) -> None:
    """``dpu_sync``: a non-parallel SYNC per rank; waits for earlier jobs and the DPUs."""
    await _submit(dset, lambda r: None, wait=True, parallel=False, what="sync")


@_logged("status")
async def status(dset: DpuSetBase) -> tuple[bool, bool]:
    """``dpu_status``: QUIRK reproduced — it syncs first, so it blocks until the DPUs stop."""
    with contextlib.suppress(DpuError):  # the SDK ignores sync's return value here
        await sync(dset)
    dpus = dset.dpu_list
    return (not any(d.running for d in dpus), any(d.fault is not None for d in dpus))


# ================================================================================================
# transfers
# ================================================================================================
@dataclass(frozen=True)
class _Target:
    space: MemorySpace
    offset: int  # byte offset inside the memory
    length: int


def _resolve_symbol(dset: DpuSetBase, symbol: str | Symbol) -> Symbol:
    if isinstance(symbol, Symbol):
        return symbol
    if not isinstance(symbol, str):
        raise TypeError(f"symbol must be a name or a Symbol, not {type(symbol).__name__}")
    return get_symbol(common_program(dset), symbol)


def _check_symbol_access(
    dset: DpuSetBase, symbol: str | Symbol, offset: int, length: int, parallel: bool
) -> _Target:
    """The checks ``CHECK_SYMBOL`` makes in the calling thread (spec §1.5)."""
    check_owner(dset.rank_list)
    sym = _resolve_symbol(dset, symbol)
    if offset < 0 or length < 0:
        raise DpuError(E.DPU_ERR_INVALID_SYMBOL_ACCESS, "offset and length must be >= 0")
    if offset + length > sym.size:
        raise DpuError(
            E.DPU_ERR_INVALID_SYMBOL_ACCESS,
            f"offset {offset} + length {length} exceeds symbol {sym.name!r} of {sym.size} bytes",
        )
    address = sym.address + offset
    space = MemorySpace.of(address)
    if space is MemorySpace.WRAM and (address % 4 or length % 4):
        raise DpuError(
            E.DPU_ERR_INVALID_WRAM_ACCESS,
            f"WRAM transfers need address and length multiples of 4 (address {address:#x}, "
            f"length {length})",
        )
    if space is MemorySpace.IRAM and (address % 8 or length % 8):
        raise DpuError(
            E.DPU_ERR_INVALID_IRAM_ACCESS,
            f"IRAM transfers need address and length multiples of 8 (address {address:#x}, "
            f"length {length})",
        )
    if parallel and not dset.is_single_dpu:
        require_parallel_wram(dset, "DPU_XFER_PARALLEL")
    if parallel and not dset.is_single_dpu and space is not MemorySpace.WRAM:
        raise DpuError(
            E.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER,
            f"DPU_XFER_PARALLEL reaches WRAM only; {sym.name!r} is in {space.value}",
        )
    return _Target(space, space_offset(address), length)


def require_parallel_wram(dset: DpuSetBase, what: str) -> None:
    """Parallel WRAM access is a v1B feature (doc 263): refuse it at the call on v1A."""
    chip = dset.emulator.config.chip_profile
    if not chip.supports_parallel_wram:
        raise DpuError(
            E.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER,
            f"{what} needs parallel WRAM access, which {chip.name} DPUs do not have (v1B only); "
            "use profile chip=v1B",
        )


def _check_in_job(dpu: Dpu, t: _Target) -> bool:
    """The checks the worker makes (spec §1.5); False means 'nothing to copy'."""
    chip = dpu.chip
    if t.space is MemorySpace.MRAM:
        if t.offset % 8 or t.length % 8:
            raise JobFailed(
                E.DPU_ERR_INVALID_MRAM_ACCESS,
                f"MRAM offset {t.offset:#x} and length {t.length} must be multiples of 8",
            )
        if t.offset >= chip.mram_size or t.offset + t.length > chip.mram_size:
            raise JobFailed(E.DPU_ERR_INVALID_MRAM_ACCESS, "access beyond the 64 MiB of MRAM")
        return t.length > 0
    if t.space is MemorySpace.WRAM:
        words = chip.wram_size // 4
        if t.length == 0:
            return False
        if t.offset // 4 >= words or (t.offset + t.length) // 4 > words:
            raise JobFailed(E.DPU_ERR_INVALID_WRAM_ACCESS, f"access beyond {chip.wram_size} B WRAM")
        return True
    if t.length == 0:
        return False
    if (
        t.offset + t.length
    ) // 8 > chip.iram_instructions or t.offset // 8 >= chip.iram_instructions:
        raise JobFailed(E.DPU_ERR_INVALID_IRAM_ACCESS, "access beyond IRAM")
    return True


def _write_dpu(dpu: Dpu, t: _Target, data: Bytes) -> None:
    if t.space is MemorySpace.WRAM:
        dpu.wram[t.offset : t.offset + t.length] = data[: t.length]
        dpu.wram_written(t.offset, t.length)
    elif t.space is MemorySpace.MRAM:
        dpu.mram.write(t.offset, data[: t.length])
    else:
        dpu.iram[t.offset : t.offset + t.length] = data[: t.length]


def _read_dpu(dpu: Dpu, t: _Target) -> Bytes:
    if t.space is MemorySpace.WRAM:
        return dpu.wram[t.offset : t.offset + t.length].copy()
    if t.space is MemorySpace.MRAM:
        return dpu.mram.read(t.offset, t.length)
    return dpu.iram[t.offset : t.offset + t.length].copy()


def host_view(buf: Any, length: int, *, writable: bool, who: str) -> Bytes:
    """Check a host buffer for a transfer of ``length`` bytes and view it as uint8."""
    try:
        view = as_bytes(buf, what=who)
    except TypeError as exc:
        raise DpuError(E.DPU_ERR_INVALID_MEMORY_TRANSFER, str(exc)) from None
    if len(view) < length:
        raise DpuError(
            E.DPU_ERR_INVALID_MEMORY_TRANSFER,
            f"{who} holds {len(view)} bytes but the transfer moves {length}",
        )
    if writable and not view.flags.writeable:
        raise DpuError(
            E.DPU_ERR_INVALID_MEMORY_TRANSFER,
            f"{who} is read-only; a transfer from the DPUs needs a writable buffer "
            "(bytearray or a NumPy array)",
        )
    if writable and isinstance(buf, np.ndarray) and not buf.flags.c_contiguous:
        raise DpuError(E.DPU_ERR_INVALID_MEMORY_TRANSFER, f"{who} must be C-contiguous")
    return view


_TO_TYPES = {
    MemorySpace.WRAM: JobType.COPY_WRAM_TO_MATRIX,
    MemorySpace.IRAM: JobType.COPY_IRAM_TO_MATRIX,
    MemorySpace.MRAM: JobType.COPY_MRAM_TO_MATRIX,
}
_FROM_TYPES = {
    MemorySpace.WRAM: JobType.COPY_WRAM_FROM_MATRIX,
    MemorySpace.IRAM: JobType.COPY_IRAM_FROM_MATRIX,
    MemorySpace.MRAM: JobType.COPY_MRAM_FROM_MATRIX,
}
_RANK_TYPES = {
    MemorySpace.WRAM: JobType.COPY_WRAM_TO_RANK,
    MemorySpace.IRAM: JobType.COPY_IRAM_TO_RANK,
    MemorySpace.MRAM: JobType.COPY_MRAM_TO_RANK,
}


def _matrix(rank: Rank) -> dict[int, Any]:
    held = _callback_ranks.get()
    if held is not None and rank.index in held:
        return rank.callback_matrix
    return rank.xfer_matrix


def prepare_xfer(dset: DpuSetBase, buf: Any) -> None:
    """``dpu_prepare_xfer``: record ``buf`` for every DPU of the set (None clears)."""
    for d in dset.dpu_list:
        m = _matrix(d.rank)
        if buf is None:
            m.pop(d.index, None)
        else:
            m[d.index] = buf


@_logged("push_xfer")
async def push_xfer(
    dset: DpuSetBase, xfer: int, symbol: str | Symbol, offset: int, length: int, flags: int
) -> None:
    """``dpu_push_xfer`` with the prepared per-DPU buffers."""
    parallel = bool(flags & DPU_XFER_PARALLEL) and not dset.is_single_dpu  # QUIRK reproduced
    target = _check_symbol_access(dset, symbol, offset, length, bool(flags & DPU_XFER_PARALLEL))
    if xfer not in (DPU_XFER_TO_DPU, DPU_XFER_FROM_DPU):
        raise DpuError(E.DPU_ERR_INVALID_MEMORY_TRANSFER, f"xfer must be TO or FROM, not {xfer}")
    to_dpu = xfer == DPU_XFER_TO_DPU
    # the matrix is copied into the jobs at enqueue time (host buffers are read when they run)
    per_rank: dict[int, list[tuple[Dpu, Bytes]]] = {}
    for d in dset.dpu_list:
        m = _matrix(d.rank)
        buf = m.get(d.index)
        if buf is None:
            continue
        view = host_view(buf, length, writable=not to_dpu, who=f"the buffer of DPU {d.name}")
        per_rank.setdefault(d.rank.index, []).append((d, view))
    if not flags & DPU_XFER_NO_RESET:
        for d in dset.dpu_list:
            _matrix(d.rank).pop(d.index, None)
    if to_dpu:
        jt = JobType.PARALLEL_COPY_WRAM_TO_MATRIX if parallel else _TO_TYPES[target.space]
    else:
        jt = JobType.PARALLEL_COPY_WRAM_FROM_MATRIX if parallel else _FROM_TYPES[target.space]
    kind = "parallel" if parallel else ("to" if to_dpu else "from")

    def make(rank: Rank) -> Job:
        entries = per_rank.get(rank.index, [])
        job = Job(
            rank, jt, info={"bytes": length * len(entries), "dpus": len(entries), "flags": flags}
        )

        def body(j: Job) -> int:
            todo = [(d, v) for d, v in entries if _check_in_job(d, target)]

            def apply() -> None:
                for d, v in todo:
                    if to_dpu:
                        _write_dpu(d, target, v)
                    else:
                        v[: target.length] = _read_dpu(d, target)

            j.apply = apply
            return timing.transfer_time_ps(kind, [target.length] * len(entries))

        job.body = body
        return job

    what = "push_xfer to DPUs" if to_dpu else "push_xfer from DPUs"
    await _submit(dset, make, wait=not flags & DPU_XFER_ASYNC, parallel=parallel, what=what)


@_logged("broadcast_to")
async def broadcast_to(
    dset: DpuSetBase, symbol: str | Symbol, offset: int, data: Any, length: int, flags: int
) -> None:
    """``dpu_broadcast_to``: PARALLEL is ignored (QUIRK reproduced), ASYNC honoured."""
    target = _check_symbol_access(dset, symbol, offset, length, False)
    view = host_view(data, length, writable=False, who="the broadcast buffer")
    single = dset._dpu

    def make(rank: Rank) -> Job:
        dpus = [single] if single is not None else rank.enabled_dpus
        jt = _TO_TYPES[target.space] if single is not None else _RANK_TYPES[target.space]
        job = Job(rank, jt, info={"bytes": length * len(dpus), "dpus": len(dpus), "flags": flags})

        def body(j: Job) -> int:
            copy = all(_check_in_job(d, target) for d in dpus)

            def apply() -> None:
                if copy:
                    for d in dpus:
                        _write_dpu(d, target, view)

            j.apply = apply
            kind = "to" if single is not None else "broadcast"
            return timing.transfer_time_ps(kind, [target.length] * len(dpus))

        job.body = body
        return job

    await _submit(dset, make, wait=not flags & DPU_XFER_ASYNC, parallel=False, what="broadcast")


@_logged("copy_from")
async def copy_from(
    dset: DpuSetBase, symbol: str | Symbol, offset: int, dst: Any, length: int
) -> None:
    """``dpu_copy_from``: single-DPU sets only, synchronous."""
    if not dset.is_single_dpu:
        raise DpuError(
            E.DPU_ERR_INVALID_DPU_SET,
            "dpu_copy_from needs a single-DPU set (iterate with dpu_foreach)",
        )
    target = _check_symbol_access(dset, symbol, offset, length, False)
    view = host_view(dst, length, writable=True, who="the destination buffer")
    dpu = dset.dpu_list[0]

    def make(rank: Rank) -> Job:
        job = Job(rank, _FROM_TYPES[target.space], info={"bytes": length, "dpus": 1})

        def body(j: Job) -> int:
            if _check_in_job(dpu, target):
                j.apply = lambda: view.__setitem__(slice(0, length), _read_dpu(dpu, target))
            return timing.transfer_time_ps("from", [length])

        job.body = body
        return job

    await _submit(dset, make, wait=True, parallel=False, what="copy_from")


# ================================================================================================
# callbacks (spec §3.5)
# ================================================================================================
CallbackFn = Callable[[Any, int, Any], Any]


@_logged("callback")
async def callback(dset: S, fn: CallbackFn, args: Any, flags: int) -> None:
    """``dpu_callback`` with the exact semantics of each flag combination."""
    if flags & DPU_CALLBACK_NONBLOCKING and not flags & DPU_CALLBACK_ASYNC:
        raise DpuError(
            E.DPU_ERR_NONBLOCKING_SYNC_CALLBACK,
            "DPU_CALLBACK_NONBLOCKING needs DPU_CALLBACK_ASYNC",
        )
    emu = dset.emulator
    if not emu.runs_host_callbacks:
        raise DpuError(
            E.DPU_ERR_INTERNAL,
            "callback jobs run as host tasks of aiopim.run() / Emulator.run(); start the "
            "program that way to use dpu_callback",
        )
    is_async = bool(flags & DPU_CALLBACK_ASYNC)
    blocking = not flags & DPU_CALLBACK_NONBLOCKING
    single_call = bool(flags & DPU_CALLBACK_SINGLE_CALL)
    parallel = bool(flags & DPU_CALLBACK_PARALLEL)
    jt = JobType.CALLBACK_PARALLEL if parallel else JobType.CALLBACK
    ranks = dset.rank_list

    def invoke(
        call_set: Any, rank_id: int, held: list[Rank], done: Callable[[int, str], None]
    ) -> None:
        async def host_call() -> None:
            token = _callback_ranks.set(frozenset(r.index for r in held) if blocking else None)
            code, message = 0, ""
            t0 = emu.kernel.now
            try:
                result = fn(call_set, rank_id, args)
                if inspect.isawaitable(result):
                    result = await result
                if isinstance(result, int) and result:
                    code, message = int(result), f"callback returned {result}"
            except DpuError as exc:
                code, message = int(exc.code), f"callback raised {exc}"
            finally:
                _callback_ranks.reset(token)
            rec = emu.recorder
            if rec is not None:
                rec.callback_ran(call_set.rank_list, t0, code)
            done(code, message)

        emu.call_host(host_call)

    if single_call and not is_async and not dset.is_single_dpu:
        # QUIRK reproduced: only on the first rank; holds every rank while it runs
        first = ranks[0]

        def make_first(rank: Rank) -> Job | None:
            if rank is not first:
                return None
            job = Job(rank, jt, info={"flags": flags})

            def body(j: Job) -> None:
                def all_held() -> None:
                    invoke(dset, ALL_RANKS_ID, ranks, lambda c, m: _finish_single(j, ranks, c, m))

                _hold_all(ranks, first, all_held)
                return None

            job.body = body
            return job

        await _submit(
            dset, make_first, wait=True, parallel=parallel, what="callback", ranks=[first]
        )
        return

    if single_call and len(ranks) > 1:
        state = {"arrived": 0, "jobs": []}

        def make_sc(rank: Rank) -> Job:
            job = Job(rank, jt, info={"flags": flags})

            def body(j: Job) -> None:
                state["arrived"] += 1  # type: ignore[operator]
                jobs: list[Job] = state["jobs"]  # type: ignore[assignment]
                jobs.append(j)
                last = state["arrived"] == len(ranks)
                if not blocking:
                    if not last:
                        rank.kernel.call_soon(lambda _: rank.finish(j, E.DPU_OK))
                        return None
                    rank.detach_current(j)
                    invoke(dset, ALL_RANKS_ID, [], lambda c, m: None)
                    return None
                if last:

                    def finish_all(code: int, message: str) -> None:
                        for other in jobs:
                            _finish_job(other, code, message)

                    invoke(dset, ALL_RANKS_ID, ranks, finish_all)
                return None

            job.body = body
            return job

        await _submit(dset, make_sc, wait=False, parallel=parallel, what="callback")
        return

    single_dpu = dset.is_single_dpu

    def make(rank: Rank) -> Job:
        job = Job(rank, jt, info={"flags": flags})
        if single_dpu:
            call_set, rank_id = dset, ALL_RANKS_ID
        else:
            call_set, rank_id = dset._child_rank(rank), ranks.index(rank)

        def body(j: Job) -> None:
            if not blocking:
                rank.detach_current(j)
                invoke(call_set, rank_id, [], lambda c, m: None)  # QUIRK: result ignored
                return None
            invoke(call_set, rank_id, [rank], lambda c, m: _finish_job(j, c, m))
            return None

        job.body = body
        return job

    await _submit(dset, make, wait=not is_async, parallel=parallel, what="callback")


def _finish_job(job: Job, code: int, message: str) -> None:
    rank = job.rank
    if message:
        job.info["error"] = message
    code_enum = (
        DpuErrorCode(code) if code in DpuErrorCode._value2member_map_ else E.DPU_ERR_INTERNAL
    )
    rank.kernel.call_soon(lambda _: rank.finish(job, code_enum), None, rank.actor)


def _hold_all(ranks: list[Rank], owner: Rank, then: Callable[[], None]) -> None:
    """Lock every other rank once its current job is done, then call ``then``."""
    remaining = {r.index for r in ranks if r is not owner}
    if not remaining:
        then()
        return

    def granted(r: Rank) -> None:
        remaining.discard(r.index)
        if not remaining:
            then()

    for r in ranks:
        if r is not owner:
            r.request_hold(granted)


def _finish_single(job: Job, ranks: list[Rank], code: int, message: str) -> None:
    for r in ranks:
        if r is not job.rank:
            r.release_hold()
    _finish_job(job, code, message)


# ================================================================================================
# logs
# ================================================================================================
def log_read(dset: DpuSetBase, stream: TextIO | None = None) -> str:
    """``dpu_log_read``: the header and the DPU's printf output, decoded from the program's
    MRAM log buffer (single DPU only). With ``stream``, the header is written first, as the SDK
    does, even when reading the buffer then fails (``DPU_ERR_LOG_*``)."""
    from ..dpu._stdio import read_log

    check_owner(dset.rank_list)
    header = f"=== DPU#0x{dset.dpu_list[0].dpu_id if dset.dpu_list else 0:x} ===\n"
    if stream is not None:
        stream.write(header)
    if not dset.is_single_dpu:
        raise DpuError(E.DPU_ERR_INVALID_DPU_SET, "dpu_log_read needs a single-DPU set")
    text = read_log(dset.dpu_list[0])
    if stream is not None:
        stream.write(text)
    return header + text
