"""Instruction semantics of the interpreter, checked against plain-integer definitions.

Each test runs a few hand-encoded instructions on one thread (pure-Python loop) and compares
registers, flags, WRAM and the PC reached with values computed here from the meaning of the
operation (unbounded Python integers, no flag formulas).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from isa_programs import Asm, Machine

from aiopim.isa import _layout as I
from aiopim.isa import _tables as T

M32 = 0xFFFFFFFF
u32 = st.integers(0, M32)
STOP = ("stop:ci", {"cc": "false", "pc": 0})


def s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def one(signature: str, *, init: dict[str, int] | None = None, **fields: object) -> Machine:
    """Run ``signature`` then stops; a taken jump lands on the stop at index 3."""
    a = Asm()
    a(signature, **fields)
    a(*STOP[:1], **STOP[1])
    a(*STOP[:1], **STOP[1])
    a(*STOP[:1], **STOP[1])
    m = Machine(a).set(**(init or {}))
    assert m.run() == I.R_END
    return m


def jumped(m: Machine) -> bool:
    return m.pc() == 4


# ---- add/sub family -------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(u32, u32)
def test_add_sub_results_and_flags(a: int, b: int) -> None:
    m = one("add:rrr", rc="r2", ra="r0", rb="r1", init={"r0": a, "r1": b})
    assert m.r("r2") == (a + b) & M32
    assert m.cf() == int(a + b > M32) and m.zf() == int((a + b) & M32 == 0)
    m = one("sub:rrr", rc="r2", ra="r0", rb="r1", init={"r0": a, "r1": b})
    assert m.r("r2") == (a - b) & M32
    assert m.cf() == int(a >= b)  # carry out = no borrow
    m = one("rsub:rrr", rc="r2", ra="r0", rb="r1", init={"r0": a, "r1": b})
    assert m.r("r2") == (b - a) & M32


@settings(max_examples=60, deadline=None)
@given(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 64) - 1))
def test_64_bit_add_and_sub_carry_chains(x: int, y: int) -> None:
    init = {"r0": x >> 32, "r1": x & M32, "r2": y >> 32, "r3": y & M32}
    a = Asm()
    a("add:rrr", rc="r5", ra="r1", rb="r3")
    a("addc:rrr", rc="r4", ra="r0", rb="r2")
    a("sub:rrr", rc="r7", ra="r1", rb="r3")
    a("subc:rrr", rc="r6", ra="r0", rb="r2")
    a("rsub:rrr", rc="r9", ra="r3", rb="r1")
    a("rsubc:rrr", rc="r8", ra="r2", rb="r0")
    a("stop:ci", cc="false", pc=0)
    m = Machine(a).set(**init)
    assert m.run() == I.R_END
    assert m.d("d4") == (x + y) & ((1 << 64) - 1)
    assert m.d("d6") == (x - y) & ((1 << 64) - 1)
    assert m.d("d8") == (x - y) & ((1 << 64) - 1)
    assert m.cf() == int(x >= y)


# ---- every condition name ------------------------------------------------------------------------
def _add_truth(name: str, a: int, b: int, zf0: int) -> bool:
    x = (a + b) & M32
    sa, sb = s32(a), s32(b)
    ov = not -(1 << 31) <= sa + sb < (1 << 31)
    table = {
        "true": True,
        "false": False,
        "z": x == 0,
        "nz": x != 0,
        "xz": x == 0 and zf0 == 1,
        "xnz": not (x == 0 and zf0 == 1),
        "pl": s32(x) >= 0,
        "mi": s32(x) < 0,
        "sz": a == 0,
        "snz": a != 0,
        "spl": sa >= 0,
        "smi": sa < 0,
        "ov": ov,
        "nov": not ov,
        "c": a + b > M32,
        "nc": a + b <= M32,
    }
    for k in range(5, 15):
        mask = (1 << k) - 1
        table[f"nc{k}"] = (a & mask) + (b & mask) <= mask
    return table[name]


_ADD_NAMES = [
    T.CONDITION_NAMES[n] for _, n in T.CONDITION_MAPS[T.CONDITION_MAP_NAMES.index("add_nz_cc")]
]


@pytest.mark.parametrize("name", _ADD_NAMES)
@settings(max_examples=12, deadline=None)
@given(
    a=u32, b=st.one_of(u32, st.sampled_from([0, 1, 31, 32, 1 << 31, M32])), zf0=st.integers(0, 1)
)
def test_add_conditions(name: str, a: int, b: int, zf0: int) -> None:
    m = one(
        "add:rrrci", rc="r2", ra="r0", rb="r1", cc=name, pc=3, init={"r0": a, "r1": b, "zf": zf0}
    )
    assert jumped(m) == _add_truth(name, a, b, zf0)
    assert m.r("r2") == (a + b) & M32


def _sub_truth(name: str, a: int, b: int, zf0: int) -> bool:
    x = (a - b) & M32
    sa, sb = s32(a), s32(b)
    ov = not -(1 << 31) <= sa - sb < (1 << 31)
    table = {
        "true": True,
        "false": False,
        "z": x == 0,
        "nz": x != 0,
        "xz": x == 0 and zf0 == 1,
        "xnz": not (x == 0 and zf0 == 1),
        "pl": s32(x) >= 0,
        "mi": s32(x) < 0,
        "sz": a == 0,
        "snz": a != 0,
        "spl": sa >= 0,
        "smi": sa < 0,
        "ov": ov,
        "nov": not ov,
        "ltu": a < b,
        "geu": a >= b,
        "leu": a <= b,
        "gtu": a > b,
        "lts": sa < sb,
        "ges": sa >= sb,
        "les": sa <= sb,
        "gts": sa > sb,
        "xleu": a < b or (a == b and zf0 == 1),
        "xgtu": not (a < b or (a == b and zf0 == 1)),
        "xles": sa < sb or (a == b and zf0 == 1),
        "xgts": not (sa < sb or (a == b and zf0 == 1)),
    }
    return table[name]


_SUB_NAMES = [
    T.CONDITION_NAMES[n] for _, n in T.CONDITION_MAPS[T.CONDITION_MAP_NAMES.index("sub_nz_cc")]
]


@pytest.mark.parametrize("name", _SUB_NAMES)
@settings(max_examples=12, deadline=None)
@given(a=u32, b=st.one_of(u32, st.sampled_from([0, 1, 1 << 31, M32])), zf0=st.integers(0, 1))
def test_sub_conditions(name: str, a: int, b: int, zf0: int) -> None:
    if b == 0 and a & 1:
        b = a  # exercise equality often
    m = one(
        "sub:rrrci", rc="r2", ra="r0", rb="r1", cc=name, pc=3, init={"r0": a, "r1": b, "zf": zf0}
    )
    assert jumped(m) == _sub_truth(name, a, b, zf0)


@pytest.mark.parametrize("name", ["xleu", "xgtu", "xles", "xgts", "xz", "xnz"])
@settings(max_examples=40, deadline=None)
@given(x=st.integers(0, (1 << 64) - 1), y=st.integers(0, (1 << 64) - 1), same_hi=st.booleans())
def test_64_bit_compares_with_sub_subc(name: str, x: int, y: int, same_hi: bool) -> None:
    if same_hi:
        y = (x & ~M32) | (y & M32)
    a = Asm()
    a("sub:zrr", ra="r1", rb="r3")
    a("subc:zrrci", ra="r0", rb="r2", cc=name, pc=4)
    a("stop:ci", cc="false", pc=0)
    a("stop:ci", cc="false", pc=0)
    a("stop:ci", cc="false", pc=0)
    m = Machine(a).set(r0=x >> 32, r1=x & M32, r2=y >> 32, r3=y & M32)
    assert m.run() == I.R_END
    sx, sy = x - (1 << 64) * (x >> 63), y - (1 << 64) * (y >> 63)
    truth = {
        "xleu": x <= y,
        "xgtu": x > y,
        "xles": sx <= sy,
        "xgts": sx > sy,
        "xz": x == y,
        "xnz": x != y,
    }[name]
    assert (m.pc() == 5) == truth


@pytest.mark.parametrize(
    ("signature", "name", "a", "b", "expected"),
    [
        ("lsl:rrrci", "sh32", 1, 32, True),
        ("lsl:rrrci", "sh32", 1, 31, False),
        ("lsl:rrrci", "nsh32", 1, 33, False),
        ("lsl:rrrci", "e", 3, 1, True),  # 6 is even
        ("lsl:rrrci", "o", 3, 0, True),
        ("lsl:rrrci", "se", 3, 1, False),
        ("lsl:rrrci", "so", 3, 1, True),
        ("mul_ul_ul:rrrci", "small", 15, 17, True),
        ("mul_ul_ul:rrrci", "large", 16, 16, True),
        ("mul_ul_ul:rrrci", "small", 16, 16, False),
    ],
)
def test_shift_parity_and_multiply_conditions(
    signature: str, name: str, a: int, b: int, expected: bool
) -> None:
    m = one(signature, rc="r2", ra="r0", rb="r1", cc=name, pc=3, init={"r0": a, "r1": b})
    assert jumped(m) == expected


@pytest.mark.parametrize(("a", "expected"), [(0, True), (1, False), (M32, False)])
def test_count_max_conditions(a: int, expected: bool) -> None:
    m = one("clz:rrci", rc="r2", ra="r0", cc="max", pc=3, init={"r0": a})
    assert jumped(m) == expected and m.r("r2") == (32 if a == 0 else 31 if a == 1 else 0)
    m = one("clz:rrci", rc="r2", ra="r0", cc="nmax", pc=3, init={"r0": a})
    assert jumped(m) != expected


@pytest.mark.parametrize(("name", "target"), [("false", 1), ("true", 3)])
def test_stop_condition_picks_the_resume_pc(name: str, target: int) -> None:
    m = one("stop:ci", cc=name, pc=3)
    assert m.pc() == target
    m = one("movd:rrci", dc="d4", db="d0", cc=name, pc=3)
    assert m.pc() == (4 if name == "true" else 2)


def test_every_condition_name_is_exercised() -> None:
    covered = set(_ADD_NAMES) | set(_SUB_NAMES) | {"sh32", "nsh32", "e", "o", "se", "so"}
    covered |= {"small", "large", "max", "nmax", "false"}
    assert covered == set(T.CONDITION_NAMES)


# ---- set forms --------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(u32, u32, st.sampled_from(["ltu", "ges", "z", "nz", "gtu", "les"]))
def test_set_forms_write_one_or_zero(a: int, b: int, name: str) -> None:
    m = one("sub:rrrc", rc="r2", ra="r0", rb="r1", cc=name, init={"r0": a, "r1": b})
    assert m.r("r2") == int(_sub_truth(name, a, b, 0))
    assert m.zf() == int(a == b)  # flags come from the difference, not from the 0/1
    m = one("sub.s:rrrc", dc="d4", ra="r0", rb="r1", cc=name, init={"r0": a, "r1": b})
    assert m.d("d4") == int(_sub_truth(name, a, b, 0))


# ---- logic, shifts, counts -------------------------------------------------------------------
def _clz(v: int) -> int:
    return 32 - v.bit_length()


_BINARY = {
    "and": lambda a, b: a & b,
    "andn": lambda a, b: ~a & b & M32,
    "nand": lambda a, b: ~(a & b) & M32,
    "nor": lambda a, b: ~(a | b) & M32,
    "nxor": lambda a, b: ~(a ^ b) & M32,
    "or": lambda a, b: a | b,
    "orn": lambda a, b: (~a | b) & M32,
    "xor": lambda a, b: a ^ b,
    "lsl": lambda a, b: (a << (b & 31)) & M32,
    "lsr": lambda a, b: a >> (b & 31),
    "asr": lambda a, b: (s32(a) >> (b & 31)) & M32,
    "rol": lambda a, b: ((a << (b & 31)) | (a >> (32 - (b & 31)))) & M32,
    "ror": lambda a, b: ((a >> (b & 31)) | (a << (32 - (b & 31)))) & M32,
    "lsl1": lambda a, b: ((a << (b & 31)) & M32) | ((1 << (b & 31)) - 1),
    "lsr1": lambda a, b: (a >> (b & 31)) | (M32 - (M32 >> (b & 31))),
    "lslx": lambda a, b: 0 if b & 31 == 0 else a >> (32 - (b & 31)),
    "lsrx": lambda a, b: 0 if b & 31 == 0 else (a << (32 - (b & 31))) & M32,
    "lsl1x": lambda a, b: M32 if b & 31 == 0 else (a >> (32 - (b & 31))) | (M32 << (b & 31)) & M32,
    "lsr1x": lambda a, b: (
        M32 if b & 31 == 0 else ((a << (32 - (b & 31))) & M32) | ((1 << (32 - (b & 31))) - 1)
    ),
    "cmpb4": lambda a, b: sum(
        1 << (8 * i) for i in range(4) if (a >> (8 * i)) & 255 == (b >> (8 * i)) & 255
    ),
}
_UNARY = {
    "cao": lambda a: bin(a).count("1"),
    "clz": _clz,
    "clo": lambda a: _clz(~a & M32),
    "cls": lambda a: _clz(~a & M32) if a >> 31 else _clz(a),
    "extsb": lambda a: (a & 0xFF) - 0x100 * ((a >> 7) & 1) & M32,
    "extsh": lambda a: (a & 0xFFFF) - 0x10000 * ((a >> 15) & 1) & M32,
    "extub": lambda a: a & 0xFF,
    "extuh": lambda a: a & 0xFFFF,
    "sats": lambda a: 0x80000000 if a >> 31 else 0x7FFFFFFF,
}


@pytest.mark.parametrize("op", sorted(_BINARY))
@settings(max_examples=15, deadline=None)
@given(a=u32, b=st.one_of(st.integers(0, 64), u32))
def test_binary_operations(op: str, a: int, b: int) -> None:
    m = one(f"{op}:rrr", rc="r2", ra="r0", rb="r1", init={"r0": a, "r1": b})
    expected = _BINARY[op](a, b)
    assert m.r("r2") == expected
    assert m.zf() == int(expected == 0)


@pytest.mark.parametrize("op", sorted(_UNARY))
@settings(max_examples=15, deadline=None)
@given(a=st.one_of(u32, st.sampled_from([0, M32, 0x80, 0x8000, 1 << 31])))
def test_unary_operations(op: str, a: int) -> None:
    m = one(f"{op}:rr", rc="r2", ra="r0", init={"r0": a})
    assert m.r("r2") == _UNARY[op](a)


def test_immediate_forms_and_zero_destination() -> None:
    m = one("lsl:rri", rc="r2", ra="r0", shift=4, init={"r0": 0x0F00000F})
    assert m.r("r2") == 0xF00000F0
    m = one("add:zri", rb="r0", imm=5, init={"r0": M32 - 4, "r2": 7})
    assert m.r("r2") == 7 and m.zf() == 1 and m.cf() == 1
    m = one("sub:rir", rc="r2", imm=10, ra="r0", init={"r0": 3})
    assert m.r("r2") == 7
    m = one("or:rri", rc="r2", ra="r0", imm=0xF0F0F0F0, init={"r0": 0x0F})
    assert m.r("r2") == 0xF0F0F0FF


_MULS = sorted(m for m in T.MNEMONICS if m.startswith("mul_") and m != "mul_step")


@pytest.mark.parametrize("mul", _MULS)
@settings(max_examples=15, deadline=None)
@given(a=u32, b=u32)
def test_byte_multiplies(mul: str, a: int, b: int) -> None:
    _, x, y = mul.split("_")

    def factor(v: int, spec: str) -> int:
        byte = (v >> 8) & 255 if spec[1] == "h" else v & 255
        return byte - 256 if spec[0] == "s" and byte & 128 else byte

    m = one(f"{mul}:rrr", rc="r2", ra="r0", rb="r1", init={"r0": a, "r1": b})
    assert m.r("r2") == (factor(a, x) * factor(b, y)) & M32


# ---- pairs -----------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(a=u32, b=u32)
def test_pair_writes_sign_and_zero_extend(a: int, b: int) -> None:
    x = (a + b) & M32
    m = one("add.s:rrr", dc="d4", ra="r0", rb="r1", init={"r0": a, "r1": b})
    assert m.r("r4") == (M32 if x >> 31 else 0) and m.r("r5") == x
    m = one("add.u:rrr", dc="d4", ra="r0", rb="r1", init={"r0": a, "r1": b})
    assert m.r("r4") == 0 and m.r("r5") == x
    m = one("lsl_add.s:rrri", dc="d4", rb="r1", ra="r0", shift=3, init={"r0": a, "r1": b})
    y = (b + (a << 3)) & M32
    assert m.d("d4") == (y | (M32 << 32) if y >> 31 else y)


def test_movd_swapd() -> None:
    m = one("movd:rrci", dc="d4", db="d0", cc="false", pc=0, init={"r0": 1, "r1": 2})
    assert (m.r("r4"), m.r("r5")) == (1, 2)
    m = one("swapd:rrci", dc="d4", db="d0", cc="true", pc=3, init={"r0": 1, "r1": 2})
    assert (m.r("r4"), m.r("r5")) == (2, 1) and jumped(m)


def test_lsl_add_flags_follow_the_shifted_operand_and_zrri_does_nothing() -> None:
    m = one("lsl_add:rrri", rc="r2", rb="r1", ra="r0", shift=4, init={"r0": 0, "r1": 9})
    assert m.r("r2") == 9 and m.zf() == 1  # ZF from ra << 4 = 0, not from the sum
    m = one("lsl_sub:rrri", rc="r2", rb="r1", ra="r0", shift=1, init={"r0": 2, "r1": 4})
    assert m.r("r2") == 0 and m.zf() == 0
    m = one("lsl_add:zrri", rb="r1", ra="r0", shift=1, init={"r0": 0, "r1": 4, "zf": 0})
    assert m.zf() == 0


# ---- mul_step / div_step ---------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(a=u32, b=u32)
def test_mul_step_sequence_multiplies(a: int, b: int) -> None:
    # d0 = (b, 0): 32 steps add ra << n to the odd register for each bit of the even one
    asm = Asm()
    for n in range(32):
        asm("mul_step:rrrici", dc="d0", ra="r2", db="d0", shift=n, cc="z", pc=33)
    asm("stop:ci", cc="false", pc=0)
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm).set(r0=b, r1=0, r2=a)
    assert m.run() == I.R_END
    assert m.r("r1") == (a * b) & M32 and m.r("r0") == 0


@settings(max_examples=40, deadline=None)
@given(n=u32, d=st.integers(1, M32))
@example(n=2_147_483_649, d=1)  # a 64-bit intermediate above int64 in the pure-Python loop
def test_div_step_sequence_divides(n: int, d: int) -> None:
    asm = Asm()
    for k in range(31, -1, -1):
        asm("div_step:rrrici", dc="d0", ra="r2", db="d0", shift=k, cc="false", pc=0)
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm)
    # skip the steps where d << k overflows, as the runtime's computed jump does
    start = 31 - _clz(d)  # first step: shift clz(d)
    m.th[0, I.T_PC] = start
    m.set(r0=0, r1=n, r2=d)
    assert m.run() == I.R_END
    assert (m.r("r0"), m.r("r1")) == (n // d, n % d)


# ---- loads and stores ------------------------------------------------------------------------
@pytest.mark.parametrize("endian", ["little", "big"])
@settings(max_examples=20, deadline=None)
@given(v=st.integers(0, (1 << 64) - 1))
def test_loads_and_stores(endian: str, v: int) -> None:
    asm = Asm()
    asm("sd:erir", endian=endian, ra="r10", off=8, db="d0")
    asm("lw:erri", endian=endian, rc="r2", ra="r10", off=8)
    asm("lhs:erri", endian="little", rc="r3", ra="r10", off=8)
    asm("lbu.u:erri", endian="little", dc="d4", ra="r10", off=15)
    asm("ld:erri", endian=endian, dc="d6", ra="r10", off=8)
    asm("sb:erii", endian="little", ra="r10", off=20, imm=-2)
    asm("sh:erii", endian="big", ra="r10", off=22, imm=0x1234)
    asm("sw_id:erii", endian="little", ra="r10", off=24, imm=0x40)
    asm("lw.s:erri", endian="little", dc="d8", ra="r10", off=8)
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm).set(r0=v >> 32, r1=v & M32, r10=0)
    assert m.run() == I.R_END
    mem = bytes(m.wram[8:16])
    raw = v.to_bytes(8, "little" if endian == "little" else "big")
    if endian == "little":
        raw = (v & M32).to_bytes(4, "little") + (v >> 32).to_bytes(4, "little")
    assert mem == raw
    assert m.r("r2") == int.from_bytes(mem[:4], endian)
    half = int.from_bytes(mem[:2], "little")
    assert m.r("r3") == (half - 0x10000 if half >> 15 else half) & M32
    assert m.d("d4") == mem[7]
    assert m.d("d6") == v
    assert bytes(m.wram[20:28]) == bytes([0xFE, 0, 0x12, 0x34]) + (0x40).to_bytes(4, "little")
    w = int.from_bytes(mem[:4], "little")
    assert m.d("d8") == (w | (M32 << 32) if w >> 31 else w)


@pytest.mark.parametrize(
    ("signature", "fields", "addr"),
    [
        ("lw:erri", {"rc": "r2", "ra": "r0", "off": 2}, 2),
        ("sd:erir", {"ra": "r0", "off": 4, "db": "d2"}, 4),
        ("lbu:erri", {"rc": "r2", "ra": "r0", "off": 65536}, 65536),
        ("sw:erii", {"ra": "r0", "off": -4, "imm": 1}, M32 - 3),
    ],
)
def test_misaligned_or_outside_wram_is_a_memory_fault(
    signature: str, fields: dict[str, object], addr: int
) -> None:
    asm = Asm()
    asm(signature, endian="little", **fields)
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm)
    assert m.run() == I.R_FAULT
    assert m.fault_kind == I.FK_MEMORY and int(m.dv[I.D_FADDR]) == addr


def test_safe_registers() -> None:
    # s0 = limit 0x40 in bits 31-16, address 0x30 in bits 15-0
    s0 = (0x40 << 16) | 0x30
    asm = Asm()
    asm("sw:esir", endian="little", ra="r0", off=8, rb="r1")  # 0x38 + 4 - 0x40 < 0: fine
    asm("lw:ersi", endian="little", rc="r2", ra="r0", off=8)
    asm("sw:esir", endian="little", ra="r0", off=12, rb="r1")  # 0x3C + 4 - 0x40 = 0: fault
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm).set(r0=s0, r1=77)
    assert m.run() == I.R_FAULT
    assert m.r("r2") == 77 and int(m.dv[I.D_FPC]) == 2 and m.fault_kind == I.FK_MEMORY
    m = one("add:ssi", rc="r2", ra="r0", imm=0x10, init={"r0": s0})
    assert m.r("r2") == s0 + 0x10
    asm = Asm()
    asm("add:ssi", rc="r2", ra="r0", imm=0xFFFF)
    m = Machine(asm).set(r0=s0)
    assert m.run() == I.R_FAULT and m.fault_kind == I.FK_SAFE
    assert m.r("r2") == (s0 + 0xFFFF) & 0xFFFFFF


# ---- control ---------------------------------------------------------------------------------
def test_call_and_return() -> None:
    asm = Asm()
    asm("call:rri", rc="r23", ra="zero", off="f")
    asm("stop:ci", cc="false", pc=0)
    asm.label("f")
    asm("add:rri", rc="r0", ra="zero", imm=42)
    asm("call:zri", ra="r23", off=0)
    m = Machine(asm)
    assert m.run() == I.R_END
    assert m.r("r0") == 42 and m.r("r23") == 1 and m.pc() == 2


def test_time_reads_the_cycle_counter() -> None:
    asm = Asm()
    for _ in range(3):
        asm("nop:")
    asm("time:r", rc="r0")
    asm("time_cfg:rr", rc="r1", rb="r2")  # reset, keep counting cycles
    asm("time:r", rc="r3")
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm).set(r2=(1 << 1) | 1)
    assert m.run() == I.R_END
    # one thread issues every 11 cycles: time at instruction 3 is cycle 33 -> 33 >> 4
    assert m.r("r0") == 33 >> 4 and m.r("r1") == 44 >> 4 and m.r("r3") == 11 >> 4


def test_acquire_release_and_atomic_bit_fold() -> None:
    asm = Asm()
    asm("acquire:rici", ra="r0", imm=3, cc="z", pc=2)  # bit (0x103 >> 8 ^ 0x103) & 255 = 2
    asm("fault:i", imm=9)
    asm("acquire:rici", ra="zero", imm=2, cc="nz", pc=4)  # taken: the bit is set
    asm("fault:i", imm=9)
    asm("release:rici", ra="zero", imm=2, cc="nz", pc=5)
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm).set(r0=0x100)
    assert m.run() == I.R_END
    assert m.atomic.sum() == 0 and m.zf() == 0  # release saw the bit set


def test_fault_instruction_and_undecodable_words() -> None:
    m = Machine(Asm()("fault:i", imm=3))
    assert m.run() == I.R_FAULT
    assert m.fault_kind == I.FK_SOFTWARE and int(m.dv[I.D_FCODE]) == 3
    m = Machine(Asm().raw((1 << 48) - 1))
    assert m.run() == I.R_FAULT and m.fault_kind == I.FK_ILLEGAL
    m = Machine(Asm()("nop:"))  # falls off the end of the program
    assert m.run() == I.R_FAULT and m.fault_kind == I.FK_PC and int(m.dv[I.D_FPC]) == 1
    m = one("sats:rr", rc="r2", ra="r0", init={"r0": 5})
    assert m.r("r2") == 0x7FFFFFFF
    m = Machine(Asm()("hash:rrr", rc="r2", ra="r0", rb="r1"))
    assert m.run() == I.R_FAULT and m.fault_kind == I.FK_UNIMPLEMENTED


# ---- threads ---------------------------------------------------------------------------------
def test_boot_resume_read_run_clr_run_results() -> None:
    asm = Asm()
    asm("add:zrici", ra="id", imm=0, cc="nz", pc="worker")  # 0
    asm("boot:rici", ra="zero", imm=1, cc="false", pc=0)  # 1: x = 0 (started)
    asm("add:rri", rc="r10", ra="zero", imm=0)  # 2: r10 = 0
    asm("boot:rici", ra="zero", imm=1, cc="nz", pc="was_running")  # 3: x = 1: jump
    asm("fault:i", imm=9)  # 4
    asm.label("was_running")
    asm("read_run:rici", ra="zero", imm=1, cc="z", pc="bad")  # 5: running: not taken
    asm("clr_run:rici", ra="zero", imm=1, cc="z", pc="bad")  # 6: x = 1, thread 1 stops
    asm("read_run:rici", ra="zero", imm=1, cc="nz", pc="bad")  # 7: x = 0 now
    asm("resume:rici", ra="zero", imm=1, cc="nz", pc="bad")  # 8: restarts thread 1
    asm("stop:ci", cc="false", pc=0)  # 9
    asm.label("bad")
    asm("fault:i", imm=8)  # 10
    asm.label("worker")
    asm("add:rri", rc="r1", ra="r1", imm=1)  # 11: thread 1 counts its iterations
    asm("add:rrici", rc="r2", ra="r1", imm=-40, cc="nz", pc="worker")  # 12
    asm("stop:ci", cc="false", pc=0)  # 13
    m = Machine(asm)
    assert m.run() == I.R_END, (m.fault_kind, int(m.dv[I.D_FPC]))
    assert m.r("r1", thread=1) == 40  # resumed where it was stopped, ran to its end


def test_performance_counter_counts_instructions_in_mode_2() -> None:
    asm = Asm()
    asm("time_cfg:zr", rb="r2")  # mode 2 (instructions), reset
    for _ in range(40):
        asm("nop:")
    asm("time:r", rc="r0")
    asm("stop:ci", cc="false", pc=0)
    m = Machine(asm).set(r2=(2 << 1) | 1)
    assert m.run() == I.R_END
    assert m.r("r0") == 40 >> 4  # 40 instructions since the reset (cycles would give 440 >> 4)


@pytest.mark.parametrize("op", ["lsl_add", "lsl_sub", "lsr_add", "rol_add"])
@settings(max_examples=30, deadline=None)
@given(a=u32, b=u32, n=st.integers(0, 31))
def test_shift_and_add_family(op: str, a: int, b: int, n: int) -> None:
    shifted = {
        "lsl_add": (a << n) & M32,
        "lsl_sub": (a << n) & M32,
        "lsr_add": a >> n,
        "rol_add": ((a << n) | (a >> (32 - n))) & M32 if n else a,
    }[op]
    expected = (b - shifted if op == "lsl_sub" else b + shifted) & M32
    m = one(f"{op}:rrri", rc="r2", rb="r1", ra="r0", shift=n, init={"r0": a, "r1": b})
    assert m.r("r2") == expected and m.zf() == int(shifted == 0)
    m = one(
        f"{op}:rrrici", rc="r2", rb="r1", ra="r0", shift=n, cc="smi", pc=3, init={"r0": a, "r1": b}
    )
    assert m.r("r2") == expected and jumped(m) == bool(a >> 31)  # source test on ra
