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
chunks need (each call has a fixed cost per DPU, and on several threads every call is a
hand-over to the workers). The scheduler then checkpoints every running DPU (its arrays, and
WRAM block by block before each block's first write; Python keeps each MRAM page before its
first write and the IRAM bytes ``ldmai`` overwrites), runs them all to the horizon in one call,
and finds
where the chunks would have stopped: at the first end or fault plus the polling latency. The
DPUs that issued past that point go back to their checkpoint and run again to it, which repeats
the same instructions (a DPU's run depends only on its own state until the host acts). Ends are
reported in the order the chunks would have reported them.
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from .. import timing
from . import _engine, _interp
from . import _layout as L
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

#: pages of a DPU's MRAM page map
_NR_PAGES = -(-max(chip.mram_size for chip in timing.CHIPS.values()) >> L.PAGE_SHIFT)


def _clock_ratio(frequency_hz: int) -> tuple[int, int]:
    """(num, den): one cycle lasts ``num / den`` ps."""
    g = math.gcd(timing.PS_PER_S, frequency_hz)
    return timing.PS_PER_S // g, frequency_hz // g


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
        self.regs, self.th, self.dv, self.atomic, self.dma = _interp.fresh_state(n, 0, 0)
        self.th[0, L.T_RUN] = L.RUN_STOPPED
        self.program: ElfProgram | None = None
        self.binary: DecodedBinary | None = None
        self.code: npt.NDArray[np.int64] = np.zeros((0, NCOL), np.int64)
        self.active = False
        self.run_id = 0
        self.boot_ps = 0
        #: MRAM pages the batched loop may use (see :meth:`IsaScheduler._export_pages`)
        self.pmap = np.full(_NR_PAGES, L.PM_UNKNOWN, np.int64)
        self.pmap_gen = -1
        self.pmap_table: object = None
        self.pmap_pages: dict[int, Any] = {}
        self.trace: collections.deque[tuple[int, int, int, str]] | None = None
        #: the interpreter module of the run (see :mod:`._engine`) and its view of the arrays
        self.engine: Any = _interp
        self.core: Any = None
        #: the state at the start of a speculative run (see :meth:`IsaScheduler._speculate`)
        self._saved: tuple[npt.NDArray[Any], ...] = ()
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
        return int(np.count_nonzero(self.th[:, L.T_RUN])) if self.active else 0

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
        self.regs, self.th, self.dv, self.atomic, self.dma = _interp.fresh_state(
            self.nr_threads, len(self.dpu.iram), self.dpu.mram.size
        )
        self._hw_sources = []
        self._saved = ()  # new arrays: the checkpoint's copies are made again at the next one
        self.boot_ps = self.dpu.kernel.now
        num, den = _clock_ratio(self.dpu.chip.frequency_hz)
        self.dv[L.D_BOOT_PS] = self.boot_ps
        self.dv[L.D_WBLOCK] = _interp.wram_block_shift(len(self.dpu.wram))
        held = np.flatnonzero(self.pmap != L.PM_UNKNOWN)  # the page map outlives a run
        self.dv[L.D_PAGES] = int(held[-1]) + 1 if len(held) else 0
        self.dv[L.D_PS_NUM] = num
        self.dv[L.D_PS_DEN] = den
        self.run_id += 1
        self.active = True
        scheduler = _scheduler(self.dpu.kernel)
        self.engine = scheduler.engine
        self.core = self.engine.Core(
            self.code,
            self.regs,
            self.th,
            self.dv,
            self.atomic,
            self.dpu.wram,
            self.dma,
            self.pmap,
            scheduler.pages,
            self.hw,
        )
        self.trace = collections.deque(maxlen=self.trace_length) if self.trace_length > 0 else None
        scheduler.add(self)

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
            return L.BIG
        dv = self.dv
        return int(_interp.first_cycle(ps, self.boot_ps, int(dv[L.D_PS_NUM]), int(dv[L.D_PS_DEN])))

    @property
    def cycles(self) -> int:
        """Cycles run so far."""
        return int(self.dv[L.D_CYCLE])

    @property
    def dma_requests(self) -> int:
        """DMA requests served in this run."""
        return int(self.dv[L.D_DMA_REQS])

    @property
    def dma_bytes(self) -> int:
        """Bytes moved by this run's DMA requests."""
        return int(self.dv[L.D_DMA_BYTES])

    @property
    def instructions(self) -> int:
        """Instructions issued so far in this run."""
        return int(self.dv[L.D_INSTR])

    def advance(self, until_ps: int) -> _Outcome | None:
        """Execute the instructions issued before ``until_ps``; the outcome if the run ended."""
        limit = self.first_cycle_at(until_ps)
        cap = self.max_run_cycles
        if cap is not None:
            limit = min(limit, cap)
        dpu = self.dpu
        step = L.BIG if self.trace is None else 1
        while True:
            reason = self.engine.run(self.core, limit, step)
            if self.trace is not None:
                self._record_trace()
            if reason == L.R_LIMIT:
                if cap is not None and self.dv[L.D_CYCLE] >= cap:
                    self.active = False
                    reason_text = (
                        f"DPU {dpu.name} still running after {cap} cycles "
                        "(IsaRunner.max_run_cycles)"
                    )
                    return _Outcome(self.time_of(cap), True, reason_text)
                return None
            if reason == L.R_STEP:
                continue
            if reason == L.R_DMA_DUE:
                _scheduler(dpu.kernel).python_dma(self)
            elif reason == L.R_END:
                self.active = False
                return _Outcome(self.time_of(int(self.dv[L.D_END])), False)
            else:
                self.active = False
                return self._fault()

    def _record_trace(self) -> None:
        assert self.trace is not None and self.program is not None
        if self.dv[L.D_INSTR] == 0:
            return
        key = (int(self.dv[L.D_LAST]), int(self.dv[L.D_RR]), int(self.dv[L.D_LAST_PC]))
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
        n = int(dv[L.D_HW_N])
        if dv[L.D_HW_DONE] == n:  # all done: start the list afresh
            n = 0
            dv[L.D_HW_DONE] = 0
            self._hw_sources = []
        if n == len(self.hw):
            self.hw = np.concatenate([self.hw, np.zeros_like(self.hw)])
            self.core.set_hw(self.hw)
        num, den = int(dv[L.D_PS_NUM]), int(dv[L.D_PS_DEN])
        self.hw[n] = (
            _interp.first_cycle(time_ps, int(dv[L.D_BOOT_PS]), num, den),
            address,
            data.ctypes.data if source is None else source,
            len(data),
        )
        self._hw_sources.append(data)  # kept alive until the list starts afresh
        dv[L.D_HW_N] = n + 1
        return (self.run_id << 32) | n

    def wrote(self, write: int) -> bool:
        """Whether the batch has made write number ``write`` of :meth:`write_at`; if not,
        the caller writes the bytes itself now and it counts as made."""
        n = write & 0xFFFFFFFF
        if write >> 32 != self.run_id:
            return False  # another run's
        if self.dv[L.D_HW_DONE] > n:
            return True
        if self.active:  # the run is at the write's time
            self.dv[L.D_HW_DONE] = n + 1
        return False

    # -- speculation ----------------------------------------------------------------------------
    def _state(self) -> tuple[npt.NDArray[Any], ...]:
        return (self.regs, self.th, self.dv, self.atomic, self.dma, self.dpu.wram)

    def checkpoint(self) -> None:
        """Have the batch make the checkpoint's copies of the arrays (registers, threads, DPU
        scalars, atomic bits, DMA engine; WRAM block by block before each block's first write)
        right before the DPU next runs, on its worker thread. The loop writes only MRAM pages its
        map marks writable: the marks are cleared with the copies, and while the scheduler
        speculates a page gets its mark back once its bytes are kept (:meth:`keep_undo`)."""
        if not self._saved:
            self._saved = tuple(np.empty_like(a) for a in self._state())
            self.core.set_checkpoint(self._saved)
        self.core.save = 1

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

    def commit(self) -> None:
        """Keep what ran since the checkpoint (the batch may go on keeping WRAM blocks until
        the next checkpoint: a copy nobody reads). Only a DPU that kept an undo list needs it."""
        self._undo = None
        self.saved_pages = set()
        self.spec_dmas = []

    def rollback(self) -> None:
        """Undo everything since the checkpoint (the DPU is running again)."""
        dpu = self.dpu
        # WRAM: the blocks the batch kept before their first write since the checkpoint
        kept = int(self.dv[L.D_WKEPT])
        shift = int(self.dv[L.D_WBLOCK])
        pages = int(self.dv[L.D_PAGES])  # the page map is not rolled back
        for saved, live in zip(self._saved, self._state(), strict=True):
            if live is not dpu.wram:
                np.copyto(live, saved)
        self.dv[L.D_PAGES] = pages
        saved_wram = self._saved[-1]
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
            self.core.set_code(self.code)
        self.commit()
        self.active = True

    # -- DMA ------------------------------------------------------------------------------------
    def _dma_due(self) -> None:
        c = int(self.dv[L.D_CYCLE])
        dpu = self.dpu
        nxt = L.BIG
        for t in range(self.nr_threads):
            if self.th[t, L.T_RUN] != L.RUN_DMA:
                continue
            due = int(self.th[t, L.T_NEXT])
            if due > c:
                nxt = min(nxt, due)
                continue
            kind, waddr, maddr, size = (int(v) for v in self.dma[t])
            undo = self._undo
            if kind == L.DMA_LDMA:
                self.engine.keep_wram(self.core, waddr, waddr + size)
                dpu.wram[waddr : waddr + size] = dpu.mram.read(maddr, size)
            elif kind == L.DMA_SDMA:
                if undo is not None:
                    first, last = maddr >> L.PAGE_SHIFT, (maddr + size - 1) >> L.PAGE_SHIFT
                    for p in range(first, last + 1):
                        if p not in self.saved_pages:
                            self.saved_pages.add(p)
                            start = p << L.PAGE_SHIFT
                            undo.append((False, start, dpu.mram.read(start, 1 << L.PAGE_SHIFT)))
                # private pages, even for zeros: the loop then writes them itself from now on
                dpu.mram.own_pages(maddr >> L.PAGE_SHIFT, (maddr + size - 1) >> L.PAGE_SHIFT)
                dpu.mram.write(maddr, dpu.wram[waddr : waddr + size].copy())
            else:
                if undo is not None:
                    undo.append((True, waddr, dpu.iram[waddr : waddr + size].copy()))
                self._load_iram(waddr, dpu.mram.read(maddr, size))
            self.th[t, L.T_RUN] = L.RUN_READY
        self.dv[L.D_DMA_MIN] = nxt

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
        self.core.set_code(code)

    # -- faults ---------------------------------------------------------------------------------
    def _fault(self) -> _Outcome:
        dv = self.dv
        kind = int(dv[L.D_FKIND])
        t, pc = int(dv[L.D_FTHREAD]), int(dv[L.D_FPC])
        addr = int(dv[L.D_FADDR])
        code: int | None = None
        if kind == L.FK_SOFTWARE:
            code = int(dv[L.D_FCODE])
            meaning = RUNTIME_FAULTS.get(code)
            what = f"fault {code}" + (f" ({meaning})" if meaning else "")
        elif kind == L.FK_MEMORY:
            what = f"memory fault: WRAM access at {addr:#x} is misaligned or out of range"
        elif kind == L.FK_SAFE:
            what = f"memory fault: safe register bound exceeded (offset {addr:#x})"
        elif kind == L.FK_DMA:
            what = f"DMA fault: transfer range at {addr:#x} leaves the memory"
        elif kind == L.FK_PC:
            n = len(self.code)
            what = f"PC {pc} is outside the loaded program ({n} instructions)"
        elif kind == L.FK_THREAD:
            what = f"thread {addr} does not exist (the DPU has {self.nr_threads} threads)"
        elif kind == L.FK_UNIMPLEMENTED:
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
        return _Outcome(self.time_of(int(dv[L.D_CYCLE])), True, reason, code, t)

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

    The running DPUs advance in one call of the batch per chunk (:func:`_interp.run_cores`,
    split over worker threads, each DPU run without the GIL); a DPU returns to Python only to
    end, to fault, or for a transfer the loop cannot serve (an ``ldmai``, or an MRAM page it
    does not hold or may not write: Python serves it and hands the loop the page, private and
    writable from then on; a DPU's page map stays valid while its MRAM bank keeps the same page
    objects)."""

    #: page references kept before the shared page table is started afresh
    MAX_PAGES: ClassVar[int] = 1 << 16

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        #: the interpreter module the DPUs of this kernel run on (see :mod:`._engine`)
        self.engine: Any = _engine.engine()
        #: the runners booted and not removed, in boot order (a dict: O(1) membership for
        #: thousands of DPUs)
        self.booted: dict[IsaRunner, None] = {}
        #: the active ones among them (rebuilt by :meth:`_active` when the set may have changed)
        self.runners: list[IsaRunner] = []
        self.entry: Entry | None = None
        #: the MRAM pages the loop may use, shared by every DPU of the kernel
        self.pages: Any = self.engine.PageTable()
        self._page_ids: dict[int, int] = {}
        self._gen = 0
        # bumped whenever the set of active runners may have changed; the active list and
        # its cores are kept for that version
        self._version = 0
        self._active_version = -1
        self._cores: list[Any] = []
        # MramBank.epoch (and page-table generation) when every page map was last checked
        self._checked: tuple[int, int] = (-1, -1)
        #: speculative scheduler events, and DPUs they sent back to their checkpoint
        self.speculations = 0
        self.rollbacks = 0
        #: a speculative event's run is under way (see :meth:`_speculate`)
        self._open = False
        #: the DPUs that kept an undo list in it (:meth:`IsaRunner.keep_undo`)
        self._undoing: list[IsaRunner] = []
        #: how many polling latencies the next speculative event may run ahead
        self._reach = _MAX_CHUNKS

    def add(self, runner: IsaRunner) -> None:
        """A DPU booted at the current time."""
        self.booted.setdefault(runner)
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
            self._cores = [r.core for r in self.runners]
        return self.runners

    # -- the batched loop -----------------------------------------------------------------------
    def _batched(self) -> bool:
        return IsaRunner.trace_length <= 0 and IsaRunner.max_run_cycles is None

    def takes_host_writes(self) -> bool:
        """Whether host writes may be scheduled into the runs (:meth:`IsaRunner.write_at`):
        the batch makes them, outside exploration (where every event keeps its own scheduler
        event)."""
        return self._batched() and not self.kernel.exploring

    def _new_pages(self) -> None:
        self.pages = self.engine.PageTable()
        self._page_ids = {}
        self._gen += 1
        for r in self.booted:  # their maps point into the old table: forget them now
            self._forget_pages(r)

    def _forget_pages(self, r: IsaRunner) -> None:
        r.pmap.fill(L.PM_UNKNOWN)
        r.pmap_pages = {}
        r.pmap_gen = self._gen
        r.pmap_table = r.dpu.mram._table
        if r.core is not None:
            r.core.pages = self.pages

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
        self._forget_pages(r)

    def _export_pages(self, r: IsaRunner, first: int, last: int) -> None:
        """Hand the loop ``r``'s MRAM pages ``first..last``."""
        self._check_pages(r)
        if len(self._page_ids) >= self.MAX_PAGES:
            self._new_pages()
        tab = r.pmap_table
        for p in range(first, last + 1):
            page = tab[p] if isinstance(tab, list) and p < len(tab) else None
            if page is None:
                r.pmap[p] = L.PM_ZERO
            else:
                idx = self._page_ids.get(id(page))
                if idx is None:
                    idx = self._page_ids[id(page)] = self.pages.add(page)
                # writable: a private page, whose old bytes are kept if the DPU speculates
                writable = page.flags.writeable and (not self._open or p in r.saved_pages)
                r.pmap[p] = 2 * idx + (1 if writable else 0)
            r.pmap_pages[p] = page
        if last >= r.dv[L.D_PAGES]:
            r.dv[L.D_PAGES] = last + 1

    def python_dma(self, r: IsaRunner) -> None:
        """Serve ``r``'s due transfers in Python, then give the loop their pages."""
        c = int(r.dv[L.D_CYCLE])
        if self._open:
            if r.keep_undo():
                self._undoing.append(r)
            r.spec_dmas.append(r.time_of(c))
        spans = [
            (int(r.dma[t, 2]), int(r.dma[t, 3]))
            for t in range(r.nr_threads)
            if r.th[t, L.T_RUN] == L.RUN_DMA and r.th[t, L.T_NEXT] <= c
        ]
        r._dma_due()
        for maddr, size in spans:
            self._export_pages(r, maddr >> L.PAGE_SHIFT, (maddr + size - 1) >> L.PAGE_SHIFT)

    def _advance_all(
        self, active: list[IsaRunner], until_ps: int, save: bool = False
    ) -> list[tuple[int, _Outcome]]:
        """Advance every runner of ``active`` to ``until_ps``; the index in ``active`` and the
        outcome of each whose run ended. ``save``: first make each one's checkpoint (in the
        batch when it runs them)."""
        if not self._batched():
            assert not save, "only the batch makes checkpoints (speculation needs it)"
            outs = [r.advance(until_ps) for r in active]
            stopped = [(j, out) for j, out in enumerate(outs) if out is not None]
            if stopped:
                self._version += 1
            return stopped
        if save:
            for r in active:
                r.checkpoint()
        cores = self._cores if active is self.runners else [r.core for r in active]
        ended: list[tuple[int, _Outcome]] = []
        todo = list(range(len(active)))  # the indices in ``active`` of ``cores``
        while True:
            reasons = np.zeros(len(cores), np.int64)
            if not self._call(cores, until_ps, reasons):
                return ended
            # a DPU that needed Python for a transfer goes on in another pass
            again: list[int] = []
            for i in np.flatnonzero(reasons).tolist():
                j = todo[i]
                r = active[j]
                reason = int(reasons[i])
                if reason == L.R_DMA_DUE:
                    self.python_dma(r)
                    again.append(j)
                    continue
                r.active = False
                self._version += 1
                if reason == L.R_END:
                    ended.append((j, _Outcome(r.time_of(int(r.dv[L.D_END])), False)))
                else:
                    ended.append((j, r._fault()))
            if not again:
                return ended
            todo = again
            cores = [active[j].core for j in todo]

    def _call(self, cores: list[Any], until_ps: int, reasons: npt.NDArray[np.int64]) -> int:
        """One call of the batch, split over worker threads on the compiled engine (each DPU
        runs on exactly one thread, so results do not depend on the split)."""
        run_cores = self.engine.run_cores
        n = len(cores)
        workers = _workers() if self.engine.compiled else 1
        if workers <= 1 or n < 2 * _MIN_DPUS_PER_THREAD:
            return int(run_cores(cores, until_ps, reasons))
        parts = min(workers, n // _MIN_DPUS_PER_THREAD)
        bounds = [n * p // parts for p in range(parts + 1)]
        pool = _pool(parts)
        futures = [
            pool.submit(run_cores, cores[bounds[p] : bounds[p + 1]], until_ps, reasons, bounds[p])
            for p in range(1, parts)
        ]
        need = int(run_cores(cores[: bounds[1]], until_ps, reasons))
        return need + sum(int(f.result()) for f in futures)

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
            issued = out.time_ps if out.fault else r.time_of(int(r.dv[L.D_LAST]))
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
        k = self.kernel
        # k.host_pending: the host must act first (Ctrl-C marks it): stop at a chunk's end
        while active and t < horizon and chunks < _MAX_CHUNKS and not k.host_pending:
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
        if self._checked != (MramBank.epoch, self._gen):
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
_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool(parts: int) -> concurrent.futures.ThreadPoolExecutor:
    """The worker threads of the batch (``parts - 1`` of them at least; the caller's thread
    runs one share)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < parts - 1:
            _POOL = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(parts - 1, 1), thread_name_prefix="aiopim-dpus"
            )
        return _POOL


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
