"""DIDL, the Device Interface Definition Language: grammar, parser, model and validation.

A DIDL file declares functions whose ``in`` / ``out`` / ``inout`` parameters are mapped to DPU
resources: words of the system mailbox (``sysmbox[i]``, ``sysmbox[a..b]``), words of tasklet
mailboxes (``mbox[t][w]`` with ranges on both) and MRAM regions (``dram[offset]`` or
``mram[offset]``)::

    function countCharacters(documentLength: in u32, requestedChar: in u8,
                             counters: out u32[16]) {
        documentLength <- sysmbox[0],
        requestedChar  <- sysmbox[1],
        counters       <- mbox[0..15][0]
    }

Every mailbox word carries one element (``u8``/``u16``/``u32`` zero-extended; ``u64`` takes two
consecutive words, low word first). MRAM regions hold the elements packed, little-endian.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import lark
import numpy as np

from ._errors import DidlError

if TYPE_CHECKING:
    from ..dpu import MailboxLayout

GRAMMAR = r"""
start: function*
function: FUNCTION NAME LPAR [param (COMMA param)* [COMMA]] RPAR LBRACE mappings RBRACE
mappings: [mapping (COMMA mapping)* [COMMA]]
param: NAME COLON DIRECTION type
type: NAME [LSQB INT RSQB]
mapping: NAME ARROW resource
resource: SYSMBOX LSQB range RSQB                       -> sysmbox
        | MBOX LSQB range RSQB LSQB range RSQB          -> mbox
        | MEMORY LSQB INT RSQB                          -> dram
range: INT [DOTDOT INT]

FUNCTION.2: "function"
DIRECTION.2: "inout" | "in" | "out"
SYSMBOX.2: "sysmbox"
MBOX.2: "mbox"
MEMORY.2: "dram" | "mram"
NAME: /[A-Za-z_][A-Za-z0-9_]*/
INT: /0[xX][0-9a-fA-F]+|[0-9]+/
ARROW: "<-"
DOTDOT: ".."
LPAR: "("
RPAR: ")"
LBRACE: "{"
RBRACE: "}"
LSQB: "["
RSQB: "]"
COMMA: ","
COLON: ":"
LINE_COMMENT: /\/\/[^\n]*/
BLOCK_COMMENT: /\/\*(.|\n)*?\*\//
%import common.WS
%ignore WS
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""

_TERMINALS = {
    "FUNCTION": "'function'",
    "DIRECTION": "a direction (in, out, inout)",
    "SYSMBOX": "'sysmbox'",
    "MBOX": "'mbox'",
    "MEMORY": "'dram' or 'mram'",
    "NAME": "a name",
    "INT": "an integer",
    "ARROW": "'<-'",
    "DOTDOT": "'..'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "COLON": "':'",
    "$END": "end of file",
}

_PARSER = lark.Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)

#: DIDL scalar types and their NumPy dtypes
SCALARS: dict[str, np.dtype[np.unsignedinteger]] = {
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
}
#: Name of the memory-copy task every interface has
MEMORY_COPY = "memoryCopy"
MRAM_ALIGN = 8

Direction = Literal["in", "out", "inout"]


@dataclass(frozen=True)
class Pos:
    """Where something is in a DIDL file (1-based line and column)."""

    file: str
    line: int
    column: int


@dataclass(frozen=True)
class Param:
    """A function parameter: ``name: direction scalar[length]``."""

    name: str
    direction: Direction
    scalar: str
    length: int | None
    pos: Pos

    @property
    def dtype(self) -> np.dtype[np.unsignedinteger]:
        """Element dtype."""
        return SCALARS[self.scalar]

    @property
    def count(self) -> int:
        """Number of elements (1 for a scalar)."""
        return 1 if self.length is None else self.length

    @property
    def words_per_element(self) -> int:
        """Mailbox words per element (2 for ``u64``)."""
        return 2 if self.scalar == "u64" else 1

    @property
    def is_input(self) -> bool:
        """Sent by the host (``in`` / ``inout``)."""
        return self.direction != "out"

    @property
    def is_output(self) -> bool:
        """Returned to the host (``out`` / ``inout``)."""
        return self.direction != "in"

    @property
    def python_name(self) -> str:
        """The snake_case name of generated code."""
        return snake_case(self.name)


@dataclass(frozen=True)
class Mapping:
    """``param <- resource``: ``sysmbox[words]``, ``mbox[tasklets][words]`` or ``dram[offset]``.

    Ranges are inclusive ``(first, last)`` pairs as written."""

    param: str
    kind: Literal["sysmbox", "mbox", "dram"]
    words: tuple[int, int]
    tasklets: tuple[int, int]
    offset: int
    pos: Pos

    @property
    def nr_words(self) -> int:
        """Words per tasklet (mbox) or in all (sysmbox)."""
        return self.words[1] - self.words[0] + 1

    @property
    def nr_tasklets(self) -> int:
        """Tasklets covered (1 unless mbox)."""
        return self.tasklets[1] - self.tasklets[0] + 1

    def word_slots(self) -> list[tuple[int, int]]:
        """Every ``(tasklet, word)`` the mapping covers, tasklet-major (tasklet -1: sysmbox)."""
        if self.kind == "sysmbox":
            return [(-1, w) for w in range(self.words[0], self.words[1] + 1)]
        if self.kind == "mbox":
            return [
                (t, w)
                for t in range(self.tasklets[0], self.tasklets[1] + 1)
                for w in range(self.words[0], self.words[1] + 1)
            ]
        return []


@dataclass(frozen=True)
class Function:
    """A DIDL function: its parameters in order and one mapping per parameter."""

    name: str
    params: tuple[Param, ...]
    mappings: tuple[Mapping, ...]
    pos: Pos

    @property
    def python_name(self) -> str:
        """The snake_case name of the worker method and of its task."""
        return snake_case(self.name)

    @property
    def inputs(self) -> tuple[Param, ...]:
        """Parameters the host sends, in order."""
        return tuple(p for p in self.params if p.is_input)

    @property
    def outputs(self) -> tuple[Param, ...]:
        """Parameters the host gets back, in order."""
        return tuple(p for p in self.params if p.is_output)

    def mapping(self, param: str) -> Mapping:
        """The mapping of ``param``."""
        return next(m for m in self.mappings if m.param == param)


@dataclass(frozen=True)
class Interface:
    """A parsed and checked DIDL file: its name (from the file name) and its functions."""

    name: str
    file: str
    source: str
    functions: tuple[Function, ...]

    def function(self, name: str) -> Function:
        """A function by its DIDL or snake_case name."""
        for f in self.functions:
            if name in (f.name, f.python_name):
                return f
        raise KeyError(name)

    @property
    def class_name(self) -> str:
        """``CharcountInterface`` for ``charcount.didl``."""
        return pascal_case(self.name) + "Interface"


def snake_case(name: str) -> str:
    """``countCharacters`` → ``count_characters`` (``HTTPRequest`` → ``http_request``)."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return s.lower()


def pascal_case(name: str) -> str:
    """``char_count`` / ``charCount`` → ``CharCount``."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+|_", name) if p]
    out = "".join(p[:1].upper() + p[1:] for p in parts) or "Device"
    return out if out[0].isalpha() else "D" + out


# -- parsing ------------------------------------------------------------------------------------
def _describe(expected: set[str] | frozenset[str]) -> str:
    names = sorted({_TERMINALS.get(e, e) for e in expected})
    if not names:
        return "nothing"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _syntax_error(exc: lark.exceptions.UnexpectedInput, text: str, file: str) -> DidlError:
    line, column = exc.line, exc.column
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        at = exc.pos_in_stream or 0
        char = text[at] if at < len(text) else ""
        if text.startswith("/*", at):
            return DidlError("unterminated /* comment", file, line, column, "'*/'")
        expected = _describe(exc.allowed)
        return DidlError(f"unexpected character {char!r}", file, line, column, expected)
    if isinstance(exc, lark.exceptions.UnexpectedEOF):
        expected = _describe(set(exc.expected))
        end_line = text.count("\n") + 1
        end_col = len(text) - (text.rfind("\n") + 1) + 1
        return DidlError("unexpected end of file", file, end_line, end_col, expected)
    assert isinstance(exc, lark.exceptions.UnexpectedToken)
    expected = _describe(exc.accepts or exc.expected)
    tok = exc.token
    if tok.type == "$END":
        end_line = text.count("\n") + 1
        end_col = len(text) - (text.rfind("\n") + 1) + 1
        return DidlError("unexpected end of file", file, end_line, end_col, expected)
    return DidlError(f"unexpected {str(tok)!r}", file, line, column, expected)


def _int(file: str, tok: lark.Token) -> int:
    """The value of an ``INT`` token: decimal or ``0x`` hexadecimal. A decimal number with a
    leading zero is refused (C would read it as octal)."""
    text = str(tok)
    if len(text) > 1 and text[0] == "0" and text[1] not in "xX":
        raise _err(
            f"number {text!r} has a leading zero",
            _pos(file, tok),
            f"a decimal number without leading zeros ({text.lstrip('0') or '0'}) or 0x hexadecimal",
        )
    return int(text, 0)


def _pos(file: str, tok: lark.Token | lark.Tree[lark.Token]) -> Pos:
    if isinstance(tok, lark.Token):
        return Pos(file, tok.line or 0, tok.column or 0)
    return Pos(file, tok.meta.line, tok.meta.column)


def _range(file: str, tree: lark.Tree[lark.Token], what: str) -> tuple[int, int]:
    first_tok, _, last_tok = tree.children
    assert isinstance(first_tok, lark.Token)
    first = _int(file, first_tok)
    if last_tok is None:
        return first, first
    assert isinstance(last_tok, lark.Token)
    last = _int(file, last_tok)
    if last < first:
        raise _err(
            f"empty {what} range {first}..{last}",
            _pos(file, first_tok),
            "a range first..last with first <= last",
        )
    return first, last


def _tokens(tree: lark.Tree[lark.Token]) -> list[lark.Token]:
    return [c for c in tree.children if isinstance(c, lark.Token)]


def _param(file: str, tree: lark.Tree[lark.Token]) -> Param:
    name, _, direction = _tokens(tree)[:3]
    type_tree = tree.children[3]
    assert isinstance(type_tree, lark.Tree)
    scalar_tok, _, length_tok, _ = type_tree.children
    assert isinstance(scalar_tok, lark.Token)
    if str(scalar_tok) not in SCALARS:
        raise _err(
            f"unknown type {str(scalar_tok)!r}", _pos(file, scalar_tok), "u8, u16, u32 or u64"
        )
    length = None
    if isinstance(length_tok, lark.Token):
        length = _int(file, length_tok)
        if length < 1:
            raise _err(f"array {name}[{length}] is empty", _pos(file, length_tok), "a length >= 1")
    d = str(direction)
    assert d in ("in", "out", "inout")
    return Param(str(name), d, str(scalar_tok), length, _pos(file, name))  # type: ignore[arg-type]


def _mapping(file: str, tree: lark.Tree[lark.Token]) -> Mapping:
    name_tok, _, res = tree.children
    assert isinstance(name_tok, lark.Token) and isinstance(res, lark.Tree)
    pos = _pos(file, name_tok)
    ranges = [c for c in res.children if isinstance(c, lark.Tree)]
    if res.data == "sysmbox":
        words = _range(file, ranges[0], "word")
        return Mapping(str(name_tok), "sysmbox", words, (0, 0), 0, pos)
    if res.data == "mbox":
        tasklets = _range(file, ranges[0], "tasklet")
        words = _range(file, ranges[1], "word")
        return Mapping(str(name_tok), "mbox", words, tasklets, 0, pos)
    off_tok = _tokens(res)[2]
    return Mapping(str(name_tok), "dram", (0, 0), (0, 0), _int(file, off_tok), pos)


def parse_didl(text: str, file: str = "<didl>", name: str | None = None) -> Interface:
    """Parse and check DIDL ``text``; ``name`` defaults to the file's stem.

    Raises :class:`DidlError` (with file, line, column and what was expected) on any error."""
    try:
        tree = _PARSER.parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(exc, text, file) from None
    functions: list[Function] = []
    for ftree in tree.children:
        assert isinstance(ftree, lark.Tree)
        name_tok = ftree.children[1]
        assert isinstance(name_tok, lark.Token)
        params = tuple(
            _param(file, c)
            for c in ftree.children
            if isinstance(c, lark.Tree) and c.data == "param"
        )
        mtree = next(c for c in ftree.children if isinstance(c, lark.Tree) and c.data == "mappings")
        mappings = tuple(_mapping(file, c) for c in mtree.children if isinstance(c, lark.Tree))
        functions.append(Function(str(name_tok), params, mappings, _pos(file, name_tok)))
    stem = name if name is not None else Path(file).stem
    iface = Interface(stem, file, text, tuple(functions))
    check_interface(iface)
    return iface


def load_didl(path: str | Path) -> Interface:
    """Parse and check the DIDL file at ``path``."""
    p = Path(path)
    return parse_didl(p.read_text(encoding="utf-8"), str(p))


# -- static checks ------------------------------------------------------------------------------
def _err(message: str, pos: Pos, expected: str = "") -> DidlError:
    return DidlError(message, pos.file, pos.line, pos.column, expected)


#: Names a worker method or argument cannot take (the worker's own attributes, ``self``)
RESERVED = {"function": {"invoke", "function", "dpu_number"}, "parameter": {"self"}}


def _check_python_name(what: str, name: str, pos: Pos) -> None:
    py = snake_case(name)
    if keyword.iskeyword(py) or keyword.issoftkeyword(py) or py.startswith("_"):
        raise _err(f"{what} {name!r} cannot be a Python name ({py!r})", pos, "another name")
    if py in RESERVED[what]:
        raise _err(f"{what} {name!r} is reserved in generated workers", pos, "another name")


def check_interface(iface: Interface) -> None:
    """The checks that need no program: names, types, mappings, sizes, directions, overlaps."""
    seen: dict[str, Function] = {}
    if not iface.functions:
        raise DidlError("no function declared", iface.file, 1, 1, "'function'")
    for f in iface.functions:
        py = f.python_name
        if py in seen:
            raise _err(
                f"function {f.name!r} has the same Python name {py!r} as {seen[py].name!r} "
                f"(line {seen[py].pos.line})",
                f.pos,
                "a unique function name",
            )
        if py == snake_case(MEMORY_COPY):
            raise _err(f"function {f.name!r} clashes with the memory-copy task", f.pos)
        _check_python_name("function", f.name, f.pos)
        seen[py] = f
        _check_function(f)


def _check_function(f: Function) -> None:
    params: dict[str, Param] = {}
    pynames: dict[str, Param] = {}
    for p in f.params:
        if p.name in params or p.python_name in pynames:
            raise _err(f"parameter {p.name!r} is declared twice in {f.name!r}", p.pos)
        _check_python_name("parameter", p.name, p.pos)
        params[p.name] = p
        pynames[p.python_name] = p
    mapped: dict[str, Mapping] = {}
    for m in f.mappings:
        found = params.get(m.param)
        if found is None:
            raise _err(
                f"{m.param!r} is not a parameter of {f.name!r}",
                m.pos,
                _describe_names(params) or "no mapping (the function has no parameter)",
            )
        if m.param in mapped:
            raise _err(
                f"{m.param!r} is mapped twice (first on line {mapped[m.param].pos.line})",
                m.pos,
                "one mapping per parameter",
            )
        mapped[m.param] = m
        _check_mapping(found, m)
    for p in f.params:
        if p.name not in mapped:
            raise _err(
                f"parameter {p.name!r} of {f.name!r} is not mapped",
                f.pos,
                f"a mapping '{p.name} <- ...'",
            )
    _check_overlaps(f)


def _describe_names(params: dict[str, Param]) -> str:
    return " or ".join(repr(n) for n in params)


def _check_mapping(p: Param, m: Mapping) -> None:
    wpe = p.words_per_element
    if m.kind == "sysmbox":
        if p.is_output:
            raise _err(
                f"{p.name!r} is {p.direction}, but the system mailbox only carries host requests",
                m.pos,
                "an 'in' parameter, or mbox[..][..] / dram[..] for results",
            )
        need = p.count * wpe
        if m.nr_words != need:
            raise _err(
                f"{p.name!r} ({p.scalar}{_len(p)}) needs {need} system mailbox word(s), the "
                f"mapping has {m.nr_words}",
                m.pos,
                f"sysmbox[a..b] with {need} word(s)",
            )
    elif m.kind == "mbox":
        if m.nr_words % wpe:
            raise _err(
                f"{p.name!r} is {p.scalar}: each element takes {wpe} words of one tasklet's "
                f"mailbox, the mapping gives {m.nr_words} per tasklet",
                m.pos,
                f"a multiple of {wpe} words per tasklet",
            )
        got = m.nr_tasklets * m.nr_words // wpe
        if got != p.count:
            raise _err(
                f"{p.name!r} ({p.scalar}{_len(p)}) has {p.count} element(s), the mapping "
                f"covers {got} ({m.nr_tasklets} tasklet(s) x {m.nr_words} word(s))",
                m.pos,
                f"mbox[..][..] covering {p.count * wpe} word(s)",
            )
    elif m.offset % MRAM_ALIGN:
        raise _err(
            f"MRAM offset {m.offset:#x} of {p.name!r} is not 8-byte aligned (DPU DMA rule)",
            m.pos,
            "an offset that is a multiple of 8",
        )


def _len(p: Param) -> str:
    return "" if p.length is None else f"[{p.length}]"


def _param_bytes(p: Param) -> int:
    return p.count * p.dtype.itemsize


def _check_overlaps(f: Function) -> None:
    params = {p.name: p for p in f.params}
    for direction in ("in", "out"):
        owners: dict[tuple[int, int], Mapping] = {}
        regions: list[tuple[int, int, Mapping]] = []
        for m in f.mappings:
            p = params[m.param]
            if (direction == "in" and not p.is_input) or (direction == "out" and not p.is_output):
                continue
            for slot in m.word_slots():
                if slot in owners:
                    raise _err(
                        f"{m.param!r} and {owners[slot].param!r} both use "
                        f"{_slot_name(slot)} as {direction}puts",
                        m.pos,
                        "disjoint mailbox words",
                    )
                owners[slot] = m
            if m.kind == "dram":
                end = m.offset + _param_bytes(p)
                for lo, hi, other in regions:
                    if m.offset < hi and lo < end:
                        raise _err(
                            f"MRAM regions of {m.param!r} and {other.param!r} overlap as "
                            f"{direction}puts",
                            m.pos,
                            "disjoint MRAM regions",
                        )
                regions.append((m.offset, end, m))


def _slot_name(slot: tuple[int, int]) -> str:
    t, w = slot
    return f"sysmbox[{w}]" if t < 0 else f"mbox[{t}][{w}]"


# -- checks against a program -------------------------------------------------------------------
#: ``refusal(what, start, end)``: why the host must not write MRAM ``[start, end)``, or None
MramRefusal = Callable[[str, int, int], str | None]


def check_resources(
    iface: Interface,
    layout: MailboxLayout | None,
    mram_size: int,
    program: str = "the program",
    refusal: MramRefusal | None = None,
) -> None:
    """Check every mapping against a program's mailboxes (``layout``), the MRAM size and,
    for inputs, the MRAM the program keeps for itself (``refusal``)."""
    for f in iface.functions:
        params = {p.name: p for p in f.params}
        for m in f.mappings:
            p = params[m.param]
            if m.kind == "dram":
                end = m.offset + _param_bytes(p)
                if end > mram_size:
                    raise _err(
                        f"{m.param!r} ends at MRAM byte {end:#x}, beyond the {mram_size:#x} "
                        "bytes of MRAM",
                        m.pos,
                        "a region inside MRAM",
                    )
                why = refusal(f"input {m.param!r}", m.offset, end) if refusal else None
                if p.is_input and why is not None:
                    raise _err(f"{why} ({program})", m.pos, "an offset in the free MRAM")
                continue
            if layout is None:
                raise _err(
                    f"{m.param!r} is mapped to {m.kind}, but {program} declares no mailboxes",
                    m.pos,
                    "Program.mailboxes(sysmbox=..., mbox=...) in the program",
                )
            if m.kind == "sysmbox":
                if m.words[1] >= layout.sysmbox_words:
                    raise _err(
                        f"sysmbox word {m.words[1]} does not exist: {program} declares "
                        f"sysmbox {layout.sysmbox_words}",
                        m.pos,
                        f"words 0..{layout.sysmbox_words - 1}"
                        if layout.sysmbox_words
                        else "a program with a system mailbox",
                    )
                continue
            if m.tasklets[1] >= layout.nr_tasklets:
                raise _err(
                    f"tasklet {m.tasklets[1]} does not exist: {program} has "
                    f"{layout.nr_tasklets} tasklets",
                    m.pos,
                    f"tasklets 0..{layout.nr_tasklets - 1}",
                )
            for t in range(m.tasklets[0], m.tasklets[1] + 1):
                if m.words[1] >= layout.mbox_words[t]:
                    raise _err(
                        f"mbox word {m.words[1]} of tasklet {t} does not exist: {program} gives "
                        f"tasklet {t} a mailbox of {layout.mbox_words[t]} word(s)",
                        m.pos,
                        f"words 0..{layout.mbox_words[t] - 1}"
                        if layout.mbox_words[t]
                        else "a tasklet with a mailbox",
                    )


__all__ = [
    "MEMORY_COPY",
    "SCALARS",
    "Function",
    "Interface",
    "Mapping",
    "Param",
    "Pos",
    "check_interface",
    "check_resources",
    "load_didl",
    "parse_didl",
    "snake_case",
]
