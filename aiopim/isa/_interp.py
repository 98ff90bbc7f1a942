# ruff: noqa: SIM109
# (chains of == comparisons: the shape numba compiles best in the hot loop)
"""The interpreter loop of one DPU: cycle-level issue, every instruction's semantics.

:func:`run` is plain Python over NumPy arrays and integers only, written so that numba
compiles it unchanged (:func:`get_run` picks the compiled or the pure-Python version). It
executes one DPU from its current cycle until a stop reason: the cycle bound, the end of the
run, a fault, or a DMA it cannot serve itself (MRAM lives in Python: the loop returns a
request, and returns again when a transfer is due so that Python copies the bytes then).

State (all owned by the caller, mutated in place):

* ``regs``: ``int64[threads, 32]`` (values 0..2**32-1): r0-r23, then the constant registers
  zero, one, lneg, mneg, id, id2, id4, id8 (filled at boot, never written), so a register
  operand is one array read;
* ``th``: ``int64[threads, NTH]``: PC, run state (stopped / running / waiting for a DMA),
  earliest cycle of its next issue (or of its DMA completion), ZF, CF;
* ``dv``: ``int64[ND]``: DPU-wide scalars (current cycle, round-robin pointer, counters,
  performance counter, fault description, DMA request, window bookkeeping);
* ``atomic``: ``uint8[256]``; ``wram``: the DPU's WRAM bytes; ``dma``: ``int64[threads, 4]``
  the outstanding transfer of each thread (kind, WRAM/IRAM address, MRAM address, size).

Issue rule: one instruction per cycle per DPU, a thread at most once every
``REVOLVER_CYCLES`` cycles, ready threads in round-robin order after the last issuer.

Windows. When the n ready threads issue in a steady pattern, every one of them issues every
``max(n, REVOLVER_CYCLES)`` cycles at a fixed offset, until an instruction changes the set
of ready threads (a DMA, ``stop``, ``boot``, ``resume``...), touches state other threads read
(a store, an atomic bit), reads the clock, or faults. Instructions other than those only read
WRAM and write their own thread's registers, flags and PC, so they commute between threads: the
loop then runs such a window one thread after the other (each for up to ``WINDOW_ROUNDS`` of its
slots), which executes the same instructions at the same cycles with the same results as issuing
them cycle by cycle, and predicts far better. The first slot holding any other instruction ends
the window there (threads already run past it are run again from a snapshot of the registers
and thread states); that instruction then issues cycle by cycle as usual. ``scratch``, a work
array per DPU, holds the snapshots and the window's issue pattern, which goes on in the next
call when a window ends at the cycle bound.

Steady issue. The pattern is steady from cycle c0 exactly when every ready thread issues once
in the first period [c0, c0 + p), p = max(n, REVOLVER_CYCLES). With n < REVOLVER_CYCLES, the
thread that issued at c0 + o is ready again at c0 + p + o and, by induction over the second
period, is then the only one ready, so every period repeats the first. With n >= REVOLVER_CYCLES
every cycle of the first period issues one thread, each once. At the turn j of the second
period the ready threads are those of offsets j to n + j - REVOLVER_CYCLES (by induction), and
round-robin picks the first of them after the previous issuer: the first period's thread j,
unless one of the others sits between the two in round-robin order. The loop simulates the first
period and checks that condition (both cost O(n) when the order is round-robin). When the i-th
ready thread after the last issuer (in round-robin order) may issue at c0 + i, for every i, the
first period issues them in that order, one per cycle, and nobody sits between two of them: the
pattern is the list itself, and the loop skips both. With at most REVOLVER_CYCLES ready threads
that each become ready (at the later of their next issue and c0) at a cycle of their own within
the first period, each issues exactly then (before it, no other thread is ready and not yet
issued), so the pattern is those cycles, and the loop skips the simulation too.

Deferred spinners. A thread whose next instruction is an ``acquire`` of a bit already set that
jumps to itself changes nothing but its flags and next issue at each of its slots, until the bit
is cleared or the set of ready threads changes. When a window opens on a steady pattern with at
least ``DEFER_SPINNERS`` such threads (and one other), the loop defers them: the window rows keep
the other threads, every thread's place in the pattern is kept as the cycle of one of its slots
(``SCR_PHASE``; the next windows take their offsets from it instead of simulating the issue
rule), and the deferred threads' slots are counted only when something may change them
(``settle_spinners``): the loop stops, a DMA completes, or an instruction that ends a window is
not one of those below. Such an instruction issues right at its slot (``defer_cut``), which the
pattern gives, instead of through the round-robin pick. A ``release`` hands the lock to the
deferred spinner on that bit whose slot comes first: from that slot it is one of the window's
threads. A ``stop`` removes a thread: with more than ``REVOLVER_CYCLES`` threads every cycle
issues one, in thread order, so the others keep their next slots and the period shrinks by one;
with fewer, each keeps its cycle. A ``boot`` or ``resume`` adds one: with fewer than
``REVOLVER_CYCLES`` threads it issues at the cycle it becomes ready if no other issues there;
with more, it takes its place in thread order after the issuer and the threads after it move
one cycle later; otherwise the deferred slots are counted and the loop goes on as usual.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..timing import (
    DMA_BETA_CYCLES_PER_BYTE,
    DMA_READ_ALPHA_CYCLES,
    DMA_WRITE_ALPHA_CYCLES,
    REVOLVER_CYCLES,
)
from ._semantics import (
    C_AK,
    C_AV,
    C_BK,
    C_BV,
    C_COND,
    C_CV,
    C_D,
    C_DB,
    C_DK,
    C_ENDIAN,
    C_FLAGS,
    C_FW0,
    C_FW1,
    C_MODE,
    C_OP,
    C_PC,
    C_SRC,
    C_SUB,
    CN_C,
    CN_E,
    CN_FALSE,
    CN_GES,
    CN_GEU,
    CN_GTS,
    CN_GTU,
    CN_LARGE,
    CN_LES,
    CN_LEU,
    CN_LTS,
    CN_LTU,
    CN_MAX,
    CN_MI,
    CN_NC,
    CN_NC5,
    CN_NC9,
    CN_NC10,
    CN_NC14,
    CN_NMAX,
    CN_NOV,
    CN_NSH32,
    CN_NZ,
    CN_O,
    CN_OV,
    CN_PL,
    CN_SE,
    CN_SH32,
    CN_SMALL,
    CN_SMI,
    CN_SNZ,
    CN_SO,
    CN_SPL,
    CN_SZ,
    CN_TRUE,
    CN_XGTS,
    CN_XGTU,
    CN_XLES,
    CN_XLEU,
    CN_XNZ,
    CN_XZ,
    CN_Z,
    DK_NONE,
    DK_PAIR,
    DK_PAIR_S,
    DK_REG,
    FAST_ACQUIRE,
    FAST_ADD,
    FAST_ADDC,
    FAST_AND,
    FAST_CALL,
    FAST_LD,
    FAST_LSL,
    FAST_LSR,
    FAST_LW,
    FAST_NONE,
    FAST_OR,
    FAST_SUB,
    FAST_XOR,
    FW_AREG,
    FW_BREG,
    FW_D,
    FW_DREG,
    FW_FLAGS,
    FW_JUMP,
    FW_KIND,
    FW_PC,
    JC_LTU,
    JC_NONE,
    JC_NZ,
    JC_TRUE,
    JC_Z,
    K_REG,
    MODE_JUMP,
    MODE_SET,
    MUL_A_HIGH,
    MUL_A_SIGNED,
    MUL_B_HIGH,
    MUL_B_SIGNED,
    OP_ACQUIRE,
    OP_ADD,
    OP_ADD_SAFE,
    OP_ADDC,
    OP_AND,
    OP_ANDN,
    OP_ASR,
    OP_BOOT,
    OP_CALL,
    OP_CAO,
    OP_CLO,
    OP_CLR_RUN,
    OP_CLS,
    OP_CLZ,
    OP_CMPB4,
    OP_DIV_STEP,
    OP_EXTSB,
    OP_EXTSH,
    OP_EXTUB,
    OP_EXTUH,
    OP_FAULT,
    OP_HASH,
    OP_ILLEGAL,
    OP_LDMA,
    OP_LDMAI,
    OP_LOAD,
    OP_LSL,
    OP_LSL1,
    OP_LSL1X,
    OP_LSL_ADD,
    OP_LSL_SUB,
    OP_LSLX,
    OP_LSR,
    OP_LSR1,
    OP_LSR1X,
    OP_LSR_ADD,
    OP_LSRX,
    OP_MOVD,
    OP_MUL,
    OP_MUL_STEP,
    OP_NAND,
    OP_NOP,
    OP_NOR,
    OP_NXOR,
    OP_OR,
    OP_ORN,
    OP_READ_RUN,
    OP_RELEASE,
    OP_RESUME,
    OP_ROL,
    OP_ROL_ADD,
    OP_ROR,
    OP_SATS,
    OP_SDMA,
    OP_STOP,
    OP_STORE,
    OP_SUB,
    OP_SUB_SAFE,
    OP_SUBC,
    OP_SWAPD,
    OP_TIME,
    OP_TIME_CFG,
    OP_XOR,
    SUB_KIND_SHIFT,
    SUB_SAFE,
    SUB_SIGNED,
    SV_ID,
    SV_IMM,
)

# ---- thread columns ---------------------------------------------------------------------------
T_PC: Final = 0
T_RUN: Final = 1
T_NEXT: Final = 2
T_ZF: Final = 3
T_CF: Final = 4
NTH: Final = 5

RUN_STOPPED: Final = 0
RUN_READY: Final = 1
RUN_DMA: Final = 2

# ---- DPU scalars ------------------------------------------------------------------------------
D_CYCLE: Final = 0  # next cycle to consider
D_RR: Final = 1  # last thread that issued
D_INSTR: Final = 2  # instructions issued since boot
D_LAST: Final = 3  # cycle of the last issue
D_DMA_MIN: Final = 4  # earliest completion cycle of an outstanding DMA (BIG if none)
D_PERF_MODE: Final = 5  # 0 stopped, 1 cycles, 2 instructions
D_PERF_ACC: Final = 6
D_PERF_MARK: Final = 7
D_FKIND: Final = 8
D_FCODE: Final = 9
D_FTHREAD: Final = 10
D_FPC: Final = 11
D_FADDR: Final = 12
D_REQ: Final = 13  # thread whose DMA request is pending
D_NTHREADS: Final = 14
D_IRAM: Final = 15  # IRAM bytes (ldmai range)
D_END: Final = 16  # cycle at which the run ended
D_LAST_PC: Final = 17  # PC of the last issued instruction
D_MRAM: Final = 18  # MRAM bytes
D_BOOT_PS: Final = 19  # kernel time of cycle 0 of the run
D_PS_NUM: Final = 20  # one cycle is D_PS_NUM / D_PS_DEN picoseconds (the chip's clock)
D_PS_DEN: Final = 21
D_DMA_FREE: Final = 22  # time the DMA engine is free again (ps)
D_DMA_REQS: Final = 23  # DMA requests served since boot
D_DMA_BYTES: Final = 24  # bytes moved by them
D_ROUNDS: Final = 25  # slots per thread of the next window (0: not set yet)
D_AGAIN: Final = 26  # 1: the issue pattern of the last window (in the work array) goes on
D_WNF: Final = 27  # the number of threads of that pattern
D_CUTTER: Final = 28  # the thread whose slot ended the last window (it runs first in the next)
D_STEP: Final = 29  # address of the program's compiled fast step (0: thread_slots; see below)
#: what that step returns besides its count: next slot, last PC (two words: 30 and 31)
D_STEP_OUT: Final = 30
#: host writes scheduled into the run (compiled batch only; rows of ``cycle, WRAM address,
#: source address, size`` in time order, see ``IsaRunner.write_at``): how many are done, and
#: how many there are
D_HW_DONE: Final = 32
D_HW_N: Final = 33
#: a checkpoint's WRAM copy is made block by block (compiled batch only, see
#: :func:`keep_wram`): the copy's address (0: no checkpoint), the blocks already in it (bit b
#: for block b) and log2 of the block size (set at boot, :func:`wram_block_shift`)
D_WKEEP: Final = 34
D_WKEPT: Final = 35
D_WBLOCK: Final = 36
#: one past the highest MRAM page the DPU's page map has held since boot (the map's entries
#: from there on are unknown: a checkpoint clears the write marks below it only)
D_PAGES: Final = 37
ND: Final = 38

BIG: Final = 1 << 62

# ---- windows ----------------------------------------------------------------------------------
#: most slots of each thread in one window
WINDOW_ROUNDS: Final = 256
#: fewest threads spinning on held locks for their slots to be counted only when needed
DEFER_SPINNERS: Final = 3
#: columns of the work array: by thread, its registers (0-23; the others are constants) and
#: state (SCR_TH...) saved when it starts in a window, and whether that start was a spin
#: (SCR_SPIN: registers not saved, a spin changes none); by row, the window's threads in issue
#: order and their offsets in the period and ready-list positions, and the ready list the issue
#: rule is simulated on (thread, next issue, offset of its issue + 1)
SCR_SPIN: Final = 24
#: by thread: what its first slot in the window does (``WK_*``, set when the window opens)
SCR_KIND: Final = 25
#: by thread, while spinners are deferred: the cycle of one of its slots in the issue pattern
SCR_PHASE: Final = 26
#: and the atomic bit it spins on, and the first cycle whose slots are not counted yet
SCR_BIT: Final = 27
SCR_FROM: Final = 28
SCR_TH: Final = 32
SCR_ORDER: Final = SCR_TH + NTH
SCR_OFF: Final = SCR_ORDER + 1
SCR_READY: Final = SCR_ORDER + 2
SCR_NEXT: Final = SCR_ORDER + 3
SCR_SEEN: Final = SCR_ORDER + 4
SCR_POS: Final = SCR_ORDER + 5
NSCR: Final = SCR_ORDER + 6

# ---- stop reasons -----------------------------------------------------------------------------
R_LIMIT: Final = 0
R_END: Final = 1
R_FAULT: Final = 2
R_DMA_REQUEST: Final = 3
R_DMA_DUE: Final = 4
R_STEP: Final = 5

# ---- fault kinds ------------------------------------------------------------------------------
FK_NONE: Final = 0
FK_SOFTWARE: Final = 1  # the fault instruction (code in D_FCODE)
FK_MEMORY: Final = 2
FK_DMA: Final = 3
FK_ILLEGAL: Final = 4  # undecodable or illegal word (decode status in D_FCODE)
FK_PC: Final = 5  # PC outside the loaded instructions
FK_THREAD: Final = 6  # boot/resume of a thread the DPU does not have
FK_UNIMPLEMENTED: Final = 7
FK_SAFE: Final = 8  # safe-register bound exceeded (a memory fault)

# DMA kinds (column 0 of ``dma``)
DMA_LDMA: Final = 1
DMA_SDMA: Final = 2
DMA_LDMAI: Final = 3

M32: Final = 0xFFFFFFFF


#: what a thread's next instruction does in a window (:func:`window_kind`)
WK_RUNS: Final = 0
WK_ENDS: Final = 1
WK_SPINS: Final = 2


def window_kind(
    code: npt.NDArray[np.int64],
    regs: npt.NDArray[np.int64],
    th: npt.NDArray[np.int64],
    atomic: npt.NDArray[np.uint8],
    t: int,
) -> int:
    """What thread ``t``'s next instruction does inside a window.

    ``WK_ENDS``: it cannot issue there (a PC outside the program, or an instruction that
    changes what other threads see or which threads are ready, or reads the clock). An acquire
    of a bit already set, a boot/resume of a thread not stopped and a clr_run of a thread not
    ready change nothing (no thread can change those inside a window) and may issue there.
    ``WK_SPINS``: an acquire of a bit already set that jumps back to itself (a spin on a held
    lock): it issues that row at every slot, changing nothing but its flags and next issue.
    ``WK_RUNS``: any other instruction, which issues in the window."""
    pc = th[t, T_PC]
    if pc < 0 or pc >= code.shape[0]:
        return WK_ENDS
    w0 = code[pc, C_FW0]
    f = w0 & FW_KIND
    if f == FAST_ACQUIRE:
        w1 = code[pc, C_FW1]
        av = w1 & M32
        if (w0 >> FW_AREG) & 1:
            av = regs[t, av]
        if not acquire_bit_set(av, w0, w1, regs, atomic, t):
            return WK_ENDS
        jc = (w0 >> FW_JUMP) & 7
        if w0 >> FW_PC == pc and (jc == JC_TRUE or jc == JC_NZ):
            return WK_SPINS
        return WK_RUNS
    if f != FAST_NONE:
        return WK_RUNS  # the common case: a row of the fast step
    op = code[pc, C_OP]
    if not ((op >= OP_STORE and op <= OP_TIME_CFG) or op == OP_ILLEGAL):
        return WK_RUNS
    if op != OP_ACQUIRE and not (op >= OP_BOOT and op <= OP_READ_RUN):
        return WK_ENDS
    wa = code[pc, C_AV]
    if code[pc, C_AK] == K_REG:
        wa = regs[t, wa]
    wb = code[pc, C_BV]
    if code[pc, C_BK] == K_REG:
        wb = regs[t, wb]
    wv = ((wa & M32) + (wb & M32)) & 0xFFFF
    wi = ((wv >> 8) ^ wv) & 0xFF
    if op == OP_ACQUIRE:
        return WK_ENDS if atomic[wi] == 0 else WK_RUNS
    if wi >= th.shape[0] or op == OP_READ_RUN:
        return WK_RUNS  # a fault (which ends the window where it happens) or a read
    if op == OP_CLR_RUN:
        return WK_ENDS if th[wi, T_RUN] == RUN_READY else WK_RUNS
    return WK_ENDS if th[wi, T_RUN] == RUN_STOPPED else WK_RUNS


def acquire_bit_set(
    av: int,
    w0: int,
    w1: int,
    regs: npt.NDArray[np.int64],
    atomic: npt.NDArray[np.uint8],
    t: int,
) -> bool:
    """Whether the atomic bit of thread ``t``'s fast ``acquire`` row (packed words ``w0``,
    ``w1``; first operand ``av``) is set."""
    return bool(atomic[acquire_bit(av, w0, w1, regs, t)] != 0)


def acquire_bit(av: int, w0: int, w1: int, regs: npt.NDArray[np.int64], t: int) -> int:
    """The atomic bit of thread ``t``'s fast ``acquire`` row (packed words ``w0``, ``w1``;
    first operand ``av``)."""
    bv = (w1 >> 32) & M32
    if (w0 >> FW_BREG) & 1:
        bv = regs[t, bv]
    wv = ((av & M32) + (bv & M32)) & 0xFFFF
    return int(((wv >> 8) ^ wv) & 0xFF)


def thread_slots(
    code: npt.NDArray[np.int64],
    regs: npt.NDArray[np.int64],
    th: npt.NDArray[np.int64],
    wram: npt.NDArray[np.uint8],
    atomic: npt.NDArray[np.uint8],
    t: int,
    cs: int,
    fe: int,
    per: int,
) -> tuple[int, int, int]:
    """Inside a window: issue thread ``t``'s instructions at its slots ``cs, cs + per, ...``
    before ``fe`` while they are rows of a fast kind (``C_FW0``: 32-bit add/sub/logic/shift
    with a register or no destination, plain or with a true/z/nz/ltu/geu jump; aligned
    little-endian ``lw``/``ld`` with no flags; ``call``/``jump``; an ``acquire`` of a bit
    already set), with the thread's PC and flags in locals. Returns the first slot not issued,
    the number issued and the PC of the last one (-1 if none); the caller issues the rest."""
    nprog = code.shape[0]
    wram_size = wram.shape[0]
    pc = th[t, T_PC]
    zf = th[t, T_ZF]
    cf = th[t, T_CF]
    n = 0
    lastpc = -1
    while cs < fe:
        if pc < 0 or pc >= nprog:
            break
        # the row's fields packed in two words (C_FW0, C_FW1): one cache line per instruction
        w0 = code[pc, C_FW0]
        f = w0 & FW_KIND
        if f == FAST_NONE:
            break
        w1 = code[pc, C_FW1]
        av = w1 & M32
        if (w0 >> FW_AREG) & 1:
            av = regs[t, av]
        if f >= FAST_ADD:
            bv = (w1 >> 32) & M32
            if (w0 >> FW_BREG) & 1:
                bv = regs[t, bv]
            av &= M32
            bv &= M32
            fcy = 0
            if f == FAST_ADD:
                fs = av + bv
                fx = fs & M32
                fcy = fs >> 32
            elif f == FAST_SUB:
                fs = av + ((~bv) & M32) + 1
                fx = fs & M32
                fcy = fs >> 32
            elif f == FAST_AND:
                fx = av & bv
            elif f == FAST_OR:
                fx = av | bv
            elif f == FAST_XOR:
                fx = av ^ bv
            elif f == FAST_LSL:
                fx = (av << (bv & 31)) & M32
            elif f == FAST_LSR:
                fx = av >> (bv & 31)
            elif f == FAST_ADDC:
                fs = av + bv + cf
                fx = fs & M32
                fcy = fs >> 32
            else:
                fs = av + ((~bv) & M32) + cf
                fx = fs & M32
                fcy = fs >> 32
            jc = (w0 >> FW_JUMP) & 7
            taken = False
            if jc != JC_NONE:
                if jc == JC_TRUE:
                    taken = True
                elif jc == JC_Z:
                    taken = fx == 0
                elif jc == JC_NZ:
                    taken = fx != 0
                elif jc == JC_LTU:
                    taken = fcy == 0
                else:
                    taken = fcy != 0
            if (w0 >> FW_FLAGS) & 1:
                zf = 1 if fx == 0 else 0
            if (w0 >> FW_FLAGS) & 2:
                cf = fcy
            if (w0 >> FW_DREG) & 1:
                regs[t, (w0 >> FW_D) & 63] = fx
            lastpc = pc
            if taken:
                pc = w0 >> FW_PC
            else:
                pc += 1
        elif f == FAST_LW:
            fa = (av + (w1 >> 32)) & M32
            if fa + 4 > wram_size or fa & 3 != 0:
                break
            regs[t, (w0 >> FW_D) & 63] = (
                int(wram[fa])
                | (int(wram[fa + 1]) << 8)
                | (int(wram[fa + 2]) << 16)
                | (int(wram[fa + 3]) << 24)
            )
            lastpc = pc
            pc += 1
        elif f == FAST_LD:
            fa = (av + (w1 >> 32)) & M32
            if fa + 8 > wram_size or fa & 7 != 0:
                break
            d = (w0 >> FW_D) & 63
            regs[t, d] = (
                int(wram[fa + 4])
                | (int(wram[fa + 5]) << 8)
                | (int(wram[fa + 6]) << 16)
                | (int(wram[fa + 7]) << 24)
            )
            regs[t, d + 1] = (
                int(wram[fa])
                | (int(wram[fa + 1]) << 8)
                | (int(wram[fa + 2]) << 16)
                | (int(wram[fa + 3]) << 24)
            )
            lastpc = pc
            pc += 1
        elif f == FAST_CALL:
            bv = (w1 >> 32) & M32
            if (w0 >> FW_BREG) & 1:
                bv = regs[t, bv]
            if (w0 >> FW_DREG) & 1:
                regs[t, (w0 >> FW_D) & 63] = (pc + 1) & M32
            lastpc = pc
            pc = (av + bv) & M32
        else:
            # an acquire of a bit already set (a spin on a held lock) changes no state
            if not acquire_bit_set(av, w0, w1, regs, atomic, t):
                break
            jc = (w0 >> FW_JUMP) & 7
            if (w0 >> FW_FLAGS) & 1:
                zf = 0
            if (w0 >> FW_FLAGS) & 2:
                cf = 0
            lastpc = pc
            if jc == JC_TRUE or jc == JC_NZ:
                pc = w0 >> FW_PC
            else:
                pc += 1
        n += 1
        cs += per
    th[t, T_PC] = pc
    th[t, T_ZF] = zf
    th[t, T_CF] = cf
    if n > 0:
        th[t, T_NEXT] = cs - per + REVOLVER_CYCLES
    return cs, n, lastpc


#: bit index of a power of two below 2**32 (De Bruijn sequence 0x077CB531)
_LOW_BIT: Final = (
    0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
    31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9,
)  # fmt: skip


def low_bit(m: int) -> int:
    """The index of the lowest set bit of ``m`` (``0 < m < 2**32``)."""
    return _LOW_BIT[(((m & -m) * 0x077CB531) & M32) >> 27]


def call_step(
    step: int,
    regs: npt.NDArray[np.int64],
    wram: npt.NDArray[np.uint8],
    atomic: npt.NDArray[np.uint8],
    th: npt.NDArray[np.int64],
    dv: npt.NDArray[np.int64],
    t: int,
    cs: int,
    fe: int,
    per: int,
) -> int:
    """:func:`thread_slots` through the program's compiled step at address ``step`` (see
    :mod:`._specialize`): the number issued; the next slot and the last PC in
    ``dv[D_STEP_OUT:]``. Only the compiled loop can call it."""
    return _call_step(step, regs, wram, atomic, th, dv, t, cs, fe, per)  # type: ignore[no-any-return]


def keep_wram(dv: npt.NDArray[np.int64], wram: npt.NDArray[np.uint8], lo: int, hi: int) -> None:
    """Before WRAM bytes ``[lo, hi)`` change: while a checkpoint is kept (``dv[D_WKEEP]``, the
    address of its WRAM copy), copy there each block among them not copied yet."""
    to = dv[D_WKEEP]
    if to == 0 or hi <= lo:
        return
    shift = dv[D_WBLOCK]
    for b in range(lo >> shift, ((hi - 1) >> shift) + 1):
        bit = 1 << b
        if dv[D_WKEPT] & bit == 0:
            a = b << shift
            n = wram.shape[0] - a
            if n > 1 << shift:
                n = 1 << shift
            copy_out(to + a, wram, a, n)
            dv[D_WKEPT] |= bit


def wram_block_shift(size: int) -> int:
    """log2 of the block size of :func:`keep_wram` for a WRAM of ``size`` bytes: at most 62
    blocks (their marks are one int64), of at least 8 bytes."""
    shift = 3
    while (size + (1 << shift) - 1) >> shift > 62:
        shift += 1
    return shift


def copy_out(to: int, wram: npt.NDArray[np.uint8], start: int, n: int) -> None:
    """Copy ``n`` bytes of ``wram`` from index ``start`` to the address ``to``."""
    ctypes.memmove(int(to), wram.ctypes.data + int(start), int(n))


def copy_row(
    dst: npt.NDArray[np.int64],
    di: int,
    dcol: int,
    src: npt.NDArray[np.int64],
    si: int,
    scol: int,
    n: int,
) -> None:
    """Copy ``n`` words of row ``si`` of ``src`` from column ``scol`` to row ``di`` of ``dst``
    from column ``dcol`` (one ``memcpy`` in the compiled loop)."""
    for j in range(n):
        dst[di, dcol + j] = src[si, scol + j]


def sort_rows(scratch: npt.NDArray[np.int64], nf: int) -> None:
    """Put the window's ``nf`` rows (thread, offset) in issue order: by offset in the period
    (an insertion sort; they are nearly in order, rotated or with one row moved)."""
    for q in range(1, nf):
        j = q
        while j > 0 and scratch[j - 1, SCR_OFF] > scratch[j, SCR_OFF]:
            for col in (SCR_ORDER, SCR_OFF):
                v = scratch[j - 1, col]
                scratch[j - 1, col] = scratch[j, col]
                scratch[j, col] = v
            j -= 1


def settle_spinners(
    code: npt.NDArray[np.int64],
    th: npt.NDArray[np.int64],
    scratch: npt.NDArray[np.int64],
    mask: int,
    end: int,
    per: int,
    last: int,
    rr: int,
    lastpc: int,
) -> tuple[int, int, int, int]:
    """Issue the deferred spinners' slots (threads ``mask``, each once every ``per`` cycles from
    its ``SCR_PHASE``) from its ``SCR_FROM`` to ``end``: each spin changes only the thread's flags
    and next issue. Returns the slots, and the latest issue (cycle, thread, PC) given the one so
    far."""
    n = 0
    m = mask
    while m != 0:
        u = low_bit(m)
        m &= m - 1
        start = scratch[u, SCR_FROM]
        scratch[u, SCR_FROM] = end
        f = start + (scratch[u, SCR_PHASE] - start) % per
        if f < end:
            k = (end - 1 - f) // per + 1
            lu = f + (k - 1) * per
            n += k
            th[u, T_NEXT] = lu + REVOLVER_CYCLES
            pc = th[u, T_PC]
            w0 = code[pc, C_FW0]
            if (w0 >> FW_FLAGS) & 1:
                th[u, T_ZF] = 0
            if (w0 >> FW_FLAGS) & 2:
                th[u, T_CF] = 0
            if lu > last:
                last = lu
                rr = u
                lastpc = pc
    return n, last, rr, lastpc


def spin_safe(code: npt.NDArray[np.int64], th: npt.NDArray[np.int64], t: int) -> bool:
    """Whether thread ``t``'s next instruction may issue while spinners are deferred: it cannot
    stop them spinning, or (``release``, ``stop``, ``boot``, ``resume``) the loop keeps the
    deferred pattern right where it issues. DMAs, ``clr_run``, ``read_run``, the clock, faults
    and undecodable words may not."""
    pc = th[t, T_PC]
    if pc < 0 or pc >= code.shape[0]:
        return False
    op = code[pc, C_OP]
    if not ((op >= OP_STORE and op <= OP_TIME_CFG) or op == OP_ILLEGAL):
        return True
    return bool(
        op == OP_STORE
        or op == OP_ACQUIRE
        or op == OP_RELEASE
        or op == OP_STOP
        or op == OP_RESUME
        or op == OP_BOOT
    )


def spin_bit(code: npt.NDArray[np.int64], regs: npt.NDArray[np.int64], t: int, pc: int) -> int:
    """The atomic bit of thread ``t``'s fast ``acquire`` row ``pc``."""
    w0 = code[pc, C_FW0]
    w1 = code[pc, C_FW1]
    av = w1 & M32
    if (w0 >> FW_AREG) & 1:
        av = regs[t, av]
    return acquire_bit(av, w0, w1, regs, t)


def _no_compiled_step(*args: Any) -> int:
    raise RuntimeError("a program's compiled fast step runs only in the compiled loop")


#: the body of :func:`call_step`: numba's intrinsic once :func:`jit_dispatcher` has run
_call_step: Callable[..., Any] = _no_compiled_step


def run(
    code: npt.NDArray[np.int64],
    regs: npt.NDArray[np.int64],
    th: npt.NDArray[np.int64],
    dv: npt.NDArray[np.int64],
    atomic: npt.NDArray[np.uint8],
    wram: npt.NDArray[np.uint8],
    dma: npt.NDArray[np.int64],
    cycle_limit: int,
    max_issue: int,
    scratch: npt.NDArray[np.int64],
) -> int:
    """Run until ``cycle_limit`` (exclusive) or a stop reason; at most ``max_issue``
    instructions (``R_STEP`` when reached; pass a huge number for no bound). ``scratch`` is an
    ``int64[>= threads, NSCR]`` work array (see :func:`scratch`)."""
    nprog = code.shape[0]
    nthreads = dv[D_NTHREADS]
    wram_size = wram.shape[0]
    c = dv[D_CYCLE]
    rr = dv[D_RR]
    dma_min = dv[D_DMA_MIN]
    issued = 0
    # counters of the issue loop, kept in locals and stored back when the loop stops
    instr = dv[D_INSTR]
    last = dv[D_LAST]
    lastpc = dv[D_LAST_PC]
    step = dv[D_STEP]  # the program's own fast step (compiled loop only), or 0
    # ---- thread-major windows (see "Windows" in the module docstring) ----
    fw = False  # inside a window
    fend = False  # the slot ``cs`` of thread ``t`` cannot be issued in the window
    cool = 0  # exact issues left before the next attempt to open a window
    # threads spinning on held locks, their slots counted only when something may stop them
    # (``settle_spinners``): while ``defer``, the issue pattern holds, the window rows are the
    # other threads', and a slot that ends a window issues right after it (``defer_cut``)
    defer = False
    deferred = 0
    ndefer = 0
    defer_since = 0  # no deferred slot before this cycle is uncounted
    defer_cut = -1
    hold = -1  # and no attempt before this cycle has passed
    rounds = dv[D_ROUNDS]  # slots per thread of the next window (halved by a re-run)
    if rounds <= 0:
        rounds = WINDOW_ROUNDS
    nf = 0  # ready threads of the window, in issue order in ``scratch[:, SCR_ORDER]``
    per = 0  # cycles between two issues of one thread
    c0 = 0  # first cycle of the window
    fe = 0  # end of the window (exclusive)
    k = 0  # index of the thread being run (-1: the window's first one is next)
    cs = 0  # cycle of its current slot
    t = 0
    w_instr = w_issued = w_last = w_rr = w_lastpc = 0  # counters at the window's start
    b_last = b_rr = b_lastpc = 0  # latest issue of the threads done so far
    s_last = s_rr = s_lastpc = s_next = 0  # before the current slot (undone if it cannot issue)
    # the last window ended by its length or the cycle limit: the next one opens where it ended,
    # with the same threads at the same offsets in the period (rotated to its end)
    again = dv[D_AGAIN] != 0
    if again:
        nf = dv[D_WNF]
        per = nf if nf > REVOLVER_CYCLES else REVOLVER_CYCLES
    fcut = False  # the window's end was set by a slot that cannot issue
    # the ready threads, bit t for thread t (only this loop's instructions change them while it
    # runs; DMA completions happen between two calls)
    ready = 0
    for q in range(nthreads):
        if th[q, T_RUN] == RUN_READY:
            ready |= 1 << q
    reason = R_LIMIT
    while True:
        if fw:
            if fend:
                fend = False
                fcut = True
                fe = cs
                if b_last >= fe:
                    # a thread run before this one issued at or after the new end: run the
                    # window again from its start (threads only read shared state inside it),
                    # and open shorter windows from now on
                    if rounds > 2:
                        rounds >>= 1
                    for kk in range(k + 1):
                        q = scratch[kk, SCR_ORDER]
                        if scratch[q, SCR_SPIN] == 0:
                            copy_row(regs, q, 0, scratch, q, 0, 24)
                        copy_row(th, q, 0, scratch, q, SCR_TH, NTH)
                    instr = w_instr
                    issued = w_issued
                    last = b_last = w_last
                    rr = b_rr = w_rr
                    lastpc = b_lastpc = w_lastpc
                    k = -1  # the first thread starts again below, as every next one does
            else:
                cs += per
            while True:
                if k >= 0 and cs < fe:
                    if step != 0:
                        done = call_step(step, regs, wram, atomic, th, dv, t, cs, fe, per)
                        cs = dv[D_STEP_OUT]
                        donepc = dv[D_STEP_OUT + 1]
                        pc = th[t, T_PC]
                        if cs < fe and pc >= 0 and pc < nprog and code[pc, C_FW0] != 0:
                            # a fast row outside the step's loops: the generic step goes on
                            cs, more, morepc = thread_slots(
                                code, regs, th, wram, atomic, t, cs, fe, per
                            )
                            if more > 0:
                                done += more
                                donepc = morepc
                    else:
                        cs, done, donepc = thread_slots(
                            code, regs, th, wram, atomic, t, cs, fe, per
                        )
                    if done > 0:
                        instr += done
                        issued += done
                        rr = t
                        last = cs - per
                        lastpc = donepc
                    if cs < fe:
                        break  # an instruction the general step issues
                # thread t is done: the next one
                if last > b_last:
                    b_last = last
                    b_rr = rr
                    b_lastpc = lastpc
                k += 1
                if k >= nf:
                    break
                t = scratch[k, SCR_ORDER]
                copy_row(scratch, t, SCR_TH, th, t, 0, NTH)
                cs = c0 + scratch[k, SCR_OFF]
                if cs < fe and scratch[t, SCR_KIND] == WK_SPINS:
                    # every slot to the window's end spins: count them instead of running them
                    scratch[t, SCR_SPIN] = 1
                    done = (fe - 1 - cs) // per + 1
                    cs += done * per
                    w0 = code[th[t, T_PC], C_FW0]
                    if (w0 >> FW_FLAGS) & 1:
                        th[t, T_ZF] = 0
                    if (w0 >> FW_FLAGS) & 2:
                        th[t, T_CF] = 0
                    th[t, T_NEXT] = cs - per + REVOLVER_CYCLES
                    instr += done
                    issued += done
                    rr = t
                    last = cs - per
                    lastpc = th[t, T_PC]
                else:
                    scratch[t, SCR_SPIN] = 0
                    copy_row(scratch, t, 0, regs, t, 0, 24)
            if k >= nf:
                # the window is done: every issue before ``fe`` happened
                fw = False
                c = fe
                last = b_last
                rr = b_rr
                lastpc = b_lastpc
                if not fcut and fe < dma_min:
                    # ended by its length or the cycle limit: the issue pattern goes on from fe
                    if fe != c0 + rounds * per:
                        for q in range(nf):
                            scratch[q, SCR_OFF] = (c0 + scratch[q, SCR_OFF] - fe) % per
                    elif rounds < WINDOW_ROUNDS:
                        rounds <<= 1
                    # in issue order again (rotated, or with the cutter put first)
                    sort_rows(scratch, nf)
                    cool = 0
                    again = True
                else:
                    # cut by a slot that cannot issue in a window: issue that one, then try
                    # again (with the thread that cut it first)
                    cool = 1
                    if defer and fcut:
                        defer_cut = dv[D_CUTTER]
                continue
            if window_kind(code, regs, th, atomic, t) == WK_ENDS:
                fend = True
                dv[D_CUTTER] = t
                continue
            c = cs
            s_last = last
            s_rr = rr
            s_lastpc = lastpc
            s_next = th[t, T_NEXT]
        elif (
            defer
            and defer_cut >= 0
            and c < dma_min
            and c < cycle_limit
            and spin_safe(code, th, defer_cut)
        ):
            # the slot that ended the window, issued now (the pattern says whose it is)
            t = defer_cut
            defer_cut = -1
            cool = 0
            hold = c
        else:
            if defer and (defer_cut >= 0 or dma_min <= c or c >= cycle_limit):
                # the pattern may change: count the spinners' slots, then go on as usual
                done, last, rr, lastpc = settle_spinners(
                    code, th, scratch, deferred, c, per, last, rr, lastpc
                )
                instr += done
                issued += done
                defer = False
                defer_cut = -1
                again = False
            if dma_min <= c:
                again = False  # a thread becomes ready: another issue pattern
                reason = R_DMA_DUE
                break
            if cool <= 0 and c > hold and c < cycle_limit and nthreads > 0:
                fcut = False
                if defer and (
                    issued + ndefer * ((c - defer_since) // per + rounds + 2) + nf * rounds
                    > max_issue
                ):
                    # the instruction bound may fall in the next window: no more deferring
                    done, last, rr, lastpc = settle_spinners(
                        code, th, scratch, deferred, c, per, last, rr, lastpc
                    )
                    instr += done
                    issued += done
                    defer = False
                    again = False  # the rows are not all the threads'
                if defer:
                    # the other threads' rows, their offsets from their phases
                    again = False
                    steady = True
                    c0 = c
                    for q in range(nf):
                        scratch[q, SCR_OFF] = (scratch[scratch[q, SCR_ORDER], SCR_PHASE] - c0) % per
                    sort_rows(scratch, nf)
                elif again:
                    again = False
                    steady = True
                    c0 = c
                else:
                    # open a window if the ready threads are in steady issue: every ready thread
                    # issues once in the first period (see "Steady issue" in the module docstring)
                    nf = 0
                    in_turn = True
                    # the ready threads in round-robin order: those after rr, then the others
                    above = ready & ~((2 << rr) - 1)
                    m = above
                    while True:
                        if m == 0:
                            if above < 0:
                                break
                            m = ready & ((2 << rr) - 1)
                            above = -1
                            continue
                        u = low_bit(m)
                        m &= m - 1
                        nx = th[u, T_NEXT]
                        scratch[nf, SCR_READY] = u
                        scratch[nf, SCR_NEXT] = nx
                        # the common case: each issues at its turn in the list (the pattern is
                        # then the list itself, see below)
                        scratch[nf, SCR_ORDER] = u
                        scratch[nf, SCR_OFF] = nf
                        if nx > c + nf:
                            in_turn = False
                        nf += 1
                    per = nf if nf > REVOLVER_CYCLES else REVOLVER_CYCLES
                    steady = nf > 0
                    c0 = c
                    simulate = steady and not in_turn
                    if simulate and nf <= REVOLVER_CYCLES and nthreads <= 32:
                        # at most one thread per cycle of the period becomes ready (each at the
                        # later of its next issue and c0): then each issues exactly there, and
                        # nothing needs simulating. ``taken``: bit o for offset o; ``at``: the
                        # thread of offset o in bits 5o..5o+4
                        taken = 0
                        at = 0
                        simulate = False
                        for q in range(nf):
                            o = scratch[q, SCR_NEXT] - c0
                            if o < 0:
                                o = 0
                            if o >= REVOLVER_CYCLES or (taken >> o) & 1:
                                simulate = True
                                break
                            taken |= 1 << o
                            at |= scratch[q, SCR_READY] << (5 * o)
                        if not simulate:
                            m = 0
                            for o in range(REVOLVER_CYCLES):
                                if (taken >> o) & 1:
                                    scratch[m, SCR_ORDER] = (at >> (5 * o)) & 31
                                    scratch[m, SCR_OFF] = o
                                    m += 1
                    if simulate:
                        # simulate the issue rule for one period (``picked``: bit p for ready-list
                        # position p, a mask rather than a column to clear: LLVM vectorises such a
                        # loop with constants it then keeps in vector registers, saved and
                        # restored around every call of the step)
                        picked = 0
                        m = 0
                        # ready-list position of the last issuer (the list starts after it)
                        pos = -1
                        y = c0
                        while y < c0 + per:
                            pick = -1
                            soonest = BIG
                            for q in range(nf):
                                p = pos + 1 + q
                                if p >= nf:
                                    p -= nf
                                nx = scratch[p, SCR_NEXT]
                                if nx <= y:
                                    pick = p
                                    break
                                if nx < soonest:
                                    soonest = nx
                            if pick < 0:
                                if nf >= REVOLVER_CYCLES:
                                    steady = False  # an idle cycle: some thread misses the period
                                    break
                                y = soonest  # nobody issues before then
                                continue
                            if (picked >> pick) & 1:
                                steady = False  # twice in one period
                                break
                            picked |= 1 << pick
                            scratch[pick, SCR_NEXT] = y + REVOLVER_CYCLES
                            scratch[pick, SCR_SEEN] = y - c0 + 1
                            scratch[m, SCR_ORDER] = scratch[pick, SCR_READY]
                            scratch[m, SCR_OFF] = y - c0
                            scratch[m, SCR_POS] = pick
                            pos = pick
                            m += 1
                            y += 1
                        steady = steady and m == nf
                    if steady and not in_turn and nf > REVOLVER_CYCLES:
                        # (here the period was simulated and picked every position once, so the
                        # SCR_SEEN column, never cleared, holds this period's offsets for all)
                        # the second period repeats the first unless a thread ready at some turn
                        # sits, in round-robin order, between the previous issuer and that turn's
                        for j in range(nf):
                            p = scratch[nf - 1 if j == 0 else j - 1, SCR_POS] + 1
                            b = scratch[j, SCR_POS]
                            while steady:
                                if p >= nf:
                                    p -= nf
                                if p == b:
                                    break
                                o = scratch[p, SCR_SEEN] - 1
                                if o > j and o <= nf + j - REVOLVER_CYCLES:
                                    steady = False
                                p += 1
                            if not steady:
                                break
                fe = c0 + rounds * per
                if steady:
                    # the first thread (in issue order) whose first slot cannot issue ends the
                    # window there; with enough threads, all are looked at for spinners
                    count_spins = defer or nf > DEFER_SPINNERS
                    spins = 0
                    for q in range(nf):
                        u = scratch[q, SCR_ORDER]
                        kind = window_kind(code, regs, th, atomic, u)
                        scratch[u, SCR_KIND] = kind
                        if kind == WK_SPINS:
                            spins += 1
                        elif kind == WK_ENDS and not fcut:
                            fe = c0 + scratch[q, SCR_OFF]
                            fcut = True
                            dv[D_CUTTER] = u
                            if not count_spins:
                                break
                    if (
                        count_spins
                        and spins > 0
                        and spins < nf
                        and (
                            defer
                            or (spins >= DEFER_SPINNERS and issued + nf * (rounds + 2) <= max_issue)
                        )
                    ):
                        # defer the spinners: the rows keep the other threads
                        if not defer:
                            defer = True
                            defer_since = c0
                            deferred = 0
                            ndefer = 0
                            for q in range(nf):
                                u = scratch[q, SCR_ORDER]
                                scratch[u, SCR_PHASE] = c0 + scratch[q, SCR_OFF]
                        m = 0
                        for q in range(nf):
                            u = scratch[q, SCR_ORDER]
                            if scratch[u, SCR_KIND] == WK_SPINS:
                                deferred |= 1 << u
                                ndefer += 1
                                scratch[u, SCR_FROM] = c0
                                scratch[u, SCR_BIT] = spin_bit(code, regs, u, th[u, T_PC])
                            else:
                                scratch[m, SCR_ORDER] = u
                                scratch[m, SCR_OFF] = scratch[q, SCR_OFF]
                                m += 1
                        nf = m
                if fe > cycle_limit:
                    fe = cycle_limit
                if fe > dma_min:
                    fe = dma_min
                if (
                    steady
                    and c0 + scratch[0, SCR_OFF] + per < fe
                    and issued + nf * rounds <= max_issue
                ):
                    cutter = dv[D_CUTTER]
                    if scratch[0, SCR_ORDER] != cutter:
                        # the thread that ended the last window is likely to end this one too:
                        # run it first, so that the others stop where it does (no re-run), and
                        # the first in issue order next (often the next to end it)
                        for q in range(1, nf):
                            if scratch[q, SCR_ORDER] == cutter:
                                for col in (SCR_ORDER, SCR_OFF):
                                    v0, v1 = scratch[0, col], scratch[1, col]
                                    scratch[0, col] = scratch[q, col]
                                    scratch[q, col] = v1
                                    scratch[1, col] = v0
                                break
                    w_instr = instr
                    w_issued = issued
                    w_last = b_last = last
                    w_rr = b_rr = rr
                    w_lastpc = b_lastpc = lastpc
                    k = -1  # the first thread starts below, as every next one does
                    fw = True
                    continue
                if (fcut or defer) and c0 + scratch[0, SCR_OFF] + per >= fe:
                    # too short for a window: the slots before its end are each thread's first
                    # of the pattern, and each of those instructions may issue in a window, so
                    # they issue now in issue order (their cycles and order issued one by one);
                    # the slot that ends it issues cycle by cycle, then try again
                    cool = 0
                    hold = fe
                    if issued + nf <= max_issue:
                        c = fe
                        for q in range(nf):
                            cs = c0 + scratch[q, SCR_OFF]
                            if cs >= fe:
                                break
                            u = scratch[q, SCR_ORDER]
                            done = 0
                            if code[th[u, T_PC], C_FW0] != 0:
                                _, done, donepc = thread_slots(
                                    code, regs, th, wram, atomic, u, cs, cs + 1, 1
                                )
                            if done == 0:
                                c = cs  # the general step issues this one
                                dv[D_CUTTER] = u
                                break
                            rr = u
                            issued += 1
                            last = cs
                            lastpc = donepc
                            instr += 1
                        if defer and (fcut or c < fe):
                            # the slot at c issues next (the cutter's, or one the general step
                            # issues)
                            defer_cut = dv[D_CUTTER]
                    continue
                else:
                    cool = nthreads
            cool -= 1
            # pick the next ready thread in round-robin order
            t = -1
            earliest = BIG
            # the common case first: the thread after the last issuer is ready
            u = rr + 1
            if u >= nthreads:
                u = 0
            if (ready >> u) & 1 and th[u, T_NEXT] <= c:
                t = u
            else:
                above = ready & ~((2 << rr) - 1)
                m = above
                while True:
                    if m == 0:
                        if above < 0:
                            break
                        m = ready & ((2 << rr) - 1)
                        above = -1
                        continue
                    u = low_bit(m)
                    m &= m - 1
                    nx = th[u, T_NEXT]
                    if nx <= c:
                        t = u
                        break
                    if nx < earliest:
                        earliest = nx
            if t < 0:
                if earliest == BIG and dma_min == BIG:
                    reason = R_END
                    break
                nc = earliest if earliest < dma_min else dma_min
                if nc >= cycle_limit and c < cycle_limit:
                    nc = cycle_limit
                if c >= cycle_limit:
                    reason = R_LIMIT
                    break
                c = nc
                continue
            if c >= cycle_limit:
                reason = R_LIMIT
                break
            if issued >= max_issue:
                reason = R_STEP
                break
            # the commonest kinds issue through the windows' fast step, for one slot
            pc = th[t, T_PC]
            if pc >= 0 and pc < nprog and code[pc, C_FW0] != 0:
                _, done, donepc = thread_slots(code, regs, th, wram, atomic, t, c, c + 1, 1)
                if done > 0:
                    rr = t
                    issued += 1
                    last = c
                    lastpc = donepc
                    instr += 1
                    c += 1
                    continue

        # ---- issue one instruction of thread t at cycle c ----
        pc = th[t, T_PC]
        rr = t
        issued += 1
        last = c
        lastpc = pc
        instr += 1
        th[t, T_NEXT] = c + REVOLVER_CYCLES
        if pc < 0 or pc >= nprog:
            dv[D_FKIND] = FK_PC
            dv[D_FTHREAD] = t
            dv[D_FPC] = pc
            reason = R_FAULT
            break
        op = code[pc, C_OP]
        npc = pc + 1
        fault = FK_NONE
        faddr = 0
        # operands
        av = code[pc, C_AV]
        if code[pc, C_AK] == K_REG:
            av = int(regs[t, av])
        bv = code[pc, C_BV]
        if code[pc, C_BK] == K_REG:
            bv = int(regs[t, bv])
        av &= M32
        bv &= M32
        mode = code[pc, C_MODE]
        dk = code[pc, C_DK]
        d = code[pc, C_D]
        flags = code[pc, C_FLAGS]
        # values the condition and the flags need
        x = 0  # the tested 32-bit value
        zx = 0  # the value ZF is computed from
        cy = 0  # carry out of bit 31 (add/sub family)
        ovf = 0  # signed overflow
        kb = 0  # carry into each bit (a ^ b ^ x) for nc<k>
        sh = 0  # raw register shift amount (sh32)
        cond_x = -1  # 1/0 overrides the condition's x for thread/atomic operations
        write = dk != DK_NONE
        result = 0  # the value written to the destination (before extension)
        wide = 0  # 1: result64 is written to a pair as is
        result64 = 0

        if op == OP_ADD or op == OP_ADDC or op == OP_SUB or op == OP_SUBC:
            p = av
            if op == OP_SUB or op == OP_SUBC:
                q = (~bv) & M32
            else:
                q = bv
            if op == OP_ADD:
                cin = 0
            elif op == OP_SUB:
                cin = 1
            else:
                cin = th[t, T_CF]
            s = p + q + cin
            x = s & M32
            cy = s >> 32
            ovf = (((p ^ x) & (q ^ x)) >> 31) & 1
            kb = p ^ q ^ x
            result = x
            zx = x
        elif op <= OP_HASH and op >= OP_AND:
            sh = bv
            n = bv & 31
            if op == OP_AND:
                x = av & bv
            elif op == OP_ANDN:
                x = (~av) & bv & M32
            elif op == OP_NAND:
                x = (~(av & bv)) & M32
            elif op == OP_NOR:
                x = (~(av | bv)) & M32
            elif op == OP_NXOR:
                x = (~(av ^ bv)) & M32
            elif op == OP_OR:
                x = av | bv
            elif op == OP_ORN:
                x = ((~av) | bv) & M32
            elif op == OP_XOR:
                x = av ^ bv
            elif op == OP_ASR:
                sa = av - (1 << 32) if av & 0x80000000 else av
                x = (sa >> n) & M32
            elif op == OP_LSL:
                x = (av << n) & M32
            elif op == OP_LSL1:
                x = ((av << n) | ((1 << n) - 1)) & M32
            elif op == OP_LSL1X:
                if n == 0:
                    x = M32
                else:
                    x = ((av >> (32 - n)) | (M32 << n)) & M32
            elif op == OP_LSLX:
                x = 0 if n == 0 else (av >> (32 - n))
            elif op == OP_LSR:
                x = av >> n
            elif op == OP_LSR1:
                x = ((av >> n) | (M32 ^ (M32 >> n))) & M32
            elif op == OP_LSR1X:
                if n == 0:
                    x = M32
                else:
                    x = ((av << (32 - n)) | ((1 << (32 - n)) - 1)) & M32
            elif op == OP_LSRX:
                x = 0 if n == 0 else ((av << (32 - n)) & M32)
            elif op == OP_ROL:
                x = ((av << n) | (av >> (32 - n))) & M32 if n else av
            elif op == OP_ROR:
                x = ((av >> n) | (av << (32 - n))) & M32 if n else av
            elif op == OP_CMPB4:
                x = 0
                for i in range(4):
                    if ((av >> (8 * i)) & 0xFF) == ((bv >> (8 * i)) & 0xFF):
                        x |= 1 << (8 * i)
            elif op == OP_MUL:
                msel = code[pc, C_SUB]
                fa = (av >> 8) & 0xFF if msel & MUL_A_HIGH else av & 0xFF
                if msel & MUL_A_SIGNED and fa & 0x80:
                    fa -= 256
                fb = (bv >> 8) & 0xFF if msel & MUL_B_HIGH else bv & 0xFF
                if msel & MUL_B_SIGNED and fb & 0x80:
                    fb -= 256
                x = (fa * fb) & M32
            else:  # hash: not defined by the instruction set
                fault = FK_UNIMPLEMENTED
            result = x
            zx = x
        elif op >= OP_CAO and op <= OP_SATS:
            if op == OP_CAO:
                x = 0
                v = av
                while v:
                    x += v & 1
                    v >>= 1
            elif op == OP_CLZ or op == OP_CLO or op == OP_CLS:
                v = av
                if op == OP_CLO or (op == OP_CLS and av & 0x80000000):
                    v = (~av) & M32
                x = 0
                while x < 32 and not (v >> (31 - x)) & 1:
                    x += 1
            elif op == OP_EXTSB:
                x = (av | 0xFFFFFF00) & M32 if av & 0x80 else av & 0xFF
            elif op == OP_EXTSH:
                x = (av | 0xFFFF0000) & M32 if av & 0x8000 else av & 0xFFFF
            elif op == OP_EXTUB:
                x = av & 0xFF
            elif op == OP_EXTUH:
                x = av & 0xFFFF
            else:  # sats: the saturation bound of ra's sign
                x = 0x80000000 if av & 0x80000000 else 0x7FFFFFFF
            result = x
            zx = x
        elif op >= OP_LSL_ADD and op <= OP_ROL_ADD:
            n = code[pc, C_CV] & 31
            if op == OP_LSR_ADD:
                shifted = bv >> n
            elif op == OP_ROL_ADD:
                shifted = ((bv << n) | (bv >> (32 - n))) & M32 if n else bv
            else:
                shifted = (bv << n) & M32
            if op == OP_LSL_SUB:
                x = (av - shifted) & M32
            else:
                x = (av + shifted) & M32
            zx = shifted  # ZF comes from the shifted operand, as the instruction set says
            result = x
        elif op == OP_ADD_SAFE or op == OP_SUB_SAFE:
            imm_signed = code[pc, C_BK] != K_REG and (bv & 0x80000000) != 0
            off = bv - (1 << 32) if imm_signed else bv
            if op == OP_ADD_SAFE:
                p = av
                q = bv
                cin = 0
                low = (av & 0xFFFF) + off
            else:
                p = av
                q = (~bv) & M32
                cin = 1
                low = (av & 0xFFFF) - off
            s = p + q + cin
            x = s & M32
            cy = s >> 32
            result = x
            if low < 0 or low > 0xFFFF:
                result = (x & 0xFFFFFF) | (t << 25)
                fault = FK_SAFE
                faddr = low
            x = result
            zx = result
        elif op == OP_LOAD or op == OP_STORE:
            sub = code[pc, C_SUB]
            size = sub & 15
            off = code[pc, C_BV]
            if sub & SUB_SAFE:
                base = av & 0xFFFF
                addr = base + off
                if addr + size - (av >> 16) >= 0:
                    fault = FK_MEMORY
                    faddr = addr
            else:
                addr = (av + off) & M32
            if fault == FK_NONE and (addr < 0 or addr + size > wram_size or addr % size != 0):
                fault = FK_MEMORY
                faddr = addr
            big = code[pc, C_ENDIAN] != 0
            if fault == FK_NONE and op == OP_LOAD:
                v = 0
                for i in range(size):
                    if big:
                        v = (v << 8) | int(wram[addr + i])
                    else:
                        v |= int(wram[addr + i]) << (8 * i)
                if size == 8:
                    wide = 1
                    result64 = v
                else:
                    if sub & SUB_SIGNED and (v >> (8 * size - 1)) & 1:
                        v = (v - (1 << (8 * size))) & M32
                    result = v
            elif fault == FK_NONE:
                kind = (sub >> SUB_KIND_SHIFT) & 3
                cv = code[pc, C_CV]
                if kind == SV_IMM:
                    v = cv
                elif kind == SV_ID:
                    v = t | cv
                elif size == 8:
                    v = (int(regs[t, cv]) << 32) | int(regs[t, cv + 1])
                else:
                    v = int(regs[t, cv])
                keep_wram(dv, wram, addr, addr + size)
                for i in range(size):
                    byte = (v >> (8 * i)) & 0xFF
                    if big:
                        wram[addr + size - 1 - i] = byte
                    else:
                        wram[addr + i] = byte
                write = False
            mode = 0
        elif op == OP_LDMA or op == OP_SDMA or op == OP_LDMAI:
            waddr = av & 0x00FFFFF8
            maddr = bv & 0xFFFFFFF8
            size = 8 * (1 + ((code[pc, C_CV] + (av >> 24)) & 0xFF))
            limit = dv[D_IRAM] if op == OP_LDMAI else wram_size
            if waddr + size > limit:
                fault = FK_DMA
                faddr = waddr
            elif maddr + size > dv[D_MRAM]:
                fault = FK_DMA
                faddr = maddr
            else:
                dma[t, 0] = (
                    DMA_LDMA if op == OP_LDMA else (DMA_SDMA if op == OP_SDMA else DMA_LDMAI)
                )
                dma[t, 1] = waddr
                dma[t, 2] = maddr
                dma[t, 3] = size
                th[t, T_PC] = npc
                th[t, T_RUN] = RUN_DMA
                ready &= ~(1 << t)
                th[t, T_NEXT] = BIG
                dv[D_REQ] = t
                c += 1
                reason = R_DMA_REQUEST
                break
        elif op == OP_ACQUIRE or op == OP_RELEASE:
            v = (av + bv) & 0xFFFF
            bit = ((v >> 8) ^ v) & 0xFF
            x = int(atomic[bit])
            atomic[bit] = 1 if op == OP_ACQUIRE else 0
            zx = x
            if defer and op == OP_RELEASE:
                # the first deferred spinner on this bit to issue next takes the lock then:
                # it becomes one of the window's threads from that slot on
                best = -1
                at = BIG
                m = deferred
                while m != 0:
                    u = low_bit(m)
                    m &= m - 1
                    if scratch[u, SCR_BIT] == bit:
                        f = c + 1 + (scratch[u, SCR_PHASE] - c - 1) % per
                        if f < at:
                            at = f
                            best = u
                if best >= 0:
                    done, last, rr, lastpc = settle_spinners(
                        code, th, scratch, 1 << best, at, per, last, rr, lastpc
                    )
                    instr += done
                    issued += done
                    deferred &= ~(1 << best)
                    ndefer -= 1
                    scratch[nf, SCR_ORDER] = best
                    nf += 1
        elif op >= OP_BOOT and op <= OP_READ_RUN:
            v = (av + bv) & 0xFFFF
            u = ((v >> 8) ^ v) & 0xFF
            if u >= nthreads:
                fault = FK_THREAD
                faddr = u
            else:
                running = th[u, T_RUN] != RUN_STOPPED
                x = 1 if running else 0
                if op == OP_BOOT or op == OP_RESUME:
                    if not running:
                        if op == OP_BOOT:
                            th[u, T_PC] = 0
                        th[u, T_RUN] = RUN_READY
                        ready |= 1 << u
                        if th[u, T_NEXT] < c + 1:
                            th[u, T_NEXT] = c + 1
                        if defer:
                            # one thread more in the pattern (see "Deferred spinners" above)
                            placed = False
                            ntot = nf + ndefer
                            y = th[u, T_NEXT]
                            if ntot < REVOLVER_CYCLES:
                                # idle cycles in each period: it issues where it becomes ready,
                                # if that cycle is free
                                placed = True
                                for q in range(nf):
                                    if (scratch[scratch[q, SCR_ORDER], SCR_PHASE] - y) % per == 0:
                                        placed = False
                                m = deferred
                                while m != 0:
                                    w = low_bit(m)
                                    m &= m - 1
                                    if (scratch[w, SCR_PHASE] - y) % per == 0:
                                        placed = False
                                if placed:
                                    scratch[u, SCR_PHASE] = y
                            elif ntot > REVOLVER_CYCLES and y == c + 1:
                                # one issue per cycle, in thread order after this one: the new
                                # thread takes its place in that order, the ones after it move
                                done, last, rr, lastpc = settle_spinners(
                                    code, th, scratch, deferred, c + 1, per, last, rr, lastpc
                                )
                                instr += done
                                issued += done
                                defer_since = c + 1
                                du = (u - t - 1) % nthreads
                                before = 0
                                m = deferred
                                for q in range(nf):
                                    m |= 1 << scratch[q, SCR_ORDER]
                                while m != 0:
                                    w = low_bit(m)
                                    m &= m - 1
                                    y = c + 1 + (scratch[w, SCR_PHASE] - c - 1) % per
                                    if (w - t - 1) % nthreads < du:
                                        before += 1
                                    else:
                                        y += 1
                                    scratch[w, SCR_PHASE] = y
                                scratch[u, SCR_PHASE] = c + 1 + before
                                per = ntot + 1
                                placed = True
                            if placed:
                                scratch[nf, SCR_ORDER] = u
                                nf += 1
                            else:
                                done, last, rr, lastpc = settle_spinners(
                                    code, th, scratch, deferred, c + 1, per, last, rr, lastpc
                                )
                                instr += done
                                issued += done
                                defer = False
                                again = False
                elif op == OP_CLR_RUN and th[u, T_RUN] == RUN_READY:
                    th[u, T_RUN] = RUN_STOPPED
                    ready &= ~(1 << u)
                zx = x
        elif op == OP_STOP:
            x = 1
            zx = 1
            cond_x = 1
        elif op == OP_FAULT:
            fault = FK_SOFTWARE
            faddr = av & 0xFFFFFF
        elif op == OP_TIME or op == OP_TIME_CFG:
            pm = dv[D_PERF_MODE]
            if pm == 1:
                tv = dv[D_PERF_ACC] + c - dv[D_PERF_MARK]
            elif pm == 2:
                tv = dv[D_PERF_ACC] + instr - 1 - dv[D_PERF_MARK]
            else:
                tv = dv[D_PERF_ACC]
            x = (tv >> 4) & M32
            result = x
            if op == OP_TIME_CFG:
                cfg = (av if code[pc, C_AK] == K_REG else 0) & 7
                newmode = (cfg >> 1) & 3
                acc = 0 if cfg & 1 else tv
                if newmode != 0:
                    pm = newmode if newmode != 3 else 0
                dv[D_PERF_MODE] = pm
                dv[D_PERF_ACC] = acc
                dv[D_PERF_MARK] = c if pm == 1 else instr - 1
            flags = 0
        elif op == OP_CALL:
            result = npc
            npc = (av + bv) & M32
            mode = 0
        elif op == OP_MOVD or op == OP_SWAPD:
            db = code[pc, C_DB]
            hi = int(regs[t, db])
            lo = int(regs[t, db + 1])
            if op == OP_SWAPD:
                result64 = (lo << 32) | hi
            else:
                result64 = (hi << 32) | lo
            wide = 1
            x = hi
        elif op == OP_MUL_STEP:
            db = code[pc, C_DB]
            hi = int(regs[t, db])
            lo = int(regs[t, db + 1])
            x = hi >> 1
            if hi & 1:
                lo = (lo + ((av << (code[pc, C_CV] & 31)) & M32)) & M32
            result64 = (x << 32) | lo
            wide = 1
            zx = x
        elif op == OP_DIV_STEP:
            db = code[pc, C_DB]
            hi = int(regs[t, db])
            lo = int(regs[t, db + 1])
            # int(): in the pure-Python path av is a NumPy int64, and the 64-bit result below
            # may exceed what an int64 holds before it is split into the pair
            dd = int((av << (code[pc, C_CV] & 31)) & M32)
            if lo >= dd:
                result64 = ((((hi << 1) | 1) & M32) << 32) | ((lo - dd) & M32)
            else:
                keep = int(regs[t, d + 1])
                result64 = (((hi << 1) & M32) << 32) | keep
            wide = 1
            x = (lo - dd) & M32
        elif op == OP_NOP:
            write = False
        elif op == OP_ILLEGAL:
            fault = FK_ILLEGAL
        else:
            fault = FK_ILLEGAL

        if fault != FK_NONE:
            if fw:
                # inside a window a fault is not issued there: undo the slot, end the window
                th[t, T_NEXT] = s_next
                rr = s_rr
                last = s_last
                lastpc = s_lastpc
                issued -= 1
                instr -= 1
                fend = True
                dv[D_CUTTER] = t
                continue
            dv[D_FKIND] = fault
            dv[D_FCODE] = faddr if fault == FK_SOFTWARE else 0
            dv[D_FADDR] = faddr
            dv[D_FTHREAD] = t
            dv[D_FPC] = pc
            if fault == FK_SAFE and dk == DK_REG:
                regs[t, d] = result
            reason = R_FAULT
            break

        # ---- condition ----
        taken = False
        cond = code[pc, C_COND]
        if mode == MODE_SET or mode == MODE_JUMP:
            srcv = int(regs[t, code[pc, C_SRC]])
            zf0 = th[t, T_ZF]  # flags are written after the condition
            if cond_x >= 0:
                x = cond_x
            z = x == 0
            neg = (x >> 31) & 1
            if cond == CN_TRUE:
                taken = True
            elif cond == CN_FALSE:
                taken = False
            elif cond == CN_Z:
                taken = z
            elif cond == CN_NZ:
                taken = not z
            elif cond == CN_LTU:
                taken = cy == 0
            elif cond == CN_GEU:
                taken = cy != 0
            elif cond == CN_LEU:
                taken = cy == 0 or z
            elif cond == CN_GTU:
                taken = cy != 0 and not z
            elif cond == CN_LTS:
                taken = (neg ^ ovf) != 0
            elif cond == CN_GES:
                taken = (neg ^ ovf) == 0
            elif cond == CN_LES:
                taken = (neg ^ ovf) != 0 or z
            elif cond == CN_GTS:
                taken = (neg ^ ovf) == 0 and not z
            elif cond == CN_XZ:
                taken = z and zf0 != 0
            elif cond == CN_XNZ:
                taken = not (z and zf0 != 0)
            elif cond == CN_XLEU:
                taken = cy == 0 or (z and zf0 != 0)
            elif cond == CN_XGTU:
                taken = not (cy == 0 or (z and zf0 != 0))
            elif cond == CN_XLES:
                taken = (neg ^ ovf) != 0 or (z and zf0 != 0)
            elif cond == CN_XGTS:
                taken = not ((neg ^ ovf) != 0 or (z and zf0 != 0))
            elif cond == CN_PL:
                taken = neg == 0
            elif cond == CN_MI:
                taken = neg != 0
            elif cond == CN_SZ:
                taken = srcv == 0
            elif cond == CN_SNZ:
                taken = srcv != 0
            elif cond == CN_SPL:
                taken = (srcv >> 31) & 1 == 0
            elif cond == CN_SMI:
                taken = (srcv >> 31) & 1 != 0
            elif cond == CN_C:
                taken = cy != 0
            elif cond == CN_NC:
                taken = cy == 0
            elif cond == CN_OV:
                taken = ovf != 0
            elif cond == CN_NOV:
                taken = ovf == 0
            elif cond == CN_E:
                taken = x & 1 == 0
            elif cond == CN_O:
                taken = x & 1 != 0
            elif cond == CN_SE:
                taken = srcv & 1 == 0
            elif cond == CN_SO:
                taken = srcv & 1 != 0
            elif cond == CN_SH32:
                taken = sh & 32 != 0
            elif cond == CN_NSH32:
                taken = sh & 32 == 0
            elif cond == CN_MAX:
                taken = x == 32
            elif cond == CN_NMAX:
                taken = x != 32
            elif cond == CN_SMALL:
                taken = x < 256
            elif cond == CN_LARGE:
                taken = x >= 256
            elif cond >= CN_NC10 and cond <= CN_NC14:
                taken = (kb >> (10 + cond - CN_NC10)) & 1 == 0
            elif cond >= CN_NC5 and cond <= CN_NC9:
                taken = (kb >> (5 + cond - CN_NC5)) & 1 == 0
            if mode == MODE_SET:
                result = 1 if taken else 0
                wide = 0

        # ---- flags ----
        if flags & 1:
            th[t, T_ZF] = 1 if (zx & M32) == 0 else 0
        if flags & 2:
            th[t, T_CF] = cy

        # ---- destination ----
        if write:
            if wide:
                regs[t, d] = (result64 >> 32) & M32
                regs[t, d + 1] = result64 & M32
            elif dk == DK_REG:
                regs[t, d] = result & M32
            elif dk == DK_PAIR:
                regs[t, d] = 0
                regs[t, d + 1] = result & M32
            else:
                r = result & M32
                regs[t, d] = M32 if (dk == DK_PAIR_S and r & 0x80000000) else 0
                regs[t, d + 1] = r

        if op == OP_STOP:
            th[t, T_PC] = code[pc, C_PC] if taken else npc
            th[t, T_RUN] = RUN_STOPPED
            ready &= ~(1 << t)
            if defer:
                # one thread fewer in the pattern (see "Deferred spinners" above)
                for q in range(nf):
                    if scratch[q, SCR_ORDER] == t:
                        nf -= 1
                        scratch[q, SCR_ORDER] = scratch[nf, SCR_ORDER]
                        break
                if nf == 0 or ndefer + nf >= REVOLVER_CYCLES:
                    done, last, rr, lastpc = settle_spinners(
                        code, th, scratch, deferred, c + 1, per, last, rr, lastpc
                    )
                    instr += done
                    issued += done
                    defer_since = c + 1
                    if nf == 0:
                        defer = False
                        again = False
                    else:
                        # a full period: the others go on in turn, one per cycle
                        for q in range(nf):
                            u = scratch[q, SCR_ORDER]
                            scratch[u, SCR_PHASE] = c + 1 + (scratch[u, SCR_PHASE] - c - 1) % per
                        m = deferred
                        while m != 0:
                            u = low_bit(m)
                            m &= m - 1
                            scratch[u, SCR_PHASE] = c + 1 + (scratch[u, SCR_PHASE] - c - 1) % per
                        per = ndefer + nf
                        if per < REVOLVER_CYCLES:
                            per = REVOLVER_CYCLES
        elif mode == MODE_JUMP and taken:
            th[t, T_PC] = code[pc, C_PC]
        else:
            th[t, T_PC] = npc
        c += 1
    if defer:
        done, last, rr, lastpc = settle_spinners(
            code, th, scratch, deferred, c, per, last, rr, lastpc
        )
        instr += done
        again = False
    # every stop of the loop: store its counters back
    dv[D_CYCLE] = c
    dv[D_RR] = rr
    dv[D_INSTR] = instr
    dv[D_LAST] = last
    dv[D_LAST_PC] = lastpc
    dv[D_ROUNDS] = rounds
    dv[D_AGAIN] = 1 if again else 0
    dv[D_WNF] = nf
    if reason == R_END:
        dv[D_END] = last + REVOLVER_CYCLES
    return reason


State = tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
    npt.NDArray[np.int64],
]


def scratch(nthreads: int) -> npt.NDArray[np.int64]:
    """A work array for :func:`run` on DPUs of up to ``nthreads`` threads."""
    return np.zeros((max(nthreads, 1), NSCR), np.int64)


def fresh_state(nthreads: int, iram_bytes: int, mram_bytes: int) -> State:
    """``(regs, th, dv, atomic, dma)`` of a DPU at launch: thread 0 ready at PC 0, registers,
    flags and atomic bits 0, the performance counter counting cycles from 0."""
    regs = np.zeros((nthreads, 32), np.int64)
    ids = np.arange(nthreads, dtype=np.int64)
    regs[:, 25] = 1
    regs[:, 26] = M32
    regs[:, 27] = 0x80000000
    regs[:, 28] = ids
    regs[:, 29] = ids * 2
    regs[:, 30] = ids * 4
    regs[:, 31] = ids * 8
    th = np.zeros((nthreads, NTH), np.int64)
    th[0, T_RUN] = RUN_READY
    dv = np.zeros(ND, np.int64)
    dv[D_RR] = nthreads - 1
    dv[D_LAST] = -REVOLVER_CYCLES
    dv[D_DMA_MIN] = BIG
    dv[D_PERF_MODE] = 1
    dv[D_NTHREADS] = nthreads
    dv[D_IRAM] = iram_bytes
    dv[D_MRAM] = mram_bytes
    dv[D_PS_NUM] = 1
    dv[D_PS_DEN] = 1
    return regs, th, dv, np.zeros(256, np.uint8), np.zeros((nthreads, 4), np.int64)


_JIT_RUN: Callable[..., int] | None = None


def jit_enabled_by_default() -> bool:
    """``AIOPIM_ISA_JIT`` (default 1): compile the loop with numba when it is installed."""
    if os.environ.get("AIOPIM_ISA_JIT", "1").strip() in ("0", "false", "no", "off", ""):
        return False
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - numba is a dependency of the test environment
        return False
    return True


def get_run(jit: bool) -> Callable[..., int]:
    """The loop: numba-compiled (``cache=True``; compiled, or loaded from numba's cache, with
    the batch the first time it is asked for) or pure Python."""
    if not jit:
        return run
    loop = jit_dispatcher()
    # the batch compiles the loop into itself (and gives the loop's dispatcher that version)
    get_run_dpus_at()
    return loop


def jit_dispatcher() -> Callable[..., int]:
    """numba's dispatcher of :func:`run` (nothing compiled yet)."""
    global _JIT_RUN
    if _JIT_RUN is None:
        import numba
        from numba.extending import overload, register_jitable

        from ._specialize import call_step_intrinsic, copy_out_intrinsic, copy_row_intrinsic

        global _call_step
        _call_step = call_step_intrinsic()
        copy = copy_out_intrinsic()
        row_copy = copy_row_intrinsic()

        @overload(copy_out)
        def _copy_out(to: Any, wram: Any, start: Any, n: Any) -> Any:
            def impl(to: Any, wram: Any, start: Any, n: Any) -> Any:
                copy(to, wram, start, n)

            return impl

        @overload(copy_row)
        def _copy_row(dst: Any, di: Any, dcol: Any, src: Any, si: Any, scol: Any, n: Any) -> Any:
            def impl(dst: Any, di: Any, dcol: Any, src: Any, si: Any, scol: Any, n: Any) -> Any:
                row_copy(dst, di, dcol, src, si, scol, n)

            return impl

        register_jitable(inline="always")(keep_wram)
        register_jitable(inline="always")(settle_spinners)
        register_jitable(inline="always")(sort_rows)
        register_jitable(inline="always")(spin_safe)
        register_jitable(inline="always")(spin_bit)
        register_jitable(inline="always")(window_kind)
        register_jitable(inline="always")(acquire_bit_set)
        register_jitable(inline="always")(acquire_bit)
        register_jitable(inline="always")(low_bit)
        register_jitable(inline="always")(thread_slots)
        register_jitable(inline="always")(call_step)
        # no reference counting: the loop allocates nothing and its caller keeps every array
        # alive, and numba's counting around the inlined fast step cost about a sixth of the
        # key-sum's time
        no_refcounts: dict[str, Any] = {"_nrt": False}  # a numba option its stubs lack
        _JIT_RUN = numba.njit(cache=True, nogil=True, **no_refcounts)(run)
    return _JIT_RUN


def compile_quietly(dispatcher: Any, signature: tuple[Any, ...]) -> None:
    """Compile (or load from numba's cache) ``dispatcher`` for ``signature`` now. Inlining the
    window helpers into the loop makes numba's own IR checks warn (a ``NumbaIRAssumptionWarning``
    about a variable's scope, not an error in the code); compiling here, with that warning
    silenced, keeps it from reaching users (and test runs that turn warnings into errors)."""
    import warnings

    from numba.core.errors import NumbaIRAssumptionWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaIRAssumptionWarning)
        dispatcher.compile(signature)


# ================================================================================================
# many DPUs in one call: DMA timing and resident-page transfers without leaving the loop
# ================================================================================================
#: MRAM page size of the page maps (the sparse MRAM bank's pages)
PAGE_SHIFT: Final = 16
#: page map entries: unknown to the loop (ask Python), or a page that reads as zeros
PM_UNKNOWN: Final = -1
PM_ZERO: Final = -2


def cycles_ps(cycles: int, num: int, den: int) -> int:
    """``cycles`` of a clock of ``num / den`` ps per cycle, rounded to the nearest ps (half to
    even, as ``ChipProfile.cycles_to_ps``)."""
    v = cycles * num
    q = v // den
    r = v - q * den
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    return q


def first_cycle(ps: int, boot: int, num: int, den: int) -> int:
    """The first cycle whose time (from ``boot``) is at or after ``ps``."""
    dt = ps - boot
    if dt <= 0:
        return 0
    c = dt * den // num
    while cycles_ps(c, num, den) < dt:
        c += 1
    while c > 0 and cycles_ps(c - 1, num, den) >= dt:
        c -= 1
    return c


def dma_request(
    th: npt.NDArray[np.int64], dv: npt.NDArray[np.int64], dma: npt.NDArray[np.int64]
) -> None:
    """Schedule the DMA request of thread ``dv[D_REQ]`` on the DPU's DMA engine: requests
    served in order, the engine busy ``beta * size`` cycles, completion ``alpha`` later."""
    t = dv[D_REQ]
    size = dma[t, 3]
    num = dv[D_PS_NUM]
    den = dv[D_PS_DEN]
    boot = dv[D_BOOT_PS]
    busy = int(DMA_BETA_CYCLES_PER_BYTE * size)
    alpha = DMA_WRITE_ALPHA_CYCLES if dma[t, 0] == DMA_SDMA else DMA_READ_ALPHA_CYCLES
    issue = dv[D_LAST]
    # in whole cycles of the run: at 350 MHz a cycle is not a whole number of ps, and adding
    # two rounded durations could land one cycle late
    start = issue
    free = first_cycle(dv[D_DMA_FREE], boot, num, den)
    if free > start:
        start = free
    dv[D_DMA_FREE] = boot + cycles_ps(start + busy, num, den)
    dv[D_DMA_REQS] += 1
    dv[D_DMA_BYTES] += size
    due = start + alpha + busy
    if due < issue + REVOLVER_CYCLES:
        due = issue + REVOLVER_CYCLES
    th[t, T_NEXT] = due
    if due < dv[D_DMA_MIN]:
        dv[D_DMA_MIN] = due


def serve_dma(
    th: npt.NDArray[np.int64],
    dv: npt.NDArray[np.int64],
    dma: npt.NDArray[np.int64],
    wram: npt.NDArray[np.uint8],
    pages: list[npt.NDArray[np.uint8]],
    pmap: npt.NDArray[np.int64],
) -> bool:
    """Copy the bytes of the transfers due now, in thread order, while their MRAM pages are
    in ``pmap`` (``2 * index + writable`` into ``pages``, or ``PM_ZERO``); False when one
    needs Python (an unknown page, a write into a page not privately held or not writable in
    ``pmap``, ``ldmai``), which then serves it and the transfers after it."""
    c = dv[D_CYCLE]
    nxt = BIG
    for t in range(dv[D_NTHREADS]):
        if th[t, T_RUN] != RUN_DMA:
            continue
        due = th[t, T_NEXT]
        if due > c:
            if due < nxt:
                nxt = due
            continue
        kind = dma[t, 0]
        if kind == DMA_LDMAI:
            return False
        waddr = dma[t, 1]
        maddr = dma[t, 2]
        size = dma[t, 3]
        for p in range(maddr >> PAGE_SHIFT, ((maddr + size - 1) >> PAGE_SHIFT) + 1):
            e = pmap[p]
            if e == PM_UNKNOWN or (kind == DMA_SDMA and (e < 0 or (e & 1) == 0)):
                return False
        pos = 0
        while pos < size:
            a = maddr + pos
            off = a & ((1 << PAGE_SHIFT) - 1)
            nb = (1 << PAGE_SHIFT) - off
            if nb > size - pos:
                nb = size - pos
            e = pmap[a >> PAGE_SHIFT]
            w = waddr + pos
            if kind == DMA_LDMA:
                if e == PM_ZERO:
                    wram[w : w + nb] = 0
                else:
                    wram[w : w + nb] = pages[e >> 1][off : off + nb]
            else:
                pages[e >> 1][off : off + nb] = wram[w : w + nb]
            pos += nb
        th[t, T_RUN] = RUN_READY
    dv[D_DMA_MIN] = nxt
    return True


def run_dpus(
    codes: list[npt.NDArray[np.int64]],
    regs: list[npt.NDArray[np.int64]],
    ths: list[npt.NDArray[np.int64]],
    dvs: list[npt.NDArray[np.int64]],
    atomics: list[npt.NDArray[np.uint8]],
    wrams: list[npt.NDArray[np.uint8]],
    dmas: list[npt.NDArray[np.int64]],
    scratches: list[npt.NDArray[np.int64]],
    pages: list[npt.NDArray[np.uint8]],
    pmaps: list[npt.NDArray[np.int64]],
    sel: npt.NDArray[np.int64],
    until_ps: int,
    reasons: npt.NDArray[np.int64],
) -> int:
    """Run DPUs ``sel`` (indices into the state lists) up to the first cycle at or after
    ``until_ps``, serving DMA requests and resident-page transfers in the loop; ``reasons[j]``
    is ``R_LIMIT`` or what DPU ``sel[j]`` needs from Python. Returns how many need it."""
    need = 0
    for j in range(sel.shape[0]):
        i = sel[j]
        dv = dvs[i]
        th = ths[i]
        dma = dmas[i]
        wram = wrams[i]
        limit = first_cycle(until_ps, dv[D_BOOT_PS], dv[D_PS_NUM], dv[D_PS_DEN])
        while True:
            r = run(codes[i], regs[i], th, dv, atomics[i], wram, dma, limit, BIG, scratches[i])
            if r == R_DMA_REQUEST:
                dma_request(th, dv, dma)
                continue
            if r == R_DMA_DUE and serve_dma(th, dv, dma, wram, pages, pmaps[i]):
                continue
            break
        reasons[j] = r
        if r != R_LIMIT:
            need += 1
    return need


# ---- the compiled batch: the DPUs' arrays passed by address (no typed lists to build) ---------
#: columns of the address table of :func:`run_dpus_at`
A_CODE: Final = 0  # code rows (address), then their count
A_NCODE: Final = 1
A_REGS: Final = 2
A_TH: Final = 3
A_DV: Final = 4
A_ATOMIC: Final = 5
A_WRAM: Final = 6  # WRAM (address), then its size
A_NWRAM: Final = 7
A_DMA: Final = 8
A_PMAP: Final = 9
A_NPMAP: Final = 10
A_SCRATCH: Final = 11
#: the addresses of the copies of a speculative event's checkpoint (registers, threads, DPU
#: scalars, atomic bits, DMA engine, work array, WRAM), which the batch makes right before
#: running the DPU, on its worker thread; 0 once done, or when not asked for
A_SAVE: Final = 12
A_HW: Final = 13  # the host writes scheduled into the run (see D_HW_N)
NA: Final = 14


def address_row(
    code: npt.NDArray[np.int64],
    regs: npt.NDArray[np.int64],
    th: npt.NDArray[np.int64],
    dv: npt.NDArray[np.int64],
    atomic: npt.NDArray[np.uint8],
    wram: npt.NDArray[np.uint8],
    dma: npt.NDArray[np.int64],
    pmap: npt.NDArray[np.int64],
    scratch: npt.NDArray[np.int64],
    hw: npt.NDArray[np.int64],
) -> list[int]:
    """One DPU's row of the address table (the caller keeps the arrays alive)."""
    arrays = (code, regs, th, dv, atomic, wram, dma, pmap, scratch, hw)
    assert all(a.flags.c_contiguous for a in arrays)
    assert scratch.shape[0] >= th.shape[0] and scratch.shape[1] == NSCR
    return [
        code.ctypes.data,
        code.shape[0],
        regs.ctypes.data,
        th.ctypes.data,
        dv.ctypes.data,
        atomic.ctypes.data,
        wram.ctypes.data,
        wram.shape[0],
        dma.ctypes.data,
        pmap.ctypes.data,
        pmap.shape[0],
        scratch.ctypes.data,
        0,
        hw.ctypes.data,
    ]


def get_run_dpus_at() -> Callable[..., int]:
    """The compiled batch over an address table (``cache=True``; needs numba)."""
    import numba

    from ._jitptr import run_dpus_at

    if not run_dpus_at.signatures:
        i64 = numba.int64
        compile_quietly(run_dpus_at, (i64[:, ::1], i64[::1], i64[::1], i64, i64[::1]))
    return run_dpus_at


def get_run_dpus_parallel() -> Callable[..., int]:
    """The compiled batch split over numba's worker threads (``cache=True``; needs numba)."""
    import numba

    from ._jitptr import run_dpus_parallel

    if not run_dpus_parallel.signatures:
        get_run_dpus_at()
        i64 = numba.int64
        signature = (i64[:, ::1], i64[::1], i64[::1], i64, i64[::1], i64)
        compile_quietly(run_dpus_parallel, signature)
    return run_dpus_parallel
