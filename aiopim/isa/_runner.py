"""Engine 2: DPU binaries run on the instruction-set interpreter, in exact virtual time.

:class:`IsaRunner` holds one DPU's interpreter state; :class:`IsaScheduler` (one per kernel)
advances every running interpreter DPU in lockstep. Exactness rule: host tasks only act at a
kernel event or at the bound of the kernel's current run, so the DPUs may run ahead up to
``H = min(kernel.limit, next kernel event)``; when one DPU ends or faults at ``E`` the host
cannot react before ``E + COMPLETION_POLL_LATENCY_PS``, so the others stop there, and the
DPUs advance in chunks of at most that length. Whatever the host then reads or writes, it
sees every DPU exactly at that instant. The scheduler is a single kernel event, re-armed at
the horizon; DPU ends and faults become kernel events at their exact times.

Speculation. When the horizon is far, one call of the loop per chunk costs more than the
chunks need (each call cuts the DPUs' windows, and on several threads every call is a hand-over
to the workers). The scheduler then checkpoints every running DPU (its arrays, and WRAM block
by block before each block's first write; Python keeps each MRAM page before its first write
and the IRAM bytes ``ldmai`` overwrites), runs them all to the horizon in one call, and finds
where the chunks would have stopped: at the first end or fault plus the polling latency. The
DPUs that issued past that point go back to their checkpoint and run again to it, which repeats
the same instructions (a DPU's run depends only on its own state until the host acts). Ends are
reported in the order the chunks would have reported them.
"""

from __future__ import annotations

import collections
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from .. import timing
from . import _interp as I
from . import _tables as T
from ._codec import DecodeStatus, decode, decode_program
from ._coreapi import INFINITY, IRAM_BIT, PRIO_LATE, Dpu, DpuRunner, Entry, Kernel, MramBank
from ._semantics import C_STATUS, NCOL, OP_ILLEGAL, compile_program
from ._text import format_instruction

if TYPE_CHECKING:
    from ..elf import ElfProgram

__all__ = [
    "DecodedBinary",
    "IsaRunner",
    "IsaScheduler",
    "boot_binary",
    "decoded_binary",
    "describe_instruction",
    "enclosing_function",
    "set_jit",
]

#: runtime fault codes of the SDK (``fault`` instruction operands)
RUNTIME_FAULTS = {
    1: "heap full",
    2: "division by zero",
    3: "assertion failed",
    4: "halt",
    5: "printf overflow",
    6: "already profiling",
    7: "not profiling",
    8: "MRAM access not aligned",
    9: "performance counter configuration not supported",
}
_SCHEDULER_ACTOR = (1 << 62) - 1
#: chunks one scheduler event runs before letting the kernel breathe (run without bound)
_MAX_CHUNKS = 256

_jit_override: bool | None = None
#: pages of a DPU's MRAM page map
_NR_PAGES = -(-max(chip.mram_size for chip in timing.CHIPS.values()) >> I.PAGE_SHIFT)


def _clock_ratio(frequency_hz: int) -> tuple[int, int]:
    """(num, den): one cycle lasts ``num / den`` ps."""
    g = math.gcd(timing.PS_PER_S, frequency_hz)
    return timing.PS_PER_S // g, frequency_hz // g


def set_jit(enabled: bool | None) -> None:
    """Use the numba-compiled loop (True), the pure-Python one (False), or the
    ``AIOPIM_ISA_JIT`` default (None) for the runs that start afterwards."""
    global _jit_override
    _jit_override = enabled


def jit_enabled() -> bool:
    """Whether runs starting now use the compiled loop."""
    return I.jit_enabled_by_default() if _jit_override is None else _jit_override


# ================================================================================================
# the decoded binary, shared by every DPU that loaded it
# ================================================================================================
@dataclass
class DecodedBinary:
    """The executable rows of a binary's ``.text`` and what fault messages need."""

    words: npt.NDArray[np.uint64]
    code: npt.NDArray[np.int64]
    #: (instruction index, name) of the functions and labels of ``.text``, sorted
    functions: list[tuple[int, str]]
    #: DPUs started with it in the compiled loop, and its compiled fast step (see
    #: :func:`compiled_step`): None until asked for, 0 if it keeps the generic one
    starts: int = 0
    step: int | None = None
    #: whether its step can be had without compiling it (None: not asked yet)
    step_ready: bool | None = None


#: ``AIOPIM_ISA_STEP=auto`` (the default): a binary whose step is not compiled yet gets it once
#: this many DPUs have started it (a rank's worth: compiling costs seconds the first time)
STEP_AFTER_STARTS: Final = 64


def compiled_step(binary: DecodedBinary) -> int:
    """The address of ``binary``'s own compiled fast step for a DPU starting it in the compiled
    loop (0: the generic step). ``AIOPIM_ISA_STEP``: ``auto`` (default) at once when the step
    was compiled already at the binary's first start (in this process, or into numba's disk
    cache by an earlier one), else once the binary has started on :data:`STEP_AFTER_STARTS`
    DPUs; ``1`` always, ``0`` never.
    Results are the same either way; only the speed differs."""
    mode = os.environ.get("AIOPIM_ISA_STEP", "auto").strip().lower()
    if mode in ("0", "off", "no", "false", ""):
        return 0
    binary.starts += 1
    if binary.step is None:
        from ._specialize import step_address, step_ready

        if mode == "auto" and binary.starts < STEP_AFTER_STARTS:
            if binary.step_ready is None:
                binary.step_ready = step_ready(binary.code)
            if not binary.step_ready:
                return 0
        binary.step = step_address(binary.code)
    return binary.step


#: the largest IRAM of any chip, in bytes (what a loaded program can occupy)
_IRAM_BYTES = max(chip[1] for chip in T.CHIPS.values()) * 8


def _text_words(program: ElfProgram) -> npt.NDArray[np.uint64]:
    end = 0
    parts: list[tuple[int, bytes]] = []
    for image in program.images():
        if image.address & IRAM_BIT and image.address < 0xF0000000:
            off = image.address & ~IRAM_BIT
            if off >= _IRAM_BYTES:
                continue  # cannot be loaded (check_fits rejects it): nothing to decode
            data = image.data[: _IRAM_BYTES - off]
            parts.append((off, data))
            end = max(end, off + len(data))
    buf = np.zeros((end + 7) // 8 * 8, np.uint8)
    for off, data in parts:
        buf[off : off + len(data)] = np.frombuffer(data, np.uint8)
    return buf.view("<u8").astype(np.uint64)


def decoded_binary(program: ElfProgram) -> DecodedBinary:
    """Decode ``program`` once (cached on the program)."""
    cached = program._interpreter
    if isinstance(cached, DecodedBinary):
        return cached
    words = _text_words(program)
    code = compile_program(decode_program(words))
    functions: list[tuple[int, str]] = []
    for sym in program.all_symbols():
        if sym.section != ".text" or sym.type not in ("FUNC", "NOTYPE") or not sym.defined:
            continue
        if not sym.address & IRAM_BIT:
            continue
        functions.append(((sym.address & ~IRAM_BIT) // 8, sym.name))
    functions.sort()
    decoded = DecodedBinary(words, code, functions)
    program._interpreter = decoded
    return decoded


def enclosing_function(program: ElfProgram, pc: int) -> str | None:
    """``name+offset`` of the function or label of ``.text`` holding instruction ``pc``."""
    decoded = decoded_binary(program)
    if not 0 <= pc < len(decoded.words):
        return None
    best: tuple[int, str] | None = None
    for index, name in decoded.functions:
        if index > pc:
            break
        best = (index, name)
    if best is None:
        return None
    return best[1] if best[0] == pc else f"{best[1]}+{pc - best[0]}"


def describe_instruction(program: ElfProgram, pc: int) -> str:
    """The instruction at ``pc`` as the disassembler prints it, jump targets as
    ``function+offset`` (for fault messages and traces)."""
    decoded = decoded_binary(program)
    if not 0 <= pc < len(decoded.words):
        return f"<no instruction at {pc}>"
    word = int(decoded.words[pc])
    ins = decode(word) if word >> 48 == 0 else None
    if ins is None:
        return f"<undecodable word {word:#014x}>"
    text = format_instruction(ins, resolve=lambda target: enclosing_function(program, target))
    return text if ins.illegal is None else f"{text} [illegal: {ins.illegal}]"


# ================================================================================================
# one DPU
# ================================================================================================
@dataclass(frozen=True)
class _Outcome:
    """How a DPU's run ended: at ``time_ps``, normally or in fault."""

    time_ps: int
    fault: bool
    reason: str = ""
    code: int | None = None
    thread: int | None = None


class IsaRunner(DpuRunner):
    """The interpreter state of one DPU (registers, threads, atomic bits, DMA engine)."""

    #: length of the per-DPU instruction trace kept in :attr:`trace` (0: no trace). A trace
    #: steps the loop one instruction at a time (slow); meant for debugging.
    trace_length: ClassVar[int] = 0
    #: a run still going after this many cycles stops the DPU in fault (None: no bound). A
    #: guard for tests of binaries that may spin forever (a real DPU would spin forever too).
    max_run_cycles: ClassVar[int | None] = None

    def __init__(self, dpu: Dpu) -> None:
        super().__init__(dpu)
        chip = dpu.chip
        n = chip.nr_threads
        self.nr_threads = n
        self.regs, self.th, self.dv, self.atomic, self.dma = I.fresh_state(n, 0, 0)
        self.scratch = I.scratch(n)
        self.th[0, I.T_RUN] = I.RUN_STOPPED
        self.program: ElfProgram | None = None
        self.binary: DecodedBinary | None = None
        self.code: npt.NDArray[np.int64] = np.zeros((0, NCOL), np.int64)
        self.active = False
        self.run_id = 0
        self.boot_ps = 0
        #: MRAM pages the batched loop may use (see :meth:`IsaScheduler._export_pages`)
        self.pmap = np.full(_NR_PAGES, I.PM_UNKNOWN, np.int64)
        self.pmap_gen = -1
        self.pmap_table: object = None
        self.pmap_pages: dict[int, Any] = {}
        self.trace: collections.deque[tuple[int, int, int, str]] | None = None
        self._run = I.get_run(False)
        #: the state at the start of a speculative run (see :meth:`IsaScheduler._speculate`)
        self._saved: tuple[npt.NDArray[Any], ...] = ()
        #: the addresses of those copies, in the order of ``_state`` (for the compiled batch)
        self.saved_addresses = np.zeros(0, np.int64)
        #: where that array is (``saved_addresses.ctypes.data``, kept: asking NumPy's ctypes
        #: interface builds an object at each call)
        self.saved_address = 0
        self._saved_code = self.code
        #: while speculating, once Python served a transfer (:meth:`keep_undo`), what it wrote
        #: outside that state: (in IRAM, address, old bytes)
        self._undo: list[tuple[bool, int, npt.NDArray[np.uint8]]] | None = None
        #: while speculating, the MRAM pages whose bytes are in ``_undo`` (the loop may write them)
        self.saved_pages: set[int] = set()
        #: while speculating, the times of the transfers Python served
        self.spec_dmas: list[int] = []
        #: host writes scheduled into this run (see :meth:`write_at`) and their source bytes
        self.hw = np.zeros((_HW_ROWS, 4), np.int64)
        self._hw_sources: list[npt.NDArray[np.uint8]] = []

    # -- DpuRunner ------------------------------------------------------------------------------
    def live_threads(self) -> int:
        return int(np.count_nonzero(self.th[:, I.T_RUN])) if self.active else 0

    def halt(self) -> None:
        if self.active:
            self.active = False
            _scheduler(self.dpu.kernel).remove(self)
        self.run_id += 1

    def blocked(self) -> list[str]:
        return []

    # -- running --------------------------------------------------------------------------------
    def start(self, program: ElfProgram) -> None:
        """Boot: thread 0 at PC 0, registers and flags 0, every atomic bit clear."""
        self.program = program
        self.binary = decoded_binary(program)
        self.code = self._launch_code(self.binary)
        self.regs, self.th, self.dv, self.atomic, self.dma = I.fresh_state(
            self.nr_threads, len(self.dpu.iram), self.dpu.mram.size
        )
        self.scratch = I.scratch(self.nr_threads)
        self._hw_sources = []
        self._saved = ()  # new arrays: the checkpoint's copies are made again at the next one
        self.saved_address = 0
        self.boot_ps = self.dpu.kernel.now
        num, den = _clock_ratio(self.dpu.chip.frequency_hz)
        self.dv[I.D_BOOT_PS] = self.boot_ps
        self.dv[I.D_WBLOCK] = I.wram_block_shift(len(self.dpu.wram))
        held = np.flatnonzero(self.pmap != I.PM_UNKNOWN)  # the page map outlives a run
        self.dv[I.D_PAGES] = int(held[-1]) + 1 if len(held) else 0
        self.dv[I.D_PS_NUM] = num
        self.dv[I.D_PS_DEN] = den
        self.run_id += 1
        self.active = True
        jit = jit_enabled()
        self._run = I.get_run(jit)
        if jit and self.code is self.binary.code:
            waiting = self.binary.step is None
            step = self.dv[I.D_STEP] = compiled_step(self.binary)
            if waiting and step:
                # the binary just got its step: the DPUs already running it take it too
                for r in _scheduler(self.dpu.kernel).booted:
                    if r.active and r.binary is self.binary and r.code is self.binary.code:
                        r.dv[I.D_STEP] = step
        self.trace = collections.deque(maxlen=self.trace_length) if self.trace_length > 0 else None
        _scheduler(self.dpu.kernel).add(self)

    def _launch_code(self, binary: DecodedBinary) -> npt.NDArray[np.int64]:
        """The binary's shared rows, unless this DPU's IRAM no longer holds the binary's
        ``.text`` (an ``ldmai`` overlay of an earlier run, a host write): then decode the IRAM
        over the same range. PCs beyond ``.text`` fault whatever the IRAM holds there."""
        n = len(binary.words)
        words = self.dpu.iram[: n * 8].view("<u8")
        if np.array_equal(words, binary.words):
            return binary.code
        return compile_program(decode_program(words.astype(np.uint64)))

    def time_of(self, cycle: int) -> int:
        """Kernel time of this run's ``cycle``."""
        return self.boot_ps + self.dpu.chip.cycles_to_ps(cycle)

    def first_cycle_at(self, ps: int) -> int:
        """The first cycle of this run whose time is at or after ``ps``."""
        if ps >= INFINITY:
            return I.BIG
        dt = ps - self.boot_ps
        if dt <= 0:
            return 0
        chip = self.dpu.chip
        c = dt * chip.frequency_hz // timing.PS_PER_S
        while chip.cycles_to_ps(c) < dt:
            c += 1
        while c > 0 and chip.cycles_to_ps(c - 1) >= dt:
            c -= 1
        return int(c)

    @property
    def cycles(self) -> int:
        """Cycles run so far."""
        return int(self.dv[I.D_CYCLE])

    @property
    def dma_requests(self) -> int:
        """DMA requests served in this run."""
        return int(self.dv[I.D_DMA_REQS])

    @property
    def dma_bytes(self) -> int:
        """Bytes moved by this run's DMA requests."""
        return int(self.dv[I.D_DMA_BYTES])

    @property
    def instructions(self) -> int:
        """Instructions issued so far in this run."""
        return int(self.dv[I.D_INSTR])

    def advance(self, until_ps: int) -> _Outcome | None:
        """Execute the instructions issued before ``until_ps``; the outcome if the run ended."""
        limit = self.first_cycle_at(until_ps)
        cap = self.max_run_cycles
        if cap is not None:
            limit = min(limit, cap)
        dpu = self.dpu
        step = I.BIG if self.trace is None else 1
        while True:
            reason = self._run(
                self.code,
                self.regs,
                self.th,
                self.dv,
                self.atomic,
                dpu.wram,
                self.dma,
                limit,
                step,
                self.scratch,
            )
            if self.trace is not None:
                self._record_trace()
            if reason == I.R_LIMIT:
                if cap is not None and self.dv[I.D_CYCLE] >= cap:
                    self.active = False
                    reason_text = (
                        f"DPU {dpu.name} still running after {cap} cycles "
                        "(IsaRunner.max_run_cycles)"
                    )
                    return _Outcome(self.time_of(cap), True, reason_text)
                return None
            if reason == I.R_STEP:
                continue
            if reason == I.R_DMA_REQUEST:
                self._dma_request()
            elif reason == I.R_DMA_DUE:
                self._dma_due()
            elif reason == I.R_END:
                self.active = False
                return _Outcome(self.time_of(int(self.dv[I.D_END])), False)
            else:
                self.active = False
                return self._fault()

    def _record_trace(self) -> None:
        assert self.trace is not None and self.program is not None
        if self.dv[I.D_INSTR] == 0:
            return
        key = (int(self.dv[I.D_LAST]), int(self.dv[I.D_RR]), int(self.dv[I.D_LAST_PC]))
        if self.trace and self.trace[-1][:3] == key:
            return
        self.trace.append((*key, describe_instruction(self.program, key[2])))

    # -- host writes scheduled into the run -----------------------------------------------------
    def needs_synced_events(self) -> bool:
        return self.active and not _scheduler(self.dpu.kernel).takes_host_writes()

    def write_at(
        self, time_ps: int, address: int, data: npt.NDArray[np.uint8], source: int | None = None
    ) -> int | None:
        """Have the compiled batch copy ``data`` (a uint8 view, read when the copy happens)
        into WRAM ``address`` when the run reaches ``time_ps``, after the instructions issued
        before it, as a host event at that time would. Writes are scheduled in time order, from
        a kernel event at or before ``time_ps``, only while the DPU runs and the scheduler takes
        them (:meth:`IsaScheduler.takes_host_writes`; else None). Returns the write's number
        for :meth:`wrote`."""
        if not self.active or not _scheduler(self.dpu.kernel).takes_host_writes():
            return None
        dv = self.dv
        n = int(dv[I.D_HW_N])
        if dv[I.D_HW_DONE] == n:  # all done: start the list afresh
            n = 0
            dv[I.D_HW_DONE] = 0
            self._hw_sources = []
        if n == len(self.hw):
            self.hw = np.concatenate([self.hw, np.zeros_like(self.hw)])
            _scheduler(self.dpu.kernel).set_host_writes(self)
        num, den = int(dv[I.D_PS_NUM]), int(dv[I.D_PS_DEN])
        self.hw[n] = (
            I.first_cycle(time_ps, int(dv[I.D_BOOT_PS]), num, den),
            address,
            data.ctypes.data if source is None else source,
            len(data),
        )
        self._hw_sources.append(data)  # kept alive until the list starts afresh
        dv[I.D_HW_N] = n + 1
        return (self.run_id << 32) | n

    def wrote(self, write: int) -> bool:
        """Whether the batch has made write number ``write`` of :meth:`write_at`; if not,
        the caller writes the bytes itself now and it counts as made."""
        n = write & 0xFFFFFFFF
        if write >> 32 != self.run_id:
            return False  # another run's
        if self.dv[I.D_HW_DONE] > n:
            return True
        if self.active:  # the run is at the write's time
            self.dv[I.D_HW_DONE] = n + 1
        return False

    # -- speculation ----------------------------------------------------------------------------
    def _state(self) -> tuple[npt.NDArray[Any], ...]:
        # not the work array: a rollback drops the window pattern it holds (see rollback)
        return (self.regs, self.th, self.dv, self.atomic, self.dma, self.dpu.wram)

    def checkpoint_copies(self) -> int:
        """Where the checkpoint's copies of the arrays (registers, threads, DPU scalars, atomic
        bits, DMA engine, WRAM) go, allocated at the first checkpoint: the address of
        their addresses (:attr:`saved_addresses`), for the compiled batch, which makes the copies
        right before the DPU runs (else :meth:`save_state`). The loop writes only MRAM pages its
        map marks writable: the marks are cleared with the copies, and while the scheduler
        speculates a page gets its mark back once its bytes are kept (:meth:`keep_undo`)."""
        if not self._saved:
            self._saved = tuple(np.empty_like(a) for a in self._state())
            self.saved_addresses = np.array([a.ctypes.data for a in self._saved], np.int64)
            self.saved_address = self.saved_addresses.ctypes.data
        return self.saved_address

    def keep_undo(self) -> bool:
        """While the scheduler speculates, before Python serves one of this DPU's transfers:
        keep what Python changes outside the arrays so that :meth:`rollback` can undo it (the
        old bytes of every MRAM page before its first write and of every IRAM write, the
        instruction rows) and the times of those transfers. True when it starts keeping (the
        first transfer of the speculative run)."""
        if self._undo is not None:
            return False
        self._saved_code = self.code
        self._undo = []
        return True

    def save_state(self) -> None:
        """The checkpoint's copies of the arrays (all of WRAM), and the loop's MRAM write marks
        cleared."""
        self.dv[I.D_WKEEP] = 0
        for saved, live in zip(self._saved, self._state(), strict=True):
            np.copyto(saved, live)
        np.bitwise_and(self.pmap, ~1, out=self.pmap, where=self.pmap >= 0)

    def commit(self) -> None:
        """Keep what ran since the checkpoint (the batch may go on keeping WRAM blocks until
        the next checkpoint: a copy nobody reads). Only a DPU that kept an undo list needs it."""
        self._undo = None
        self.saved_pages = set()
        self.spec_dmas = []

    def rollback(self) -> None:
        """Undo everything since the checkpoint (the DPU is running again)."""
        dpu = self.dpu
        # WRAM: the whole copy (save_state), or the blocks the compiled batch kept
        keeping = bool(self.dv[I.D_WKEEP])
        kept = int(self.dv[I.D_WKEPT])
        shift = int(self.dv[I.D_WBLOCK])
        pages = int(self.dv[I.D_PAGES])  # the page map is not rolled back
        for saved, live in zip(self._saved, self._state(), strict=True):
            if live is not dpu.wram:
                np.copyto(live, saved)
        self.dv[I.D_PAGES] = pages
        # the work array was not copied: its window pattern is that of a later cycle, so the
        # loop finds the pattern again (windows are exact wherever they open)
        self.dv[I.D_AGAIN] = 0
        saved_wram = self._saved[-1]
        if not keeping:
            np.copyto(dpu.wram, saved_wram)
        while kept:
            block = (kept & -kept).bit_length() - 1
            kept &= kept - 1
            start = block << shift
            dpu.wram[start : start + (1 << shift)] = saved_wram[start : start + (1 << shift)]
        if self._undo is not None:
            for in_iram, address, old in reversed(self._undo):
                if in_iram:
                    dpu.iram[address : address + len(old)] = old
                else:
                    dpu.mram.write(address, old)
            self.code = self._saved_code
        self.commit()
        self.active = True

    # -- DMA ------------------------------------------------------------------------------------
    def _dma_request(self) -> None:
        I.dma_request(self.th, self.dv, self.dma)

    def _dma_due(self) -> None:
        c = int(self.dv[I.D_CYCLE])
        dpu = self.dpu
        nxt = I.BIG
        for t in range(self.nr_threads):
            if self.th[t, I.T_RUN] != I.RUN_DMA:
                continue
            due = int(self.th[t, I.T_NEXT])
            if due > c:
                nxt = min(nxt, due)
                continue
            kind, waddr, maddr, size = (int(v) for v in self.dma[t])
            undo = self._undo
            if kind == I.DMA_LDMA:
                I.keep_wram(self.dv, dpu.wram, waddr, waddr + size)
                dpu.wram[waddr : waddr + size] = dpu.mram.read(maddr, size)
            elif kind == I.DMA_SDMA:
                if undo is not None:
                    first, last = maddr >> I.PAGE_SHIFT, (maddr + size - 1) >> I.PAGE_SHIFT
                    for p in range(first, last + 1):
                        if p not in self.saved_pages:
                            self.saved_pages.add(p)
                            start = p << I.PAGE_SHIFT
                            undo.append((False, start, dpu.mram.read(start, 1 << I.PAGE_SHIFT)))
                dpu.mram.write(maddr, dpu.wram[waddr : waddr + size].copy())
            else:
                if undo is not None:
                    undo.append((True, waddr, dpu.iram[waddr : waddr + size].copy()))
                self._load_iram(waddr, dpu.mram.read(maddr, size))
            self.th[t, I.T_RUN] = I.RUN_READY
        self.dv[I.D_DMA_MIN] = nxt

    def _load_iram(self, address: int, data: npt.NDArray[np.uint8]) -> None:
        """``ldmai``: new instructions in this DPU's IRAM (a private copy of the rows)."""
        dpu = self.dpu
        dpu.iram[address : address + len(data)] = data
        first, end = address // 8, (address + len(data)) // 8
        words = dpu.iram[first * 8 : end * 8].view("<u8").astype(np.uint64)
        rows = compile_program(decode_program(words))
        n = max(len(self.code), end)
        code = np.zeros((n, self.code.shape[1]), np.int64)
        code[: len(self.code)] = self.code
        code[len(self.code) :, 0] = OP_ILLEGAL  # until written
        code[first:end] = rows
        self.code = code
        self.dv[I.D_STEP] = 0  # the binary's compiled step no longer matches the rows

    # -- faults ---------------------------------------------------------------------------------
    def _fault(self) -> _Outcome:
        dv = self.dv
        kind = int(dv[I.D_FKIND])
        t, pc = int(dv[I.D_FTHREAD]), int(dv[I.D_FPC])
        addr = int(dv[I.D_FADDR])
        code: int | None = None
        if kind == I.FK_SOFTWARE:
            code = int(dv[I.D_FCODE])
            meaning = RUNTIME_FAULTS.get(code)
            what = f"fault {code}" + (f" ({meaning})" if meaning else "")
        elif kind == I.FK_MEMORY:
            what = f"memory fault: WRAM access at {addr:#x} is misaligned or out of range"
        elif kind == I.FK_SAFE:
            what = f"memory fault: safe register bound exceeded (offset {addr:#x})"
        elif kind == I.FK_DMA:
            what = f"DMA fault: transfer range at {addr:#x} leaves the memory"
        elif kind == I.FK_PC:
            n = len(self.code)
            what = f"PC {pc} is outside the loaded program ({n} instructions)"
        elif kind == I.FK_THREAD:
            what = f"thread {addr} does not exist (the DPU has {self.nr_threads} threads)"
        elif kind == I.FK_UNIMPLEMENTED:
            what = "unimplemented instruction"
        else:
            status = int(self.code[pc, C_STATUS]) if 0 <= pc < len(self.code) else 1
            what = {
                DecodeStatus.UNDECODABLE: "illegal instruction: undecodable word",
                DecodeStatus.ILLEGAL_CONDITION: "illegal instruction: condition code "
                "not in the condition map",
                DecodeStatus.ILLEGAL_PAIR: "illegal instruction: odd register pair",
            }.get(DecodeStatus(status), "illegal instruction")
        reason = f"DPU {self.dpu.name} thread {t} at PC {pc}"
        if self.program is not None:
            func = enclosing_function(self.program, pc)
            if func is not None:
                reason += f" ({func})"
            reason += f": {what}; instruction {describe_instruction(self.program, pc)}"
        else:
            reason += f": {what}"
        return _Outcome(self.time_of(int(dv[I.D_CYCLE])), True, reason, code, t)

    def schedule_report(self, outcome: _Outcome) -> None:
        """A kernel event at the outcome's time that tells the DPU its run ended."""
        self.dpu.kernel.call_at(
            outcome.time_ps, self.report, (self.run_id, outcome), self.dpu.actor
        )

    def report(self, arg: tuple[int, _Outcome]) -> None:
        """Kernel event at the outcome's time: tell the DPU its run ended."""
        run_id, outcome = arg
        if run_id != self.run_id or not self.dpu.running:
            return
        if outcome.fault:
            self.dpu.stop_in_fault(outcome.reason, outcome.code, outcome.thread)
        else:
            self.dpu.run_ended()


# ================================================================================================
# the per-kernel scheduler
# ================================================================================================
class IsaScheduler:
    """Advances every running interpreter DPU of one kernel (see the module docstring).

    The running DPUs advance in one call of the loop per chunk (:func:`_interp.run_dpus` over
    lists of their state); a DPU returns to Python only to end, to fault, or for a transfer
    whose MRAM page the loop does not hold (then Python serves it and hands the loop the page:
    a DPU's page map stays valid while its MRAM bank keeps the same page objects)."""

    #: page references kept before the shared page list is started afresh
    MAX_PAGES: ClassVar[int] = 1 << 16

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        #: the runners booted and not removed, in boot order (a dict: O(1) membership for
        #: thousands of DPUs)
        self.booted: dict[IsaRunner, None] = {}
        #: the active ones among them (rebuilt by :meth:`_active` when the set may have changed)
        self.runners: list[IsaRunner] = []
        self.entry: Entry | None = None
        # the state lists of the batched loop, for the runners in ``_slots``
        self._slots: dict[IsaRunner, int] = {}
        self._lists: tuple[Any, ...] = ()
        self._pmaps: Any = None
        self._run_dpus: Callable[..., int]
        self._table = np.zeros((0, I.NA), np.int64)
        self._page_addr = np.zeros(0, np.int64)
        self._run_dpus = I.run_dpus
        self._run_parallel: Callable[..., int] | None = None
        self._jit = False
        self._pages: Any = None
        self._page_ids: dict[int, int] = {}
        self._gen = 0
        # bumped whenever the set of active runners may have changed; the active list and
        # its rows in the batch are kept for that version
        self._version = 0
        self._active_version = -1
        self._sel = np.zeros(0, np.int64)
        # MramBank.epoch (and page-list generation) when every page map was last checked
        self._checked: tuple[int, int] = (-1, -1)
        #: speculative scheduler events, and DPUs they sent back to their checkpoint
        self.speculations = 0
        self.rollbacks = 0
        #: a speculative event's run is under way (see :meth:`_speculate`)
        self._open = False
        #: the DPUs that kept an undo list in it (:meth:`IsaRunner.keep_undo`)
        self._undoing: list[IsaRunner] = []
        #: the addresses of the checkpoint copies of the DPUs of selection ``_copies_sel``
        self._copies = np.zeros(0, np.int64)
        self._copies_sel: npt.NDArray[np.int64] | None = None
        #: how many polling latencies the next speculative event may run ahead
        self._reach = _MAX_CHUNKS

    def add(self, runner: IsaRunner) -> None:
        """A DPU booted at the current time."""
        self.booted.setdefault(runner)
        self._slots = {}  # its state arrays are new: rebuild the lists
        self._version += 1
        if self.entry is None:
            k = self.kernel
            self.entry = k.call_at(k.now, self._fire, None, _SCHEDULER_ACTOR, PRIO_LATE)

    def remove(self, runner: IsaRunner) -> None:
        """A DPU stopped (its run ended or it was halted from outside)."""
        self.booted.pop(runner, None)
        self._version += 1

    def _active(self) -> list[IsaRunner]:
        """The active runners (the list is rebuilt only when the set may have changed)."""
        if self._active_version != self._version:
            self.runners = [r for r in self.booted if r.active]
            self.booted = dict.fromkeys(self.runners)
            self._active_version = self._version
            self._sel = np.zeros(0, np.int64)
        return self.runners

    # -- the batched loop -----------------------------------------------------------------------
    def _batched(self) -> bool:
        return IsaRunner.trace_length <= 0 and IsaRunner.max_run_cycles is None

    def _build(self, runners: list[IsaRunner]) -> None:
        jit = jit_enabled()
        if jit != self._jit or self._pages is None:
            self._jit = jit
            self._new_pages()
        self._slots = {r: i for i, r in enumerate(runners)}
        self._sel = np.zeros(0, np.int64)
        if jit:
            # compiled: one row of array addresses per DPU (the runners keep the arrays alive)
            self._lists = ()
            self._table = np.array(
                [
                    I.address_row(
                        r.code,
                        r.regs,
                        r.th,
                        r.dv,
                        r.atomic,
                        r.dpu.wram,
                        r.dma,
                        r.pmap,
                        r.scratch,
                        r.hw,
                    )
                    for r in runners
                ],
                np.int64,
            ).reshape(len(runners), I.NA)
            self._run_dpus = I.get_run_dpus_at()
        else:
            for r in runners:
                r.dv[I.D_STEP] = 0  # a compiled step runs only in the compiled loop
            self._lists = tuple(
                [r.dpu.wram if name == "wram" else getattr(r, name) for r in runners]
                for name in ("code", "regs", "th", "dv", "atomic", "wram", "dma", "scratch")
            )
            self._pmaps = [r.pmap for r in runners]
            self._run_dpus = I.run_dpus

    def takes_host_writes(self) -> bool:
        """Whether host writes may be scheduled into the runs (:meth:`IsaRunner.write_at`):
        the batch built for the running DPUs is the compiled one (it makes them), outside
        exploration (where every event keeps its own scheduler event)."""
        return self._batched() and self._jit and not self.kernel.exploring

    def set_host_writes(self, r: IsaRunner) -> None:
        """``r``'s list of host writes moved."""
        slot = self._slots.get(r)
        if slot is not None and self._jit:
            self._table[slot, I.A_HW] = r.hw.ctypes.data

    def _set_code(self, r: IsaRunner) -> None:
        """``r``'s instruction rows may have changed (an ``ldmai``)."""
        slot = self._slots[r]
        if self._jit:
            self._table[slot, I.A_CODE] = r.code.ctypes.data
            self._table[slot, I.A_NCODE] = r.code.shape[0]
        else:
            self._lists[0][slot] = r.code

    def _new_pages(self) -> None:
        self._pages = [np.zeros(1, np.uint8)]  # index 0 unused (pmap entries are 2 * index + w)
        self._page_addr = np.zeros(64, np.int64)
        self._page_ids = {}
        self._gen += 1
        for r in self._slots:  # their maps point into the old list: forget them now
            r.pmap.fill(I.PM_UNKNOWN)
            r.pmap_pages = {}
            r.pmap_gen = self._gen
            r.pmap_table = r.dpu.mram._table

    def _check_pages(self, r: IsaRunner) -> None:
        """Forget ``r``'s page map when its MRAM bank no longer holds those pages."""
        if r.pmap_gen == self._gen and r.pmap_pages:
            tab = r.dpu.mram._table
            if tab is r.pmap_table and (
                tab is None or all(tab[p] is page for p, page in r.pmap_pages.items())
            ):
                return
        elif r.pmap_gen == self._gen and r.pmap_table is r.dpu.mram._table:
            return
        r.pmap.fill(I.PM_UNKNOWN)
        r.pmap_pages = {}
        r.pmap_gen = self._gen
        r.pmap_table = r.dpu.mram._table

    def _export_pages(self, r: IsaRunner, first: int, last: int) -> None:
        """Hand the loop ``r``'s MRAM pages ``first..last``."""
        self._check_pages(r)
        if len(self._page_ids) >= self.MAX_PAGES:
            self._new_pages()
            self._check_pages(r)
        tab = r.pmap_table
        for p in range(first, last + 1):
            page = tab[p] if isinstance(tab, list) and p < len(tab) else None
            if page is None:
                r.pmap[p] = I.PM_ZERO
            else:
                idx = self._page_ids.get(id(page))
                if idx is None:
                    idx = self._page_ids[id(page)] = len(self._pages)
                    self._pages.append(page)
                    if idx >= len(self._page_addr):
                        self._page_addr = np.resize(self._page_addr, 2 * idx)
                    self._page_addr[idx] = page.ctypes.data
                # writable: a private page, whose old bytes are kept if the DPU speculates
                writable = page.flags.writeable and (not self._open or p in r.saved_pages)
                r.pmap[p] = 2 * idx + (1 if writable else 0)
            r.pmap_pages[p] = page
        if last >= r.dv[I.D_PAGES]:
            r.dv[I.D_PAGES] = last + 1

    def _python_dma(self, r: IsaRunner) -> None:
        """Serve the due transfers in Python, then give the loop their pages."""
        c = int(r.dv[I.D_CYCLE])
        if self._open:
            if r.keep_undo():
                self._undoing.append(r)
            r.spec_dmas.append(r.time_of(c))
        spans = [
            (int(r.dma[t, 2]), int(r.dma[t, 3]))
            for t in range(r.nr_threads)
            if r.th[t, I.T_RUN] == I.RUN_DMA and r.th[t, I.T_NEXT] <= c
        ]
        r._dma_due()
        for maddr, size in spans:
            self._export_pages(r, maddr >> I.PAGE_SHIFT, (maddr + size - 1) >> I.PAGE_SHIFT)

    def _advance_all(
        self, active: list[IsaRunner], until_ps: int, save: bool = False
    ) -> list[tuple[int, _Outcome]]:
        """Advance every runner of ``active`` to ``until_ps``; the index in ``active`` and the
        outcome of each whose run ended. ``save``: first make each one's checkpoint copies
        (after :meth:`IsaRunner.checkpoint`), in the compiled batch when it runs them."""
        if not self._batched():
            if save:
                for r in active:
                    r.save_state()
            outs = [r.advance(until_ps) for r in active]
            stopped = [(j, out) for j, out in enumerate(outs) if out is not None]
            if stopped:
                self._version += 1
            return stopped
        if active is self.runners and len(self._sel) == len(active):
            sel = self._sel
        else:
            slots = self._slots
            if any(r not in slots for r in active):
                self._build(active)
                slots = self._slots
            sel = np.fromiter((slots[r] for r in active), np.int64, len(active))
            if active is self.runners:
                self._sel = sel
        if save:
            # the compiled batch makes them right before the DPU runs, on its thread
            if self._jit:
                if self._copies_sel is not sel:
                    # the same until the set of DPUs changes (a DPU that boots again gets new
                    # copies, and its booting makes a new selection)
                    self._copies = np.array(
                        [r.saved_address or r.checkpoint_copies() for r in active], np.int64
                    )
                    self._copies_sel = sel
                self._table[sel, I.A_SAVE] = self._copies
            else:
                for r in active:
                    r.checkpoint_copies()
                    r.save_state()
        ended: list[tuple[int, _Outcome]] = []
        todo = list(range(len(active)))  # the indices in ``active`` of ``sel``
        while True:
            reasons = np.zeros(len(sel), np.int64)
            if not self._call(sel, until_ps, reasons):
                return ended
            # a DPU that needed Python for a transfer goes on in another pass
            again: list[int] = []
            for i in np.flatnonzero(reasons).tolist():
                j = todo[i]
                r = active[j]
                reason = int(reasons[i])
                if reason == I.R_DMA_DUE:
                    self._python_dma(r)
                    self._set_code(r)
                    again.append(j)
                    continue
                r.active = False
                self._version += 1
                if reason == I.R_END:
                    ended.append((j, _Outcome(r.time_of(int(r.dv[I.D_END])), False)))
                else:
                    ended.append((j, r._fault()))
            if not again:
                return ended
            todo = again
            sel = np.fromiter((self._slots[active[j]] for j in todo), np.int64, len(todo))

    def _call(
        self, sel: npt.NDArray[np.int64], until_ps: int, reasons: npt.NDArray[np.int64]
    ) -> int:
        """One call of the batched loop, split over numba's worker threads when compiled (each
        DPU runs on exactly one thread, so results do not depend on the split)."""
        if self._jit:
            args: tuple[Any, ...] = (self._table, self._page_addr)
        else:
            args = (*self._lists, self._pages, self._pmaps)
        workers = _workers() if self._jit else 1
        n = len(sel)
        if workers <= 1 or n < 2 * _MIN_DPUS_PER_THREAD:
            return int(self._run_dpus(*args, sel, until_ps, reasons))
        parts = min(workers, n // _MIN_DPUS_PER_THREAD)
        if self._run_parallel is None:
            self._run_parallel = I.get_run_dpus_parallel()
        with _PARALLEL_LOCK:
            return int(self._run_parallel(*args, sel, until_ps, reasons, parts))

    def _speculate(self, active: list[IsaRunner], now: int, target: int) -> int:
        """What the chunks below do from ``now`` to ``target``, in one call of the loop: every
        DPU runs to ``target`` from a checkpoint; the chunks would have stopped at the first end
        or fault plus the polling latency, so the DPUs that issued past that point go back to
        their checkpoint and run again to it. Ends are reported in the chunks' order. Returns
        where the DPUs stopped."""
        poll = timing.COMPLETION_POLL_LATENCY_PS
        self.speculations += 1
        self._open = True
        try:
            ended = self._advance_all(active, target, save=True)
        finally:
            self._open = False
        stop = min([target, *(out.time_ps + poll for _, out in ended)])
        kept: list[tuple[int, int, int, _Outcome]] = []
        redo: list[IsaRunner] = []
        finished = set()
        for j, out in ended:
            r = active[j]
            finished.add(j)
            issued = out.time_ps if out.fault else r.time_of(int(r.dv[I.D_LAST]))
            if issued < stop:
                # the chunk that would have seen it end, and the passes of that chunk's loop
                # calls before it (one more after each transfer Python served)
                chunk = (issued - now) // poll
                passes = sum(1 for d in r.spec_dmas if (d - now) // poll == chunk)
                kept.append((chunk, passes, j, out))
            else:
                redo.append(r)
        if stop < target:
            redo.extend(r for j, r in enumerate(active) if j not in finished)
        rolled_back = {id(r) for r in redo}
        for r in self._undoing:
            if id(r) not in rolled_back:
                r.commit()
        self._undoing = []
        self._reach = _MAX_CHUNKS if redo else min(2 * self._reach, _MAX_REACH)
        if redo:
            self.rollbacks += len(redo)
            for r in redo:
                r.rollback()
                self._check_pages(r)
                self._set_code(r)
            self._version += 1
            # the same instructions again, now to ``stop``: none of these DPUs issued an
            # instruction that ends its run before ``stop``, so none ends
            if self._advance_all(redo, stop):
                raise AssertionError("a DPU replayed from its checkpoint ran differently")
        for _, _, j, out in sorted(kept, key=lambda e: e[:3]):
            active[j].schedule_report(out)
        return stop

    def _lockstep(self, active: list[IsaRunner], now: int, horizon: int) -> int:
        """Advance ``active`` from ``now`` towards ``horizon`` in chunks of one polling latency
        (at most ``_MAX_CHUNKS``), stopping a latency after the first end or fault. Returns
        where the DPUs stopped."""
        poll = timing.COMPLETION_POLL_LATENCY_PS
        t = now
        chunks = 0
        while active and t < horizon and chunks < _MAX_CHUNKS:
            # one DPU alone needs no lockstep: nobody else can run past its end
            span = poll if len(active) > 1 else poll * _MAX_CHUNKS
            t_end = min(horizon, t + span)
            ended = self._advance_all(active, t_end)
            for j, out in ended:
                horizon = min(horizon, out.time_ps + poll)
                active[j].schedule_report(out)
            if ended:
                active = self._active()
            t = t_end
            chunks += 1
        return t

    def _fire(self, _: Any) -> None:
        self.entry = None
        k = self.kernel
        active = self._active()
        if not active:
            return
        now = k.now
        # events that touch no running DPU (writes scheduled into the runs instead) are not
        # horizons when the compiled batch makes those writes
        nxt = k.next_synced_event_time() if self.takes_host_writes() else k.next_event_time()
        horizon = min(k.limit, INFINITY if nxt is None else nxt)
        # the host acts only between scheduler events: check the page maps here, when some
        # MRAM bank's page table may have changed since the last check
        if self._batched() and self._checked != (MramBank.epoch, self._gen):
            for r in active:
                self._check_pages(r)
            self._checked = (MramBank.epoch, self._gen)
        if horizon <= now:
            # something else still happens now: execute only what issues before now, and come
            # back before anything at now + 1 ps
            for j, out in self._advance_all(active, now):
                active[j].schedule_report(out)
            if self._active():
                self.entry = k.call_at(now + 1, self._fire, None, _SCHEDULER_ACTOR, 0)
            return
        poll = timing.COMPLETION_POLL_LATENCY_PS
        # outside exploration, a run of speculative events that needed no rollback doubles the
        # next one's reach (the scheduler's own events are not observable there; in exploration
        # each one draws a key, so the events stay those of the chunks)
        reach = _MAX_CHUNKS if k.exploring else self._reach
        target = min(horizon, now + poll * reach)
        if len(active) > 1 and self._batched() and target - now >= poll * _SPECULATE_CHUNKS:
            t = self._speculate(active, now, target)
        else:
            t = self._lockstep(active, now, horizon)
        if self._active():
            self.entry = k.call_at(t, self._fire, None, _SCHEDULER_ACTOR, PRIO_LATE)


#: rows of a DPU's list of host writes at first (it doubles when full)
_HW_ROWS = 4
#: a scheduler event speculates (see IsaScheduler._speculate) when the DPUs may run at least
#: this many polling latencies ahead
_SPECULATE_CHUNKS = 2
#: the farthest a speculative event runs ahead, in polling latencies
_MAX_REACH = 1 << 14
#: fewer DPUs than this per thread are not worth a thread
_MIN_DPUS_PER_THREAD = 16
#: one batch split over numba's worker threads at a time (numba's "workqueue" threading layer,
#: used where no OpenMP or TBB is found, must not be entered from two threads at once)
_PARALLEL_LOCK = threading.Lock()


def _workers() -> int:
    """Threads the batched loop may use: ``AIOPIM_ISA_THREADS``, default the usable cores."""
    env = os.environ.get("AIOPIM_ISA_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _scheduler(kernel: Kernel) -> IsaScheduler:
    """The kernel's scheduler, kept on the kernel itself: a module-level table would keep every
    finished emulator alive through the scheduler's DPUs."""
    s = kernel.services.get("isa")
    if not isinstance(s, IsaScheduler):
        s = kernel.services["isa"] = IsaScheduler(kernel)
    return s


def boot_binary(dpu: Dpu, program: ElfProgram) -> None:
    """Start ``program``'s instructions on ``dpu`` (thread 0 at PC 0)."""
    dpu.runner_of(IsaRunner).start(program)
