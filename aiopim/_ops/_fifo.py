"""Host side of WRAM FIFOs (``dpu_fifo.h``): links, prepared buffers, push and flush jobs.

Every pointer the host reads or writes is the 64-bit word in the DPU's emulated WRAM that the DPU
side uses (sdk-reference.md §4.1); the link keeps only the host copy the SDK keeps (the pointer pair
captured by the last push/flush). The push/flush algorithms follow ``dpu_copy_to_wram_fifo`` /
``dpu_copy_from_wram_fifo`` (sdk-reference.md §4.3) pass by pass, in virtual time."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import timing
from .._dpulist import format_dpu_list
from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._jobs import Job
from .._machine._memory import Bytes
from .._machine._program import MemorySpace, Symbol
from .._machine._rank import Rank
from .._machine._wramfifo import (
    DATA_SIZE,
    MASK64,
    MAX_PTR_SIZE,
    PTR_SIZE,
    READ_PTR,
    WRITE_PTR,
    is_full,
    pack_u64,
    read_u32,
    struct_size,
    write_u64,
)
from .._runtime._kernel import Command, Delay, Process
from ._flags import XferMode
from ._load import common_program, get_symbol
from ._oplog import logged
from ._submit import inline_ranks, submit
from ._validate import check_int, check_set, check_str
from ._xfer import host_view, require_parallel_wram

if TYPE_CHECKING:
    from .._machine._dpu import Dpu
    from .._machine._recorder import Recorder
    from ._set import Allocation, DpuSetBase

E = DpuErrorCode
DPU_INPUT_FIFO = 0
DPU_OUTPUT_FIFO = 1


class DpuQuirkWarning(UserWarning):
    """An SDK quirk that aiopim reproduces is corrupting or dropping data in this program."""


class RankFifo:
    """``dpu_fifo_rank_t``: one rank's prepared buffers, pointer copies and retry settings."""

    __slots__ = ("flushes", "matrix", "max_retries", "ptrs", "time_for_retry_us")

    def __init__(self, nr_dpus: int) -> None:
        #: host copy of every DPU's (read_ptr, write_ptr), as captured by the last push/flush
        self.ptrs: list[tuple[int, int]] = [(0, 0)] * nr_dpus
        self.matrix: dict[int, Any] = {}
        self.max_retries = timing.FIFO_PUSH_MAX_RETRIES
        self.time_for_retry_us = timing.FIFO_TIME_FOR_RETRY_US
        #: flush jobs that ran on this rank (tells which ranks of a failed call did flush)
        self.flushes = 0


class FifoLink:
    """``struct dpu_fifo_link_t``: a host link to one FIFO of every DPU of a set."""

    def __init__(
        self,
        direction: int,
        struct: Symbol,
        data: Symbol,
        ptr_size: int,
        data_size: int,
        ranks: list[Rank],
    ) -> None:
        self.direction = direction
        self.struct = struct
        self.data = data
        self.ptr_size = ptr_size
        self.data_size = data_size
        #: ``2**ptr_size`` elements (plain attributes: the push and read paths ask for them per
        #: DPU)
        self.capacity = 1 << ptr_size
        #: size of the ring buffer (what an output buffer must hold)
        self.ring_bytes = data_size << ptr_size
        self.rank_fifos: dict[int, RankFifo] | None = {
            r.index: RankFifo(len(r.dpus)) for r in ranks
        }
        #: the allocation of the linked set (None: not checked)
        self.owner: Allocation | None = None

    @property
    def name(self) -> str:
        """The FIFO's variable name in the DPU program."""
        return self.struct.name

    @property
    def is_input(self) -> bool:
        """True for a link made by ``dpu_link_input_fifo``."""
        return self.direction == DPU_INPUT_FIFO

    def rank_fifo(self, rank: Rank) -> RankFifo:
        """The per-rank state, or a DpuError if the link does not cover ``rank``."""
        if self.rank_fifos is None:
            raise DpuError(
                E.DPU_ERR_INTERNAL,
                f"the link to FIFO {self.name!r} was freed (dpu_fifo_link_free); link it again",
            )
        rf = self.rank_fifos.get(rank.index)
        if self.owner is not None and (self.owner.freed or rank.owner is not self.owner):
            raise DpuError(
                E.DPU_ERR_INVALID_DPU_SET,
                f"the link to FIFO {self.name!r} belongs to a DPU set that was freed (dpu_free)",
            )
        if rf is None:
            raise DpuError(
                E.DPU_ERR_INVALID_DPU_SET,
                f"the link to FIFO {self.name!r} does not cover rank {rank.index}; link the FIFO "
                "on a set that contains it",
            )
        return rf

    def __repr__(self) -> str:
        kind = "input" if self.is_input else "output"
        return (
            f"<FifoLink {kind} {self.name!r} {self.capacity}x{self.data_size}B "
            f"on {len(self.rank_fifos or ())} rank(s)>"
        )


# ================================================================================================
# immediate calls
# ================================================================================================
def link_fifo(dset: DpuSetBase, name: str, direction: int) -> FifoLink:
    """``dpu_link_input_fifo`` / ``dpu_link_output_fifo`` (immediate, not a job)."""
    check_set(dset)
    name = check_str(name, "fifo_name")
    program = common_program(dset)
    struct = get_symbol(program, name)
    data = get_symbol(program, f"__{name}_data")
    for sym in (struct, data):
        if sym.space is not MemorySpace.WRAM:
            raise DpuError(
                E.DPU_ERR_INVALID_WRAM_ACCESS,
                f"FIFO symbol {sym.name!r} is in {sym.space.value}; WRAM FIFOs live in WRAM",
            )
    need = struct_size(direction == DPU_OUTPUT_FIFO)
    if struct.size < need:
        raise DpuError(
            E.DPU_ERR_INVALID_WRAM_ACCESS,
            f"{name!r} is {struct.size} bytes, not a FIFO struct ({need} bytes); declare it with "
            "INPUT_FIFO_INIT / OUTPUT_FIFO_INIT",
        )
    first = dset.dpu_list[0]
    ptr_size = read_u32(first.wram, struct.offset + PTR_SIZE)
    data_size = read_u32(first.wram, struct.offset + DATA_SIZE)
    if ptr_size > MAX_PTR_SIZE or data_size % 8 or data_size == 0:
        raise DpuError(
            E.DPU_ERR_INVALID_WRAM_ACCESS,
            f"FIFO {name!r} on DPU {first.name} reads ptr_size={ptr_size}, data_size={data_size}; "
            "expected ptr_size <= 10 and a positive multiple of 8 (is the program loaded?)",
        )
    if data.size < data_size << ptr_size:
        raise DpuError(
            E.DPU_ERR_INVALID_WRAM_ACCESS,
            f"{data.name!r} holds {data.size} bytes but the FIFO needs {data_size << ptr_size}",
        )
    if ptr_size > 8:
        warnings.warn(
            f"FIFO {name!r} has ptr_size {ptr_size}: the SDK (2025.1) truncates masked pointers "
            "to uint8 and addresses the wrong slots on hardware; aiopim uses full-width indices",
            DpuQuirkWarning,
            stacklevel=3,
        )
    link = FifoLink(direction, struct, data, ptr_size, data_size, dset.rank_list)
    link.owner = dset._owner
    return link


def check_link(link: Any) -> FifoLink:
    """A ``FifoLink`` argument (``TypeError`` naming ``link`` otherwise)."""
    if not isinstance(link, FifoLink):
        raise TypeError(f"link must be a FIFO link (dpu_fifo_link_t), not {type(link).__name__}")
    return link


def link_free(link: FifoLink) -> None:
    """``dpu_fifo_link_free``."""
    check_link(link).rank_fifos = None


def fifo_prepare_xfer(dset: DpuSetBase, link: FifoLink, buf: Any) -> None:
    """``dpu_fifo_prepare_xfer``: ``buf`` for every DPU of the set (None clears)."""
    check_set(dset)
    check_link(link)
    for d in dset.dpu_list:
        m = link.rank_fifo(d.rank).matrix
        if buf is None:
            m.pop(d.index, None)
        else:
            m[d.index] = buf


def set_push_max_retries(link: FifoLink, dset: DpuSetBase, max_retries: int) -> None:
    """``dpu_fifo_set_push_max_retries`` for the ranks of ``dset``."""
    check_link(link)
    check_set(dset)
    max_retries = check_int(
        max_retries, "max_retries", E.DPU_ERR_INVALID_MEMORY_TRANSFER, high=0xFFFFFFFF
    )
    for r in dset.rank_list:
        link.rank_fifo(r).max_retries = int(max_retries)


def set_time_for_push_retries(link: FifoLink, dset: DpuSetBase, microseconds: int) -> None:
    """``dpu_fifo_set_time_for_push_retries`` (µs between two push attempts)."""
    check_link(link)
    check_set(dset)
    microseconds = check_int(
        microseconds, "microseconds", E.DPU_ERR_INVALID_MEMORY_TRANSFER, high=0xFFFFFFFF
    )
    for r in dset.rank_list:
        link.rank_fifo(r).time_for_retry_us = int(microseconds)


def _held(link: FifoLink, dpu: Dpu) -> tuple[int, int]:
    """``(read_ptr, elements)`` of the pointer pair captured by the last push/flush."""
    check_link(link)
    rd, wr = link.rank_fifo(dpu.rank).ptrs[dpu.index]
    return rd, (wr - rd) & MASK64


def fifo_size(link: FifoLink, dpu: Dpu) -> int:
    """``get_fifo_size``: ``wr - rd`` of the pointer pair captured by the last push/flush."""
    return _held(link, dpu)[1]


def flushed_elements(link: FifoLink, rf: RankFifo, dpu: Dpu, ring: Bytes) -> Bytes:
    """The elements (oldest first, one row each) that the last flush of ``rf``'s rank copied
    from ``dpu``'s ring into ``ring``: rows ``get_fifo_elem(..., 0 .. get_fifo_size - 1)``."""
    rd, wr = rf.ptrs[dpu.index]
    slots = (rd + np.arange((wr - rd) & MASK64, dtype=np.uint64)) & np.uint64(link.capacity - 1)
    rows: Bytes = ring[: link.ring_bytes].reshape(link.capacity, link.data_size)[slots]
    return rows


def fifo_elem(link: FifoLink, dpu: Dpu, buf: Any, i: int) -> Bytes:
    """``get_fifo_elem``: element ``i`` (oldest first) of the ring copied into ``buf``."""
    if type(i) is not int:
        i = check_int(i, "i", E.DPU_ERR_INVALID_MEMORY_TRANSFER, low=-(1 << 63))
    rd, size = _held(link, dpu)
    if not 0 <= i < size:
        raise IndexError(
            f"FIFO {link.name!r} of DPU {dpu.name} holds {size} element(s), not {i + 1}"
        )
    view = host_view(buf, link.ring_bytes, writable=False, who="the FIFO buffer")
    slot = (rd + i) & (link.capacity - 1)
    return view[slot * link.data_size : (slot + 1) * link.data_size]


# ================================================================================================
# the push job
# ================================================================================================
#: told, when a rank's flush job has copied its DPUs' rings into their buffers, the rank and
#: the link's state on it (the pointer pairs of that flush, until the next one)
FlushedHook = Callable[[Rank, RankFifo], None]


@logged("fifo_push_xfer")
async def fifo_push_xfer(
    dset: DpuSetBase, link: FifoLink, mode: XferMode, *, on_flushed: FlushedHook | None = None
) -> None:
    """``dpu_fifo_push_xfer``: one PARALLEL_FIFO_PUSH or _FLUSH job per rank.

    ``on_flushed`` is called (in virtual time) as each rank's flush ends, even if the caller
    was cancelled meanwhile: what the flush took out of the DPUs can then be kept."""
    check_link(link)
    require_parallel_wram(dset, "WRAM FIFOs")
    single = dset._dpu
    # QUIRK fixed: the SDK always enqueues a PUSH on a single-DPU set, even for an output link
    jt = JobType.PARALLEL_FIFO_PUSH if link.is_input else JobType.PARALLEL_FIFO_FLUSH
    need = link.data_size if link.is_input else link.ring_bytes
    per_rank: dict[int, dict[int, Bytes]] = {}
    # the checks of a buffer hold for every DPU it was prepared for: one view per buffer
    views: dict[int, Bytes] = {}
    rank: Rank | None = None
    for d in dset.dpu_list:
        if d.rank is not rank:
            rank = d.rank
            matrix = link.rank_fifo(rank).matrix
            buffers = per_rank.setdefault(rank.index, {})
        buf = matrix.get(d.index)
        if buf is not None:
            view = views.get(id(buf))
            if view is None:
                view = views[id(buf)] = host_view(
                    buf, need, writable=not link.is_input, who=f"the FIFO buffer of DPU {d.name}"
                )
            buffers[d.index] = view
    if mode.reset:
        for d in dset.dpu_list:
            link.rank_fifo(d.rank).matrix.pop(d.index, None)

    # the link's per-rank state is taken at the call: a job already running keeps it even if
    # the set is freed or the link released meanwhile
    def algorithm(rank: Rank, rf: RankFifo) -> FifoAlgorithm:
        dpus = [single] if single is not None else rank.enabled_dpus
        buffers = per_rank.get(rank.index, {})
        if link.is_input:
            return _push_input(link, rf, rank, dpus, buffers)
        return _flush_output(link, rf, rank, dpus, buffers, on_flushed)

    ranks = dset.rank_list
    if mode.wait and inline_ranks(ranks):
        code, message = await _drive_inline(dset, algorithm(ranks[0], link.rank_fifo(ranks[0])))
        if code != E.DPU_OK:
            raise DpuError(code, f"rank {ranks[0].index}: {message}")
        return

    def make(rank: Rank) -> Job:
        buffers = per_rank.get(rank.index, {})
        info = {"fifo": link.name, "dpus": len(buffers), "flags": mode.flags}
        rf = link.rank_fifo(rank)
        return FifoJob(rank, jt, info, lambda: algorithm(rank, rf))

    what = "fifo_push" if link.is_input else "fifo_flush"
    await submit(dset, make, wait=mode.wait, parallel=True, what=what)


#: a push or flush pass by pass, as a kernel process: (error code, message) at the end
FifoAlgorithm = Coroutine[Any, Any, tuple[DpuErrorCode, str]]


class FifoJob(Job):
    """PARALLEL_FIFO_PUSH / _FLUSH: the SDK's algorithm runs as a kernel process that ends
    the job itself."""

    __slots__ = ("algorithm",)

    def __init__(
        self,
        rank: Rank,
        job_type: JobType,
        info: dict[str, Any],
        algorithm: Callable[[], FifoAlgorithm],
    ) -> None:
        super().__init__(rank, job_type, info=info)
        self.algorithm = algorithm

    def start(self) -> None:
        rank = self.rank

        async def run() -> None:
            code, message = await self.algorithm()
            if message:
                self.info["error"] = message
            rank.finish(self, code)

        def crashed(_: Process, exc: BaseException | None) -> None:
            if exc is not None:
                rank.kernel.crashed = exc

        name = f"{self.type.name} on rank {rank.index}"
        rank.kernel.spawn(run(), actor=rank.actor, name=name, on_exit=crashed)
        return None


async def _drive_inline(dset: DpuSetBase, coro: FifoAlgorithm) -> tuple[DpuErrorCode, str]:
    """Run a push/flush algorithm from a blocking callback on its own rank
    (sdk-reference.md §3.4)."""
    emu = dset.emulator
    value: Any = None
    while True:
        try:
            cmd: Command = coro.send(value)
        except StopIteration as stop:
            result: tuple[DpuErrorCode, str] = stop.value
            return result
        assert isinstance(cmd, Delay)
        await emu.delay(cmd.ps, "an inline FIFO transfer")


def _record_ptrs(
    rec: Recorder,
    rank: Rank,
    link: FifoLink,
    idx: list[int],
    pairs: list[tuple[int, int]],
    *,
    read: bool,
) -> None:
    """Record the pointer pairs the host holds for DPUs ``idx`` (``pairs`` in their order):
    just read from WRAM, or after its own writes."""
    rd, wr = zip(*pairs, strict=True) if pairs else ((), ())
    rec.add(
        "fifo_ptrs",
        rank=rank.index,
        fifo=link.name,
        input=link.is_input,
        read=read,
        dpus=tuple(idx),
        rd=rd,
        wr=wr,
    )


def _record_held(rec: Recorder, rank: Rank, link: FifoLink, rf: RankFifo, dpus: list[Dpu]) -> None:
    """Record the pointer pairs the host holds for ``dpus`` after its writes."""
    idx = [d.index for d in dpus]
    held = rf.ptrs
    _record_ptrs(rec, rank, link, idx, [held[i] for i in idx], read=False)


def _rows_of(idx: list[int]) -> list[int] | slice:
    """The rows of the DPUs of indices ``idx`` (increasing, as a rank lists its DPUs): a slice
    when they are consecutive, so that NumPy and list updates need no gather, else ``idx``."""
    if idx and idx[-1] - idx[0] == len(idx) - 1:
        return slice(idx[0], idx[-1] + 1)
    return idx


def _hold(held: list[tuple[int, int]], idx: list[int], pairs: list[tuple[int, int]]) -> None:
    """Keep ``pairs`` as the host's copies of the pointers of DPUs ``idx`` (in that order)."""
    rows = _rows_of(idx)
    if isinstance(rows, slice):
        held[rows] = pairs
    else:
        for i, pair in zip(idx, pairs, strict=True):
            held[i] = pair


#: one pass's read of the pointers: the DPUs' indices, their (read_ptr, write_ptr) pairs in that
#: order, and the same pairs as a uint64 array of two columns
PtrRead = tuple[list[int], list[tuple[int, int]], npt.NDArray[np.uint64]]


async def _read_ptrs(
    link: FifoLink, rf: RankFifo, rank: Rank, dpus: list[Dpu], rec: Recorder | None
) -> PtrRead:
    """One pass's read of every DPU's (read_ptr, write_ptr); the link keeps the copy."""
    await Delay(timing.parallel_wram_access_ps(16 * len(dpus)))
    at = link.struct.offset + READ_PTR
    idx = [d.index for d in dpus]
    # the rank's WRAM rows at once (``Dpu.wram`` is row ``index``), copied: the pass uses them
    # after the DPUs have run on
    words = rank.wram_memory.rows[_rows_of(idx), at : at + 16].copy().view("<u8")
    pairs: list[tuple[int, int]] = list(map(tuple, words.tolist()))
    _hold(rf.ptrs, idx, pairs)
    if rec is not None:
        _record_ptrs(rec, rank, link, idx, pairs, read=True)
    return idx, pairs, words


def _record_push(
    rec: Recorder | None, rank: Rank, link: FifoLink, t0: int, dpus: int, retries: int
) -> None:
    if rec is not None:
        rec.add("fifo_push", rank=rank.index, fifo=link.name, start=t0, dpus=dpus, retries=retries)


async def _push_input(
    link: FifoLink, rf: RankFifo, rank: Rank, dpus: list[Dpu], buffers: dict[int, Bytes]
) -> tuple[DpuErrorCode, str]:
    """``dpu_copy_to_wram_fifo``: one element per DPU, retried while some DPUs are full."""
    mask, size = link.capacity - 1, link.data_size
    s, data = link.struct.offset, link.data.offset
    rec = rank.machine.recorder
    t0 = rank.kernel.now
    todo = [d for d in dpus if d.index in buffers]
    first, retry, n_retries = True, False, 0
    while True:
        read = await _read_ptrs(link, rf, rank, dpus, rec)
        idx, pairs, words = read
        rds, wrs = words[:, 0], words[:, 1]
        slots = wrs & mask
        nr_full = int((((rds & mask) == slots) & (rds != wrs)).sum())
        if first:
            first = False
            if pairs and not nr_full and (slots == slots[0]).all():
                await _fast_push(link, rf, rank, dpus, buffers, read)
                if rec is not None:
                    _record_held(rec, rank, link, rf, dpus)
                _record_push(rec, rank, link, t0, len(todo), 0)
                return E.DPU_OK, ""
        full: list[Dpu] = []
        if todo and nr_full == len(dpus):
            # every DPU is full (those left to push among them): the pass writes nothing
            retry = True
            full = todo
            todo = []
        ptrs = dict(zip(idx, pairs, strict=True)) if todo else {}
        # the running DPUs need to be at the pass's times only at its end (see _plan_pass)
        planned, until, whole = (
            _plan_pass(link, rank, todo, ptrs, buffers) if todo else (None, None, False)
        )
        if whole and until is not None:
            # every write to a running DPU is scheduled into its run: the pass's end is the
            # only time the host needs. A DPU that stopped before its write's time is written
            # then, which nothing can tell: it no longer reads, and its rank runs this job.
            await Delay(until - rank.kernel.now, until)
        for d in todo:
            rd, wr = ptrs[d.index]
            if is_full(rd, wr, mask):
                retry = True
                full.append(d)
                continue
            slot = data + (wr & mask) * size
            writes = planned.get(d.index) if planned is not None else None
            if not whole:
                await Delay(timing.parallel_wram_access_ps(size), until)
            if writes is None or not d.runner_wrote(writes[0]):
                d.wram[slot : slot + size] = buffers[d.index][:size]
                d.wram_written(slot, size)
            if not whole:
                await Delay(timing.parallel_wram_access_ps(8), until)
            if writes is None or not d.runner_wrote(writes[1]):
                write_u64(d, s + WRITE_PTR, wr + 1)
            rf.ptrs[d.index] = (rd, wr + 1)
        if rec is not None and len(full) < len(todo):
            _record_held(rec, rank, link, rf, dpus)
        todo = full
        if retry:  # sticky once set (QUIRK reproduced, sdk-reference.md §4.3 step 4)
            n_retries += 1
            if rec is not None:
                rec.add(
                    "fifo_retry", rank=rank.index, fifo=link.name, retry=n_retries, full=len(full)
                )
            await Delay(rf.time_for_retry_us * timing.PS_PER_US)
            if n_retries > rf.max_retries:
                if rec is not None:
                    rec.add(
                        "fifo_full",
                        rank=rank.index,
                        fifo=link.name,
                        start=t0,
                        retries=n_retries,
                        dpus=[d.index for d in full],
                    )
                return E.DPU_ERR_WRAM_FIFO_FULL, (
                    f"input FIFO {link.name!r} still full on DPU(s) "
                    f"{format_dpu_list(full) or '(none: pushed on the last pass)'} "
                    f"after {rf.max_retries} retries of {rf.time_for_retry_us} µs; drain the "
                    "DPUs' output FIFOs faster or raise the retry limits"
                )
        if not todo:
            _record_push(rec, rank, link, t0, len(buffers), n_retries)
            return E.DPU_OK, ""


def _plan_pass(
    link: FifoLink,
    rank: Rank,
    todo: list[Dpu],
    ptrs: dict[int, tuple[int, int]],
    buffers: dict[int, Bytes],
) -> tuple[dict[int, tuple[int, int]] | None, int | None, bool]:
    """A pass writes each DPU with room in turn (its element, then its write pointer), one
    transfer at a time: schedule those writes into the runs of the DPUs whose engine takes them
    (``DpuRunner.write_at``), so that the pass's events need not bring every running DPU to
    their times, only its end. The numbers of the scheduled writes by DPU, the pass's end, and
    whether the pass needs no event but its end (it writes something, and every running DPU
    it writes takes its writes into its run); (None, None, False) when a running DPU needs the
    events to bring it there (the pass then writes every DPU itself, at its events)."""
    if any(d.running and d.runner is not None and d.runner.needs_synced_events() for d in todo):
        return None, None, False
    mask, size = link.capacity - 1, link.data_size
    s, data = link.struct.offset, link.data.offset
    element_ps = timing.parallel_wram_access_ps(size)
    pointer_ps = timing.parallel_wram_access_ps(8)
    planned: dict[int, tuple[int, int]] = {}
    t = rank.kernel.now
    # the new write pointers, one row per DPU (the runners keep the rows they read alive), and
    # each prepared buffer's element with its address (one buffer often serves every DPU)
    pointers = np.zeros((len(todo), 8), np.uint8)
    pointers_at = pointers.ctypes.data
    elements: dict[int, tuple[Bytes, int]] = {}
    whole = True
    for k, d in enumerate(todo):
        rd, wr = ptrs[d.index]
        if is_full(rd, wr, mask):
            continue
        t += element_ps
        t_element = t
        t += pointer_ps
        runner = d.runner if d.running else None
        if runner is None:
            continue  # stopped: nothing reads its WRAM any more, the host writes it
        buf = buffers[d.index]
        element = elements.get(id(buf))
        if element is None:
            view = buf[:size]
            element = elements[id(buf)] = (view, view.ctypes.data)
        first = runner.write_at(t_element, data + (wr & mask) * size, *element)
        if first is None:
            # an engine whose DPUs only meet the host at events (Python kernels): written at
            # them, so the pass keeps every event
            whole = False
            continue
        pack_u64(pointers, 8 * k, (wr + 1) & MASK64)
        second = runner.write_at(t, s + WRITE_PTR, pointers[k], pointers_at + 8 * k)
        assert second is not None
        planned[d.index] = (first, second)
    return planned, t, whole and bool(planned)


async def _fast_push(
    link: FifoLink,
    rf: RankFifo,
    rank: Rank,
    dpus: list[Dpu],
    buffers: dict[int, Bytes],
    read: PtrRead,
) -> None:
    """First pass with room everywhere and aligned pointers: one rank-wide write + broadcast."""
    size, s = link.data_size, link.struct.offset
    idx, pairs, words = read
    wr0 = pairs[0][1]
    slot = link.data.offset + (wr0 & (link.capacity - 1)) * size
    await Delay(timing.parallel_wram_access_ps(size * len(buffers)))
    rows = rank.wram_memory.rows
    dpu_rows = _rows_of(idx)
    given = [buffers.get(i) for i in idx]
    first = given[0]
    missing: list[str] = []
    if first is not None and all(buf is first for buf in given):
        rows[dpu_rows, slot : slot + size] = first[:size]  # one buffer prepared for every DPU
    else:
        for d, buf in zip(dpus, given, strict=True):
            if buf is not None:
                d.wram[slot : slot + size] = buf[:size]
            else:
                missing.append(d.name)
    # the DPUs whose engine reacts to host writes (tasklets polling WRAM), in order
    notify = [d for d in dpus if d.runner is not None and d.runner.watches_wram]
    for d in notify:
        if buffers.get(d.index) is not None:
            d.wram_written(slot, size)
    await Delay(timing.parallel_wram_access_ps(8 * len(dpus)))
    if missing:
        warnings.warn(
            f"input FIFO {link.name!r}: DPU(s) {format_dpu_list(missing)} had no prepared buffer "
            "but the SDK's rank-wide push still advances their write pointer (garbage element)",
            DpuQuirkWarning,
            stacklevel=1,
        )
    if (words[:, 1] != wr0).any():
        skewed = [(d, wr) for d, (_, wr) in zip(dpus, pairs, strict=True) if wr != wr0]
        d, wr = skewed[0]
        warnings.warn(
            f"input FIFO {link.name!r}: the SDK's rank-wide push would broadcast DPU "
            f"{dpus[0].name}'s write pointer + 1 ({wr0 + 1}) to DPU(s) "
            f"{format_dpu_list([d for d, _ in skewed])}, moving DPU {d.name}'s from "
            f"{wr} to {wr0 + 1} (more elements than slots, or a pointer moved back); aiopim "
            "advances each DPU's own write pointer by one",
            DpuQuirkWarning,
            stacklevel=1,
        )
    # QUIRK fixed: each DPU's own wr + 1, not the first DPU's (same cost)
    advanced = (words[:, 1] + np.uint64(1)).astype("<u8")
    rows[dpu_rows, s + WRITE_PTR : s + WRITE_PTR + 8] = advanced.view(np.uint8).reshape(-1, 8)
    for d in notify:
        d.wram_written(s + WRITE_PTR, 8)
    _hold(rf.ptrs, idx, [(rd, wr) for (rd, _), wr in zip(pairs, advanced.tolist(), strict=True)])


async def _flush_output(
    link: FifoLink,
    rf: RankFifo,
    rank: Rank,
    dpus: list[Dpu],
    buffers: dict[int, Bytes],
    on_flushed: FlushedHook | None = None,
) -> tuple[DpuErrorCode, str]:
    """``dpu_copy_from_wram_fifo``: copy every ring, then ``read_ptr := write_ptr``."""
    s, ring = link.struct.offset, link.ring_bytes
    rec = rank.machine.recorder
    t0 = rank.kernel.now
    idx, pairs, _ = await _read_ptrs(link, rf, rank, dpus, rec)  # in the order of ``dpus``
    fills = {i: (wr - rd) & MASK64 for i, (rd, wr) in zip(idx, pairs, strict=True)}
    drained = any(fills.values())
    if drained:
        await Delay(timing.parallel_wram_access_ps(ring * len(buffers)))
        data = link.data.offset
        for d in dpus:
            buf = buffers.get(d.index)
            if buf is not None:
                buf[:ring] = d.wram[data : data + ring]
        await Delay(timing.parallel_wram_access_ps(8 * len(dpus)))
        lost = [d.name for d in dpus if d.index not in buffers and fills[d.index]]
        if lost:
            warnings.warn(
                f"output FIFO {link.name!r}: DPU(s) {format_dpu_list(lost)} had no prepared "
                "buffer; the SDK's flush empties their FIFO anyway and their elements are lost",
                DpuQuirkWarning,
                stacklevel=1,
            )
        for d, (_, wr) in zip(dpus, pairs, strict=True):
            write_u64(d, s + READ_PTR, wr)
    if rec is not None:
        if drained:
            emptied = [(wr, wr) for _, wr in pairs]
            _record_ptrs(rec, rank, link, idx, emptied, read=False)
        rec.add(
            "fifo_flush",
            rank=rank.index,
            fifo=link.name,
            start=t0,
            dpus=len(buffers),
            elements=sum(fills.values()),
        )
    rf.flushes += 1
    if on_flushed is not None:
        on_flushed(rank, rf)
    return E.DPU_OK, ""
