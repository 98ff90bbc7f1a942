"""Instruction text: the SDK's alias choice, and text -> assembler -> the same word for every
signature."""

from __future__ import annotations

import random

import pytest
from isa_helpers import random_instruction

from aiopim.isa import (
    AsmError,
    Instruction,
    assemble_program,
    decode,
    encode,
    format_instruction,
    signature_index,
    sugar_for,
)
from aiopim.isa import _tables as T

NSIGS = len(T.SIG_KEYWORD)


def _canonical(ins: Instruction) -> bool:
    """False when a condition code shares its name with a lower code of the same map (the
    64-bit set forms name 6 and 34 both ``z``…): its text assembles to the lower code."""
    for op in T.SIG_OPERANDS[ins.sig]:
        if op[1] == T.KIND_COND and op[2] >= 0:
            codes = dict(T.CONDITION_MAPS[op[8]])
            code = ins.fields[op[2]]
            if any(c < code and n == codes[code] for c, n in codes.items()):
                return False
    return True


@pytest.mark.parametrize(
    ("signature", "fields", "text"),
    [
        ("sub:zrici", {"ra": 1, "imm": 5, "cc": 20, "pc": 7}, "jltu r1, 5, 7"),
        ("sub:zrici", {"ra": 1, "imm": 0, "cc": 3, "pc": 7}, "jnz r1, 7"),
        ("sub:zrici", {"ra": 1, "imm": 0, "cc": 2, "pc": 7}, "jz r1, 7"),
        ("sub:zrici", {"ra": 1, "imm": 0, "cc": 4, "pc": 7}, "sub zero, r1, 0, xz, 7"),
        ("or:rri", {"rc": 1, "ra": 24, "imm": 5}, "move r1, 5"),
        ("or:rri", {"rc": 1, "ra": 2, "imm": 5}, "or r1, r2, 5"),
        ("or:rrif", {"rc": 1, "ra": 2, "imm": 0}, "move r1, r2"),
        ("or:rrif", {"rc": 1, "ra": 2, "imm": 4}, "or r1, r2, 4, false"),
        ("xor:rri", {"rc": 1, "ra": 2, "imm": 0xFFFFFFFF}, "not r1, r2"),
        ("call:zri", {"ra": 24, "off": 5}, "jump 5"),
        ("call:zri", {"ra": 23, "off": 0}, "jump r23"),
        ("call:zri", {"ra": 23, "off": 2}, "jump r23, 2"),
        ("call:rri", {"rc": 23, "ra": 24, "off": 9}, "call r23, 9"),
        ("stop:ci", {"cc": 0, "pc": 0}, "stop"),
        ("stop:ci", {"cc": 1, "pc": 3}, "stop true, 3"),
        ("fault:i", {"imm": 0}, "bkp"),
        ("fault:i", {"imm": 2}, "fault 2"),
        ("lw:erri", {"endian": 0, "rc": 0, "ra": 22, "off": -4}, "lw r0, r22, -4"),
        ("lw:erri", {"endian": 1, "rc": 0, "ra": 22, "off": -4}, "lw !big, r0, r22, -4"),
        ("sd:erir", {"endian": 0, "ra": 31, "off": 8, "db": 22}, "sd id8, 8, d22"),
        ("add:ssi", {"rc": 1, "ra": 2, "imm": -3}, "adds r1, r2, -3"),
        ("boot:rici", {"ra": 28, "imm": 1, "cc": 0, "pc": 0}, "boot id, 1"),
        ("time_cfg:zr", {"rb": 3}, "time_cfg r3"),
        ("sub:rir", {"rc": 4, "imm": 0, "ra": 5}, "neg r4, r5"),
    ],
)
def test_alias_printing(signature: str, fields: dict[str, int], text: str) -> None:
    ins = Instruction.make(signature, **fields)
    assert format_instruction(ins) == text
    assert format_instruction(ins, alias=False).split()[0] == ins.keyword
    got = assemble_program(text).text
    assert got == [encode(ins)]


def test_alias_with_fewest_operands_wins() -> None:
    # sd_id:erii with imm 0 matches both sd_id:ri and sd_id:rii; the shorter one is printed
    ins = Instruction.make("sd_id:erii", endian=0, ra=22, off=8, imm=0)
    s = sugar_for(ins)
    assert s is not None and T.SUGARS[s][:2] == ("sd_id", "ri")
    assert format_instruction(ins) == "sd_id r22, 8"


def test_exact_spelling_names_the_signature() -> None:
    ins = Instruction.make("lbs:ersi", endian=1, rc=20, ra=25, off=4)
    assert format_instruction(ins) == "lbs !big, r20, one, 4"
    assert format_instruction(ins, exact=True) == "lbs:ersi !big, r20, one, 4"
    # the plain text is the unsafe form; the exact one selects the safe form
    assert decode(assemble_program("lbs !big, r20, one, 4").text[0]).signature == "lbs:erri"  # type: ignore[union-attr]
    assert assemble_program(format_instruction(ins, exact=True)).text == [encode(ins)]


def test_conditions_accept_question_mark_and_jump_labels() -> None:
    a = assemble_program("top:\n add r0, r0, 1, ?nz, top\n or r1, zero, 0, ?xnz, top\n")
    first = decode(a.text[0])
    assert first is not None and first.values()["pc"] == 0 and first.values()["cc"] == 3


@pytest.mark.parametrize("chunk", range(4))
def test_text_round_trip_every_signature(chunk: int) -> None:
    """format -> assemble gives the word back, for random legal fields of every signature
    (with the explicit ``keyword:form`` spelling where the SDK text is ambiguous)."""
    rng = random.Random(100 + chunk)
    instructions: list[Instruction] = []
    for sig in range(chunk, NSIGS, 4):
        for _ in range(6):
            ins = random_instruction(sig, rng)
            if _canonical(ins):
                instructions.append(ins)
    lines = [format_instruction(i) for i in instructions]
    words = assemble_program("\n".join(lines)).text
    ambiguous = 0
    for ins, line, word in zip(instructions, lines, words, strict=True):
        if word != encode(ins):
            # only a safe-register form written with a constant register is ambiguous
            assert "s" in ins.form, line
            ambiguous += 1
            exact = assemble_program(format_instruction(ins, exact=True)).text
            assert exact == [encode(ins)], line
    assert ambiguous < len(lines) // 50


def test_set_form_condition_names_take_the_lower_code() -> None:
    sig = signature_index("sub:rric")
    word = assemble_program("sub r1, r2, 3, xz").text[0]
    ins = decode(word)
    assert ins is not None and ins.sig == sig
    codes = dict(
        T.CONDITION_MAPS[next(op[8] for op in T.SIG_OPERANDS[sig] if op[1] == T.KIND_COND)]
    )
    assert T.CONDITION_NAMES[codes[ins.values()["cc"]]] == "xz"
    assert ins.values()["cc"] == min(c for c, n in codes.items() if T.CONDITION_NAMES[n] == "xz")


def test_operand_errors_name_the_operand() -> None:
    with pytest.raises(AsmError) as exc:
        assemble_program("    add r0, r1, 5, bogus, 3")
    assert exc.value.line == 1 and exc.value.column == 20
    with pytest.raises(AsmError, match="movd: d1 is not a register pair"):
        assemble_program("movd d1, d2")
