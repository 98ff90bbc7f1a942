"""The ``vud.h`` host library over aiopim's emulator: ranks, IME control, transfers, symbols.

Errors are sticky, as Memclave documents them: a failing call stores a :class:`VudError` in
``VudRank.err`` (and a human-readable reason in ``VudRank.detail``) and every later call on that
rank does nothing until the caller resets ``err``. Python misuse (wrong types or shapes) raises
``TypeError`` / ``ValueError`` naming the parameter, before anything happens.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import timing
from ._coreapi import (
    MRAM_BIT,
    OWNER,
    DpuError,
    DpuProgram,
    DpuSetBase,
    Emulator,
    Job,
    JobType,
    MemorySpace,
    Rank,
    current_emulator,
    space_offset,
    submit_jobs,
)
from ._crypto import (
    CONFIRMATION,
    KEY_BYTES,
    NONCE_BYTES,
    DhKeyPair,
    aead_open,
    aead_seal,
    session_key,
)
from ._enclave import (
    DEBUG_OUT,
    IME_LOAD_BUFFER,
    LOAD_BUFFER_BYTES,
    MSG_BUFFER,
    MSG_FLAG_USER_KEY,
    SK_MSG,
    SK_XCHG_1,
    SK_XCHG_2,
    SK_XCHG_3,
    XCHG_CONFIRM,
    XCHG_COUNTER,
    XCHG_HOST_PK,
    XCHG_WRAPPED_KEY,
    Msg,
    RankEnclave,
    encode_msg,
    machine_of,
    read_msg,
    write_mram,
)
from ._errors import VudError
from ._sk import read_sk, resolve_program, seal, sk_from_program

VUD_ALLOC_ANY = -1
#: DPUs of a Memclave rank (always a whole rank)
NR_DPUS = 64
#: MRAM bytes per DPU reachable by the transfers
MRAM_BYTES = 64 << 20
#: threads ``vud_rank_nr_workers`` can create before ``VUD_SYSTEM_THREAD`` (aiopim's limit)
MAX_WORKERS = 256

U64 = npt.NDArray[np.uint64]


class VudImeSk(IntEnum):
    """The default subkernels of ``vud_ime_launch_default``."""

    VUD_IME_SK_MSG = 0
    VUD_IME_SK_XCHG_1 = 1
    VUD_IME_SK_XCHG_2 = 2
    VUD_IME_SK_XCHG_3 = 3


VUD_IME_SK_MSG = VudImeSk.VUD_IME_SK_MSG
VUD_IME_SK_XCHG_1 = VudImeSk.VUD_IME_SK_XCHG_1
VUD_IME_SK_XCHG_2 = VudImeSk.VUD_IME_SK_XCHG_2
VUD_IME_SK_XCHG_3 = VudImeSk.VUD_IME_SK_XCHG_3
_DEFAULT_SK = {
    VudImeSk.VUD_IME_SK_MSG: SK_MSG,
    VudImeSk.VUD_IME_SK_XCHG_1: SK_XCHG_1,
    VudImeSk.VUD_IME_SK_XCHG_2: SK_XCHG_2,
    VudImeSk.VUD_IME_SK_XCHG_3: SK_XCHG_3,
}

SubkernelSource = str | os.PathLike[str] | DpuProgram


@dataclass(eq=False)
class VudRank:
    """``struct vud_rank``: one rank of 64 DPUs held by the Memclave library.

    ``fd`` is the rank number (``/dev/vpim<fd>``), -1 when not allocated; ``base`` is kept for
    the C layout; ``detail`` (aiopim's addition) says why ``err`` was set.
    """

    err: VudError = VudError.VUD_OK
    key: bytes = bytes(KEY_BYTES)
    next_sk: SubkernelSource | None = None
    nr_workers: int = 1
    fd: int = -1
    base: int = 0
    detail: str = ""
    _emu: Emulator | None = field(default=None, repr=False)

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "err" and value == VudError.VUD_OK:
            # the program handled the error: its reason goes with it
            super().__setattr__("detail", "")

    @property
    def rank_nr(self) -> int:
        """The rank number (``fd``)."""
        return self.fd


# --- helpers --------------------------------------------------------------------------------------
def _set_err(r: VudRank, err: VudError, detail: str) -> None:
    if r.err == VudError.VUD_OK:
        r.err = err
        r.detail = detail


def _context(r: VudRank) -> tuple[Emulator, Rank, RankEnclave] | None:
    """The rank's emulator, rank and enclave; None (and ``err`` set) when a call must not run."""
    if r.err != VudError.VUD_OK:
        return None
    emu = r._emu
    if emu is None or r.fd < 0:
        _set_err(r, VudError.VUD_SYSTEM_ERR, "the rank is not allocated (freed or never opened)")
        return None
    rank = emu.rank(r.fd)
    if rank.control_owner != OWNER:
        _set_err(r, VudError.VUD_SYSTEM_ERR, f"rank {r.fd} is no longer held by Memclave")
        return None
    return emu, rank, machine_of(emu).rank_enclave(rank)


def _check_size(sz: object) -> int:
    if not isinstance(sz, int | np.integer) or isinstance(sz, bool):
        raise TypeError(f"sz must be an int (8-byte words), not {type(sz).__name__}")
    if not 0 <= int(sz) < 1 << 32:
        raise ValueError(f"sz must fit vud_mram_size (uint32), got {sz}")
    return int(sz)


def _check_addr(addr: object, what: str) -> int:
    if not isinstance(addr, int | np.integer) or isinstance(addr, bool):
        raise TypeError(f"{what} must be an int MRAM address, not {type(addr).__name__}")
    if not 0 <= int(addr) < 1 << 32:
        raise ValueError(f"{what} must fit vud_mram_addr (uint32), got {addr}")
    return int(addr)


def _words(buf: object, sz: int, what: str, *, writable: bool = False) -> U64:
    if not isinstance(buf, np.ndarray) or buf.dtype != np.uint64:
        raise TypeError(f"{what} must be a NumPy uint64 array, not {_describe(buf)}")
    if buf.shape != (sz,):
        raise ValueError(f"{what} must have shape ({sz},), got {buf.shape}")
    if writable and not buf.flags.writeable:
        raise ValueError(f"{what} must be writable")
    return buf


def _per_dpu(buf: object, sz: int, what: str, *, writable: bool = False) -> list[U64]:
    """``uint64_t *(*buf)[64]``: an array of shape (64, sz) or 64 arrays of shape (sz,)."""
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint64:
            raise TypeError(f"{what} must hold uint64, not {buf.dtype}")
        if buf.shape != (NR_DPUS, sz):
            raise ValueError(f"{what} must have shape ({NR_DPUS}, {sz}), got {buf.shape}")
        if writable and not buf.flags.writeable:
            raise ValueError(f"{what} must be writable")
        return list(buf)
    if isinstance(buf, Sequence) and not isinstance(buf, str | bytes):
        if len(buf) != NR_DPUS:
            raise ValueError(f"{what} must hold {NR_DPUS} buffers, got {len(buf)}")
        return [_words(b, sz, f"{what}[{i}]", writable=writable) for i, b in enumerate(buf)]
    raise TypeError(f"{what} must be a (64, sz) uint64 array or 64 arrays, not {_describe(buf)}")


def _describe(x: object) -> str:
    if isinstance(x, np.ndarray):
        return f"an array of {x.dtype}"
    return type(x).__name__


def _range_ok(r: VudRank, addr: int, sz: int) -> bool:
    if addr % 8:
        _set_err(r, VudError.VUD_MEMORY_ERR, f"MRAM address {addr:#x} is not 8-byte aligned")
        return False
    if addr + 8 * sz > MRAM_BYTES:
        _set_err(
            r, VudError.VUD_MEMORY_ERR, f"{8 * sz} bytes at {addr:#x} go past the 64 MiB of MRAM"
        )
        return False
    return True


def _host_facing(r: VudRank, enc: RankEnclave, what: str) -> bool:
    if enc.all_host_facing:
        return True
    _set_err(
        r,
        VudError.VUD_EXPECTED_FAULT,
        f"{what}: {64 - enc.nr_host_facing} DPU(s) still own the MUX (call vud_ime_wait)",
    )
    return False


class VudJob(Job):
    """One Memclave operation on the rank actor: ``effect`` applied after ``duration`` ps."""

    __slots__ = ("duration", "effect")

    def __init__(
        self,
        rank: Rank,
        job_type: JobType,
        info: dict[str, Any],
        duration: int,
        effect: Callable[[], None],
    ) -> None:
        super().__init__(rank, job_type, info=info)
        self.duration = duration
        self.effect = effect

    def start(self) -> int:
        return self.duration

    def complete(self) -> None:
        self.effect()


async def _job(
    r: VudRank,
    rank: Rank,
    jt: JobType,
    op: str,
    duration: int,
    apply: Callable[[], None],
    nbytes: int = 0,
) -> None:
    """Run one job on the rank actor (queued, timed and recorded like an SDK job).

    The call returns when the job ends (a SYNC_PARALLEL follows it): a job that resumes the
    DPUs does not wait for them, as Memclave's calls do not.
    """
    assert r._emu is not None
    emu = r._emu

    def make(rk: Rank) -> Job:
        return VudJob(rk, jt, {"vud": op, "bytes": nbytes, "dpus": NR_DPUS}, duration, apply)

    for attempt in range(2):
        rank.job_error = 0  # Memclave has no use for the SDK's asynchronous job errors
        try:
            await submit_jobs(
                DpuSetBase(emu, [rank]), make, wait=True, parallel=True, what=op, owner=OWNER
            )
            return
        except DpuError as exc:  # the job was flushed by a DPU fault report: it never ran
            if attempt:
                _set_err(r, VudError.VUD_SYSTEM_ERR, f"{op}: {exc}")


def _transfer_ps(r: VudRank, kind: str, nbytes: int) -> int:
    return timing.memclave_transfer_ps(kind, nbytes, r.nr_workers)


# --- ranks ----------------------------------------------------------------------------------------
async def vud_rank_alloc(rank_nr: int) -> VudRank:
    """Open rank ``rank_nr`` (or the first free one for ``VUD_ALLOC_ANY``); ``err`` on failure."""
    if not isinstance(rank_nr, int) or isinstance(rank_nr, bool):
        raise TypeError(f"rank_nr must be an int, not {type(rank_nr).__name__}")
    emu = current_emulator()
    r = VudRank(_emu=emu)
    cfg = emu.config
    if cfg.nr_dpus_per_rank != NR_DPUS:
        _set_err(
            r,
            VudError.VUD_NOT_FOUND,
            f"Memclave ranks have 64 DPUs; this machine has {cfg.nr_dpus_per_rank} per rank",
        )
        return r
    if rank_nr == VUD_ALLOC_ANY:
        free = [i for i in range(cfg.nr_ranks) if not emu.machine.is_allocated(i)]
        if not free:
            _set_err(r, VudError.VUD_NOT_FOUND, "every rank is in use")
            return r
        index = free[0]
    elif not 0 <= rank_nr < cfg.nr_ranks:
        _set_err(r, VudError.VUD_SYSTEM_ERR, f"no device /dev/vpim{rank_nr}")
        return r
    else:
        index = rank_nr
        if emu.machine.is_allocated(index):
            owner = emu.rank(index).control_owner or "the SDK"
            _set_err(r, VudError.VUD_RANK_BUSY, f"rank {index} is held by {owner}")
            return r
    rank = emu.rank(index)
    rank.allocated = True
    rank.job_error = 0
    rank.nr_job_slots = rank.free_slots = 16
    rank.xfer_matrix.clear()
    rank.callback_matrix.clear()
    for d in rank.dpus:
        d.enabled = True
        d.reset_memories()
        d.program = None
    enc = machine_of(emu).rank_enclave(rank)
    enc.attach()
    r.fd = index
    await _job(
        r,
        rank,
        JobType.LAUNCH_RANK,
        "vud_rank_alloc",
        timing.LAUNCH_BOOT_LATENCY_PS,
        enc.boot_firmware,
    )
    return r


async def vud_rank_free(r: VudRank) -> None:
    """Release the rank (waits for its DPUs to stop); ``r`` can no longer be used."""
    emu = r._emu
    if emu is None or r.fd < 0:
        return
    rank = emu.rank(r.fd)
    r.fd = -1
    if rank.control_owner != OWNER:
        return
    while rank.running_dpus or rank.current is not None:
        w = emu.kernel.new_waiter(f"rank {rank.index} to stop before vud_rank_free")
        rank.stop_waiters.append(w)
        t0 = emu.kernel.now
        await emu.bridge.wait(w)
        if emu.recorder is not None:
            emu.recorder.host_wait("vud_rank_free", t0, (rank,))
    machine_of(emu).rank_enclave(rank).detach()
    rank.allocated = False
    rank.job_error = 0


def vud_rank_nr_workers(r: VudRank, n: int) -> None:
    """Use ``n`` transfer threads (the caller counts as worker 0)."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"n must be an int, not {type(n).__name__}")
    if _context(r) is None:
        return
    if not 1 <= n <= MAX_WORKERS:
        _set_err(r, VudError.VUD_SYSTEM_THREAD, f"cannot run a pool of {n} worker threads")
        return
    r.nr_workers = n


async def vud_rank_qry_mux(r: VudRank) -> int:
    """Number of DPUs that gave the MUX to the host (asked through the virtual CI)."""
    ctx = _context(r)
    if ctx is None:
        return 0
    emu, rank, enc = ctx
    t0 = emu.kernel.now
    await emu.delay(timing.MEMCLAVE_VCI_ROUND_TRIP_PS, "vud_rank_qry_mux")
    if emu.recorder is not None:
        emu.recorder.host_wait("vud_rank_qry_mux", t0, (rank,))
    return enc.nr_host_facing


async def vud_rank_rel_mux(r: VudRank) -> None:
    """Give the MUX back to the DPUs: each resumes and handles its message."""
    ctx = _context(r)
    if ctx is None:
        return
    _, rank, enc = ctx
    await _job(
        r,
        rank,
        JobType.LAUNCH_RANK,
        "vud_rank_rel_mux",
        timing.MEMCLAVE_VCI_ROUND_TRIP_PS,
        enc.release_mux,
    )


async def vud_ime_wait(r: VudRank) -> None:
    """Wait until all 64 DPUs faulted (gave the MUX to the host).

    aiopim also reports a subkernel the trusted loader refused (or that faulted) here, as
    ``VUD_NOT_WAITING`` with the loader's reason in ``detail``.
    """
    ctx = _context(r)
    if ctx is None:
        return
    emu, rank, enc = ctx
    t0 = emu.kernel.now
    if not enc.all_host_facing:
        w = emu.kernel.new_waiter(f"vud_ime_wait: every DPU of rank {rank.index} to fault")
        enc.add_waiter(w)
        await emu.bridge.wait(w)
    await emu.delay(timing.MEMCLAVE_VCI_ROUND_TRIP_PS, "vud_ime_wait")
    if emu.recorder is not None:
        emu.recorder.host_wait("vud_ime_wait", t0, (rank,))
    for st in enc.dpus:
        if st.reject is not None:
            _set_err(r, VudError.VUD_NOT_WAITING, f"DPU {st.index}: {st.reject}")
            return


# --- raw transfers --------------------------------------------------------------------------------
async def _broadcast(r: VudRank, sz: int, data: bytes, tgt: int, op: str) -> None:
    ctx = _context(r)
    if ctx is None or not _range_ok(r, tgt, sz) or not _host_facing(r, ctx[2], op) or sz == 0:
        return
    _, rank, _ = ctx
    total = len(data) * NR_DPUS

    def apply() -> None:
        for d in rank.dpus:
            write_mram(d, tgt, data)

    await _job(
        r, rank, JobType.COPY_MRAM_TO_RANK, op, _transfer_ps(r, "broadcast", total), apply, total
    )


async def _scatter(r: VudRank, sz: int, parts: list[bytes], tgt: int, op: str) -> None:
    ctx = _context(r)
    if ctx is None or not _range_ok(r, tgt, sz) or not _host_facing(r, ctx[2], op) or sz == 0:
        return
    _, rank, _ = ctx
    total = 8 * sz * NR_DPUS

    def apply() -> None:
        for d, part in zip(rank.dpus, parts, strict=True):
            write_mram(d, tgt, part)

    await _job(
        r, rank, JobType.COPY_MRAM_TO_MATRIX, op, _transfer_ps(r, "transfer", total), apply, total
    )


async def _gather(r: VudRank, sz: int, src: int, out: list[U64], op: str) -> bool:
    ctx = _context(r)
    if ctx is None or not _range_ok(r, src, sz) or not _host_facing(r, ctx[2], op):
        return False
    if sz == 0 or not out:
        return True
    _, rank, _ = ctx
    total = 8 * sz * len(out)

    def apply() -> None:
        for d, dst in zip(rank.dpus, out, strict=False):
            dst[:] = d.mram.read(src, 8 * sz).view(np.uint64)

    await _job(
        r, rank, JobType.COPY_MRAM_FROM_MATRIX, op, _transfer_ps(r, "gather", total), apply, total
    )
    return r.err == VudError.VUD_OK


async def vud_broadcast_transfer(r: VudRank, sz: int, src: U64, tgt: int) -> None:
    """Write ``src[sz]`` at MRAM address ``tgt`` of every DPU."""
    sz = _check_size(sz)
    data = _words(src, sz, "src").tobytes()
    await _broadcast(r, sz, data, _check_addr(tgt, "tgt"), "vud_broadcast_transfer")


async def vud_simple_transfer(r: VudRank, sz: int, src: Any, tgt: int) -> None:
    """Write ``src[i][sz]`` at MRAM address ``tgt`` of DPU ``i``, for the 64 DPUs."""
    sz = _check_size(sz)
    parts = [p.tobytes() for p in _per_dpu(src, sz, "src")]
    await _scatter(r, sz, parts, _check_addr(tgt, "tgt"), "vud_simple_transfer")


async def vud_simple_gather(r: VudRank, sz: int, src: int, tgt: Any) -> None:
    """Read ``sz`` words at MRAM address ``src`` of DPU ``i`` into ``tgt[i]``."""
    sz = _check_size(sz)
    out = _per_dpu(tgt, sz, "tgt", writable=True)
    await _gather(r, sz, _check_addr(src, "src"), out, "vud_simple_gather")


# --- symbols --------------------------------------------------------------------------------------
def vud_get_symbol(elf: SubkernelSource, sym: str) -> tuple[VudError, int]:
    """``(VUD_OK, MRAM offset)`` of MRAM symbol ``sym`` in subkernel ``elf``, or an error."""
    if not isinstance(sym, str):
        raise TypeError(f"sym must be a str, not {type(sym).__name__}")
    try:
        program = resolve_program(elf)
    except DpuError:
        return VudError.VUD_SK_NOT_FOUND, 0
    symbol = program.symbols().get(sym)
    if symbol is None:
        return VudError.VUD_SYMBOL_NOT_FOUND, 0
    if symbol.space is not MemorySpace.MRAM or space_offset(symbol.address) >= MRAM_BYTES:
        return VudError.VUD_SYMBOL_NOT_MRAM, symbol.address
    return VudError.VUD_OK, symbol.address & ~MRAM_BIT


def _symbol(r: VudRank, sym: str) -> int | None:
    if not isinstance(sym, str):
        raise TypeError(f"symbol must be a str, not {type(sym).__name__}")
    if _context(r) is None:
        return None
    if r.next_sk is None:
        _set_err(r, VudError.VUD_SK_NOT_FOUND, "no subkernel loaded (vud_ime_load) to look in")
        return None
    err, addr = vud_get_symbol(r.next_sk, sym)
    if err != VudError.VUD_OK:
        _set_err(r, err, f"symbol {sym!r} of the loaded subkernel: {err.name}")
        return None
    return addr


async def vud_broadcast_to(r: VudRank, sz: int, src: U64, symbol: str) -> None:
    """Broadcast ``src[sz]`` to MRAM variable ``symbol`` of the loaded subkernel."""
    sz = _check_size(sz)
    data = _words(src, sz, "src").tobytes()
    addr = _symbol(r, symbol)
    if addr is not None:
        await _broadcast(r, sz, data, addr, "vud_broadcast_to")


async def vud_transfer_to(r: VudRank, sz: int, src: Any, symbol: str) -> None:
    """Write ``src[i][sz]`` to MRAM variable ``symbol`` of DPU ``i``."""
    sz = _check_size(sz)
    parts = [p.tobytes() for p in _per_dpu(src, sz, "src")]
    addr = _symbol(r, symbol)
    if addr is not None:
        await _scatter(r, sz, parts, addr, "vud_transfer_to")


async def vud_gather_from(r: VudRank, sz: int, symbol: str, tgt: Any) -> None:
    """Read ``sz`` words of MRAM variable ``symbol`` of DPU ``i`` into ``tgt[i]``."""
    sz = _check_size(sz)
    out = _per_dpu(tgt, sz, "tgt", writable=True)
    addr = _symbol(r, symbol)
    if addr is not None:
        await _gather(r, sz, addr, out, "vud_gather_from")


async def vud_log_read(r: VudRank, nb_dpus: int, logs: U64) -> None:
    """Read the top 64 bytes of MRAM (``__ime_debug_out``) of the first ``nb_dpus`` DPUs."""
    if not isinstance(nb_dpus, int) or isinstance(nb_dpus, bool):
        raise TypeError(f"nb_dpus must be an int, not {type(nb_dpus).__name__}")
    if not 0 <= nb_dpus <= NR_DPUS:
        raise ValueError(f"nb_dpus must be between 0 and 64, got {nb_dpus}")
    if not isinstance(logs, np.ndarray) or logs.dtype != np.uint64:
        raise TypeError(f"logs must be a NumPy uint64 array, not {_describe(logs)}")
    if logs.shape != (nb_dpus, 8) or not logs.flags.writeable:
        raise ValueError(f"logs must be a writable array of shape ({nb_dpus}, 8)")
    await _gather(r, 8, DEBUG_OUT, list(logs), "vud_log_read")


# --- subkernels and the IME -----------------------------------------------------------------------
def _launchable(r: VudRank, enc: RankEnclave, what: str) -> bool:
    if not _host_facing(r, enc, what):
        return False
    for d in enc.rank.dpus:
        kind, _, _ = read_msg(d)
        if kind != Msg.WAITING:
            name = Msg(kind).name if kind in Msg._value2member_map_ else str(kind)
            _set_err(
                r,
                VudError.VUD_NOT_WAITING,
                f"{what}: DPU {d.index}'s message buffer holds {name}, not WAITING",
            )
            return False
    return True


def _check_source(path: object) -> None:
    if not isinstance(path, str | os.PathLike | DpuProgram):
        raise TypeError(f"path must be a path to a DPU ELF or a DpuProgram, not {_describe(path)}")


async def _load(r: VudRank, path: SubkernelSource, auth_only: bool, op: str) -> None:
    _check_source(path)
    ctx = _context(r)
    if ctx is None or not _launchable(r, ctx[2], op):
        return
    emu = ctx[0]
    err, sk, reason = read_sk(path, auth_only)
    if err != VudError.VUD_OK:
        _set_err(r, err, f"{op}: {reason}")
        return
    buf = bytearray(sk)
    err = seal(buf, r.key, machine_of(emu).random_iv(dpu_chosen=False))
    if err == VudError.VUD_OK and len(buf) > LOAD_BUFFER_BYTES:
        err = VudError.VUD_SK_TAG
    if err != VudError.VUD_OK:
        _set_err(r, err, f"{op}: the sealed subkernel ({len(buf)} B) does not fit the load buffer")
        return
    await _broadcast(r, len(buf) // 8, bytes(buf), IME_LOAD_BUFFER, op)
    if r.err == VudError.VUD_OK:
        r.next_sk = path


async def vud_ime_load(r: VudRank, path: SubkernelSource) -> None:
    """Seal subkernel ``path`` (text and data encrypted) with ``r.key``; stage it for launch."""
    await _load(r, path, False, "vud_ime_load")


async def vud_ime_load_auth_only(r: VudRank, path: SubkernelSource) -> None:
    """Like :func:`vud_ime_load`, but authenticated only (nothing encrypted)."""
    await _load(r, path, True, "vud_ime_load_auth_only")


async def _send(r: VudRank, msg: bytes, op: str) -> None:
    ctx = _context(r)
    if ctx is None:
        return
    await _broadcast(r, 1, msg, MSG_BUFFER, op)
    await vud_rank_rel_mux(r)


async def vud_ime_launch(r: VudRank) -> None:
    """Ask every DPU's trusted loader to load and run the staged subkernel."""
    ctx = _context(r)
    if ctx is None:
        return
    if r.next_sk is None:
        _set_err(r, VudError.VUD_SK_NOT_FOUND, "vud_ime_launch: no subkernel loaded")
        return
    if not _host_facing(r, ctx[2], "vud_ime_launch"):
        return
    await _send(r, encode_msg(Msg.LOAD_SK, MSG_FLAG_USER_KEY, IME_LOAD_BUFFER), "vud_ime_launch")


async def vud_ime_launch_default(r: VudRank, sk: VudImeSk | int) -> None:
    """Run one of Memclave's own subkernels (MSG, XCHG_1..3)."""
    if sk not in _DEFAULT_SK:
        raise ValueError(f"sk must be one of {[s.name for s in VudImeSk]}, got {sk!r}")
    ctx = _context(r)
    if ctx is None or not _launchable(r, ctx[2], "vud_ime_launch_default"):
        return
    slot = _DEFAULT_SK[VudImeSk(sk)]
    await _send(r, encode_msg(Msg.LOAD_SK, 0, slot), "vud_ime_launch_default")


def _key_bytes(key: object) -> bytes:
    if isinstance(key, np.ndarray):
        key = key.tobytes()
    if not isinstance(key, bytes | bytearray | memoryview):
        raise TypeError(f"key must be 32 bytes, not {_describe(key)}")
    data = bytes(key)
    if len(data) != KEY_BYTES:
        raise ValueError(f"key must be 32 bytes long, got {len(data)}")
    return data


async def vud_ime_install_key(
    r: VudRank, key: bytes, common_pk: U64 | None = None, pk: U64 | None = None
) -> None:
    """Key exchange with every DPU, then install ``key`` as the rank's user key.

    ``common_pk`` (32 words) or ``pk`` (64 x 32 words) pin the DPUs' public keys:
    ``VUD_KEY_XCHG`` if a DPU shows another one.
    """
    user_key = _key_bytes(key)
    pins: list[bytes] | None = None
    if common_pk is not None:
        pins = [_words(common_pk, 32, "common_pk").tobytes()] * NR_DPUS
    if pk is not None:
        pins = [p.tobytes() for p in _per_dpu(pk, 32, "pk")]
    ctx = _context(r)
    if ctx is None:
        return
    emu = ctx[0]
    await vud_ime_launch_default(r, VUD_IME_SK_XCHG_1)
    await vud_ime_wait(r)
    published = np.zeros((NR_DPUS, 34), dtype=np.uint64)
    if not await _gather(r, 34, XCHG_COUNTER, list(published), "vud_ime_install_key"):
        return
    client = DhKeyPair(machine_of(emu).rng.getrandbits(256))
    wrapped = np.zeros((NR_DPUS, 6), dtype=np.uint64)
    for i, row in enumerate(published):
        counter, dpu_pk = row[:2].tobytes(), row[2:].tobytes()
        if pins is not None and pins[i] != dpu_pk:
            _set_err(r, VudError.VUD_KEY_XCHG, f"DPU {i}'s public key is not the pinned one")
            return
        secret = client.shared_secret(dpu_pk)
        if secret is None:
            _set_err(r, VudError.VUD_KEY_XCHG, f"DPU {i} published an invalid public key")
            return
        sealed = aead_seal(session_key(secret, counter), bytes(NONCE_BYTES), user_key)
        wrapped[i] = np.frombuffer(sealed, dtype=np.uint64)
    await _scatter(r, 6, [w.tobytes() for w in wrapped], XCHG_WRAPPED_KEY, "vud_ime_install_key")
    await _broadcast(r, 32, client.public, XCHG_HOST_PK, "vud_ime_install_key")
    await vud_rank_rel_mux(r)
    await vud_ime_wait(r)
    confirm = np.zeros((NR_DPUS, 8), dtype=np.uint64)
    if not await _gather(r, 8, XCHG_CONFIRM, list(confirm), "vud_ime_install_key"):
        return
    for i, row in enumerate(confirm):
        raw = row.tobytes()
        if aead_open(user_key, raw[48:60], raw[:48]) != CONFIRMATION:
            _set_err(r, VudError.VUD_KEY_XCHG, f"DPU {i} did not confirm the new key")
            return
    r.key = user_key


# --- .sk files (vud_sk.h) -------------------------------------------------------------------------
def vud_sk_from_elf(path: SubkernelSource, auth_only: bool = False) -> tuple[VudError, bytes]:
    """``(VUD_OK, .sk bytes)`` (header filled, not yet sealed) or ``(VUD_SK_NOT_FOUND, b"")``."""
    _check_source(path)
    return sk_from_program(path, auth_only)


def vud_enc_auth_sk(sk: bytearray, key: bytes, iv: bytes | None = None) -> VudError:
    """Seal ``sk`` in place with ChaCha20-Poly1305 under ``key`` (``VUD_SK_TAG`` on failure).

    ``iv`` defaults to a fresh host nonce (bit 0 of byte 0 clear): from the emulator's seeded
    generator inside an emulated program, from the OS otherwise.
    """
    if not isinstance(sk, bytearray):
        raise TypeError(f"sk must be a bytearray (sealed in place), not {_describe(sk)}")
    k = _key_bytes(key)
    if iv is None:
        try:
            iv = machine_of(current_emulator()).random_iv(dpu_chosen=False)
        except RuntimeError:
            raw = bytearray(os.urandom(NONCE_BYTES))
            raw[0] &= 0xFE
            iv = bytes(raw)
    if len(iv) != NONCE_BYTES:
        raise ValueError(f"iv must be {NONCE_BYTES} bytes long, got {len(iv)}")
    return seal(sk, k, bytes(iv))


# --- emulator-side helpers (not part of vud.h) ----------------------------------------------------
def enclave_public_keys(rank_nr: int, emulator: Emulator | None = None) -> U64:
    """The public keys rank ``rank_nr``'s DPUs publish, as ``pk[64][32]`` for pinning."""
    emu = emulator or current_emulator()
    machine = machine_of(emu)
    out = np.zeros((NR_DPUS, 32), dtype=np.uint64)
    for i in range(NR_DPUS):
        out[i] = np.frombuffer(machine.static_keypair(rank_nr, i).public, dtype=np.uint64)
    return out
