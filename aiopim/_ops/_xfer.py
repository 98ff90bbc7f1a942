"""Host <-> DPU transfers: ``dpu_prepare_xfer``, ``dpu_push_xfer``, ``dpu_broadcast_to``,
``dpu_copy_to`` and ``dpu_copy_from``, with the checks the SDK makes at the call and in the
worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import timing
from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._dpu import Dpu
from .._machine._jobs import Job, JobFailed
from .._machine._memory import Bytes, MramImage, as_bytes
from .._machine._program import MemorySpace, Symbol, space_offset
from .._machine._rank import Rank
from ._flags import XferMode
from ._load import common_program, get_symbol
from ._oplog import logged
from ._set import DpuSetBase
from ._submit import prepared_buffers, submit
from ._validate import check_int, check_set

E = DpuErrorCode


@dataclass(frozen=True)
class _Target:
    space: MemorySpace
    offset: int  # byte offset inside the memory
    length: int


def _resolve_symbol(dset: DpuSetBase, symbol: str | Symbol) -> Symbol:
    if isinstance(symbol, Symbol):
        return symbol
    if not isinstance(symbol, str):
        raise TypeError(f"symbol_name must be a name or a Symbol, not {type(symbol).__name__}")
    return get_symbol(common_program(dset), symbol)


def check_symbol_access(
    dset: DpuSetBase, symbol: str | Symbol, offset: int, length: int, parallel: bool
) -> _Target:
    """The checks ``CHECK_SYMBOL`` makes in the calling thread (sdk-reference.md §1.5)."""
    offset = check_int(offset, "offset", E.DPU_ERR_INVALID_SYMBOL_ACCESS)
    length = check_int(length, "length", E.DPU_ERR_INVALID_SYMBOL_ACCESS)
    sym = _resolve_symbol(dset, symbol)
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
    """The checks the worker makes (sdk-reference.md §1.5); False means 'nothing to copy'."""
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


def _read_dpu(dpu: Dpu, t: _Target, out: Bytes) -> None:
    if t.space is MemorySpace.WRAM:
        out[:] = dpu.wram[t.offset : t.offset + t.length]
    elif t.space is MemorySpace.MRAM:
        dpu.mram.read_into(t.offset, out)
    else:
        out[:] = dpu.iram[t.offset : t.offset + t.length]


class SharedBytes:
    """The bytes of one broadcast to MRAM, held once for every DPU of every rank it reaches.

    Each rank's job reads the host buffer when it runs; the image is rebuilt only if the buffer
    changed since the last job made it."""

    __slots__ = ("_image", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self._image: MramImage | None = None

    def image(self, data: Bytes) -> MramImage:
        """The image of ``data`` as it is now."""
        img = self._image
        if img is None or not img.holds(self.offset, data):
            img = self._image = MramImage(self.offset, data)
        return img


_U8 = np.dtype(np.uint8)


def host_view(buf: Any, length: int, *, writable: bool, who: str) -> Bytes:
    """Check a host buffer for a transfer of ``length`` bytes and view it as uint8."""
    if (
        not writable
        and type(buf) is np.ndarray
        and buf.dtype is _U8
        and buf.ndim == 1
        and buf.strides[0] == 1
        and buf.shape[0] >= length
    ):
        return buf  # a flat byte array read from, the common case: nothing else to check
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


class CopyJob(Job):
    """A host <-> DPU copy: each entry's host view to/from the target of its DPU."""

    __slots__ = ("entries", "kind", "shared", "target", "to_dpu")

    def __init__(
        self,
        rank: Rank,
        job_type: JobType,
        target: _Target,
        entries: list[tuple[Dpu, Bytes]],
        *,
        to_dpu: bool,
        kind: str,
        flags: int | None = None,
        shared: SharedBytes | None = None,
    ) -> None:
        info: dict[str, Any] = {"bytes": target.length * len(entries), "dpus": len(entries)}
        if flags is not None:
            info["flags"] = flags
        super().__init__(rank, job_type, info=info)
        self.target = target
        self.entries = entries
        self.to_dpu = to_dpu
        #: the timing model's transfer kind ("to", "from", "broadcast", "parallel")
        self.kind = kind
        #: set for a broadcast to MRAM: the DPUs share one copy of the bytes
        self.shared = shared

    def start(self) -> int:
        t = self.target
        duration = timing.transfer_time_ps(self.kind, [t.length] * len(self.entries))
        self.entries = [(d, v) for d, v in self.entries if _check_in_job(d, t)]
        return duration

    def complete(self) -> None:
        t = self.target
        if self.shared is not None and self.entries:
            image = self.shared.image(self.entries[0][1][: t.length])
            for d, _ in self.entries:
                d.mram.write_image(image)
            return
        for d, v in self.entries:
            if self.to_dpu:
                _write_dpu(d, t, v)
            else:
                _read_dpu(d, t, v[: t.length])


def prepare_xfer(dset: DpuSetBase, buf: Any) -> None:
    """``dpu_prepare_xfer``: record ``buf`` for every DPU of the set (None clears)."""
    check_set(dset)
    for d in dset.dpu_list:
        m = prepared_buffers(d.rank)
        if buf is None:
            m.pop(d.index, None)
        else:
            m[d.index] = buf


@logged("push_xfer")
async def push_xfer(
    dset: DpuSetBase,
    to_dpu: bool,
    symbol: str | Symbol,
    offset: int,
    length: int,
    mode: XferMode,
) -> None:
    """``dpu_push_xfer`` with the prepared per-DPU buffers."""
    parallel = mode.parallel and not dset.is_single_dpu  # QUIRK reproduced
    target = check_symbol_access(dset, symbol, offset, length, mode.parallel)
    # the matrix is copied into the jobs at enqueue time (host buffers are read when they run)
    per_rank: dict[int, list[tuple[Dpu, Bytes]]] = {}
    for d in dset.dpu_list:
        buf = prepared_buffers(d.rank).get(d.index)
        if buf is None:
            continue
        view = host_view(buf, length, writable=not to_dpu, who=f"the buffer of DPU {d.name}")
        per_rank.setdefault(d.rank.index, []).append((d, view))
    if mode.reset:
        for d in dset.dpu_list:
            prepared_buffers(d.rank).pop(d.index, None)
    if to_dpu:
        jt = JobType.PARALLEL_COPY_WRAM_TO_MATRIX if parallel else _TO_TYPES[target.space]
    else:
        jt = JobType.PARALLEL_COPY_WRAM_FROM_MATRIX if parallel else _FROM_TYPES[target.space]
    kind = "parallel" if parallel else ("to" if to_dpu else "from")

    def make(rank: Rank) -> Job:
        entries = per_rank.get(rank.index, [])
        return CopyJob(rank, jt, target, entries, to_dpu=to_dpu, kind=kind, flags=mode.flags)

    what = "push_xfer to DPUs" if to_dpu else "push_xfer from DPUs"
    await submit(dset, make, wait=mode.wait, parallel=parallel, what=what)


@logged("broadcast_to")
async def broadcast_to(
    dset: DpuSetBase, symbol: str | Symbol, offset: int, data: Any, length: int, mode: XferMode
) -> None:
    """``dpu_broadcast_to``: ``parallel`` is ignored (QUIRK reproduced), ``wait`` honoured."""
    target = check_symbol_access(dset, symbol, offset, length, False)
    view = host_view(data, length, writable=False, who="the broadcast buffer")
    single = dset._dpu
    shared = SharedBytes(target.offset) if target.space is MemorySpace.MRAM else None

    def make(rank: Rank) -> Job:
        if single is not None:
            entries, jt, kind = [(single, view)], _TO_TYPES[target.space], "to"
            share = None
        else:
            entries = [(d, view) for d in rank.enabled_dpus]
            jt, kind, share = _RANK_TYPES[target.space], "broadcast", shared
        return CopyJob(
            rank, jt, target, entries, to_dpu=True, kind=kind, flags=mode.flags, shared=share
        )

    await submit(dset, make, wait=mode.wait, parallel=False, what="broadcast")


@logged("copy_from")
async def copy_from(
    dset: DpuSetBase, symbol: str | Symbol, offset: int, dst: Any, length: int
) -> None:
    """``dpu_copy_from``: single-DPU sets only, synchronous."""
    if not dset.is_single_dpu:
        raise DpuError(
            E.DPU_ERR_INVALID_DPU_SET,
            "dpu_copy_from needs a single-DPU set (iterate with dpu_foreach)",
        )
    target = check_symbol_access(dset, symbol, offset, length, False)
    view = host_view(dst, length, writable=True, who="the destination buffer")
    dpu = dset.dpu_list[0]

    def make(rank: Rank) -> Job:
        jt = _FROM_TYPES[target.space]
        return CopyJob(rank, jt, target, [(dpu, view)], to_dpu=False, kind="from")

    await submit(dset, make, wait=True, parallel=False, what="copy_from")
