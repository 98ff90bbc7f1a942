"""The DPU side of Memclave, emulated: the MSG subkernel, the trusted loader, the key exchange.

Each Memclave-owned rank has one :class:`DpuEnclave` per DPU. A DPU is either *host-facing*
(faulted, the MUX given to the host) or running: a firmware step (``memclave:MSG``,
``memclave:TL``, ``memclave:XCHG_1``, ``memclave:XCHG_2``) or a user subkernel. Firmware steps
are DPU programs that only take virtual time; their effect is applied when they stop, so they
appear in traces as DPU runs like any other program.
"""

from __future__ import annotations

import functools
import hashlib
import random
import struct
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from .. import timing
from ..dpu import Program
from ._coreapi import (
    OWNER,
    Delay,
    Dpu,
    DpuProgram,
    Emulator,
    JobType,
    Rank,
    TaskletRunner,
    hook_dpu_stop,
    patch_clocks_per_sec,
    unhook_dpu_stop,
)
from ._crypto import (
    CONFIRMATION,
    DH_BYTES,
    NONCE_BYTES,
    DhKeyPair,
    aead_open,
    aead_seal,
    session_key,
)
from ._sk import (
    SK_HEADER_BYTES,
    InstructionDecoder,
    isa_instruction,
    open_sealed,
    parse_header,
    scan_banned_instructions,
)

# --- MRAM map (offsets inside each DPU's 64 MiB) --------------------------------------------------
SK_MSG = 0x3F00000
SK_XCHG_1 = 0x3F20000
SK_XCHG_2 = 0x3F40000
SK_XCHG_3 = 0x3F60000
MSG_BUFFER = 0x3FC0000
IME_LOAD_BUFFER = 0x3FC0008
DEBUG_OUT = 0x3FFFFC0
LOAD_BUFFER_BYTES = DEBUG_OUT - IME_LOAD_BUFFER
#: key exchange: counter (16 B) and DPU public key at 0x0/0x10, host public key, wrapped key
XCHG_COUNTER = 0x0
XCHG_DPU_PK = 0x10
XCHG_HOST_PK = 0x110
XCHG_WRAPPED_KEY = 0x210
XCHG_CONFIRM = 0x0
COUNTER_BYTES = 16
WRAPPED_KEY_BYTES = 48
CONFIRM_BYTES = 64
#: bytes of ``.data.persist`` (``g_load_prop`` and the user's ``__ime_persist`` variables)
PERSIST_BYTES = 64


class Msg(IntEnum):
    """Message types of the MSG subkernel's buffer ``{u16 type, u16 flags, u32 ptr}``."""

    NOP = 0
    WAITING = 1
    PING = 2
    PONG = 3
    LOAD_SK = 4


MSG_FLAG_USER_KEY = 1
_MSG = struct.Struct("<HHI")


def persist_range(wram_size: int) -> tuple[int, int]:
    """WRAM ``[start, end)`` of ``.data.persist``: the 64 bytes below the top 64 of WRAM."""
    return wram_size - 2 * PERSIST_BYTES, wram_size - PERSIST_BYTES


def encode_msg(kind: int, flags: int = 0, ptr: int = 0) -> bytes:
    """The 8 bytes of a message."""
    return _MSG.pack(kind, flags, ptr)


def read_msg(dpu: Dpu) -> tuple[int, int, int]:
    """``(type, flags, ptr)`` of ``dpu``'s message buffer."""
    kind, flags, ptr = _MSG.unpack(dpu.mram.read(MSG_BUFFER, 8).tobytes())
    return int(kind), int(flags), int(ptr)


def write_mram(dpu: Dpu, offset: int, data: bytes) -> None:
    """Store ``data`` at MRAM ``offset`` of ``dpu``."""
    dpu.mram.write(offset, np.frombuffer(data, dtype=np.uint8))


class Firmware(DpuProgram):
    """A step of Memclave's own DPU code: it runs for ``duration_ps`` and stops."""

    def __init__(self, name: str, duration_ps: int) -> None:
        self.name = f"memclave:{name}"
        self.duration_ps = duration_ps

    @property
    def nr_tasklets(self) -> int:
        return 1

    def symbols(self) -> Mapping[str, Any]:
        return {}

    def images(self) -> list[Any]:
        return []

    def boot(self, dpu: Dpu) -> None:
        async def step() -> None:
            await Delay(self.duration_ps)

        dpu.runner_of(TaskletRunner).spawn(0, step())


FW_MSG = Firmware("MSG", timing.MEMCLAVE_MSG_PS)
FW_LOADER = Firmware("TL", timing.MEMCLAVE_AUTH_LOAD_PS)
FW_XCHG_1 = Firmware("XCHG_1", timing.MEMCLAVE_XCHG1_PS)
FW_XCHG_2 = Firmware("XCHG_2", timing.MEMCLAVE_KEY_EXCHANGE_PS)

#: what a DPU does when its current program stops: the next program to boot, or None
After = Callable[[Dpu], DpuProgram | None]


@dataclass
class DpuEnclave:
    """The secrets and protocol state of one emulated DPU."""

    rank: int
    index: int
    machine: MemclaveMachine
    counter: int = 0
    user_key: bytes | None = None
    host_facing: bool = False
    xchg_stage: int = 0
    reject: str | None = None
    after: After | None = None
    _keypair: DhKeyPair | None = field(default=None, repr=False)

    @property
    def keypair(self) -> DhKeyPair:
        """The static key pair baked into this DPU's XCHG subkernel."""
        if self._keypair is None:
            self._keypair = self.machine.static_keypair(self.rank, self.index)
        return self._keypair


class MemclaveMachine:
    """Memclave state of one emulator: per-DPU secrets (kept across allocations), options."""

    def __init__(self, emulator: Emulator) -> None:
        # no reference to the emulator: it is the weak key of this state in ``_MACHINES``
        self.rng = random.Random(f"aiopim.memclave:{emulator.seed}")
        self.shared_static_key = False
        #: the banned-instruction scan's decoder (the DPU instruction set; None: no scan)
        self.decoder: InstructionDecoder | None = isa_instruction
        self.ranks: dict[int, RankEnclave] = {}

    def static_keypair(self, rank: int, dpu: int) -> DhKeyPair:
        """A fixed key pair per DPU (or one for the machine with ``shared_static_key``)."""
        return _static_keypair((-1, -1) if self.shared_static_key else (rank, dpu))

    def rank_enclave(self, rank: Rank) -> RankEnclave:
        """The enclave of ``rank`` (created on first use; keys and counters persist)."""
        enc = self.ranks.get(rank.index)
        if enc is None or enc.rank is not rank:
            enc = self.ranks[rank.index] = RankEnclave(self, rank, enc)
        return enc

    def random_iv(self, *, dpu_chosen: bool) -> bytes:
        """A fresh nonce; bit 0 of byte 0 tells DPU-chosen (1) from host-chosen (0) nonces."""
        iv = bytearray(self.rng.randbytes(NONCE_BYTES))
        iv[0] = (iv[0] | 1) if dpu_chosen else (iv[0] & 0xFE)
        return bytes(iv)


@functools.cache
def _static_keypair(ident: tuple[int, int]) -> DhKeyPair:
    """The same for every emulator: a DPU's key pair is part of its (emulated) firmware."""
    seed = hashlib.sha256(b"aiopim memclave static key %d %d" % ident).digest()
    return DhKeyPair(int.from_bytes(seed, "big"))


_MACHINES: weakref.WeakKeyDictionary[Emulator, MemclaveMachine] = weakref.WeakKeyDictionary()


def machine_of(emulator: Emulator) -> MemclaveMachine:
    """The Memclave state of ``emulator``."""
    m = _MACHINES.get(emulator)
    if m is None:
        m = _MACHINES[emulator] = MemclaveMachine(emulator)
    return m


class RankEnclave:
    """The 64 emulated enclaves of one rank and the host-facing bookkeeping."""

    def __init__(self, machine: MemclaveMachine, rank: Rank, old: RankEnclave | None) -> None:
        self.machine = machine
        self.rank = rank
        self.dpus: list[DpuEnclave] = [
            old.dpus[i] if old is not None else DpuEnclave(rank.index, i, machine)
            for i in range(len(rank.dpus))
        ]
        self._waiters: list[Any] = []

    # -- ownership ---------------------------------------
    def attach(self) -> None:
        """Take the rank's control plane; restart the firmware (user keys are forgotten)."""
        rank = self.rank
        rank.control_owner = OWNER
        hook_dpu_stop(rank, self._stopped)
        for st in self.dpus:
            st.user_key = None
            st.host_facing = False
            st.xchg_stage = 0
            st.reject = None
            st.after = None

    def detach(self) -> None:
        """Give the control plane back to the SDK."""
        unhook_dpu_stop(self.rank)
        self.rank.control_owner = None

    def boot_firmware(self) -> None:
        """First stage: the trusted loader loads the MSG subkernel on every DPU."""
        for st in self.dpus:
            st.after = self._write_waiting
        self._boot_all(FW_LOADER)

    # -- host-facing state ---------------------------------------
    @property
    def nr_host_facing(self) -> int:
        """DPUs faulted with the MUX on the host side (what ``qry_mux`` reports)."""
        return sum(1 for st in self.dpus if st.host_facing)

    @property
    def all_host_facing(self) -> bool:
        """True when the host may touch MRAM and send messages."""
        return all(st.host_facing for st in self.dpus)

    def add_waiter(self, waiter: Any) -> None:
        """Resolve ``waiter`` once every DPU is host-facing."""
        self._waiters.append(waiter)
        self._check_waiters()

    def _check_waiters(self) -> None:
        if self._waiters and self.all_host_facing:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if w.pending:
                    w.resolve()

    # -- DPU side ---------------------------------------
    def _boot_all(self, program: DpuProgram) -> None:
        dpus = self.rank.dpus
        for d in dpus:
            d.program = program
            self.dpus[d.index].host_facing = False
        self.rank.boot_dpus(dpus, JobType.LAUNCH_RANK)

    def release_mux(self) -> None:
        """``VCI_REL_MUX``: every host-facing DPU resumes its firmware."""
        todo = []
        for d in self.rank.dpus:
            st = self.dpus[d.index]
            if not st.host_facing:
                continue
            program, st.after = self._resume(d, st)
            st.host_facing = False
            st.reject = None
            d.program = program
            todo.append(d)
        if todo:
            self.rank.boot_dpus(todo, JobType.LAUNCH_RANK)

    def _resume(self, d: Dpu, st: DpuEnclave) -> tuple[DpuProgram, After]:
        if st.xchg_stage == 1:
            return FW_XCHG_2, self._xchg_2
        kind, flags, ptr = read_msg(d)
        if kind == Msg.LOAD_SK and flags & MSG_FLAG_USER_KEY:
            return FW_LOADER, lambda dpu: self._load_user(dpu, ptr)
        if kind == Msg.LOAD_SK:
            if ptr == SK_XCHG_1:
                return FW_XCHG_1, self._xchg_1
            if ptr == SK_XCHG_2:
                return FW_XCHG_2, self._xchg_2
            if ptr in (SK_MSG, SK_XCHG_3):  # XCHG_3 alone has no stage-2 secret to confirm
                return FW_MSG, self._write_waiting
            return FW_MSG, lambda dpu: self._refuse(dpu, f"no default subkernel at {ptr:#x}")
        if kind == Msg.PING:
            return FW_MSG, self._pong
        return FW_MSG, self._write_waiting

    def _stopped(self, dpu: Dpu) -> None:
        st = self.dpus[dpu.index]
        after, st.after = st.after, None
        nxt = after(dpu) if after is not None else None
        if nxt is None:
            st.host_facing = True
            self._check_waiters()
            return
        self.rank.kernel.call_soon(self._boot_next, (dpu, nxt), self.rank.actor)

    def _boot_next(self, arg: tuple[Dpu, DpuProgram]) -> None:
        dpu, program = arg
        dpu.program = program
        try:
            self.rank.boot_dpus([dpu], JobType.LAUNCH_RANK)
        except Exception as exc:  # JobFailed: e.g. an ELF subkernel with no model bound
            st = self.dpus[dpu.index]
            st.after = None
            st.reject = f"subkernel {program.name!r} cannot start: {exc}"
            write_mram(dpu, MSG_BUFFER, encode_msg(Msg.NOP))
            st.host_facing = True
            self._check_waiters()

    # -- firmware effects (run when a step stops) ---------------------------------------
    def _write_waiting(self, dpu: Dpu) -> None:
        write_mram(dpu, MSG_BUFFER, encode_msg(Msg.WAITING))

    def _pong(self, dpu: Dpu) -> None:
        write_mram(dpu, MSG_BUFFER, encode_msg(Msg.PONG))

    def _refuse(self, dpu: Dpu, reason: str) -> None:
        self.dpus[dpu.index].reject = reason
        write_mram(dpu, MSG_BUFFER, encode_msg(Msg.NOP))

    def _wipe_wram(self, dpu: Dpu) -> None:
        lo, hi = persist_range(dpu.chip.wram_size)
        dpu.wram[:lo] = 0
        dpu.wram[hi:] = 0

    def _load_user(self, dpu: Dpu, ptr: int) -> DpuProgram | None:
        st = self.dpus[dpu.index]
        if not IME_LOAD_BUFFER <= ptr < DEBUG_OUT:
            self._refuse(dpu, f"load pointer {ptr:#x} is outside the load buffer")
            return None
        head = parse_header(dpu.mram.read(ptr, SK_HEADER_BYTES).tobytes())
        if head is None:
            self._refuse(dpu, "the load buffer holds no subkernel (bad magic or sizes)")
            return None
        if ptr + head.size > DEBUG_OUT:
            self._refuse(dpu, "the subkernel overflows the load buffer")
            return None
        opened = open_sealed(dpu.mram.read(ptr, head.size).tobytes(), st.user_key)
        if isinstance(opened, str):
            self._refuse(dpu, opened)
            return None
        decoder = self.machine.decoder
        # a Python kernel's text is a name tag, not DPU code: only binaries are scanned
        if decoder is not None and not isinstance(opened.program, Program):
            words = np.frombuffer(opened.text, dtype="<u8")
            banned = scan_banned_instructions(words, decoder)
            if banned:
                i, why = banned[0]
                self._refuse(dpu, f"instruction {i} of the subkernel: {why}")
                return None
        program = opened.program
        if program is None:
            self._refuse(dpu, "aiopim has no behaviour for this code (seal it with vud_*)")
            return None
        lo, _ = persist_range(dpu.chip.wram_size)
        if len(opened.text) > len(dpu.iram) or len(opened.data.rstrip(b"\0")) > lo:
            self._refuse(dpu, "the subkernel does not fit IRAM / WRAM")
            return None
        self._wipe_wram(dpu)
        data = np.frombuffer(opened.data[:lo], dtype=np.uint8)
        dpu.wram[: len(data)] = data
        dpu.iram[:] = 0
        dpu.iram[: len(opened.text)] = np.frombuffer(opened.text, dtype=np.uint8)
        dpu.persistent.clear()
        patch_clocks_per_sec(dpu, program)
        st.after = self._user_done
        return program

    def _user_done(self, dpu: Dpu) -> DpuProgram | None:
        st = self.dpus[dpu.index]
        self._wipe_wram(dpu)
        if dpu.fault is not None:  # the loader takes the DPU back and reports it, as a refusal
            self._refuse(dpu, f"subkernel faulted: {dpu.fault.reason}")
            return None
        st.after = self._write_waiting
        return FW_MSG

    def _xchg_1(self, dpu: Dpu) -> None:
        st = self.dpus[dpu.index]
        st.counter += 1
        write_mram(dpu, XCHG_COUNTER, st.counter.to_bytes(COUNTER_BYTES, "little"))
        write_mram(dpu, XCHG_DPU_PK, st.keypair.public)
        st.xchg_stage = 1

    def _xchg_2(self, dpu: Dpu) -> None:
        st = self.dpus[dpu.index]
        st.xchg_stage = 0
        host_pk = dpu.mram.read(XCHG_HOST_PK, DH_BYTES).tobytes()
        wrapped = dpu.mram.read(XCHG_WRAPPED_KEY, WRAPPED_KEY_BYTES).tobytes()
        secret = st.keypair.shared_secret(host_pk)
        user_key = None
        if secret is not None:
            k = session_key(secret, st.counter.to_bytes(COUNTER_BYTES, "little"))
            user_key = aead_open(k, bytes(NONCE_BYTES), wrapped)
        if user_key is None or len(user_key) != 32:
            write_mram(dpu, XCHG_CONFIRM, bytes(CONFIRM_BYTES))
        else:
            st.user_key = user_key
            iv = self.machine.random_iv(dpu_chosen=True)
            sealed = aead_seal(user_key, iv, CONFIRMATION)
            pad = bytes(CONFIRM_BYTES - len(sealed) - len(iv))
            write_mram(dpu, XCHG_CONFIRM, sealed + iv + pad)
        self._write_waiting(dpu)
