"""A reference implementation of the DPU instructions, written independently of the interpreter
in ``aiopim.isa``: the tests cross-check the two. It executes one decoded instruction on flat
NumPy state.

State of a DPU, all flat arrays:

* ``regs``: ``uint32[threads, 24]``; ``pcs``: ``int64[threads]`` (instruction indexes);
* ``zf``, ``cf``: ``uint8[threads]``; ``wram``: ``uint8[wram_bytes]``.

:func:`execute` runs the instruction of decoded row ``values`` (a row of
:attr:`DecodedProgram.values`) with signature ``sig`` for thread ``tid`` and returns an event:

* ``EV_OK``: done; registers, flags, WRAM and ``pcs[tid]`` (next instruction or jump target)
  are updated;
* ``EV_EXTERNAL``: the instruction acts outside the thread (``acquire release boot resume stop
  clr_run read_run ldma ldmai sdma fault time time_cfg``); nothing was changed: the caller
  (the scheduler, which owns atomic bits, threads, DMA and time) runs
  :func:`execute_system` on the DPU-wide state, at the virtual time it chooses;
* ``EV_MEMORY_FAULT``: a WRAM access outside WRAM or not aligned to its size (nothing
  changed), or a safe-register form whose check failed (its result or access happened first,
  as the instruction describes; the PC stays on the instruction);
* ``EV_UNIMPLEMENTED``: ``hash`` and ``sats``, whose functions are not described; nothing
  changed.

Readings the instruction tables leave open, and the choice made here:

* CF holds the carry out of the 32-bit addition actually performed (``a + ~b + 1`` for a
  subtraction, ``a + ~b + CF`` for ``subc``), so ``ltu``/``geu``… test the borrow ``¬C``;
  chained ``sub``/``subc`` and ``add``/``addc`` give 64-bit results and compares.
* The ``s*`` conditions (``sz snz spl smi se so``) test the first register source: ``ra``, or
  ``rb`` in the forms that have no ``ra`` (``sub zero, imm, rb``).
* ``sh32``/``nsh32`` test bit 5 of the shift register; ``small``/``large``: product < / ≥ 256;
  ``nc<k>``: no carry into bit ``k`` of the addition; ``max``/``nmax``: count result = 32.
* ``lsl_add`` and its kin set ZF from the shifted value; their ``zrri`` form does nothing.
* ``mul_step`` jumps on ``x = dbe >> 1``; ``div_step`` tests its ``s*`` conditions on ``ra``.
* Conditions see the flags before the instruction writes them.
* ``boot``/``resume`` of a stopped thread start it (at PC 0 / its PC) and give x = 0; of a
  running thread they do nothing and give x = 1. ``release`` gives the bit's old value;
  ``clr_run``/``read_run`` the target's run bit (``clr_run`` clears it). ``stop`` takes its
  condition with x = 1. ``time`` reads bits 35..4 of the counter; ``time_cfg`` also stores
  ``rb & 7`` as ``(mode << 1) | reset`` (reset zeroes the counter), also in its ``zero`` form,
  as the runtime's profiler uses it.
* Safe registers hold a WRAM address (bits 15..0) and a limit (bits 31..16). ``adds``/``subs``
  fault when the 16-bit address arithmetic leaves 0..0xFFFF (writing ``result & 0xFFFFFF |
  id << 25``); safe loads and stores fault when ``address + offset + (size if size > 1 else 0)
  - limit >= 0``, after accessing the aligned 16-bit address, exactly as the tables' forms
  describe it.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from aiopim.isa import _tables as T
from aiopim.isa._codec import FIELD_NAMES

__all__ = [
    "EV_EXTERNAL",
    "EV_MEMORY_FAULT",
    "EV_OK",
    "EV_UNIMPLEMENTED",
    "EV_DMA_FAULT",
    "EV_FAULT",
    "EV_THREAD_FAULT",
    "EV_ILLEGAL",
    "EV_STEP_LIMIT",
    "run_threads",
    "dma_bytes",
    "execute_system",
    "OPS",
    "execute",
    "new_state",
]

EV_OK: Final = 0
EV_EXTERNAL: Final = 1
EV_MEMORY_FAULT: Final = 2
EV_UNIMPLEMENTED: Final = 3
EV_FAULT: Final = 4
EV_DMA_FAULT: Final = 5
EV_THREAD_FAULT: Final = 6
#: :func:`run_threads` only: undecodable or illegal instruction, or PC outside the program
EV_ILLEGAL: Final = 7
#: :func:`run_threads` only: the step budget ran out
EV_STEP_LIMIT: Final = 8

M32: Final = 0xFFFFFFFF

#: operation of each mnemonic; loads/stores/externals get their own classes below
OPS: Final = T.MNEMONICS
_ALU2: Final = [
    "add",
    "addc",
    "sub",
    "subc",
    "rsub",
    "rsubc",
    "and",
    "or",
    "xor",
    "nand",
    "nor",
    "nxor",
    "andn",
    "orn",
    "lsl",
    "lsr",
    "asr",
    "rol",
    "ror",
    "lsl1",
    "lsr1",
    "lslx",
    "lsrx",
    "lsl1x",
    "lsr1x",
    "cmpb4",
    "mul_sh_sh",
    "mul_sh_sl",
    "mul_sh_uh",
    "mul_sh_ul",
    "mul_sl_sh",
    "mul_sl_sl",
    "mul_sl_uh",
    "mul_sl_ul",
    "mul_uh_uh",
    "mul_uh_ul",
    "mul_ul_uh",
    "mul_ul_ul",
]
_ALU1: Final = ["clz", "clo", "cls", "cao", "extsb", "extsh", "extub", "extuh"]
_SHIFT_ADD: Final = ["lsl_add", "lsl_sub", "lsr_add", "rol_add"]
#: load mnemonic -> (size, sign-extending)
_LOADS: Final = {
    "lbs": (1, 1),
    "lbu": (1, 0),
    "lhs": (2, 1),
    "lhu": (2, 0),
    "lw": (4, 0),
    "ld": (8, 0),
}
#: store mnemonic -> size
_STORES: Final = {
    "sb": 1,
    "sh": 2,
    "sw": 4,
    "sd": 8,
    "sb_id": 1,
    "sh_id": 2,
    "sw_id": 4,
    "sd_id": 8,
}
_EXTERNAL: Final = [
    "acquire",
    "release",
    "boot",
    "resume",
    "stop",
    "clr_run",
    "read_run",
    "ldma",
    "ldmai",
    "sdma",
    "fault",
    "time",
    "time_cfg",
]

# operation classes
K_ALU2, K_ALU1, K_SHIFT_ADD, K_LOAD, K_STORE, K_MOVD, K_SWAPD, K_CALL = range(8)
K_NOP, K_MUL_STEP, K_DIV_STEP, K_EXTERNAL, K_UNIMPLEMENTED, K_SAFE_ALU, K_SAFE_MEM = range(8, 15)

F = {name: i for i, name in enumerate(FIELD_NAMES)}
FI_CC: Final = F["cc"]
FI_DB: Final = F["db"]
FI_IMM: Final = F["imm"]
FI_IMMDMA: Final = F["immDma"]
FI_ENDIAN: Final = F["endian"]
FI_OFF: Final = F["off"]
FI_RA: Final = F["ra"]
FI_RB: Final = F["rb"]
FI_SHIFT: Final = F["shift"]
_COND_NAME_ID: Final = {n: i for i, n in enumerate(T.CONDITION_NAMES)}


def _derive() -> dict[str, npt.NDArray[np.int64]]:
    """Per-signature execution parameters, from the operand descriptors."""
    n = len(T.SIG_KEYWORD)
    cols = {
        k: np.full(n, -1, np.int64)
        for k in [
            "kind",
            "op",
            "dest",
            "pair",
            "ext",
            "src1",
            "src1imm",
            "src2",
            "src2imm",
            "srcreg",
            "cond",
            "cmode",
            "pc",
            "size",
            "signed",
            "id",
            "flags",
            "isload",
        ]
    }
    for s in range(n):
        mn = T.MNEMONICS[T.SIG_FAMILY[s]]
        kw = T.SIG_KEYWORD[s]
        ops = T.SIG_OPERANDS[s]
        cols["op"][s] = T.SIG_FAMILY[s]
        cols["flags"][s] = T.SIG_FLAGS[s]
        cols["ext"][s] = 1 if kw.endswith(".s") else 2 if kw.endswith(".u") else 0
        safe = any(op[7] for op in ops)
        if mn in ("hash", "sats"):
            kind = K_UNIMPLEMENTED
        elif safe and mn in ("add", "sub"):
            kind = K_SAFE_ALU
        elif safe:
            kind = K_SAFE_MEM
            cols["size"][s] = _LOADS[mn][0] if mn in _LOADS else _STORES[mn]
            cols["signed"][s] = _LOADS[mn][1] if mn in _LOADS else 0
            cols["isload"][s] = int(mn in _LOADS)
        elif mn in _EXTERNAL:
            kind = K_EXTERNAL
        elif mn in _ALU2:
            kind = K_ALU2
        elif mn in _ALU1:
            kind = K_ALU1
        elif mn in _SHIFT_ADD:
            kind = K_SHIFT_ADD
        elif mn in _LOADS:
            kind = K_LOAD
            cols["size"][s], cols["signed"][s] = _LOADS[mn]
        elif mn in _STORES:
            kind = K_STORE
            cols["size"][s] = _STORES[mn]
            cols["id"][s] = int(mn.endswith("_id"))
        else:
            kind = {
                "movd": K_MOVD,
                "swapd": K_SWAPD,
                "call": K_CALL,
                "nop": K_NOP,
                "tell": K_NOP,
                "mul_step": K_MUL_STEP,
                "div_step": K_DIV_STEP,
            }[mn]
        cols["kind"][s] = kind
        store = mn in _STORES
        sources: list[tuple[int, int]] = []
        for k, op in enumerate(ops):
            _name, okind, fid, _bits, _signed, _ro, pair, _safe, cmap, _implicit, _const = op
            if not store and (
                (okind == T.KIND_REG and fid in (F["rc"], F["dc"]))
                or (k == 0 and okind == T.KIND_CONST_REG)
            ):
                cols["dest"][s] = fid  # -1 for the zero destination
                cols["pair"][s] = pair
            elif okind == T.KIND_REG and store and k == len(ops) - 1:
                sources.append((fid, 0))  # the stored register (or pair)
                cols["pair"][s] = pair
            elif okind in (T.KIND_REG, T.KIND_IMM) and not store:
                sources.append((fid, int(okind == T.KIND_IMM)))
            elif okind == T.KIND_IMM and store and op[0] == "imm":
                sources.append((fid, 1))
            elif okind == T.KIND_COND:
                cols["cond"][s] = cmap
                if fid < 0:
                    cols["cmode"][s] = 0  # the implicit "false": flags only
            elif okind == T.KIND_PC:
                cols["pc"][s] = fid
        if cols["cond"][s] >= 0 and cols["cmode"][s] != 0:
            cols["cmode"][s] = 2 if cols["pc"][s] >= 0 else 1
        if kind == K_CALL:
            sources = [(fid, 0) for fid, _imm in sources]
        for j, (fid, imm) in enumerate(sources[:2], start=1):
            cols[f"src{j}"][s] = fid
            cols[f"src{j}imm"][s] = imm
        regs = [fid for fid, imm in sources if not imm]
        fields = {f[0] for f in T.SIG_FIELDS[s]}
        cols["srcreg"][s] = F["ra"] if F["ra"] in regs else regs[0] if regs else -1
        if kind in (K_MUL_STEP, K_DIV_STEP) or (kind == K_SHIFT_ADD and F["ra"] in fields):
            cols["srcreg"][s] = F["ra"]
    for col in ("pair", "ext", "signed", "id", "isload"):
        cols[col] = np.maximum(cols[col], 0)
    return cols


_P: Final = _derive()
KIND: Final = _P["kind"]
OP: Final = _P["op"]
DEST: Final = _P["dest"]
PAIR: Final = _P["pair"]
EXT: Final = _P["ext"]
SRC1: Final = _P["src1"]
SRC1IMM: Final = _P["src1imm"]
SRC2: Final = _P["src2"]
SRC2IMM: Final = _P["src2imm"]
SRCREG: Final = _P["srcreg"]
COND: Final = _P["cond"]
CMODE: Final = _P["cmode"]
PCF: Final = _P["pc"]
SIZE: Final = _P["size"]
SIGNED: Final = _P["signed"]
IDSTORE: Final = _P["id"]
FLAGS: Final = _P["flags"]
IS_LOAD: Final = _P["isload"]
#: condition name id of (map, code), -1 where the map has no such code
COND_NAME: Final = np.full((len(T.CONDITION_MAPS), 64), -1, np.int64)
for _m, _entries in enumerate(T.CONDITION_MAPS):
    for _code, _name in _entries:
        COND_NAME[_m, _code] = _name

_OPID: Final = {name: i for i, name in enumerate(T.MNEMONICS)}
O_ADD: Final = _OPID["add"]
O_ADDC: Final = _OPID["addc"]
O_AND: Final = _OPID["and"]
O_ANDN: Final = _OPID["andn"]
O_ASR: Final = _OPID["asr"]
O_CAO: Final = _OPID["cao"]
O_CLO: Final = _OPID["clo"]
O_CLS: Final = _OPID["cls"]
O_CLZ: Final = _OPID["clz"]
O_CMPB4: Final = _OPID["cmpb4"]
O_EXTSB: Final = _OPID["extsb"]
O_EXTSH: Final = _OPID["extsh"]
O_EXTUB: Final = _OPID["extub"]
O_LSL: Final = _OPID["lsl"]
O_LSL1: Final = _OPID["lsl1"]
O_LSL1X: Final = _OPID["lsl1x"]
O_LSL_SUB: Final = _OPID["lsl_sub"]
O_LSLX: Final = _OPID["lslx"]
O_LSR: Final = _OPID["lsr"]
O_LSR1: Final = _OPID["lsr1"]
O_LSR1X: Final = _OPID["lsr1x"]
O_LSR_ADD: Final = _OPID["lsr_add"]
O_LSRX: Final = _OPID["lsrx"]
O_NAND: Final = _OPID["nand"]
O_NOR: Final = _OPID["nor"]
O_NXOR: Final = _OPID["nxor"]
O_OR: Final = _OPID["or"]
O_ORN: Final = _OPID["orn"]
O_ROL: Final = _OPID["rol"]
O_ROL_ADD: Final = _OPID["rol_add"]
O_ROR: Final = _OPID["ror"]
O_RSUB: Final = _OPID["rsub"]
O_RSUBC: Final = _OPID["rsubc"]
O_SUB: Final = _OPID["sub"]
O_SUBC: Final = _OPID["subc"]
O_XOR: Final = _OPID["xor"]
O_ACQUIRE: Final = _OPID["acquire"]
O_RELEASE: Final = _OPID["release"]
O_BOOT: Final = _OPID["boot"]
O_RESUME: Final = _OPID["resume"]
O_STOP: Final = _OPID["stop"]
O_CLR_RUN: Final = _OPID["clr_run"]
O_READ_RUN: Final = _OPID["read_run"]
O_LDMA: Final = _OPID["ldma"]
O_LDMAI: Final = _OPID["ldmai"]
O_SDMA: Final = _OPID["sdma"]
O_FAULT: Final = _OPID["fault"]
O_TIME: Final = _OPID["time"]
O_TIME_CFG: Final = _OPID["time_cfg"]
#: per operation: byte (0 low, 1 high) and signedness of each factor of the 8x8 multiplies
MUL_A_HIGH: Final = np.array([int(m[:4] == "mul_" and m[5] == "h") for m in T.MNEMONICS])
MUL_A_SIGNED: Final = np.array([int(m[:4] == "mul_" and m[4] == "s") for m in T.MNEMONICS])
MUL_B_HIGH: Final = np.array([int(m[:4] == "mul_" and m[-1] == "h") for m in T.MNEMONICS])
MUL_B_SIGNED: Final = np.array([int(m[:4] == "mul_" and m[-2] == "s") for m in T.MNEMONICS])


def new_state(
    threads: int, wram_bytes: int
) -> tuple[
    npt.NDArray[np.uint32],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint8],
]:
    """Zeroed ``(regs, pcs, zf, cf, wram)`` for ``threads`` threads."""
    return (
        np.zeros((threads, 24), np.uint32),
        np.zeros(threads, np.int64),
        np.zeros(threads, np.uint8),
        np.zeros(threads, np.uint8),
        np.zeros(wram_bytes, np.uint8),
    )


def read_reg(regs: npt.NDArray[np.uint32], tid: int, code: int) -> int:
    """Value of register ``code`` (0-23, or a constant register 24-31) for thread ``tid``."""
    if code < 24:
        return int(regs[tid, code])
    if code == 24:
        return 0
    if code == 25:
        return 1
    if code == 26:
        return M32
    if code == 27:
        return 0x80000000
    return (tid << (code - 28)) & M32


def _src(
    values: npt.NDArray[np.int64], fid: int, imm: int, regs: npt.NDArray[np.uint32], tid: int
) -> int:
    v = int(values[fid])
    return v & M32 if imm else read_reg(regs, tid, v)


def _clz(x: int) -> int:
    n = 0
    bit = 0x80000000
    while n < 32 and not x & bit:
        n += 1
        bit >>= 1
    return n


def _popcount(x: int) -> int:
    n = 0
    while x:
        n += x & 1
        x >>= 1
    return n


C_TRUE: Final = _COND_NAME_ID["true"]
C_FALSE: Final = _COND_NAME_ID["false"]
C_Z: Final = _COND_NAME_ID["z"]
C_NZ: Final = _COND_NAME_ID["nz"]
C_XZ: Final = _COND_NAME_ID["xz"]
C_XNZ: Final = _COND_NAME_ID["xnz"]
C_PL: Final = _COND_NAME_ID["pl"]
C_MI: Final = _COND_NAME_ID["mi"]
C_SZ: Final = _COND_NAME_ID["sz"]
C_SNZ: Final = _COND_NAME_ID["snz"]
C_SPL: Final = _COND_NAME_ID["spl"]
C_SMI: Final = _COND_NAME_ID["smi"]
C_OV: Final = _COND_NAME_ID["ov"]
C_NOV: Final = _COND_NAME_ID["nov"]
C_C: Final = _COND_NAME_ID["c"]
C_NC: Final = _COND_NAME_ID["nc"]
C_LTU: Final = _COND_NAME_ID["ltu"]
C_GEU: Final = _COND_NAME_ID["geu"]
C_LEU: Final = _COND_NAME_ID["leu"]
C_GTU: Final = _COND_NAME_ID["gtu"]
C_LTS: Final = _COND_NAME_ID["lts"]
C_GES: Final = _COND_NAME_ID["ges"]
C_LES: Final = _COND_NAME_ID["les"]
C_GTS: Final = _COND_NAME_ID["gts"]
C_XLEU: Final = _COND_NAME_ID["xleu"]
C_XGTU: Final = _COND_NAME_ID["xgtu"]
C_XLES: Final = _COND_NAME_ID["xles"]
C_XGTS: Final = _COND_NAME_ID["xgts"]
C_E: Final = _COND_NAME_ID["e"]
C_O: Final = _COND_NAME_ID["o"]
C_SE: Final = _COND_NAME_ID["se"]
C_SO: Final = _COND_NAME_ID["so"]
C_SH32: Final = _COND_NAME_ID["sh32"]
C_NSH32: Final = _COND_NAME_ID["nsh32"]
C_MAX: Final = _COND_NAME_ID["max"]
C_NMAX: Final = _COND_NAME_ID["nmax"]
C_SMALL: Final = _COND_NAME_ID["small"]
C_LARGE: Final = _COND_NAME_ID["large"]
#: k for the nc<k> conditions, -1 for the other names
NC_BIT: Final = np.array(
    [int(n[2:]) if n.startswith("nc") and n[2:].isdigit() else -1 for n in T.CONDITION_NAMES],
    np.int64,
)


def condition(
    name: int, x: int, src: int, zf0: int, carry: int, ovf: int, ncbits: int, aux: int
) -> bool:
    """Truth of condition ``name`` (index into ``CONDITION_NAMES``); ``aux`` is the shift
    register for ``sh32``."""
    z = x == 0
    neg = (x >> 31) & 1
    lt = (neg ^ ovf) == 1
    xz = z and zf0 == 1
    if name == C_TRUE:
        return True
    if name == C_FALSE:
        return False
    if name == C_Z:
        return z
    if name == C_NZ:
        return not z
    if name == C_XZ:
        return xz
    if name == C_XNZ:
        return not xz
    if name == C_PL:
        return neg == 0
    if name == C_MI:
        return neg == 1
    if name == C_SZ:
        return src == 0
    if name == C_SNZ:
        return src != 0
    if name == C_SPL:
        return (src >> 31) & 1 == 0
    if name == C_SMI:
        return (src >> 31) & 1 == 1
    if name == C_OV:
        return ovf == 1
    if name == C_NOV:
        return ovf == 0
    if name in (C_C, C_GEU):
        return carry == 1
    if name in (C_NC, C_LTU):
        return carry == 0
    if name == C_LEU:
        return carry == 0 or z
    if name == C_GTU:
        return carry == 1 and not z
    if name == C_LTS:
        return lt
    if name == C_GES:
        return not lt
    if name == C_LES:
        return lt or z
    if name == C_GTS:
        return not lt and not z
    if name == C_XLEU:
        return carry == 0 or xz
    if name == C_XGTU:
        return not (carry == 0 or xz)
    if name == C_XLES:
        return lt or xz
    if name == C_XGTS:
        return not (lt or xz)
    if name == C_E:
        return x & 1 == 0
    if name == C_O:
        return x & 1 == 1
    if name == C_SE:
        return src & 1 == 0
    if name == C_SO:
        return src & 1 == 1
    if name == C_SH32:
        return (aux >> 5) & 1 == 1
    if name == C_NSH32:
        return (aux >> 5) & 1 == 0
    if name == C_MAX:
        return x == 32
    if name == C_NMAX:
        return x != 32
    if name == C_SMALL:
        return x < 256
    if name == C_LARGE:
        return x >= 256
    k = int(NC_BIT[name])
    return k >= 0 and (ncbits >> k) & 1 == 0


def _alu2(op: int, a: int, b: int, cin: int) -> tuple[int, int, int, int]:
    """``(x, carry, overflow, carry-in bits)`` of a two-source operation on 32-bit values."""
    if op in (O_ADD, O_ADDC):
        c0 = cin if op == O_ADDC else 0
        full = a + b + c0
        x = full & M32
        return x, full >> 32, (((a ^ x) & (b ^ x)) >> 31) & 1, a ^ b ^ x
    if op in (O_SUB, O_SUBC, O_RSUB, O_RSUBC):
        if op in (O_RSUB, O_RSUBC):
            a, b = b, a
        c0 = cin if op in (O_SUBC, O_RSUBC) else 1
        nb = ~b & M32
        full = a + nb + c0
        x = full & M32
        return x, full >> 32, (((a ^ x) & (nb ^ x)) >> 31) & 1, a ^ nb ^ x
    n = b & 31
    x = 0
    if op == O_AND:
        x = a & b
    elif op == O_OR:
        x = a | b
    elif op == O_XOR:
        x = a ^ b
    elif op == O_NAND:
        x = ~(a & b)
    elif op == O_NOR:
        x = ~(a | b)
    elif op == O_NXOR:
        x = ~(a ^ b)
    elif op == O_ANDN:
        x = ~a & b
    elif op == O_ORN:
        x = ~a | b
    elif op == O_LSL:
        x = a << n
    elif op == O_LSR:
        x = a >> n
    elif op == O_ASR:
        x = (a - (1 << 32) if a >> 31 else a) >> n
    elif op == O_ROL:
        x = (a << n) | (a >> (32 - n)) if n else a
    elif op == O_ROR:
        x = (a >> n) | (a << (32 - n)) if n else a
    elif op == O_LSL1:
        x = (a << n) | ((1 << n) - 1)
    elif op == O_LSR1:
        x = (a >> n) | (M32 ^ (M32 >> n))
    elif op == O_LSLX:
        x = 0 if n == 0 else a >> (32 - n)
    elif op == O_LSRX:
        x = 0 if n == 0 else a << (32 - n)
    elif op == O_LSL1X:
        x = M32 if n == 0 else (a >> (32 - n)) | (M32 ^ (M32 >> (32 - n)))
    elif op == O_LSR1X:
        x = M32 if n == 0 else (a << (32 - n)) | ((1 << (32 - n)) - 1)
    elif op == O_CMPB4:
        for i in range(4):
            if (a >> (8 * i)) & 0xFF == (b >> (8 * i)) & 0xFF:
                x |= 1 << (8 * i)
    else:  # mul_XY_ZW: byte Y of a (l = low, h = high) times byte W of b, X/Z signedness
        fa = (a >> (8 * int(MUL_A_HIGH[op]))) & 0xFF
        fb = (b >> (8 * int(MUL_B_HIGH[op]))) & 0xFF
        if MUL_A_SIGNED[op] and fa >= 128:
            fa -= 256
        if MUL_B_SIGNED[op] and fb >= 128:
            fb -= 256
        x = fa * fb
    return x & M32, 0, 0, 0


def _alu1(op: int, a: int) -> int:
    if op == O_CLZ:
        return _clz(a)
    if op == O_CLO:
        return _clz(~a & M32)
    if op == O_CLS:
        return _clz(~a & M32) if a >> 31 else _clz(a)
    if op == O_CAO:
        return _popcount(a)
    if op == O_EXTSB:
        return (a & 0xFF) - 0x100 & M32 if a & 0x80 else a & 0xFF
    if op == O_EXTSH:
        return (a & 0xFFFF) - 0x10000 & M32 if a & 0x8000 else a & 0xFFFF
    if op == O_EXTUB:
        return a & 0xFF
    return a & 0xFFFF  # extuh


def _write(
    regs: npt.NDArray[np.uint32], tid: int, dest: int, pair: int, ext: int, x: int, hi: int
) -> None:
    """Write ``x`` to register ``dest``, or (``pair``) ``hi:x`` to the pair, where ``ext``
    1/2 sign-/zero-extends ``x`` to 64 bits instead of using ``hi``."""
    if pair:
        if ext == 1:
            hi = M32 if x >> 31 else 0
        elif ext == 2:
            hi = 0
        regs[tid, dest] = hi
        regs[tid, dest + 1] = x & M32
    else:
        regs[tid, dest] = x & M32


def _load(wram: npt.NDArray[np.uint8], addr: int, size: int, big: int) -> int:
    v = 0
    for i in range(size):
        byte = int(wram[addr + i])
        v |= byte << (8 * (size - 1 - i) if big else 8 * i)
    return v


def _store(wram: npt.NDArray[np.uint8], addr: int, size: int, big: int, v: int) -> None:
    for i in range(size):
        shift = 8 * (size - 1 - i) if big else 8 * i
        wram[addr + i] = (v >> shift) & 0xFF


def _access(
    sig: int,
    values: npt.NDArray[np.int64],
    tid: int,
    regs: npt.NDArray[np.uint32],
    wram: npt.NDArray[np.uint8],
    addr: int,
    load: bool,
    dreg: int,
    pair: int,
    ext: int,
) -> None:
    """The WRAM load or store of ``sig`` at ``addr`` (already checked)."""
    size = int(SIZE[sig])
    big = int(values[FI_ENDIAN])
    if load:
        if size == 8:  # the high word at the lower address in big-endian order
            first, second = _load(wram, addr, 4, big), _load(wram, addr + 4, 4, big)
            hi, lo = (first, second) if big else (second, first)
            regs[tid, dreg] = hi
            regs[tid, dreg + 1] = lo
        else:
            v = _load(wram, addr, size, big)
            if SIGNED[sig] and v >> (8 * size - 1):
                v = (v - (1 << (8 * size))) & M32
            _write(regs, tid, dreg, pair, ext, v, 0)
        return
    s1, s2 = int(SRC1[sig]), int(SRC2[sig])
    fid = s2 if s2 >= 0 else s1
    imm = int(SRC2IMM[sig]) if s2 >= 0 else int(SRC1IMM[sig])
    if imm:
        v = int(values[fid])  # sign-extended immediate
        if IDSTORE[sig]:
            v |= tid
        hi = M32 if v < 0 else 0
        lo = v & M32
    elif PAIR[sig]:
        code = int(values[fid])
        hi, lo = int(regs[tid, code]), int(regs[tid, code + 1])
    else:
        hi, lo = 0, read_reg(regs, tid, int(values[fid]))
    if size == 8:
        _store(wram, addr, 4, big, hi if big else lo)
        _store(wram, addr + 4, 4, big, lo if big else hi)
    else:
        _store(wram, addr, size, big, lo)


def execute(
    sig: int,
    values: npt.NDArray[np.int64],
    tid: int,
    regs: npt.NDArray[np.uint32],
    pcs: npt.NDArray[np.int64],
    zf: npt.NDArray[np.uint8],
    cf: npt.NDArray[np.uint8],
    wram: npt.NDArray[np.uint8],
) -> int:
    """Execute decoded instruction ``(sig, values)`` for thread ``tid``; returns an ``EV_*``."""
    kind = int(KIND[sig])
    if kind == K_EXTERNAL:
        return EV_EXTERNAL
    if kind == K_UNIMPLEMENTED:
        return EV_UNIMPLEMENTED
    pc = int(pcs[tid])
    nxt = pc + 1
    op = int(OP[sig])
    zf0 = int(zf[tid])
    cin = int(cf[tid])
    s1, s2 = int(SRC1[sig]), int(SRC2[sig])

    srcreg = int(SRCREG[sig])
    sv = read_reg(regs, tid, int(values[srcreg])) if srcreg >= 0 else 0
    dest = int(DEST[sig])
    dreg = int(values[dest]) if dest >= 0 else -1
    pair, ext = int(PAIR[sig]), int(EXT[sig])
    cmap, cmode = int(COND[sig]), int(CMODE[sig])
    cname = int(COND_NAME[cmap, int(values[FI_CC])]) if cmap >= 0 and cmode > 0 else -1
    target = int(values[PCF[sig]]) if PCF[sig] >= 0 else 0

    if kind in (K_ALU2, K_ALU1):
        if kind == K_ALU2:
            a = _src(values, s1, int(SRC1IMM[sig]), regs, tid)
            b = _src(values, s2, int(SRC2IMM[sig]), regs, tid)
            x, carry, ovf, ncb = _alu2(op, a, b, cin)
            aux = b
        else:
            a = _src(values, s1, int(SRC1IMM[sig]), regs, tid)
            x, carry, ovf, ncb, aux = _alu1(op, a), 0, 0, 0, 0
        taken = cname >= 0 and condition(cname, x, sv, zf0, carry, ovf, ncb, aux)
        if dreg >= 0:
            if cmode == 1:
                _write(regs, tid, dreg, pair, 2, 1 if taken else 0, 0)
            else:
                _write(regs, tid, dreg, pair, ext, x, 0)
        flags = int(FLAGS[sig])
        if flags & 1:
            zf[tid] = 1 if x == 0 else 0
        if flags & 2:
            cf[tid] = carry
        pcs[tid] = target if cmode == 2 and taken else nxt
        return EV_OK
    if kind == K_SHIFT_ADD:
        if dreg < 0 and cmode != 2:  # the zrri form has no effect
            pcs[tid] = nxt
            return EV_OK
        b = read_reg(regs, tid, int(values[FI_RB]))
        a = read_reg(regs, tid, int(values[FI_RA]))
        n = int(values[FI_SHIFT]) & 31
        if op == O_LSR_ADD:
            shifted = a >> n
        elif op == O_ROL_ADD:
            shifted = ((a << n) | (a >> (32 - n))) & M32 if n else a
        else:
            shifted = (a << n) & M32
        x = (b - shifted if op == O_LSL_SUB else b + shifted) & M32
        taken = cname >= 0 and condition(cname, x, sv, zf0, 0, 0, 0, 0)
        if dreg >= 0:
            _write(regs, tid, dreg, pair, ext, x, 0)
        zf[tid] = 1 if shifted == 0 else 0
        pcs[tid] = target if cmode == 2 and taken else nxt
        return EV_OK
    if kind in (K_LOAD, K_STORE):
        size = int(SIZE[sig])
        base = read_reg(regs, tid, int(values[FI_RA]))
        addr = (base + int(values[FI_OFF])) & M32
        if addr + size > len(wram) or addr % size:
            return EV_MEMORY_FAULT
        _access(sig, values, tid, regs, wram, addr, kind == K_LOAD, dreg, pair, ext)
        pcs[tid] = nxt
        return EV_OK
    if kind == K_SAFE_MEM:
        # the register holds an address (bits 15..0) and a limit (bits 31..16)
        size = int(SIZE[sig])
        base = read_reg(regs, tid, int(values[FI_RA]))
        addr = (base & 0xFFFF) + int(values[FI_OFF])
        over = addr + (size if size > 1 else 0) - (base >> 16)
        fault = over >= 0
        if fault:  # the access still happens, at the aligned 16-bit address, then the fault
            addr = addr & 0xFFFF & ~(size - 1)
        if addr < 0 or addr + size > len(wram) or addr % size:
            return EV_MEMORY_FAULT
        _access(sig, values, tid, regs, wram, addr, bool(IS_LOAD[sig]), dreg, pair, ext)
        if fault:
            return EV_MEMORY_FAULT
        pcs[tid] = nxt
        return EV_OK
    if kind == K_SAFE_ALU:
        a = read_reg(regs, tid, int(values[FI_RA]))
        b = _src(values, s2, int(SRC2IMM[sig]), regs, tid)
        x, carry, _ovf, _ncb = _alu2(op, a, b, cin)
        low = (a & 0xFFFF) + (int(values[s2]) if SRC2IMM[sig] else b) * (1 if op == O_ADD else -1)
        fault = (low >> 16) != 0
        if fault:
            x = (x & 0xFFFFFF) | ((tid << 25) & M32)
        regs[tid, dreg] = x
        zf[tid] = 1 if x == 0 else 0
        cf[tid] = carry
        if fault:
            return EV_MEMORY_FAULT
        pcs[tid] = nxt
        return EV_OK
    if kind in (K_MOVD, K_SWAPD):
        code = int(values[FI_DB])
        hi, lo = int(regs[tid, code]), int(regs[tid, code + 1])
        if kind == K_SWAPD:
            hi, lo = lo, hi
        regs[tid, dreg], regs[tid, dreg + 1] = hi, lo
        taken = cname >= 0 and condition(cname, 0, 0, zf0, 0, 0, 0, 0)
        pcs[tid] = target if taken else nxt
        return EV_OK
    if kind == K_CALL:
        a = read_reg(regs, tid, int(values[FI_RA]))
        off = read_reg(regs, tid, int(values[FI_RB])) if s2 >= 0 and s2 == FI_RB else 0
        if s2 < 0 or s2 != FI_RB:
            off = int(values[FI_OFF])
        if dreg >= 0:
            regs[tid, dreg] = nxt
        pcs[tid] = (a + off) & M32
        return EV_OK
    if kind == K_MUL_STEP:
        db = int(values[FI_DB])
        dbe, dbo = int(regs[tid, db]), int(regs[tid, db + 1])
        ra = read_reg(regs, tid, int(values[FI_RA]))
        n = int(values[FI_SHIFT]) & 31
        x = dbe >> 1
        lo = (dbo + ((ra << n) & M32)) & M32 if dbe & 1 else dbo
        regs[tid, dreg], regs[tid, dreg + 1] = x, lo
        taken = cname >= 0 and condition(cname, x, sv, zf0, 0, 0, 0, 0)
        zf[tid] = 1 if x == 0 else 0
        pcs[tid] = target if taken else nxt
        return EV_OK
    if kind == K_DIV_STEP:
        db = int(values[FI_DB])
        dbe, dbo = int(regs[tid, db]), int(regs[tid, db + 1])
        ra = read_reg(regs, tid, int(values[FI_RA]))
        d = (ra << (int(values[FI_SHIFT]) & 31)) & M32
        if dbo >= d:
            regs[tid, dreg], regs[tid, dreg + 1] = ((dbe << 1) | 1) & M32, dbo - d
        else:  # only the even register is written (the odd one keeps its value)
            regs[tid, dreg] = (dbe << 1) & M32
        taken = cname >= 0 and condition(cname, 0, sv, zf0, 0, 0, 0, 0)
        pcs[tid] = target if taken else nxt
        return EV_OK
    pcs[tid] = nxt  # nop, tell
    return EV_OK


def dma_bytes(values: npt.NDArray[np.int64], tid: int, regs: npt.NDArray[np.uint32]) -> int:
    """Bytes a ``ldma``/``sdma``/``ldmai`` row moves: 8 * (1 + ((n + (ra >> 24)) & 0xFF))."""
    ra = read_reg(regs, tid, int(values[FI_RA]))
    return 8 * (1 + ((int(values[FI_IMMDMA]) + (ra >> 24)) & 0xFF))


def execute_system(
    sig: int,
    values: npt.NDArray[np.int64],
    tid: int,
    regs: npt.NDArray[np.uint32],
    pcs: npt.NDArray[np.int64],
    zf: npt.NDArray[np.uint8],
    wram: npt.NDArray[np.uint8],
    mram: npt.NDArray[np.uint8],
    atomic: npt.NDArray[np.uint8],
    running: npt.NDArray[np.uint8],
    counter: npt.NDArray[np.int64],
) -> int:
    """Execute an instruction :func:`execute` reported as ``EV_EXTERNAL``, on the DPU-wide
    state: ``mram`` (``uint8``, any length), ``atomic`` (``uint8[256]``), ``running``
    (``uint8[threads]``, the run bits) and ``counter`` (``int64[2]``: the performance counter
    value the caller keeps up to date, and the mode last configured).

    Returns ``EV_OK``; ``EV_FAULT`` for ``fault`` (the code is the row's ``imm``);
    ``EV_DMA_FAULT`` when a transfer leaves WRAM or ``mram``; ``EV_THREAD_FAULT`` for a
    ``boot``/``resume``/``clr_run``/``read_run`` of a thread the DPU does not have;
    ``EV_EXTERNAL`` for ``ldmai`` (rewriting IRAM means decoding again: the caller's job).
    Nothing changes on a fault. ``stop`` clears the thread's run bit and moves its PC.
    """
    op = int(OP[sig])
    pc = int(pcs[tid])
    nxt = pc + 1
    cmap = int(COND[sig])
    cname = int(COND_NAME[cmap, int(values[FI_CC])]) if cmap >= 0 and CMODE[sig] > 0 else -1
    target = int(values[PCF[sig]]) if PCF[sig] >= 0 else 0
    ra = read_reg(regs, tid, int(values[FI_RA]))
    if op == O_FAULT:
        return EV_FAULT
    if op == O_LDMAI:
        return EV_EXTERNAL
    if op == O_STOP:
        taken = cname >= 0 and condition(cname, 1, ra, int(zf[tid]), 0, 0, 0, 0)
        pcs[tid] = target if taken else nxt
        running[tid] = 0
        return EV_OK
    if op in (O_LDMA, O_SDMA):
        n = dma_bytes(values, tid, regs)
        w = ra & 0x00FFFFF8
        m = read_reg(regs, tid, int(values[FI_RB])) & 0xFFFFFFF8
        if w + n > len(wram) or m + n > len(mram):
            return EV_DMA_FAULT
        if op == O_LDMA:
            wram[w : w + n] = mram[m : m + n]
        else:
            mram[m : m + n] = wram[w : w + n]
        pcs[tid] = nxt
        return EV_OK
    if op in (O_TIME, O_TIME_CFG):
        x = (int(counter[0]) >> 4) & M32
        if op == O_TIME_CFG:
            config = read_reg(regs, tid, int(values[FI_RB])) & 7
            counter[1] = config >> 1
            if config & 1:
                counter[0] = 0
        dreg = int(DEST[sig])
        if dreg >= 0:
            regs[tid, int(values[dreg])] = x
        taken = cname >= 0 and condition(cname, x, 0, int(zf[tid]), 0, 0, 0, 0)
        pcs[tid] = target if taken else nxt
        return EV_OK
    # acquire, release, boot, resume, clr_run, read_run: an index folded from ra + imm
    a = (ra + int(values[FI_IMM])) & 0xFFFF
    index = ((a >> 8) ^ a) & 0xFF
    if op in (O_ACQUIRE, O_RELEASE):
        x = int(atomic[index])
        atomic[index] = 1 if op == O_ACQUIRE else 0
    else:
        if index >= len(running):
            return EV_THREAD_FAULT
        x = int(running[index])
        if op == O_BOOT and not x:
            running[index] = 1
            pcs[index] = 0
        elif op == O_RESUME and not x:
            running[index] = 1
        elif op == O_CLR_RUN:
            running[index] = 0
    taken = cname >= 0 and condition(cname, x, ra, int(zf[tid]), 0, 0, 0, 0)
    zf[tid] = 1 if x == 0 else 0
    pcs[tid] = target if taken else nxt
    return EV_OK


def run_threads(
    sigs: npt.NDArray[np.int32],
    status: npt.NDArray[np.int8],
    rows: npt.NDArray[np.int64],
    regs: npt.NDArray[np.uint32],
    pcs: npt.NDArray[np.int64],
    zf: npt.NDArray[np.uint8],
    cf: npt.NDArray[np.uint8],
    wram: npt.NDArray[np.uint8],
    mram: npt.NDArray[np.uint8],
    atomic: npt.NDArray[np.uint8],
    running: npt.NDArray[np.uint8],
    counter: npt.NDArray[np.int64],
    max_steps: int,
) -> tuple[int, int, int]:
    """Run the threads whose run bit is set, round-robin by thread id (one instruction each
    per round), until none runs: a functional run without time.

    ``sigs``/``status``/``rows`` are a :class:`DecodedProgram`'s arrays; ``counter[0]``
    counts the instructions issued. Returns ``(event, thread, steps)``: ``EV_OK`` when every
    thread stopped, else the event that stopped the run and the thread it happened on
    (``EV_FAULT``, ``EV_MEMORY_FAULT``, ``EV_DMA_FAULT``, ``EV_THREAD_FAULT``,
    ``EV_UNIMPLEMENTED``, ``EV_EXTERNAL`` for ``ldmai``, ``EV_ILLEGAL``, ``EV_STEP_LIMIT``);
    the faulting thread's PC is left on the instruction.
    """
    steps = 0
    nthreads = len(running)
    active = True
    while active:
        active = False
        for t in range(nthreads):
            if not running[t]:
                continue
            active = True
            if steps >= max_steps:
                return EV_STEP_LIMIT, t, steps
            pc = int(pcs[t])
            if pc < 0 or pc >= len(sigs) or status[pc] != 0:
                return EV_ILLEGAL, t, steps
            sig = int(sigs[pc])
            ev = execute(sig, rows[pc], t, regs, pcs, zf, cf, wram)
            if ev == EV_EXTERNAL:
                ev = execute_system(
                    sig, rows[pc], t, regs, pcs, zf, wram, mram, atomic, running, counter
                )
            if ev != EV_OK:
                return ev, t, steps
            steps += 1
            counter[0] += 1
    return EV_OK, -1, steps
