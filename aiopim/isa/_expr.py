"""Integer expressions of the assembler: numbers, symbols, ``.``, and C operators."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["Expr", "ExprError", "parse_expr"]

_TOKEN: Final = re.compile(
    r"\s*(?:"
    r"(?P<num>0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)"
    r"|(?P<char>'(?:\\.|[^'\\])')"
    r"|(?P<sym>[A-Za-z_.$][\w.$]*)"
    r"|(?P<op><<|>>|[-+*/%&|^~()])"
    r")"
)
_BINARY: Final = {
    "|": 1,
    "^": 2,
    "&": 3,
    "<<": 4,
    ">>": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}


class ExprError(ValueError):
    """A malformed expression; ``offset`` is the character where it went wrong."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


#: symbol name -> value; raises KeyError for an unknown symbol
Lookup = Callable[[str], int]


@dataclass(frozen=True)
class Expr:
    """A parsed expression: ``op`` is ``num``/``sym``/``dot``/a unary (``neg``, ``~``, ``pos``)
    or binary operator; ``offset`` is its position in the operand text."""

    op: str
    value: int = 0
    name: str = ""
    args: tuple[Expr, ...] = ()
    offset: int = 0

    def symbols(self) -> set[str]:
        """Names of the symbols the expression uses."""
        out = {self.name} if self.op == "sym" else set()
        for a in self.args:
            out |= a.symbols()
        return out

    def eval(self, lookup: Lookup, dot: int) -> int:
        """Value with symbols from ``lookup`` and ``.`` = ``dot``."""
        op = self.op
        if op == "num":
            return self.value
        if op == "dot":
            return dot
        if op == "sym":
            try:
                return lookup(self.name)
            except KeyError:
                raise ExprError(f"undefined symbol {self.name!r}", self.offset) from None
        vals = [a.eval(lookup, dot) for a in self.args]
        if op == "neg":
            return -vals[0]
        if op == "pos":
            return vals[0]
        if op == "~":
            return ~vals[0]
        a, b = vals
        if op in ("/", "%") and b == 0:
            raise ExprError("division by zero", self.offset)
        if op in ("<<", ">>") and not 0 <= b < 256:
            raise ExprError(f"shift count {b} out of range", self.offset)
        result: int = {
            "|": lambda: a | b,
            "^": lambda: a ^ b,
            "&": lambda: a & b,
            "<<": lambda: a << b,
            ">>": lambda: a >> b,
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: int(a / b),
            "%": lambda: a - b * int(a / b),
        }[op]()
        return result


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            start = pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise ExprError(f"unexpected character {text[start]!r}", start)
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


def parse_expr(text: str) -> Expr:
    """Parse ``text`` (``ExprError`` with the offending offset if it is not an expression)."""
    toks = _tokens(text)
    pos = 0

    def peek() -> tuple[str, str, int] | None:
        return toks[pos] if pos < len(toks) else None

    def primary() -> Expr:
        nonlocal pos
        t = peek()
        if t is None:
            raise ExprError("expression expected", len(text))
        kind, val, at = t
        pos += 1
        if kind == "num":
            return Expr("num", int(val, 0) if not val.isdigit() else int(val, 10), offset=at)
        if kind == "char":
            import ast

            ch = ast.literal_eval(val)
            return Expr("num", ord(ch), offset=at)
        if kind == "sym":
            return Expr("dot", offset=at) if val == "." else Expr("sym", name=val, offset=at)
        if val == "(":
            e = binary(0)
            t2 = peek()
            if t2 is None or t2[1] != ")":
                raise ExprError("')' expected", t2[2] if t2 else len(text))
            pos += 1
            return e
        if val in ("-", "~", "+"):
            operand = primary()
            return Expr({"-": "neg", "~": "~", "+": "pos"}[val], args=(operand,), offset=at)
        raise ExprError(f"unexpected {val!r}", at)

    def binary(min_prec: int) -> Expr:
        nonlocal pos
        left = primary()
        while True:
            t = peek()
            if t is None or t[0] != "op" or t[1] not in _BINARY or _BINARY[t[1]] <= min_prec:
                return left
            pos += 1
            right = binary(_BINARY[t[1]])
            left = Expr(t[1], args=(left, right), offset=t[2])

    e = binary(0)
    if pos != len(toks):
        raise ExprError(f"unexpected {toks[pos][1]!r}", toks[pos][2])
    return e
