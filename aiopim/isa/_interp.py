# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# (compiled, array indices are not checked: every index the loop uses is checked by the
# instruction's own rules first, see "Many DPUs in one call" in docs/isa-semantics.md)
"""The interpreter loop of one DPU: cycle-level issue, every instruction's semantics, the DMA
engine, and the batch that runs many DPUs.

This module is written in Cython's pure-Python mode: the package build compiles it (with
``_interp.pxd``, which gives the imported constants C types) into an extension that runs the
DPUs without the GIL, and the same file imported as plain Python is the executable reference
the compiled path is tested against (``AIOPIM_ISA_ENGINE=python``). In plain Python every value
read from an array goes through ``iv()``, so both paths compute on exact integers; in C those
calls are no-ops.

A DPU's state is a :class:`Core`: the arrays described in :mod:`._layout`, owned by its
runner, plus the MRAM page map through which the loop serves transfers itself. :func:`run`
executes one DPU from its current cycle until a stop reason (``R_*``): the cycle bound, the
end of the run, a fault, or a transfer the loop cannot serve (an ``ldmai``, an MRAM page it
does not hold or may not write: Python serves it and hands the loop the page).

Issue rule (the plain definition, no shortcut): one instruction per cycle per DPU, a thread at
most once every ``REVOLVER_CYCLES`` cycles, the ready threads in round-robin order after the
last issuer. A cycle where nobody can issue is skipped to the next cycle where somebody can or
a transfer completes.
"""

from __future__ import annotations

import ctypes

import cython
import numpy as np
import numpy.typing as npt

if not cython.compiled:
    # compiled, these names are C constants of the same values: _interp.pxd, generated from
    # these modules by ``python -m aiopim.isa._pxd`` (a test checks that it is up to date)
    from ..timing import (
        DMA_BETA_CYCLES_PER_BYTE,
        DMA_READ_ALPHA_CYCLES,
        DMA_WRITE_ALPHA_CYCLES,
        REVOLVER_CYCLES,
    )
    from ._layout import (
        BIG,
        D_BOOT_PS,
        D_CYCLE,
        D_DMA_BYTES,
        D_DMA_FREE,
        D_DMA_MIN,
        D_DMA_REQS,
        D_END,
        D_FADDR,
        D_FCODE,
        D_FKIND,
        D_FPC,
        D_FTHREAD,
        D_HW_DONE,
        D_HW_N,
        D_INSTR,
        D_IRAM,
        D_LAST,
        D_LAST_PC,
        D_MRAM,
        D_NTHREADS,
        D_PAGES,
        D_PERF_ACC,
        D_PERF_MARK,
        D_PERF_MODE,
        D_PS_DEN,
        D_PS_NUM,
        D_READY,
        D_RR,
        D_WBLOCK,
        D_WKEEP,
        D_WKEPT,
        DMA_LDMA,
        DMA_LDMAI,
        DMA_SDMA,
        EXT8,
        EXT16,
        FK_DMA,
        FK_ILLEGAL,
        FK_MEMORY,
        FK_PC,
        FK_SAFE,
        FK_SOFTWARE,
        FK_THREAD,
        FK_UNIMPLEMENTED,
        M32,
        M64,
        MAX31,
        MRAM_ALIGN,
        ND,
        NDMA,
        NHW,
        NREG,
        NTH,
        PAGE_SHIFT,
        PM_UNKNOWN,
        PM_ZERO,
        R_DMA_DUE,
        R_END,
        R_FAULT,
        R_LIMIT,
        R_STEP,
        RUN_DMA,
        RUN_READY,
        RUN_STOPPED,
        SIGN32,
        T_CF,
        T_NEXT,
        T_PC,
        T_RUN,
        T_ZF,
        X_FAULT,
        X_NEXT,
        X_THREADS,
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
        FAST_ADD,
        FAST_ADDC,
        FAST_AND,
        FAST_CALL,
        FAST_LD,
        FAST_LSL,
        FAST_LSR,
        FAST_LW,
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
        JC_GEU,
        JC_LTU,
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
        NCOL,
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

__all__ = [
    "Core",
    "PageTable",
    "compiled",
    "cycles_ps",
    "first_cycle",
    "fresh_state",
    "run",
    "run_cores",
    "wram_block_shift",
]

#: whether this module runs compiled (the extension) or as plain Python
compiled: bool = cython.compiled

#: rows of a fast kind (see :func:`fast_row`) issue through their packed words (the general
#: path otherwise: tests compare the two)
fast_rows = cython.declare(cython.bint, True)


def set_fast_rows(enabled: bool) -> None:
    """Issue rows of a fast kind through :func:`fast_row` (True, the default) or the general
    path."""
    global fast_rows
    fast_rows = enabled


# ================================================================================================
# state
# ================================================================================================
@cython.cclass
class PageTable:
    """The MRAM pages the loop may read or write, shared by the DPUs of one batch: ``addr[i]``
    is the address of page ``i`` (compiled path), ``arrays[i]`` the page itself (both
    paths; it keeps the page alive). Entry 0 is unused (page map entries are ``2 * i + w``)."""

    addr = cython.declare(cython.longlong[::1], visibility="public")
    arrays = cython.declare(list, visibility="public")

    def __init__(self) -> None:
        self.addr = np.zeros(64, np.int64)
        self.arrays = [np.zeros(1, np.uint8)]

    def add(self, page: npt.NDArray[np.uint8]) -> int:
        """Append ``page``; its index."""
        i: cython.Py_ssize_t = len(self.arrays)
        self.arrays.append(page)
        if i >= self.addr.shape[0]:
            grown = np.zeros(2 * i, np.int64)
            grown[: self.addr.shape[0]] = self.addr
            self.addr = grown
        self.addr[i] = page.ctypes.data
        return i


@cython.cclass
class Core:
    """One DPU's interpreter state: its arrays (see :mod:`._layout`), its MRAM page map,
    the host writes scheduled into its run and the copies of its last checkpoint."""

    code = cython.declare(cython.longlong[::1], visibility="public")
    regs = cython.declare(cython.longlong[::1], visibility="public")
    th = cython.declare(cython.longlong[::1], visibility="public")
    dv = cython.declare(cython.longlong[::1], visibility="public")
    atomic = cython.declare(cython.uchar[::1], visibility="public")
    wram = cython.declare(cython.uchar[::1], visibility="public")
    dma = cython.declare(cython.longlong[::1], visibility="public")
    #: MRAM page p -> ``2 * index + writable`` in ``pages``, or ``PM_UNKNOWN`` / ``PM_ZERO``
    pmap = cython.declare(cython.longlong[::1], visibility="public")
    pages = cython.declare(PageTable, visibility="public")
    #: host writes: rows (cycle, WRAM address, source address, bytes), ``dv[D_HW_N]`` of them
    hw = cython.declare(cython.longlong[::1], visibility="public")
    #: 1: make the checkpoint copies below before the next run (see :func:`save_state`)
    save = cython.declare(cython.int, visibility="public")
    s_regs = cython.declare(cython.longlong[::1], visibility="public")
    s_th = cython.declare(cython.longlong[::1], visibility="public")
    s_dv = cython.declare(cython.longlong[::1], visibility="public")
    s_atomic = cython.declare(cython.uchar[::1], visibility="public")
    s_dma = cython.declare(cython.longlong[::1], visibility="public")
    s_wram = cython.declare(cython.uchar[::1], visibility="public")

    def __init__(
        self,
        code: npt.NDArray[np.int64],
        regs: npt.NDArray[np.int64],
        th: npt.NDArray[np.int64],
        dv: npt.NDArray[np.int64],
        atomic: npt.NDArray[np.uint8],
        wram: npt.NDArray[np.uint8],
        dma: npt.NDArray[np.int64],
        pmap: npt.NDArray[np.int64],
        pages: PageTable,
        hw: npt.NDArray[np.int64],
    ) -> None:
        # the loop indexes the two-dimensional arrays flat, rows of compile-time widths
        self.code = code.reshape(-1)
        self.regs = regs.reshape(-1)
        self.th = th.reshape(-1)
        self.dv = dv
        self.atomic = atomic
        self.wram = wram
        self.dma = dma.reshape(-1)
        self.pmap = pmap
        self.pages = pages
        self.hw = hw.reshape(-1)
        self.save = 0

    def set_code(self, code: npt.NDArray[np.int64]) -> None:
        """New instruction rows (an ``ldmai``, a rollback)."""
        self.code = code.reshape(-1)

    def set_hw(self, hw: npt.NDArray[np.int64]) -> None:
        """A new (larger) array of host writes."""
        self.hw = hw.reshape(-1)

    def set_checkpoint(self, copies: tuple[npt.NDArray[np.generic], ...]) -> None:
        """Where the checkpoint copies go: (regs, th, dv, atomic, dma, wram)."""
        regs, th, dv, atomic, dma, wram = copies
        self.s_regs = regs.reshape(-1)
        self.s_th = th.reshape(-1)
        self.s_dv = dv
        self.s_atomic = atomic
        self.s_dma = dma.reshape(-1)
        self.s_wram = wram


def fresh_state(
    nthreads: int, iram_bytes: int, mram_bytes: int
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
    npt.NDArray[np.int64],
]:
    """``(regs, th, dv, atomic, dma)`` of a DPU at launch: thread 0 ready at PC 0, registers,
    flags and atomic bits 0, the performance counter counting cycles from 0."""
    regs = np.zeros((nthreads, 32), np.int64)
    ids = np.arange(nthreads, dtype=np.int64)
    regs[:, 25] = 1
    regs[:, 26] = M32
    regs[:, 27] = SIGN32
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


def wram_block_shift(size: int) -> int:
    """log2 of the block size in which a checkpoint keeps WRAM (:func:`keep_wram`) for a WRAM
    of ``size`` bytes: at most 62 blocks (their marks are one int64), of at least 8 bytes."""
    shift = 3
    while (size + (1 << shift) - 1) >> shift > 62:
        shift += 1
    return shift


# ================================================================================================
# small helpers
# ================================================================================================
@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def iv(v: cython.longlong) -> cython.longlong:
    """``v`` as an exact integer: a no-op compiled, ``int()`` of a NumPy scalar in Python."""
    if cython.compiled:
        return v
    return int(v)


@cython.ccall
@cython.nogil
@cython.exceptval(check=False)
def cycles_ps(
    cycles: cython.longlong, num: cython.longlong, den: cython.longlong
) -> cython.longlong:
    """``cycles`` of a clock of ``num / den`` ps per cycle, rounded to the nearest ps (half to
    even, as ``ChipProfile.cycles_to_ps``)."""
    v: cython.longlong = cycles * num
    q: cython.longlong = v // den
    r: cython.longlong = v - q * den
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    return q


@cython.ccall
@cython.nogil
@cython.exceptval(check=False)
def first_cycle(
    ps: cython.longlong, boot: cython.longlong, num: cython.longlong, den: cython.longlong
) -> cython.longlong:
    """The first cycle whose time (from ``boot``) is at or after ``ps``."""
    dt: cython.longlong = ps - boot
    if dt <= 0:
        return 0
    if dt >= BIG // den:
        return BIG
    c: cython.longlong = dt * den // num
    while cycles_ps(c, num, den) < dt:
        c += 1
    while c > 0 and cycles_ps(c - 1, num, den) >= dt:
        c -= 1
    return c


@cython.ccall
@cython.nogil
@cython.exceptval(check=False)
def keep_wram(core: Core, lo: cython.longlong, hi: cython.longlong) -> cython.void:
    """Before WRAM bytes ``[lo, hi)`` change: while a checkpoint is kept (``core.dv[D_WKEEP]``),
    copy to its WRAM copy each block among them not copied yet."""
    if core.dv[D_WKEEP] == 0 or hi <= lo:
        return
    shift: cython.longlong = core.dv[D_WBLOCK]
    size: cython.longlong = core.wram.shape[0]
    b: cython.longlong
    a: cython.longlong
    i: cython.longlong
    end: cython.longlong
    for b in range(lo >> shift, ((hi - 1) >> shift) + 1):
        if (core.dv[D_WKEPT] >> b) & 1 == 0:
            a = b << shift
            end = a + (1 << shift)
            if end > size:
                end = size
            for i in range(a, end):
                core.s_wram[i] = core.wram[i]
            core.dv[D_WKEPT] |= cython.cast(cython.longlong, 1) << b


# ================================================================================================
# one instruction
# ================================================================================================
@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def logic(
    op: cython.longlong, av: cython.longlong, bv: cython.longlong, sub: cython.longlong
) -> cython.longlong:
    """x of the two-operand logic, shift and byte operations (``and`` .. ``mul``); -1 for
    ``hash``, which the instruction set does not define."""
    n: cython.longlong = bv & 31
    x: cython.longlong = 0
    i: cython.longlong
    fa: cython.longlong
    fb: cython.longlong
    sa: cython.longlong
    if op == OP_AND:
        x = av & bv
    elif op == OP_OR:
        x = av | bv
    elif op == OP_XOR:
        x = av ^ bv
    elif op == OP_LSL:
        x = (av << n) & M32
    elif op == OP_LSR:
        x = av >> n
    elif op == OP_ANDN:
        x = (~av) & bv & M32
    elif op == OP_NAND:
        x = (~(av & bv)) & M32
    elif op == OP_NOR:
        x = (~(av | bv)) & M32
    elif op == OP_NXOR:
        x = (~(av ^ bv)) & M32
    elif op == OP_ORN:
        x = ((~av) | bv) & M32
    elif op == OP_ASR:
        sa = av - (cython.cast(cython.longlong, 1) << 32) if av & SIGN32 else av
        x = (sa >> n) & M32
    elif op == OP_LSL1:
        x = ((av << n) | ((cython.cast(cython.longlong, 1) << n) - 1)) & M32
    elif op == OP_LSL1X:
        x = M32 if n == 0 else ((av >> (32 - n)) | (M32 << n)) & M32
    elif op == OP_LSLX:
        x = 0 if n == 0 else (av >> (32 - n))
    elif op == OP_LSR1:
        x = ((av >> n) | (M32 ^ (M32 >> n))) & M32
    elif op == OP_LSR1X:
        x = (
            M32
            if n == 0
            else ((av << (32 - n)) | ((cython.cast(cython.longlong, 1) << (32 - n)) - 1)) & M32
        )
    elif op == OP_LSRX:
        x = 0 if n == 0 else ((av << (32 - n)) & M32)
    elif op == OP_ROL:
        x = ((av << n) | (av >> (32 - n))) & M32 if n else av
    elif op == OP_ROR:
        x = ((av >> n) | (av << (32 - n))) & M32 if n else av
    elif op == OP_CMPB4:
        for i in range(4):
            if ((av >> (8 * i)) & 0xFF) == ((bv >> (8 * i)) & 0xFF):
                x |= cython.cast(cython.longlong, 1) << (8 * i)
    elif op == OP_MUL:
        fa = (av >> 8) & 0xFF if sub & MUL_A_HIGH else av & 0xFF
        if sub & MUL_A_SIGNED and fa & 0x80:
            fa -= 256
        fb = (bv >> 8) & 0xFF if sub & MUL_B_HIGH else bv & 0xFF
        if sub & MUL_B_SIGNED and fb & 0x80:
            fb -= 256
        x = (fa * fb) & M32
    else:  # hash
        x = -1
    return x


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def unary(op: cython.longlong, av: cython.longlong) -> cython.longlong:
    """x of the one-operand operations (``cao`` .. ``sats``)."""
    x: cython.longlong = 0
    v: cython.longlong
    if op == OP_CAO:
        v = av
        while v:
            x += v & 1
            v >>= 1
    elif op in (OP_CLZ, OP_CLO, OP_CLS):
        v = av
        if op == OP_CLO or (op == OP_CLS and av & SIGN32):
            v = (~av) & M32
        while x < 32 and not (v >> (31 - x)) & 1:
            x += 1
    elif op == OP_EXTSB:
        x = (av | EXT8) & M32 if av & 0x80 else av & 0xFF
    elif op == OP_EXTSH:
        x = (av | EXT16) & M32 if av & 0x8000 else av & 0xFFFF
    elif op == OP_EXTUB:
        x = av & 0xFF
    elif op == OP_EXTUH:
        x = av & 0xFFFF
    else:  # sats: the saturation bound of ra's sign
        x = SIGN32 if av & SIGN32 else MAX31
    return x


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def condition(
    cond: cython.longlong,
    x: cython.longlong,
    cy: cython.longlong,
    ovf: cython.longlong,
    kb: cython.longlong,
    sh: cython.longlong,
    srcv: cython.longlong,
    zf0: cython.longlong,
) -> cython.bint:
    """Whether condition ``cond`` holds for result ``x``, carry ``cy``, overflow ``ovf``,
    carries into each bit ``kb``, shift operand ``sh``, tested register ``srcv`` and the
    zero flag before the instruction ``zf0``."""
    z: cython.bint = x == 0
    lt: cython.bint = ((x >> 31) & 1) ^ ovf != 0
    if cond == CN_TRUE:
        return True
    if cond == CN_Z:
        return z
    if cond == CN_NZ:
        return not z
    if cond == CN_LTU:
        return cy == 0
    if cond == CN_GEU:
        return cy != 0
    if cond == CN_LEU:
        return cy == 0 or z
    if cond == CN_GTU:
        return cy != 0 and not z
    if cond == CN_LTS:
        return lt
    if cond == CN_GES:
        return not lt
    if cond == CN_LES:
        return lt or z
    if cond == CN_GTS:
        return not lt and not z
    if cond == CN_FALSE:
        return False
    if cond == CN_XZ:
        return z and zf0 != 0
    if cond == CN_XNZ:
        return not (z and zf0 != 0)
    if cond == CN_XLEU:
        return cy == 0 or (z and zf0 != 0)
    if cond == CN_XGTU:
        return not (cy == 0 or (z and zf0 != 0))
    if cond == CN_XLES:
        return lt or (z and zf0 != 0)
    if cond == CN_XGTS:
        return not (lt or (z and zf0 != 0))
    if cond == CN_PL:
        return (x >> 31) & 1 == 0
    if cond == CN_MI:
        return (x >> 31) & 1 != 0
    if cond == CN_SZ:
        return srcv == 0
    if cond == CN_SNZ:
        return srcv != 0
    if cond == CN_SPL:
        return (srcv >> 31) & 1 == 0
    if cond == CN_SMI:
        return (srcv >> 31) & 1 != 0
    if cond == CN_C:
        return cy != 0
    if cond == CN_NC:
        return cy == 0
    if cond == CN_OV:
        return ovf != 0
    if cond == CN_NOV:
        return ovf == 0
    if cond == CN_E:
        return x & 1 == 0
    if cond == CN_O:
        return x & 1 != 0
    if cond == CN_SE:
        return srcv & 1 == 0
    if cond == CN_SO:
        return srcv & 1 != 0
    if cond == CN_SH32:
        return sh & 32 != 0
    if cond == CN_NSH32:
        return sh & 32 == 0
    if cond == CN_MAX:
        return x == 32
    if cond == CN_NMAX:
        return x != 32
    if cond == CN_SMALL:
        return x < 256
    if cond == CN_LARGE:
        return x >= 256
    if cond >= CN_NC10 and cond <= CN_NC14:
        return (kb >> (10 + cond - CN_NC10)) & 1 == 0
    if cond >= CN_NC5 and cond <= CN_NC9:
        return (kb >> (5 + cond - CN_NC5)) & 1 == 0
    return False


@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def set_fault(
    core: Core,
    kind: cython.longlong,
    t: cython.longlong,
    pc: cython.longlong,
    addr: cython.longlong,
) -> cython.longlong:
    """Record a fault of thread ``t`` at ``pc``; ``X_FAULT``."""
    core.dv[D_FKIND] = kind
    core.dv[D_FCODE] = addr if kind == FK_SOFTWARE else 0
    core.dv[D_FADDR] = addr
    core.dv[D_FTHREAD] = t
    core.dv[D_FPC] = pc
    return X_FAULT


@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def dma_request(
    core: Core,
    t: cython.longlong,
    kind: cython.longlong,
    waddr: cython.longlong,
    maddr: cython.longlong,
    size: cython.longlong,
    c: cython.longlong,
) -> cython.void:
    """Thread ``t`` issues a transfer at cycle ``c``: it waits, and the DPU's DMA engine serves
    requests in order, busy ``beta * size`` cycles each, completing ``alpha`` later."""
    core.dma[t * NDMA + 0] = kind
    core.dma[t * NDMA + 1] = waddr
    core.dma[t * NDMA + 2] = maddr
    core.dma[t * NDMA + 3] = size
    core.th[t * NTH + T_RUN] = RUN_DMA
    core.dv[D_READY] &= ~(cython.cast(cython.longlong, 1) << t)
    num: cython.longlong = core.dv[D_PS_NUM]
    den: cython.longlong = core.dv[D_PS_DEN]
    boot: cython.longlong = core.dv[D_BOOT_PS]
    busy: cython.longlong = cython.cast(cython.longlong, DMA_BETA_CYCLES_PER_BYTE * size)
    alpha: cython.longlong = DMA_WRITE_ALPHA_CYCLES if kind == DMA_SDMA else DMA_READ_ALPHA_CYCLES
    # in whole cycles of the run: at 350 MHz a cycle is not a whole number of ps, and adding
    # two rounded durations could land one cycle late
    start: cython.longlong = c
    free: cython.longlong = first_cycle(core.dv[D_DMA_FREE], boot, num, den)
    if free > start:
        start = free
    core.dv[D_DMA_FREE] = boot + cycles_ps(start + busy, num, den)
    core.dv[D_DMA_REQS] += 1
    core.dv[D_DMA_BYTES] += size
    due: cython.longlong = start + alpha + busy
    if due < c + REVOLVER_CYCLES:
        due = c + REVOLVER_CYCLES
    core.th[t * NTH + T_NEXT] = due
    if due < core.dv[D_DMA_MIN]:
        core.dv[D_DMA_MIN] = due


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def word32(wram: cython.uchar[::1], a: cython.longlong) -> cython.longlong:
    """The little-endian 32-bit word at WRAM byte ``a``."""
    return iv(wram[a]) | (iv(wram[a + 1]) << 8) | (iv(wram[a + 2]) << 16) | (iv(wram[a + 3]) << 24)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def fast_row(
    regs: cython.longlong[::1],
    th: cython.longlong[::1],
    wram: cython.uchar[::1],
    t: cython.longlong,
    pc: cython.longlong,
    w0: cython.longlong,
    w1: cython.longlong,
) -> cython.bint:
    """Issue a row of a fast kind (``C_FW0``: 32-bit add/sub/logic/shift with a register or
    no destination, plain or with a true/z/nz/ltu/geu jump; aligned little-endian ``lw``/``ld``
    with no flags; ``call``/``jump`` with no flags) from its two packed words; False (nothing
    done) for an access the general path faults on, or an ``acquire``."""
    f: cython.longlong = w0 & FW_KIND
    av: cython.longlong = w1 & M32
    bv: cython.longlong = (w1 >> 32) & M32
    if (w0 >> FW_AREG) & 1:
        av = iv(regs[t * NREG + av])
    fx: cython.longlong
    fa: cython.longlong
    d: cython.longlong
    if f >= FAST_ADD:
        if (w0 >> FW_BREG) & 1:
            bv = iv(regs[t * NREG + bv])
        cy: cython.longlong = 0
        if f == FAST_ADD:
            fx = av + bv
            cy = fx >> 32
        elif f == FAST_SUB:
            fx = av + ((~bv) & M32) + 1
            cy = fx >> 32
        elif f == FAST_AND:
            fx = av & bv
        elif f == FAST_OR:
            fx = av | bv
        elif f == FAST_XOR:
            fx = av ^ bv
        elif f == FAST_LSL:
            fx = av << (bv & 31)
        elif f == FAST_LSR:
            fx = av >> (bv & 31)
        elif f == FAST_ADDC:
            fx = av + bv + iv(th[t * NTH + T_CF])
            cy = fx >> 32
        else:
            fx = av + ((~bv) & M32) + iv(th[t * NTH + T_CF])
            cy = fx >> 32
        fx &= M32
        jc: cython.longlong = (w0 >> FW_JUMP) & 7
        taken: cython.bint = (
            jc == JC_TRUE
            or (jc == JC_Z and fx == 0)
            or (jc == JC_NZ and fx != 0)
            or (jc == JC_LTU and cy == 0)
            or (jc == JC_GEU and cy != 0)
        )
        if (w0 >> FW_FLAGS) & 1:
            th[t * NTH + T_ZF] = 1 if fx == 0 else 0
        if (w0 >> FW_FLAGS) & 2:
            th[t * NTH + T_CF] = cy
        if (w0 >> FW_DREG) & 1:
            regs[t * NREG + ((w0 >> FW_D) & 63)] = fx
        th[t * NTH + T_PC] = (w0 >> FW_PC) if taken else pc + 1
        return True
    if f == FAST_LW:
        fa = (av + bv) & M32
        if fa + 4 > wram.shape[0] or fa & 3 != 0:
            return False
        regs[t * NREG + ((w0 >> FW_D) & 63)] = word32(wram, fa)
        th[t * NTH + T_PC] = pc + 1
        return True
    if f == FAST_LD:
        fa = (av + bv) & M32
        if fa + 8 > wram.shape[0] or fa & 7 != 0:
            return False
        d = t * NREG + ((w0 >> FW_D) & 63)
        regs[d] = word32(wram, fa + 4)  # the high word of the pair
        regs[d + 1] = word32(wram, fa)
        th[t * NTH + T_PC] = pc + 1
        return True
    if f == FAST_CALL:
        if (w0 >> FW_BREG) & 1:
            bv = iv(regs[t * NREG + bv])
        if (w0 >> FW_DREG) & 1:
            regs[t * NREG + ((w0 >> FW_D) & 63)] = (pc + 1) & M32
        th[t * NTH + T_PC] = (av + bv) & M32
        return True
    return False


@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def execute(
    core: Core,
    code: cython.longlong[::1],
    regs: cython.longlong[::1],
    th: cython.longlong[::1],
    dv: cython.longlong[::1],
    atomic: cython.uchar[::1],
    wram: cython.uchar[::1],
    nprog: cython.longlong,
    t: cython.longlong,
    c: cython.longlong,
    instr: cython.longlong,
) -> cython.longlong:
    """Issue the instruction of thread ``t`` at cycle ``c`` (``nprog``: rows of ``code``;
    ``instr``: instructions issued before it); ``X_NEXT``, ``X_THREADS`` or ``X_FAULT``."""
    pc: cython.longlong = th[t * NTH + T_PC]
    th[t * NTH + T_NEXT] = c + REVOLVER_CYCLES
    if pc < 0 or pc >= nprog:
        return set_fault(core, FK_PC, t, pc, 0)
    row: cython.longlong = pc * NCOL
    if (
        fast_rows
        and code[row + C_FW0] != 0
        and fast_row(regs, th, wram, t, pc, iv(code[row + C_FW0]), iv(code[row + C_FW1]))
    ):
        return X_NEXT
    op: cython.longlong = iv(code[row + C_OP])
    npc: cython.longlong = pc + 1
    ret: cython.longlong = X_NEXT
    av: cython.longlong = iv(code[row + C_AV])
    if iv(code[row + C_AK]) == K_REG:
        av = iv(regs[t * NREG + av])
    bv: cython.longlong = iv(code[row + C_BV])
    if iv(code[row + C_BK]) == K_REG:
        bv = iv(regs[t * NREG + bv])
    av &= M32
    bv &= M32
    mode: cython.longlong = iv(code[row + C_MODE])
    dk: cython.longlong = iv(code[row + C_DK])
    d: cython.longlong = iv(code[row + C_D])
    flags: cython.longlong = iv(code[row + C_FLAGS])
    x: cython.longlong = 0  # the tested 32-bit value
    zx: cython.longlong = 0  # the value ZF is computed from
    cy: cython.longlong = 0  # carry out of bit 31 (add/sub family)
    ovf: cython.longlong = 0  # signed overflow
    kb: cython.longlong = 0  # carry into each bit (a ^ b ^ x) for nc<k>
    sh: cython.longlong = 0  # raw register shift amount (sh32)
    write: cython.bint = dk != DK_NONE
    result: cython.longlong = 0  # the value written to the destination (before extension)
    wide: cython.bint = False  # result64 is written to a pair as is
    result64: cython.ulonglong = 0
    p: cython.longlong
    q: cython.longlong
    s: cython.longlong
    i: cython.longlong
    n: cython.longlong
    v: cython.ulonglong
    u: cython.longlong
    sub: cython.longlong
    size: cython.longlong
    addr: cython.longlong
    hi: cython.longlong
    lo: cython.longlong
    taken: cython.bint = False

    if op in (OP_ADD, OP_ADDC, OP_SUB, OP_SUBC):
        p = av
        q = (~bv) & M32 if (op in (OP_SUB, OP_SUBC)) else bv
        if op == OP_ADD:
            s = p + q
        elif op == OP_SUB:
            s = p + q + 1
        else:
            s = p + q + iv(th[t * NTH + T_CF])
        x = s & M32
        cy = s >> 32
        ovf = (((p ^ x) & (q ^ x)) >> 31) & 1
        kb = p ^ q ^ x
        result = x
        zx = x
    elif op in (OP_LOAD, OP_STORE):
        sub = iv(code[row + C_SUB])
        size = sub & 15
        if sub & SUB_SAFE:
            addr = (av & 0xFFFF) + iv(code[row + C_BV])
            if addr + size - (av >> 16) >= 0:
                return set_fault(core, FK_MEMORY, t, pc, addr)
        else:
            addr = (av + iv(code[row + C_BV])) & M32
        if addr < 0 or addr + size > wram.shape[0] or addr & (size - 1) != 0:
            return set_fault(core, FK_MEMORY, t, pc, addr)
        big: cython.bint = iv(code[row + C_ENDIAN]) != 0
        if op == OP_LOAD:
            v = 0
            for i in range(size):
                if big:
                    v = (v << 8) | iv(wram[addr + i])
                else:
                    v |= cython.cast(cython.ulonglong, iv(wram[addr + i])) << (8 * i)
            if size == 8:
                wide = True
                result64 = v
            else:
                if sub & SUB_SIGNED and (v >> (8 * size - 1)) & 1:
                    v = (v - (cython.cast(cython.ulonglong, 1) << (8 * size))) & M32
                result = cython.cast(cython.longlong, v)
        else:
            kind: cython.longlong = (sub >> SUB_KIND_SHIFT) & 3
            cv: cython.longlong = iv(code[row + C_CV])
            if kind == SV_IMM:
                v = cython.cast(cython.ulonglong, cv) & M64
            elif kind == SV_ID:
                v = t | cv
            elif size == 8:
                v = (cython.cast(cython.ulonglong, iv(regs[t * NREG + cv])) << 32) | iv(
                    regs[t * NREG + cv + 1]
                )
            else:
                v = iv(regs[t * NREG + cv])
            keep_wram(core, addr, addr + size)
            for i in range(size):
                if big:
                    wram[addr + size - 1 - i] = (v >> (8 * i)) & 0xFF
                else:
                    wram[addr + i] = (v >> (8 * i)) & 0xFF
            write = False
        mode = 0
    elif op in (
        OP_AND,
        OP_ANDN,
        OP_NAND,
        OP_NOR,
        OP_NXOR,
        OP_OR,
        OP_ORN,
        OP_XOR,
        OP_ASR,
        OP_LSL,
        OP_LSL1,
        OP_LSL1X,
        OP_LSLX,
        OP_LSR,
        OP_LSR1,
        OP_LSR1X,
        OP_LSRX,
        OP_ROL,
        OP_ROR,
        OP_CMPB4,
        OP_MUL,
        OP_HASH,
    ):
        sh = bv
        x = logic(op, av, bv, iv(code[row + C_SUB]))
        if x < 0:
            return set_fault(core, FK_UNIMPLEMENTED, t, pc, 0)
        result = x
        zx = x
    elif op == OP_CALL:
        result = npc
        npc = (av + bv) & M32
        mode = 0
    elif op in (
        OP_CAO,
        OP_CLO,
        OP_CLS,
        OP_CLZ,
        OP_EXTSB,
        OP_EXTSH,
        OP_EXTUB,
        OP_EXTUH,
        OP_SATS,
    ):
        x = unary(op, av)
        result = x
        zx = x
    elif op in (OP_LSL_ADD, OP_LSL_SUB, OP_LSR_ADD, OP_ROL_ADD):
        n = iv(code[row + C_CV]) & 31
        if op == OP_LSR_ADD:
            s = bv >> n
        elif op == OP_ROL_ADD:
            s = ((bv << n) | (bv >> (32 - n))) & M32 if n else bv
        else:
            s = (bv << n) & M32
        x = (av - s) & M32 if op == OP_LSL_SUB else (av + s) & M32
        zx = s  # ZF comes from the shifted operand, as the instruction set says
        result = x
    elif op in (OP_LDMA, OP_SDMA, OP_LDMAI):
        waddr: cython.longlong = av & 0x00FFFFF8
        maddr: cython.longlong = bv & MRAM_ALIGN
        size = 8 * (1 + ((iv(code[row + C_CV]) + (av >> 24)) & 0xFF))
        if waddr + size > (dv[D_IRAM] if op == OP_LDMAI else wram.shape[0]):
            return set_fault(core, FK_DMA, t, pc, waddr)
        if maddr + size > dv[D_MRAM]:
            return set_fault(core, FK_DMA, t, pc, maddr)
        th[t * NTH + T_PC] = npc
        dma_request(
            core,
            t,
            DMA_LDMA if op == OP_LDMA else (DMA_SDMA if op == OP_SDMA else DMA_LDMAI),
            waddr,
            maddr,
            size,
            c,
        )
        return X_THREADS
    elif op in (OP_ACQUIRE, OP_RELEASE):
        v = (av + bv) & 0xFFFF
        u = cython.cast(cython.longlong, ((v >> 8) ^ v) & 0xFF)
        x = iv(atomic[u])
        atomic[u] = 1 if op == OP_ACQUIRE else 0
        zx = x
    elif op in (OP_BOOT, OP_RESUME, OP_CLR_RUN, OP_READ_RUN):
        v = (av + bv) & 0xFFFF
        u = cython.cast(cython.longlong, ((v >> 8) ^ v) & 0xFF)
        if u >= dv[D_NTHREADS]:
            return set_fault(core, FK_THREAD, t, pc, u)
        x = 1 if th[u * NTH + T_RUN] != RUN_STOPPED else 0
        if (op in (OP_BOOT, OP_RESUME)) and x == 0:
            if op == OP_BOOT:
                th[u * NTH + T_PC] = 0
            th[u * NTH + T_RUN] = RUN_READY
            dv[D_READY] |= cython.cast(cython.longlong, 1) << u
            if th[u * NTH + T_NEXT] < c + 1:
                th[u * NTH + T_NEXT] = c + 1
            ret = X_THREADS
        elif op == OP_CLR_RUN and th[u * NTH + T_RUN] == RUN_READY:
            th[u * NTH + T_RUN] = RUN_STOPPED
            dv[D_READY] &= ~(cython.cast(cython.longlong, 1) << u)
            ret = X_THREADS
        zx = x
    elif op in (OP_MOVD, OP_SWAPD, OP_MUL_STEP, OP_DIV_STEP):
        # the source pair: its even register (high word) and the next (low word)
        hi = iv(regs[t * NREG + iv(code[row + C_DB])])
        lo = iv(regs[t * NREG + iv(code[row + C_DB]) + 1])
        if op == OP_MOVD:
            result64 = (cython.cast(cython.ulonglong, hi) << 32) | lo
            x = hi
        elif op == OP_SWAPD:
            result64 = (cython.cast(cython.ulonglong, lo) << 32) | hi
            x = hi
        elif op == OP_MUL_STEP:
            x = hi >> 1
            if hi & 1:
                lo = (lo + ((av << (iv(code[row + C_CV]) & 31)) & M32)) & M32
            result64 = (cython.cast(cython.ulonglong, x) << 32) | lo
            zx = x
        else:  # div_step
            s = (av << (iv(code[row + C_CV]) & 31)) & M32
            if lo >= s:
                result64 = (cython.cast(cython.ulonglong, ((hi << 1) | 1) & M32) << 32) | (
                    (lo - s) & M32
                )
            else:
                result64 = (cython.cast(cython.ulonglong, (hi << 1) & M32) << 32) | iv(
                    regs[t * NREG + d + 1]
                )
            x = (lo - s) & M32
        wide = True
    elif op in (OP_ADD_SAFE, OP_SUB_SAFE):
        # a signed immediate offset: the 16-bit check sees its sign
        off: cython.longlong = bv
        if iv(code[row + C_BK]) != K_REG and (bv & SIGN32) != 0:
            off = bv - (cython.cast(cython.longlong, 1) << 32)
        if op == OP_ADD_SAFE:
            s = av + bv
            lo = (av & 0xFFFF) + off
        else:
            s = av + ((~bv) & M32) + 1
            lo = (av & 0xFFFF) - off
        x = s & M32
        cy = s >> 32
        result = x
        if lo < 0 or lo > 0xFFFF:
            if dk == DK_REG:
                regs[t * NREG + d] = (x & 0xFFFFFF) | (t << 25)
            return set_fault(core, FK_SAFE, t, pc, lo)
        zx = x
    elif op == OP_STOP:
        x = 1
        zx = 1
    elif op in (OP_TIME, OP_TIME_CFG):
        pm: cython.longlong = dv[D_PERF_MODE]
        tv: cython.longlong
        if pm == 1:
            tv = dv[D_PERF_ACC] + c - dv[D_PERF_MARK]
        elif pm == 2:
            tv = dv[D_PERF_ACC] + instr - dv[D_PERF_MARK]
        else:
            tv = dv[D_PERF_ACC]
        x = (tv >> 4) & M32
        result = x
        if op == OP_TIME_CFG:
            cfg: cython.longlong = (av if iv(code[row + C_AK]) == K_REG else 0) & 7
            newmode: cython.longlong = (cfg >> 1) & 3
            if newmode != 0:
                pm = newmode if newmode != 3 else 0
            dv[D_PERF_MODE] = pm
            dv[D_PERF_ACC] = 0 if cfg & 1 else tv
            dv[D_PERF_MARK] = c if pm == 1 else instr
        flags = 0
    elif op == OP_NOP:
        write = False
    elif op == OP_FAULT:
        return set_fault(core, FK_SOFTWARE, t, pc, av & 0xFFFFFF)
    else:
        return set_fault(core, FK_ILLEGAL, t, pc, 0)

    # ---- condition (it sees the flags before the instruction writes them) ----
    if mode != 0:
        taken = condition(
            iv(code[row + C_COND]),
            x,
            cy,
            ovf,
            kb,
            sh,
            iv(regs[t * NREG + iv(code[row + C_SRC])]),
            th[t * NTH + T_ZF],
        )
        if mode == MODE_SET:
            result = 1 if taken else 0
            wide = False
    # ---- flags ----
    if flags & 1:
        th[t * NTH + T_ZF] = 1 if (zx & M32) == 0 else 0
    if flags & 2:
        th[t * NTH + T_CF] = cy
    # ---- destination ----
    if write:
        if wide:
            regs[t * NREG + d] = cython.cast(cython.longlong, (result64 >> 32) & M32)
            regs[t * NREG + d + 1] = cython.cast(cython.longlong, result64 & M32)
        elif dk == DK_REG:
            regs[t * NREG + d] = result & M32
        elif dk == DK_PAIR:
            regs[t * NREG + d] = 0
            regs[t * NREG + d + 1] = result & M32
        else:
            regs[t * NREG + d] = M32 if (dk == DK_PAIR_S and result & SIGN32) else 0
            regs[t * NREG + d + 1] = result & M32
    # ---- next PC ----
    if op == OP_STOP:
        th[t * NTH + T_PC] = iv(code[row + C_PC]) if taken else npc
        th[t * NTH + T_RUN] = RUN_STOPPED
        dv[D_READY] &= ~(cython.cast(cython.longlong, 1) << t)
        return X_THREADS
    th[t * NTH + T_PC] = iv(code[row + C_PC]) if (mode == MODE_JUMP and taken) else npc
    return ret


# ================================================================================================
# the DMA engine's completions
# ================================================================================================
@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def copy_page(
    core: Core,
    e: cython.longlong,
    off: cython.longlong,
    w: cython.longlong,
    nb: cython.longlong,
    to_wram: cython.bint,
) -> cython.void:
    """Copy ``nb`` bytes between WRAM ``w`` and byte ``off`` of page entry ``e``."""
    i: cython.longlong
    if cython.compiled:
        ww: cython.p_longlong = cython.cast(cython.p_longlong, cython.address(core.wram[w]))
        if e == PM_ZERO:
            for i in range(nb >> 3):
                ww[i] = 0
            return
        pw: cython.p_longlong = cython.cast(cython.p_longlong, core.pages.addr[e >> 1] + off)
        if to_wram:
            for i in range(nb >> 3):
                ww[i] = pw[i]
        else:
            for i in range(nb >> 3):
                pw[i] = ww[i]
    else:
        if e == PM_ZERO:
            core.wram[w : w + nb] = 0
        elif to_wram:
            core.wram[w : w + nb] = core.pages.arrays[e >> 1][off : off + nb]
        else:
            core.pages.arrays[e >> 1][off : off + nb] = core.wram[w : w + nb]


@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def serve_dma(core: Core, c: cython.longlong) -> cython.bint:
    """Complete the transfers due at cycle ``c``, in thread order, while their MRAM pages are
    in the page map (written only into a page the map marks writable); False when one needs
    Python (an unknown or read-only page, an ``ldmai``), which then serves it and the ones
    after it."""
    nxt: cython.longlong = BIG
    t: cython.longlong
    p: cython.longlong
    e: cython.longlong
    for t in range(core.dv[D_NTHREADS]):
        if core.th[t * NTH + T_RUN] != RUN_DMA:
            continue
        due: cython.longlong = core.th[t * NTH + T_NEXT]
        if due > c:
            if due < nxt:
                nxt = due
            continue
        kind: cython.longlong = core.dma[t * NDMA + 0]
        if kind == DMA_LDMAI:
            return False
        waddr: cython.longlong = core.dma[t * NDMA + 1]
        maddr: cython.longlong = core.dma[t * NDMA + 2]
        size: cython.longlong = core.dma[t * NDMA + 3]
        for p in range(maddr >> PAGE_SHIFT, ((maddr + size - 1) >> PAGE_SHIFT) + 1):
            e = core.pmap[p]
            if e == PM_UNKNOWN or (kind == DMA_SDMA and (e < 0 or (e & 1) == 0)):
                return False
        if kind == DMA_LDMA:
            keep_wram(core, waddr, waddr + size)
        pos: cython.longlong = 0
        while pos < size:
            a: cython.longlong = maddr + pos
            off: cython.longlong = a & ((1 << PAGE_SHIFT) - 1)
            nb: cython.longlong = (1 << PAGE_SHIFT) - off
            if nb > size - pos:
                nb = size - pos
            copy_page(core, core.pmap[a >> PAGE_SHIFT], off, waddr + pos, nb, kind == DMA_LDMA)
            pos += nb
        core.th[t * NTH + T_RUN] = RUN_READY
        core.dv[D_READY] |= cython.cast(cython.longlong, 1) << t
    core.dv[D_DMA_MIN] = nxt
    return True


# ================================================================================================
# the issue loop
# ================================================================================================
@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def pick(
    th: cython.longlong[::1],
    ready: cython.longlong,
    n: cython.longlong,
    rr: cython.longlong,
    c: cython.longlong,
) -> cython.longlong:
    """The thread that issues at cycle ``c`` among the ``ready`` ones (bit t for thread t, of
    ``n``): the first after ``rr`` in round-robin order whose next issue is due; else
    ``-1 - e``, ``e`` the earliest cycle one is (``BIG`` if no thread is ready)."""
    u: cython.longlong = rr + 1
    if u >= n:
        u = 0
    if (ready >> u) & 1 and th[u * NTH + T_NEXT] <= c:
        return u  # the common case: the thread after the last issuer
    earliest: cython.longlong = BIG
    nx: cython.longlong
    u = rr
    _k: cython.longlong
    for _k in range(n):
        u += 1
        if u >= n:
            u = 0
        if (ready >> u) & 1:
            nx = th[u * NTH + T_NEXT]
            if nx <= c:
                return u
            if nx < earliest:
                earliest = nx
    return -1 - earliest


@cython.ccall
@cython.nogil
@cython.exceptval(check=False)
def run(core: Core, cycle_limit: cython.longlong, max_issue: cython.longlong) -> cython.longlong:
    """Run until ``cycle_limit`` (exclusive) or a stop reason (``R_*``); at most ``max_issue``
    instructions (``R_STEP`` when reached)."""
    return loop(
        core,
        core.code,
        core.regs,
        core.th,
        core.dv,
        core.atomic,
        core.wram,
        cycle_limit,
        max_issue,
    )


@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def loop(
    core: Core,
    code: cython.longlong[::1],
    regs: cython.longlong[::1],
    th: cython.longlong[::1],
    dv: cython.longlong[::1],
    atomic: cython.uchar[::1],
    wram: cython.uchar[::1],
    cycle_limit: cython.longlong,
    max_issue: cython.longlong,
) -> cython.longlong:
    """:func:`run` over the core's arrays (passed borrowed: the compiled loop keeps their
    addresses in registers)."""
    c: cython.longlong = dv[D_CYCLE]
    rr: cython.longlong = dv[D_RR]
    instr: cython.longlong = dv[D_INSTR]
    last: cython.longlong = dv[D_LAST]
    lastpc: cython.longlong = dv[D_LAST_PC]
    issued: cython.longlong = 0
    reason: cython.longlong = R_LIMIT
    t: cython.longlong
    nc: cython.longlong
    x: cython.longlong
    n: cython.longlong = dv[D_NTHREADS]
    nprog: cython.longlong = code.shape[0] // NCOL
    # the ready threads, bit t for thread t (Python may have changed run states between calls),
    # and the earliest completion of a transfer: kept here, read back from ``dv`` after an
    # instruction or a completion changes them
    ready: cython.longlong = 0
    for t in range(n):
        if th[t * NTH + T_RUN] == RUN_READY:
            ready |= cython.cast(cython.longlong, 1) << t
    dv[D_READY] = ready
    dma_min: cython.longlong = dv[D_DMA_MIN]
    while True:
        if dma_min <= c:
            if not serve_dma(core, c):
                reason = R_DMA_DUE
                break
            ready = dv[D_READY]
            dma_min = dv[D_DMA_MIN]
        if c >= cycle_limit:
            if ready == 0 and dma_min == BIG:
                reason = R_END
            break
        t = pick(th, ready, n, rr, c)
        if t < 0:
            # nobody issues now: on to the next cycle where a thread or a transfer is due
            nc = -1 - t
            if nc == BIG and dma_min == BIG:
                reason = R_END
                break
            if dma_min < nc:
                nc = dma_min
            c = nc if nc < cycle_limit else cycle_limit
            continue
        if issued >= max_issue:
            reason = R_STEP
            break
        lastpc = th[t * NTH + T_PC]
        x = execute(core, code, regs, th, dv, atomic, wram, nprog, t, c, instr)
        rr = t
        last = c
        issued += 1
        instr += 1
        if x != X_NEXT:
            if x == X_FAULT:
                reason = R_FAULT
                break
            ready = dv[D_READY]
            dma_min = dv[D_DMA_MIN]
        c += 1
    dv[D_CYCLE] = c
    dv[D_RR] = rr
    dv[D_INSTR] = instr
    dv[D_LAST] = last
    dv[D_LAST_PC] = lastpc
    if reason == R_END:
        dv[D_END] = last + REVOLVER_CYCLES
    return reason


# ================================================================================================
# the batch: many DPUs, without the GIL
# ================================================================================================
@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def host_writes(core: Core) -> cython.void:
    """Copy into WRAM the host writes scheduled at or before the DPU's cycle, in order: the
    host's bytes as they are now (no host code runs while the batch does)."""
    c: cython.longlong = core.dv[D_CYCLE]
    i: cython.longlong = core.dv[D_HW_DONE]
    j: cython.longlong
    while i < core.dv[D_HW_N] and core.hw[i * NHW + 0] <= c:
        w: cython.longlong = core.hw[i * NHW + 1]
        n: cython.longlong = core.hw[i * NHW + 3]
        keep_wram(core, w, w + n)
        if cython.compiled:
            src: cython.p_uchar = cython.cast(cython.p_uchar, core.hw[i * NHW + 2])
            for j in range(n):
                core.wram[w + j] = src[j]
        else:
            source = ctypes.string_at(int(core.hw[i * NHW + 2]), int(n))
            core.wram[w : w + n] = np.frombuffer(source, np.uint8)
        i += 1
    core.dv[D_HW_DONE] = i


@cython.ccall
@cython.nogil
@cython.exceptval(check=False)
def save_state(core: Core) -> cython.void:
    """The checkpoint: copies of the arrays (WRAM is then kept block by block before each
    block's first write, :func:`keep_wram`), and the MRAM write marks of the page map
    cleared (Python keeps a page's old bytes before giving the mark back)."""
    core.dv[D_WKEEP] = 0  # the copy does not keep WRAM: a rollback ends the keeping
    core.s_regs[:] = core.regs
    core.s_th[:] = core.th
    core.s_dv[:] = core.dv
    core.s_atomic[:] = core.atomic
    core.s_dma[:] = core.dma
    core.dv[D_WKEEP] = 1
    core.dv[D_WKEPT] = 0
    p: cython.longlong
    end: cython.longlong = core.dv[D_PAGES]
    if end > core.pmap.shape[0]:
        end = core.pmap.shape[0]
    for p in range(end):
        if core.pmap[p] >= 0:
            core.pmap[p] &= ~cython.cast(cython.longlong, 1)
    core.save = 0


@cython.cfunc
@cython.nogil
@cython.exceptval(check=False)
def advance(core: Core, until_ps: cython.longlong) -> cython.longlong:
    """Run one DPU up to the first cycle at or after ``until_ps``, making the host writes
    scheduled on the way; the stop reason."""
    if core.save:
        save_state(core)
    limit: cython.longlong = first_cycle(
        until_ps, core.dv[D_BOOT_PS], core.dv[D_PS_NUM], core.dv[D_PS_DEN]
    )
    r: cython.longlong
    while True:
        stop: cython.longlong = limit
        if core.dv[D_HW_DONE] < core.dv[D_HW_N] and core.hw[core.dv[D_HW_DONE] * NHW] < stop:
            # a host write before the limit: run to it first
            stop = core.hw[core.dv[D_HW_DONE] * NHW]
        r = run(core, stop, BIG)
        if r == R_LIMIT and stop < limit:
            host_writes(core)
            continue
        return r


def run_cores(
    cores: list[Core], until_ps: int, reasons: npt.NDArray[np.int64], first: int = 0
) -> int:
    """Run ``cores`` up to ``until_ps``, each without the GIL; ``reasons[first + j]`` is
    ``R_LIMIT`` or what core ``j`` needs from Python. Returns how many need it."""
    need: cython.Py_ssize_t = 0
    j: cython.Py_ssize_t
    r: cython.longlong
    until: cython.longlong = until_ps
    core: Core
    for j in range(len(cores)):
        core = cores[j]
        with cython.nogil:
            r = advance(core, until)
        reasons[first + j] = r
        if r != R_LIMIT:
            need += 1
    return need
