"""Operation tables of the interpreter, derived from the instruction-set tables at import.

Every signature (``keyword:form``) is reduced to a row of small integers the interpreter loop
dispatches on: an operation id, where the result goes (a register, a sign- or zero-extended
register pair, nowhere), how the condition is used (none, *set* form, *jump* form), which
operands feed the operation (registers or constants, in the order the operation reads them),
and the flags the signature writes. ``SIG_TABLE`` holds these static rows; ``SIG_TEMPLATES``
the same rows with each operand cell naming the decoded field it takes. :func:`compile_program`
fills the templates from a decoded program once per load (vectorised) and gives the flat
``int64[n, NCOL]`` array the loop executes; a condition code is resolved to its condition
*name* there (``-1`` when the form has none), and a code the map does not name, an odd pair or
an undecodable word becomes an illegal-instruction row.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from . import _tables as T
from ._codec import FIELD_NAMES, DecodedProgram, DecodeStatus

__all__ = [
    "NCOL",
    "OP_NAMES",
    "SIG_TABLE",
    "SIG_TEMPLATES",
    "compile_program",
]

# ---- operation ids ---------------------------------------------------------------------------
OP_NAMES: Final = (
    "illegal",
    "nop",
    # two-operand ALU (x = A op B)
    "add",
    "addc",
    "sub",
    "subc",
    "and",
    "andn",
    "nand",
    "nor",
    "nxor",
    "or",
    "orn",
    "xor",
    "asr",
    "lsl",
    "lsl1",
    "lsl1x",
    "lslx",
    "lsr",
    "lsr1",
    "lsr1x",
    "lsrx",
    "rol",
    "ror",
    "cmpb4",
    "mul",
    "hash",
    # one-operand ALU (x = op A)
    "cao",
    "clo",
    "cls",
    "clz",
    "extsb",
    "extsh",
    "extub",
    "extuh",
    "sats",
    # x = A +/- (B shifted by C)
    "lsl_add",
    "lsl_sub",
    "lsr_add",
    "rol_add",
    # safe-register arithmetic
    "add_safe",
    "sub_safe",
    # memory
    "load",
    "store",
    "ldma",
    "sdma",
    "ldmai",
    # threads, atomics, time
    "acquire",
    "release",
    "boot",
    "resume",
    "clr_run",
    "read_run",
    "stop",
    "fault",
    "time",
    "time_cfg",
    # control and pairs
    "call",
    "movd",
    "swapd",
    "mul_step",
    "div_step",
)
_OP: Final = {name: i for i, name in enumerate(OP_NAMES)}
OP_ILLEGAL: Final = _OP["illegal"]
OP_NOP: Final = _OP["nop"]
OP_ADD: Final = _OP["add"]
OP_ADDC: Final = _OP["addc"]
OP_SUB: Final = _OP["sub"]
OP_SUBC: Final = _OP["subc"]
OP_AND: Final = _OP["and"]
OP_ANDN: Final = _OP["andn"]
OP_NAND: Final = _OP["nand"]
OP_NOR: Final = _OP["nor"]
OP_NXOR: Final = _OP["nxor"]
OP_OR: Final = _OP["or"]
OP_ORN: Final = _OP["orn"]
OP_XOR: Final = _OP["xor"]
OP_ASR: Final = _OP["asr"]
OP_LSL: Final = _OP["lsl"]
OP_LSL1: Final = _OP["lsl1"]
OP_LSL1X: Final = _OP["lsl1x"]
OP_LSLX: Final = _OP["lslx"]
OP_LSR: Final = _OP["lsr"]
OP_LSR1: Final = _OP["lsr1"]
OP_LSR1X: Final = _OP["lsr1x"]
OP_LSRX: Final = _OP["lsrx"]
OP_ROL: Final = _OP["rol"]
OP_ROR: Final = _OP["ror"]
OP_CMPB4: Final = _OP["cmpb4"]
OP_MUL: Final = _OP["mul"]
OP_HASH: Final = _OP["hash"]
OP_CAO: Final = _OP["cao"]
OP_CLO: Final = _OP["clo"]
OP_CLS: Final = _OP["cls"]
OP_CLZ: Final = _OP["clz"]
OP_EXTSB: Final = _OP["extsb"]
OP_EXTSH: Final = _OP["extsh"]
OP_EXTUB: Final = _OP["extub"]
OP_EXTUH: Final = _OP["extuh"]
OP_SATS: Final = _OP["sats"]
OP_LSL_ADD: Final = _OP["lsl_add"]
OP_LSL_SUB: Final = _OP["lsl_sub"]
OP_LSR_ADD: Final = _OP["lsr_add"]
OP_ROL_ADD: Final = _OP["rol_add"]
OP_ADD_SAFE: Final = _OP["add_safe"]
OP_SUB_SAFE: Final = _OP["sub_safe"]
OP_LOAD: Final = _OP["load"]
OP_STORE: Final = _OP["store"]
OP_LDMA: Final = _OP["ldma"]
OP_SDMA: Final = _OP["sdma"]
OP_LDMAI: Final = _OP["ldmai"]
OP_ACQUIRE: Final = _OP["acquire"]
OP_RELEASE: Final = _OP["release"]
OP_BOOT: Final = _OP["boot"]
OP_RESUME: Final = _OP["resume"]
OP_CLR_RUN: Final = _OP["clr_run"]
OP_READ_RUN: Final = _OP["read_run"]
OP_STOP: Final = _OP["stop"]
OP_FAULT: Final = _OP["fault"]
OP_TIME: Final = _OP["time"]
OP_TIME_CFG: Final = _OP["time_cfg"]
OP_CALL: Final = _OP["call"]
OP_MOVD: Final = _OP["movd"]
OP_SWAPD: Final = _OP["swapd"]
OP_MUL_STEP: Final = _OP["mul_step"]
OP_DIV_STEP: Final = _OP["div_step"]

#: ALU operations whose two operands are added (carry, overflow, nc<k> are defined)
ARITH_OPS: Final = (OP_ADD, OP_ADDC, OP_SUB, OP_SUBC)

# ---- destination kinds, condition modes, operand kinds -----------------------------------------
DK_NONE: Final = 0
DK_REG: Final = 1
DK_PAIR_S: Final = 2  # 32-bit result sign-extended into a pair
DK_PAIR_U: Final = 3  # zero-extended
DK_PAIR: Final = 4  # a 64-bit value (ld, movd ...)

MODE_PLAIN: Final = 0
MODE_SET: Final = 1
MODE_JUMP: Final = 2

K_REG: Final = 0
K_IMM: Final = 1

# store value kinds (column C_SUB of stores)
SV_REG: Final = 0
SV_IMM: Final = 1
SV_ID: Final = 2

# ---- columns of a compiled instruction row ---------------------------------------------------
C_OP: Final = 0
C_DK: Final = 1  # destination kind
C_D: Final = 2  # destination register (even register of a pair)
C_MODE: Final = 3
C_AK: Final = 4  # operand A: kind and value (register index or constant)
C_AV: Final = 5
C_BK: Final = 6
C_BV: Final = 7
C_CV: Final = 8  # third operand: shift amount / DMA immediate
C_SRC: Final = 9  # register tested by the source conditions (sz, spl, se ...)
C_COND: Final = 10  # condition name index, -1 when the form has none
C_PC: Final = 11  # jump target
C_FLAGS: Final = 12  # bit 0 ZF, bit 1 CF
C_SUB: Final = 13  # op detail: load/store size|signed|safe, mul byte selection, store kind
C_DB: Final = 14  # source pair register (even)
C_ENDIAN: Final = 15  # 1 = big-endian access
C_STATUS: Final = 16  # DecodeStatus; non-zero = illegal instruction
C_SIG: Final = 17  # signature index (-1 undecodable)
#: a row the interpreter's fast step runs as is (FAST_* kind in the low 4 bits), its fields
#: packed (see FW_*) so that the step reads one cache line; 0 for every other row
C_FW0: Final = 18
C_FW1: Final = 19  # its operand values: A (low 32 bits) and B (high 32 bits)
NCOL: Final = 20
#: bit fields of C_FW0: kind (4 bits), jump (3, JC_*), flags (2), destination is a register
#: (1), destination register (6), A and B are registers (1 each); the jump target from bit 32
FW_KIND: Final = 15
FW_JUMP: Final = 4
FW_FLAGS: Final = 7
FW_DREG: Final = 9
FW_D: Final = 10
FW_AREG: Final = 16
FW_BREG: Final = 17
FW_PC: Final = 32

# fast kinds (C_FW0 & FW_KIND): the forms the interpreter's fast path runs without further checks
FAST_NONE: Final = 0
FAST_LW: Final = 1  # aligned little-endian lw into a register, no flags
FAST_LD: Final = 2  # aligned little-endian ld into a pair, no flags
FAST_CALL: Final = 3  # call/jump with no flags
FAST_ACQUIRE: Final = 4  # acquire with a true/z/nz jump or none (runs when the bit is set)
FAST_ADD: Final = 5  # then the 32-bit ALU operations, in FAST_ALU_OPS order
#: ALU operations of the fast path: destination a register or none, no set-condition
FAST_ALU_OPS: Final = ("add", "sub", "and", "or", "xor", "lsl", "lsr", "addc", "subc")
FAST_SUB: Final = FAST_ADD + 1
FAST_AND: Final = FAST_ADD + 2
FAST_OR: Final = FAST_ADD + 3
FAST_XOR: Final = FAST_ADD + 4
FAST_LSL: Final = FAST_ADD + 5
FAST_LSR: Final = FAST_ADD + 6
FAST_ADDC: Final = FAST_ADD + 7
FAST_SUBC: Final = FAST_ADD + 8

# jumps of fast rows (C_FW0 >> FW_JUMP)
JC_NONE: Final = 0
JC_TRUE: Final = 1
JC_Z: Final = 2
JC_NZ: Final = 3
JC_LTU: Final = 4
JC_GEU: Final = 5

# load/store detail bits (C_SUB): size in bits 0-3, signed bit 4, safe bit 5, store kind bits 6-7
SUB_SIGNED: Final = 16
SUB_SAFE: Final = 32
SUB_KIND_SHIFT: Final = 6

# mul detail bits: ra high byte, ra signed, rb high byte, rb signed
MUL_A_HIGH: Final = 1
MUL_A_SIGNED: Final = 2
MUL_B_HIGH: Final = 4
MUL_B_SIGNED: Final = 8

# ---- condition name indexes -------------------------------------------------------------------
_CN = {name: i for i, name in enumerate(T.CONDITION_NAMES)}
CN_C: Final = _CN["c"]
CN_E: Final = _CN["e"]
CN_FALSE: Final = _CN["false"]
CN_GES: Final = _CN["ges"]
CN_GEU: Final = _CN["geu"]
CN_GTS: Final = _CN["gts"]
CN_GTU: Final = _CN["gtu"]
CN_LARGE: Final = _CN["large"]
CN_LES: Final = _CN["les"]
CN_LEU: Final = _CN["leu"]
CN_LTS: Final = _CN["lts"]
CN_LTU: Final = _CN["ltu"]
CN_MAX: Final = _CN["max"]
CN_MI: Final = _CN["mi"]
CN_NC: Final = _CN["nc"]
CN_NC5: Final = _CN["nc5"]
CN_NC6: Final = _CN["nc6"]
CN_NC7: Final = _CN["nc7"]
CN_NC8: Final = _CN["nc8"]
CN_NC9: Final = _CN["nc9"]
CN_NC10: Final = _CN["nc10"]
CN_NC11: Final = _CN["nc11"]
CN_NC12: Final = _CN["nc12"]
CN_NC13: Final = _CN["nc13"]
CN_NC14: Final = _CN["nc14"]
CN_NMAX: Final = _CN["nmax"]
CN_NOV: Final = _CN["nov"]
CN_NSH32: Final = _CN["nsh32"]
CN_NZ: Final = _CN["nz"]
CN_O: Final = _CN["o"]
CN_OV: Final = _CN["ov"]
CN_PL: Final = _CN["pl"]
CN_SE: Final = _CN["se"]
CN_SH32: Final = _CN["sh32"]
CN_SMALL: Final = _CN["small"]
CN_SMI: Final = _CN["smi"]
CN_SNZ: Final = _CN["snz"]
CN_SO: Final = _CN["so"]
CN_SPL: Final = _CN["spl"]
CN_SZ: Final = _CN["sz"]
CN_TRUE: Final = _CN["true"]
CN_XGTS: Final = _CN["xgts"]
CN_XGTU: Final = _CN["xgtu"]
CN_XLES: Final = _CN["xles"]
CN_XLEU: Final = _CN["xleu"]
CN_XNZ: Final = _CN["xnz"]
CN_XZ: Final = _CN["xz"]
CN_Z: Final = _CN["z"]

_F = {name: i for i, name in enumerate(FIELD_NAMES)}
F_RC, F_RA, F_RB, F_DC, F_DB = _F["rc"], _F["ra"], _F["rb"], _F["dc"], _F["db"]
F_CC, F_IMM, F_OFF, F_PC, F_SHIFT = _F["cc"], _F["imm"], _F["off"], _F["pc"], _F["shift"]
F_ENDIAN, F_IMMDMA = _F["endian"], _F["immDma"]

_LOAD_SIZE = {"lbs": (1, True), "lbu": (1, False), "lhs": (2, True), "lhu": (2, False)}
_LOAD_SIZE |= {"lw": (4, False), "ld": (8, False)}
_STORE_SIZE = {"sb": 1, "sh": 2, "sw": 4, "sd": 8}


def _row(sig: int) -> list[int]:
    """The static part of signature ``sig``'s row (operand values filled per instruction)."""
    family = T.MNEMONICS[T.SIG_FAMILY[sig]]
    keyword, form = T.SIG_KEYWORD[sig], T.SIG_FORM[sig]
    ext = keyword[-2:] if keyword[-2:] in (".s", ".u") else ""
    operands = T.SIG_OPERANDS[sig]
    row = [0] * NCOL
    row[C_COND] = -1
    row[C_SRC] = 24  # the constant register zero
    row[C_FLAGS] = T.SIG_FLAGS[sig]
    row[C_SIG] = sig
    has_cond = any(op[1] == T.KIND_COND and op[2] >= 0 for op in operands)
    has_pc = any(op[1] == T.KIND_PC for op in operands)
    if has_cond:
        row[C_MODE] = MODE_JUMP if has_pc else MODE_SET
    if family in _LOAD_SIZE:
        size, signed = _LOAD_SIZE[family]
        row[C_OP] = OP_LOAD
        row[C_SUB] = size | (SUB_SIGNED if signed else 0) | (SUB_SAFE if "s" in form[1:] else 0)
        if size == 8:
            row[C_DK] = DK_PAIR
        elif ext:
            row[C_DK] = DK_PAIR_S if ext == ".s" else DK_PAIR_U
        else:
            row[C_DK] = DK_REG
        return row
    store = family.split("_")[0]
    if store in _STORE_SIZE:
        row[C_OP] = OP_STORE
        kind = SV_ID if family.endswith("_id") else (SV_IMM if form.endswith("ii") else SV_REG)
        safe = form.startswith("es")
        row[C_SUB] = _STORE_SIZE[store] | (SUB_SAFE if safe else 0) | (kind << SUB_KIND_SHIFT)
        return row
    if family.startswith("mul_") and family != "mul_step":
        _, a, b = family.split("_")
        row[C_OP] = OP_MUL
        row[C_SUB] = (
            (MUL_A_HIGH if a[1] == "h" else 0)
            | (MUL_A_SIGNED if a[0] == "s" else 0)
            | (MUL_B_HIGH if b[1] == "h" else 0)
            | (MUL_B_SIGNED if b[0] == "s" else 0)
        )
    elif family in ("add", "sub") and form in ("ssi", "sss"):
        row[C_OP] = OP_ADD_SAFE if family == "add" else OP_SUB_SAFE
    elif family in ("rsub", "rsubc"):
        row[C_OP] = OP_SUB if family == "rsub" else OP_SUBC
    elif family in ("lsl_add", "lsl_sub", "lsr_add", "rol_add") and form == "zrri":
        row[C_OP] = OP_NOP  # documented as an instruction with no effect
        row[C_FLAGS] = 0
        return row
    elif family == "tell":
        row[C_OP] = OP_NOP
    else:
        row[C_OP] = _OP[family]
    return row


def _build_sig_table() -> npt.NDArray[np.int64]:
    return np.array([_row(s) for s in range(len(T.SIG_KEYWORD))], dtype=np.int64)


#: one static row per signature
SIG_TABLE: Final = _build_sig_table()

#: per signature: condition map as a dense code -> name array (-1 = not in the map)
_COND_DENSE: Final = np.full((len(T.SIG_KEYWORD), 64), -1, dtype=np.int64)
for _s, _ops in enumerate(T.SIG_OPERANDS):
    for _op in _ops:
        if _op[1] == T.KIND_COND:
            _cmap = _op[8]
            if _op[2] < 0:  # implicit condition ("f" forms): a fixed code
                for _code, _name in T.CONDITION_MAPS[_cmap]:
                    if _code == _op[9]:
                        _COND_DENSE[_s, :] = _name
            else:
                for _code, _name in T.CONDITION_MAPS[_cmap]:
                    _COND_DENSE[_s, _code] = _name
#: per signature: 1 if the form names a condition field (the dense map applies)
_HAS_COND: Final = np.array(
    [any(op[1] == T.KIND_COND for op in ops) for ops in T.SIG_OPERANDS], dtype=bool
)


def _dest_name(sig: int) -> str | None:
    """Name of the destination operand of ``sig`` (``rc``/``sc``/``dc``), None if it has none."""
    for op in T.SIG_OPERANDS[sig]:
        if op[1] == T.KIND_ENDIAN:
            continue
        return op[0] if op[0] in ("rc", "sc", "dc") else None
    return None


def _sources(sig: int) -> list[tuple[str, int]]:
    """Source operands of ``sig`` in syntax order: (field name, field id)."""
    out = []
    skip = _dest_name(sig) is not None
    for op in T.SIG_OPERANDS[sig]:
        kind, fid = op[1], op[2]
        if kind in (T.KIND_COND, T.KIND_PC, T.KIND_ENDIAN, T.KIND_CONST_REG) or fid < 0:
            continue
        if skip:
            skip = False
            continue
        out.append((FIELD_NAMES[fid], fid))
    return out


#: marks a template cell that takes a field's value: ``FIELD_REF + field id``
FIELD_REF: Final = 1 << 20


def _build_templates() -> npt.NDArray[np.int64]:
    """Per signature: its row with every operand cell a reference to the field it reads."""
    refs = np.arange(len(FIELD_NAMES), dtype=np.int64) + FIELD_REF
    out = SIG_TABLE.copy()
    for sig in range(len(out)):
        row = out[sig]
        row[C_PC] = refs[F_PC]
        row[C_ENDIAN] = refs[F_ENDIAN]
        _fill_operands(sig, row, refs)
    return out


def compile_program(decoded: DecodedProgram) -> npt.NDArray[np.int64]:
    """The ``int64[n, NCOL]`` rows the interpreter executes for ``decoded`` (vectorised: the
    signature's template row, its field references replaced by the instruction's values)."""
    n = len(decoded)
    sig = decoded.sig.astype(np.int64)
    known = sig >= 0
    safe = np.where(known, sig, 0)
    code = SIG_TEMPLATES[safe].copy()
    ref = code >= FIELD_REF
    rows = np.nonzero(ref)[0]
    code[ref] = decoded.values[rows, code[ref] - FIELD_REF]
    cc = decoded.values[:, F_CC] & 63
    code[:, C_COND] = np.where(_HAS_COND[safe], _COND_DENSE[safe, cc], -1)
    status = np.where(known, decoded.status.astype(np.int64), int(DecodeStatus.UNDECODABLE))
    bad = status != DecodeStatus.OK
    code[bad] = 0
    code[bad, C_OP] = OP_ILLEGAL
    code[bad, C_COND] = -1
    code[bad, C_SIG] = np.where(known[bad], sig[bad], -1)
    code[:, C_STATUS] = status
    _fill_fast(code)
    return code.reshape(n, NCOL)


def _fill_fast(code: npt.NDArray[np.int64]) -> None:
    """Columns C_FW0 and C_FW1 of ``code`` (see the FAST_* kinds and the FW_* fields)."""
    op, dk, mode, cond = code[:, C_OP], code[:, C_DK], code[:, C_MODE], code[:, C_COND]
    flags, size = code[:, C_FLAGS], code[:, C_SUB] & (15 | SUB_SAFE)
    jump = np.full(len(code), -1, np.int64)
    jump[mode == MODE_PLAIN] = JC_NONE
    is_jump = mode == MODE_JUMP
    for cn, jc in ((CN_TRUE, JC_TRUE), (CN_Z, JC_Z), (CN_NZ, JC_NZ), (CN_LTU, JC_LTU)):
        jump[is_jump & (cond == cn)] = jc
    jump[is_jump & (cond == CN_GEU)] = JC_GEU
    reg_or_none = (dk == DK_REG) | (dk == DK_NONE)
    fast = np.zeros(len(code), np.int64)
    for i, name in enumerate(FAST_ALU_OPS):
        fast[(op == _OP[name]) & reg_or_none & (jump >= 0)] = FAST_ADD + i
    plain_load = (op == OP_LOAD) & (flags == 0) & (code[:, C_ENDIAN] == 0)
    fast[plain_load & (size == 4) & (dk == DK_REG)] = FAST_LW
    fast[plain_load & (size == 8) & (dk != DK_NONE)] = FAST_LD
    fast[(op == OP_CALL) & (flags == 0) & reg_or_none] = FAST_CALL
    acquire_jump = (jump == JC_NONE) | (jump == JC_TRUE) | (jump == JC_Z) | (jump == JC_NZ)
    fast[(op == OP_ACQUIRE) & (dk == DK_NONE) & acquire_jump] = FAST_ACQUIRE
    jump = np.where((fast >= FAST_ADD) | (fast == FAST_ACQUIRE), jump, 0)
    m32 = np.int64(0xFFFFFFFF)
    packed = (
        fast
        | jump << FW_JUMP
        | (flags & 3) << FW_FLAGS
        | (dk == DK_REG).astype(np.int64) << FW_DREG
        | (code[:, C_D] & 63) << FW_D
        | (code[:, C_AK] == K_REG).astype(np.int64) << FW_AREG
        | (code[:, C_BK] == K_REG).astype(np.int64) << FW_BREG
        | (code[:, C_PC] & m32) << FW_PC
    )
    code[:, C_FW0] = np.where(fast != FAST_NONE, packed, 0)
    code[:, C_FW1] = np.where(
        fast != FAST_NONE, (code[:, C_AV] & m32) | (code[:, C_BV] & m32) << 32, 0
    )


def _fill_operands(sig: int, row: npt.NDArray[np.int64], v: npt.NDArray[np.int64]) -> None:
    op = int(row[C_OP])
    keyword = T.SIG_KEYWORD[sig]
    has = {FIELD_NAMES[f[0]] for f in T.SIG_FIELDS[sig]}
    dest = _dest_name(sig)
    if dest in ("rc", "sc"):
        row[C_D] = v[F_RC]
        if row[C_DK] == DK_NONE:
            row[C_DK] = DK_REG
    elif dest == "dc":
        row[C_D] = v[F_DC]
        if row[C_DK] == DK_NONE:
            pair_ops = (OP_MOVD, OP_SWAPD, OP_MUL_STEP, OP_DIV_STEP)
            row[C_DK] = (
                DK_PAIR if op in pair_ops else (DK_PAIR_S if keyword.endswith(".s") else DK_PAIR_U)
            )
    if "db" in has:
        row[C_DB] = v[F_DB]
    if op in (OP_LOAD, OP_STORE):
        # A = base register, B = offset; stores: C = register rb / pair db / immediate
        row[C_AK], row[C_AV] = K_REG, v[F_RA]
        row[C_BK], row[C_BV] = K_IMM, v[F_OFF]
        row[C_SRC] = v[F_RA]
        if op == OP_STORE:
            row[C_CV] = v[F_DB] if "db" in has else (v[F_RB] if "rb" in has else v[F_IMM])
        return
    if op in (OP_LDMA, OP_SDMA, OP_LDMAI):
        row[C_AK], row[C_AV] = K_REG, v[F_RA]
        row[C_BK], row[C_BV] = K_REG, v[F_RB]
        row[C_CV] = v[F_IMMDMA]
        return
    if op == OP_CALL:
        row[C_AK], row[C_AV] = K_REG, v[F_RA]
        if "rb" in has:
            row[C_BK], row[C_BV] = K_REG, v[F_RB]
        else:
            row[C_BK], row[C_BV] = K_IMM, v[F_OFF]
        return
    kinds: list[tuple[int, int]] = []
    for fname, fid in _sources(sig):
        kinds.append((K_REG if fname in ("ra", "rb", "db") else K_IMM, int(v[fid])))
    if keyword.startswith("rsub"):
        kinds = [kinds[1], kinds[0]]  # x = rb - ra
    if "ra" in has:
        row[C_SRC] = v[F_RA]
    else:
        regs = [value for kind, value in kinds if kind == K_REG]
        row[C_SRC] = regs[0] if regs else 24
    if op in (OP_MUL_STEP, OP_DIV_STEP):
        # sources: ra, db, shift
        row[C_AK], row[C_AV] = kinds[0]
        row[C_CV] = kinds[2][1]
        return
    if op in (OP_LSL_ADD, OP_LSL_SUB, OP_LSR_ADD, OP_ROL_ADD):
        # sources: rb, ra, shift -> x = rb +/- (ra shifted by shift)
        row[C_AK], row[C_AV] = kinds[0]
        row[C_BK], row[C_BV] = kinds[1]
        row[C_CV] = kinds[2][1]
        return
    if op in (OP_FAULT, OP_STOP):
        row[C_AK], row[C_AV] = K_IMM, v[F_IMM]
        return
    if len(kinds) >= 1:
        row[C_AK], row[C_AV] = kinds[0]
    if len(kinds) >= 2:
        row[C_BK], row[C_BV] = kinds[1]


#: one template row per signature (see :func:`compile_program`)
SIG_TEMPLATES: Final = _build_templates()
