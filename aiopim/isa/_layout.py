"""The layout of the interpreter's state arrays, its stop reasons and its fault kinds.

One DPU's state (owned by :class:`._runner.IsaRunner`, mutated in place by :mod:`._interp`):

* ``regs``: ``int64[threads, 32]`` (values 0..2**32-1): r0-r23, then the constant registers
  zero, one, lneg, mneg, id, id2, id4, id8 (filled at boot, never written), so a register
  operand is one array read;
* ``th``: ``int64[threads, NTH]``: PC, run state, earliest cycle of its next issue (or of its
  DMA completion), ZF, CF;
* ``dv``: ``int64[ND]``: DPU-wide scalars (``D_*``);
* ``atomic``: ``uint8[256]``; ``wram``: the DPU's WRAM bytes; ``dma``: ``int64[threads, 4]``,
  the outstanding transfer of each thread (kind, WRAM/IRAM address, MRAM address, size).
"""

from __future__ import annotations

from typing import Final

#: columns of ``regs`` (r0-r23 and the constant registers), of ``dma`` and of the host writes
NREG: Final = 32
NDMA: Final = 4
NHW: Final = 4

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
D_NTHREADS: Final = 13
D_IRAM: Final = 14  # IRAM bytes (ldmai range)
D_END: Final = 15  # cycle at which the run ended
D_LAST_PC: Final = 16  # PC of the last issued instruction
D_MRAM: Final = 17  # MRAM bytes
D_BOOT_PS: Final = 18  # kernel time of cycle 0 of the run
D_PS_NUM: Final = 19  # one cycle is D_PS_NUM / D_PS_DEN picoseconds (the chip's clock)
D_PS_DEN: Final = 20
D_DMA_FREE: Final = 21  # time the DMA engine is free again (ps)
D_DMA_REQS: Final = 22  # DMA requests served since boot
D_DMA_BYTES: Final = 23  # bytes moved by them
D_READY: Final = 24  # bit t: thread t is ready to issue
#: host writes scheduled into the run: done so far, and how many (rows of ``Core.hw``)
D_HW_DONE: Final = 25
D_HW_N: Final = 26
#: 1 while a checkpoint's WRAM copy is kept block by block (``Core.s_wram``), the blocks
#: copied so far (bit b for block b) and log2 of the block size
D_WKEEP: Final = 27
D_WKEPT: Final = 28
D_WBLOCK: Final = 29
#: pages of the page map that may hold entries (an end bound of its scans)
D_PAGES: Final = 30
ND: Final = 31

#: "never" in cycles
BIG: Final = 1 << 62

# ---- stop reasons of the loop -----------------------------------------------------------------
R_LIMIT: Final = 0
R_END: Final = 1
R_FAULT: Final = 2
R_DMA_DUE: Final = 3  # a transfer is due that the loop cannot serve (Python serves it)
R_STEP: Final = 4  # the instruction bound was reached

# ---- fault kinds (dv[D_FKIND]) ----------------------------------------------------------------
FK_NONE: Final = 0
FK_SOFTWARE: Final = 1  # the fault instruction (code in D_FCODE)
FK_MEMORY: Final = 2
FK_DMA: Final = 3
FK_ILLEGAL: Final = 4  # undecodable or illegal word (decode status in the row)
FK_PC: Final = 5  # PC outside the loaded instructions
FK_THREAD: Final = 6  # boot/resume of a thread the DPU does not have
FK_UNIMPLEMENTED: Final = 7
FK_SAFE: Final = 8  # safe-register bound exceeded (a memory fault)

# ---- transfers (dma[t, 0]) --------------------------------------------------------------------
DMA_LDMA: Final = 1
DMA_SDMA: Final = 2
DMA_LDMAI: Final = 3

# ---- MRAM page maps ---------------------------------------------------------------------------
#: MRAM page size of the page maps (the sparse MRAM bank's pages)
PAGE_SHIFT: Final = 16
#: page map entries: ``2 * index + writable`` into the page table, or one of these
PM_UNKNOWN: Final = -1  # unknown to the loop (ask Python)
PM_ZERO: Final = -2  # a page never written: reads as zeros

# ---- masks and bounds of 32- and 64-bit values ----------------------------------------------
M32: Final = 0xFFFFFFFF
M64: Final = 0xFFFFFFFFFFFFFFFF
SIGN32: Final = 0x80000000
MAX31: Final = 0x7FFFFFFF
EXT8: Final = 0xFFFFFF00
EXT16: Final = 0xFFFF0000
MRAM_ALIGN: Final = 0xFFFFFFF8

# ---- what executing one instruction tells the loop --------------------------------------------
X_NEXT: Final = 0  # issued; the thread goes on
X_FAULT: Final = 1  # faulted (dv holds the fault)
X_THREADS: Final = 2  # issued and changed the set of ready threads or the DMA engine
