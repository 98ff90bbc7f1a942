"""Instruction text: the SDK's assembly syntax and its choice of alias (sugar) when printing.

Syntax: ``keyword op, op, …`` with operands in the order of the signature's form. Registers
``r0``…``r23``, pairs ``d0``…``d22``, safe registers ``s0``…``s23`` and the constant registers
``zero one lneg mneg id id2 id4 id8``; conditions by name (``z``, ``ltu``…; a leading ``?`` is
accepted when parsing); endianness ``!little``/``!big``; immediates in decimal (hex for large
unsigned values); jump targets as instruction indexes, or labels when a resolver is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from . import _tables as T
from ._codec import FIELD_NAMES, Instruction, _sign, encode

__all__ = ["CONST_NAMES", "REGISTER_NAMES", "format_instruction", "operand_rows", "sugar_for"]

#: constant register name -> code
CONST_NAMES: Final = dict(T.CONSTANT_REGISTERS)
_CONST_BY_CODE: Final = {code: name for name, code in T.CONSTANT_REGISTERS}
#: every reserved register name (never a symbol in an expression)
REGISTER_NAMES: Final = frozenset(
    [f"r{i}" for i in range(24)]
    + [f"d{i}" for i in range(24)]
    + [f"s{i}" for i in range(24)]
    + list(CONST_NAMES)
)
_COND_NAME: Final = tuple({c: T.CONDITION_NAMES[n] for c, n in m} for m in T.CONDITION_MAPS)
_F_OFF: Final = FIELD_NAMES.index("off")
_F_RA: Final = FIELD_NAMES.index("ra")

Operand = tuple[str, int, int, int, int, int, int, int, int, int, int]
#: label for a jump target (instruction index), or None to print the number
PcResolver = Callable[[int], str | None]


def sugar_for(instruction: Instruction, word: int | None = None) -> int | None:
    """Index into ``SUGARS`` of the alias the SDK prints for ``instruction``, or None.

    Among the aliases whose condition matches the word, the one with the fewest operands wins,
    the first in the signature's alias order on a tie.
    """
    w = encode(instruction) if word is None else word
    best: int | None = None
    for s in T.SIG_SUGARS[instruction.sig]:
        _kw, _form, _target, mask, value, _implied, ops, _doc = T.SUGARS[s]
        if w & mask == value and (best is None or len(ops) < len(T.SUGARS[best][6])):
            best = s
    return best


def operand_rows(
    instruction: Instruction, *, alias: bool = True
) -> tuple[str, tuple[Operand, ...]]:
    """``(keyword, operand descriptors)`` the instruction prints with."""
    if alias:
        s = sugar_for(instruction)
        if s is not None:
            return T.SUGARS[s][0], T.SUGARS[s][6]
    return instruction.keyword, T.SIG_OPERANDS[instruction.sig]


def register_name(code: int, *, pair: bool = False, safe: bool = False) -> str:
    """Text of register code ``code`` in an operand position."""
    if code >= 24:
        return _CONST_BY_CODE[code]
    return f"{'d' if pair else 's' if safe else 'r'}{code}"


def _is_jump_target(instruction: Instruction, op: Operand) -> bool:
    # call/jump add ra to the offset: only a target when ra is the zero register
    if op[2] == _F_OFF:
        return instruction.fields[_F_RA] == CONST_NAMES["zero"]
    return True


def format_operand(instruction: Instruction, op: Operand, resolve: PcResolver | None) -> str:
    """Text of one operand of ``instruction``."""
    _name, kind, fid, bits, signed, _ro, pair, safe, cmap, implicit, const = op
    if kind == T.KIND_CONST_REG:
        return _CONST_BY_CODE[const]
    if kind == T.KIND_COND:
        code = implicit if fid < 0 else instruction.fields[fid]
        return _COND_NAME[cmap].get(code, "???")
    raw = instruction.fields[fid]
    if kind == T.KIND_REG:
        return register_name(raw, pair=bool(pair), safe=bool(safe))
    if kind == T.KIND_ENDIAN:
        return "!big" if raw else "!little"
    if kind == T.KIND_PC:
        if resolve is not None and _is_jump_target(instruction, op):
            label = resolve(raw)
            if label is not None:
                return label
        return str(raw)
    value = raw & ((1 << bits) - 1)
    if signed:
        return str(_sign(value, bits))
    return str(value) if value < 0x10000 else hex(value)


def format_instruction(
    instruction: Instruction,
    *,
    alias: bool = True,
    exact: bool = False,
    resolve: PcResolver | None = None,
) -> str:
    """Assembly text of ``instruction``: the SDK's alias when one applies (``alias``), the
    explicit ``keyword:form`` spelling with ``exact`` (never ambiguous when re-assembled),
    jump targets through ``resolve``."""
    if exact:
        keyword, ops = instruction.signature, T.SIG_OPERANDS[instruction.sig]
    else:
        keyword, ops = operand_rows(instruction, alias=alias)
    text = ", ".join(format_operand(instruction, op, resolve) for op in ops)
    return f"{keyword} {text}" if text else keyword
