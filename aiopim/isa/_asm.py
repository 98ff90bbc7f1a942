"""The DPU assembler: toolchain-style assembly text to a DPU ELF executable.

See docs/isa.md for the syntax. Two passes: the first splits lines into statements, places
labels (every instruction is 8 bytes, so layout never depends on operand values) and lays the
sections out in the DPU memories; the second evaluates expressions, picks the signature each
instruction names and encodes it.
"""

from __future__ import annotations

import ast
import re
import struct
from dataclasses import dataclass, field
from typing import Final

from . import _tables as T
from ._codec import FIELD_NAMES, EncodeError, Instruction, encode, signature_index
from ._coreapi import ATOMIC_BASE, IRAM_BIT, MRAM_BIT
from ._expr import Expr, ExprError, parse_expr
from ._text import CONST_NAMES, REGISTER_NAMES
from .elfwriter import (
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    STT_FUNC,
    STT_NOTYPE,
    STT_OBJECT,
    ElfWriter,
)

__all__ = ["AsmError", "Assembly", "assemble", "assemble_program"]

#: default stack of a tasklet when the program sets no ``STACK_SIZE_TASKLET_<i>``
STACK_SIZE_DEFAULT: Final = 1024
MAX_TASKLETS: Final = 24
NOP_WORD: Final = encode(Instruction.make("nop:"))

_LABEL: Final = re.compile(r"\s*([A-Za-z_.$][\w.$]*)\s*:(?=\s|$)")
_ASSIGN: Final = re.compile(r"\s*([A-Za-z_.$][\w.$]*)\s*=(?!=)")
_WORD: Final = re.compile(r"\s*([.A-Za-z_][\w.:$]*)")
#: condition name -> code per map; a name with two codes (z, nz, xz, xnz of the 64-bit set
#: forms) takes the lower one
_COND_BY_MAP: Final = tuple(
    {T.CONDITION_NAMES[n]: c for c, n in reversed(m)} for m in T.CONDITION_MAPS
)
_DATA_SIZES: Final = {
    ".byte": 1,
    ".short": 2,
    ".hword": 2,
    ".2byte": 2,
    ".word": 4,
    ".long": 4,
    ".int": 4,
    ".4byte": 4,
    ".quad": 8,
    ".8byte": 8,
}
_SHORTHAND: Final = {
    ".text": ".text",
    ".data": ".data",
    ".bss": ".bss",
    ".rodata": ".rodata",
    ".mram": ".mram",
    ".atomic": ".atomic",
    ".host": ".data.__sys_host",
}
_IGNORED: Final = (".file", ".ident", ".loc", ".addrsig", ".addrsig_sym", ".cfi_")


class AsmError(ValueError):
    """An assembly error at ``line``/``column`` (1-based; 0 when it concerns the whole file)."""

    def __init__(self, message: str, line: int = 0, column: int = 0, source: str = "<asm>"):
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        where = f"{source}:{line}:{column}" if line else source
        super().__init__(f"{where}: error: {message}")


# ================================================================================================
# statements
# ================================================================================================
@dataclass
class _Arg:
    text: str
    col: int  # 1-based column of the first non-blank character


@dataclass
class _Stmt:
    line: int
    col: int
    name: str  # directive (with the dot) or instruction keyword
    args: list[_Arg]
    section: str = ""
    offset: int = 0  # byte offset in its section


@dataclass
class _Section:
    name: str
    space: str  # IRAM, WRAM, MRAM, ATOMIC
    nobits: bool
    size: int = 0
    align: int = 8
    stmts: list[_Stmt] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    address: int = 0  # space offset (bytes) after layout


def _space_of(name: str) -> str:
    if name.startswith(".text"):
        return "IRAM"
    if name.startswith(".mram"):
        return "MRAM"
    if name.startswith(".atomic"):
        return "ATOMIC"
    return "WRAM"


def _split_args(text: str, col0: int) -> list[_Arg]:
    """Split on top-level commas (not inside parentheses or quotes)."""
    args: list[_Arg] = []
    depth = 0
    quote = ""
    start = 0
    for i, ch in enumerate(text + ","):
        if i == len(text):
            depth, quote = 0, ""  # the end closes whatever is open
        if quote:
            if ch == "\\":
                continue
            if ch == quote and text[i - 1 : i] != "\\":
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            piece = text[start:i]
            stripped = piece.strip()
            lead = len(piece) - len(piece.lstrip())
            args.append(_Arg(stripped, col0 + start + lead))
            start = i + 1
    if len(args) == 1 and not args[0].text:
        return []
    return args


def _statements(line: str) -> list[str]:
    """The ``;``-separated statements of a line, each padded with blanks to keep columns."""
    out: list[str] = []
    start = 0
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = ""
        elif ch == '"':
            quote = ch
        elif ch == ";":
            out.append(" " * start + line[start:i])
            start = i + 1
    out.append(" " * start + line[start:])
    return out


def _strip_comments(lines: list[str]) -> list[str]:
    out: list[str] = []
    in_block = False
    for line in lines:
        buf = []
        i = 0
        quote = ""
        while i < len(line):
            ch = line[i]
            if in_block:
                if line.startswith("*/", i):
                    in_block = False
                    buf.append("  ")
                    i += 2
                else:
                    buf.append(" ")
                    i += 1
                continue
            if quote:
                buf.append(ch)
                if ch == "\\" and i + 1 < len(line):
                    buf.append(line[i + 1])
                    i += 2
                    continue
                if ch == quote:
                    quote = ""
                i += 1
                continue
            if ch in "\"'" and not (ch == "'" and quote == ""):
                quote = ch
            elif ch == "'" and i + 2 < len(line) and line[i + 2] == "'":
                buf.append(line[i : i + 3])
                i += 3
                continue
            if line.startswith("//", i) or (ch == "#" and not line[:i].strip()):
                break
            if line.startswith("/*", i):
                in_block = True
                buf.append("  ")
                i += 2
                continue
            buf.append(ch)
            i += 1
        out.append("".join(buf))
    return out


# ================================================================================================
# the assembler
# ================================================================================================
@dataclass
class Assembly:
    """What :func:`assemble_program` produced: the ELF bytes and the pieces it was built from."""

    elf: bytes
    text: list[int]  # instruction words of .text
    symbols: dict[str, int]  # label/.set name -> ELF address (or absolute value)
    nr_tasklets: int


@dataclass
class _Sym:
    name: str
    section: str | None  # None: absolute (.set)
    offset: int = 0  # byte offset in the section
    expr: Expr | None = None  # .set expression
    stmt: _Stmt | None = None
    value: int | None = None  # resolved absolute value
    bind: int = STB_LOCAL
    type: int = STT_NOTYPE
    size: int = 0


class _Assembler:
    def __init__(self, text: str, chip: str, source: str) -> None:
        if chip not in T.CHIPS:
            raise ValueError(f"chip must be one of {sorted(T.CHIPS)}, not {chip!r}")
        self.chip = chip
        self.source = source
        self.lines = _strip_comments([line.removesuffix("\r") for line in text.split("\n")])
        self.sections: dict[str, _Section] = {}
        self.symbols: dict[str, _Sym] = {}
        self.globals: dict[str, _Stmt] = {}
        self.weak: set[str] = set()
        self.types: dict[str, int] = {}
        self.sizes: list[_Stmt] = []
        self.current = self._section(".text", 1, 1)
        self._resolving: set[str] = set()

    # -- errors -----------------------------------------------------------------------------------
    def err(self, message: str, line: int = 0, col: int = 0) -> AsmError:
        return AsmError(message, line, col, self.source)

    # -- pass 1 -----------------------------------------------------------------------------------
    def _section(self, name: str, line: int, col: int) -> _Section:
        sec = self.sections.get(name)
        if sec is None:
            space = _space_of(name)
            nobits = name.startswith((".bss", ".mram.noinit"))
            sec = self.sections[name] = _Section(name, space, nobits)
        return sec

    def _define(self, name: str, line: int, col: int) -> None:
        if name in self.symbols or name in REGISTER_NAMES:
            what = "a register name" if name in REGISTER_NAMES else "already defined"
            raise self.err(f"symbol {name!r} is {what}", line, col)
        sec = self.current
        self.symbols[name] = _Sym(name, sec.name, sec.size)

    def pass1(self) -> None:
        for n, full in enumerate(self.lines, start=1):
            for line in _statements(full):
                self._line(n, line)

    def _line(self, n: int, line: str) -> None:
        pos = 0
        while True:
            m = _LABEL.match(line, pos)
            if m is None:
                break
            self._define(m.group(1), n, m.start(1) + 1)
            pos = m.end()
        rest = line[pos:]
        if not rest.strip():
            return
        m = _ASSIGN.match(line, pos)
        if m is not None:
            arg_text = line[m.end() :]
            args = [_Arg(m.group(1), m.start(1) + 1)]
            args += _split_args(arg_text, m.end() + 1)
            self._directive(_Stmt(n, m.start(1) + 1, ".set", args))
            return
        m = _WORD.match(line, pos)
        if m is None:
            col = pos + len(rest) - len(rest.lstrip()) + 1
            raise self.err(f"unexpected {rest.strip()[:20]!r}", n, col)
        name = m.group(1)
        stmt = _Stmt(n, m.start(1) + 1, name, _split_args(line[m.end() :], m.end() + 1))
        if name.startswith(".") and not self._is_keyword(name):
            self._directive(stmt)
        else:
            self._instruction(stmt)

    @staticmethod
    def _is_keyword(name: str) -> bool:
        return name.split(":")[0] in _CANDIDATES

    def _instruction(self, stmt: _Stmt) -> None:
        sec = self.current
        if sec.space != "IRAM":
            raise self.err(
                f"instruction {stmt.name!r} outside a .text section", stmt.line, stmt.col
            )
        if stmt.name not in _CANDIDATES and stmt.name not in _SIG_NAMES:
            raise self.err(f"unknown instruction {stmt.name!r}", stmt.line, stmt.col)
        stmt.section, stmt.offset = sec.name, sec.size
        sec.stmts.append(stmt)
        sec.size += 8

    def _need(self, stmt: _Stmt, lo: int, hi: int) -> None:
        if not lo <= len(stmt.args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.err(
                f"{stmt.name} takes {want} operands, got {len(stmt.args)}", stmt.line, stmt.col
            )

    def _const(self, stmt: _Stmt, arg: _Arg) -> int:
        """An expression that must be known during pass 1 (sizes, alignments)."""
        expr = self._parse(arg, stmt)
        return self._eval(expr, arg, stmt, early=True)

    def _directive(self, stmt: _Stmt) -> None:
        d = stmt.name
        sec = self.current
        stmt.section, stmt.offset = sec.name, sec.size
        if d in _SHORTHAND:
            self._need(stmt, 0, 0)
            self.current = self._section(_SHORTHAND[d], stmt.line, stmt.col)
        elif d in (".section", ".pushsection"):
            if not stmt.args:
                raise self.err(".section needs a name", stmt.line, stmt.col)
            name = stmt.args[0].text.strip('"')
            if not re.fullmatch(r"[.\w$]+", name):
                raise self.err(f"bad section name {name!r}", stmt.line, stmt.args[0].col)
            self.current = self._section(name, stmt.line, stmt.col)
        elif d in (".globl", ".global", ".weak", ".local"):
            if not stmt.args:
                raise self.err(f"{d} needs a symbol", stmt.line, stmt.col)
            for a in stmt.args:
                if d == ".local":
                    self.globals.pop(a.text, None)
                else:
                    self.globals[a.text] = stmt
                if d == ".weak":
                    self.weak.add(a.text)
        elif d in (".set", ".equ"):
            self._need(stmt, 2, 2)
            name = stmt.args[0].text
            if not re.fullmatch(r"[A-Za-z_.$][\w.$]*", name) or name in REGISTER_NAMES:
                raise self.err(f"bad symbol name {name!r}", stmt.line, stmt.args[0].col)
            if name in self.symbols:
                raise self.err(f"symbol {name!r} is already defined", stmt.line, stmt.args[0].col)
            expr = self._parse(stmt.args[1], stmt)
            self.symbols[name] = _Sym(name, None, expr=expr, stmt=stmt)
        elif d == ".type":
            self._need(stmt, 2, 2)
            kind = stmt.args[1].text.lstrip("@%").lower()
            types = {"function": STT_FUNC, "object": STT_OBJECT, "notype": STT_NOTYPE}
            if kind not in types:
                raise self.err(f"unknown symbol type {kind!r}", stmt.line, stmt.args[1].col)
            self.types[stmt.args[0].text] = types[kind]
        elif d == ".size":
            self._need(stmt, 2, 2)
            self._parse(stmt.args[1], stmt)
            self.sizes.append(stmt)
        elif d in (".balign", ".p2align", ".align"):
            self._need(stmt, 1, 3)
            n = self._const(stmt, stmt.args[0])
            align = n if d == ".balign" else 1 << n if 0 <= n < 32 else -1
            if align <= 0 or align & (align - 1):
                raise self.err(f"alignment {n} is not a power of 2", stmt.line, stmt.args[0].col)
            if sec.space == "IRAM" and align < 8:
                align = 8
            pad = -sec.size % align
            sec.align = max(sec.align, align)
            stmt.args = stmt.args[1:2]
            self._reserve(stmt, pad)
        elif d in (".zero", ".space", ".skip"):
            self._need(stmt, 1, 2)
            n = self._const(stmt, stmt.args[0])
            if n < 0:
                raise self.err(f"negative size {n}", stmt.line, stmt.args[0].col)
            stmt.args = stmt.args[1:]
            self._reserve(stmt, n)
        elif d in _DATA_SIZES or d in (".ascii", ".asciz", ".string"):
            if sec.space == "IRAM":
                raise self.err(
                    f"{d} is not allowed in {sec.name} (instructions only)", stmt.line, stmt.col
                )
            if sec.nobits:
                raise self.err(
                    f"initialised data in NOBITS section {sec.name}", stmt.line, stmt.col
                )
            if not stmt.args:
                raise self.err(f"{d} needs operands", stmt.line, stmt.col)
            if d in _DATA_SIZES:
                for a in stmt.args:
                    self._parse(a, stmt)
                size = _DATA_SIZES[d] * len(stmt.args)
            else:
                size = sum(len(self._string(a, stmt)) for a in stmt.args)
                if d != ".ascii":
                    size += len(stmt.args)
            sec.stmts.append(stmt)
            sec.size += size
        elif d.startswith(_IGNORED):
            pass
        else:
            raise self.err(f"unknown directive {d!r}", stmt.line, stmt.col)

    def _reserve(self, stmt: _Stmt, n: int) -> None:
        sec = self.current
        if stmt.args and sec.nobits:
            raise self.err(f"fill value in NOBITS section {sec.name}", stmt.line, stmt.args[0].col)
        if sec.space == "IRAM" and n % 8:
            raise self.err(f"{n} bytes is not a whole number of instructions", stmt.line, stmt.col)
        stmt.name = ".fill"
        stmt.offset = sec.size
        stmt.args = [_Arg(str(n), stmt.col), *stmt.args]
        sec.stmts.append(stmt)
        sec.size += n

    def _string(self, arg: _Arg, stmt: _Stmt) -> bytes:
        text = arg.text
        if len(text) < 2 or text[0] != '"' or text[-1] != '"':
            raise self.err("string literal expected", stmt.line, arg.col)
        try:
            value = ast.literal_eval("b" + text)
        except (SyntaxError, ValueError) as exc:
            raise self.err(f"bad string literal ({exc})", stmt.line, arg.col) from None
        assert isinstance(value, bytes)
        return value

    def _parse(self, arg: _Arg, stmt: _Stmt) -> Expr:
        if not arg.text:
            raise self.err("missing operand", stmt.line, arg.col)
        try:
            return parse_expr(arg.text)
        except ExprError as exc:
            raise self.err(str(exc), stmt.line, arg.col + exc.offset) from None

    # -- symbols ----------------------------------------------------------------------------------
    def _eval(self, expr: Expr, arg: _Arg, stmt: _Stmt, *, early: bool = False) -> int:
        for name in expr.symbols():
            if name in REGISTER_NAMES:
                raise self.err(f"register {name} in an expression", stmt.line, arg.col)

        def lookup(name: str) -> int:
            return self._value(name, early=early)

        dot = self._dot(stmt)
        try:
            return expr.eval(lookup, dot)
        except ExprError as exc:
            raise self.err(str(exc), stmt.line, arg.col + exc.offset) from None

    def _dot(self, stmt: _Stmt) -> int:
        sec = self.sections.get(stmt.section)
        if sec is None:
            return 0
        off = sec.address + stmt.offset
        return off // 8 if sec.space == "IRAM" else off

    def _value(self, name: str, *, early: bool = False) -> int:
        """Value of a symbol in expressions: the space offset (instruction index in IRAM)."""
        sym = self.symbols.get(name)
        if sym is None:
            if not early and name in self.runtime_values:
                return self.runtime_values[name]
            raise KeyError(name)
        if sym.section is None:
            if sym.value is None:
                if name in self._resolving:
                    line, col = (sym.stmt.line, sym.stmt.col) if sym.stmt else (0, 0)
                    raise self.err(f"symbol {name!r} is defined in terms of itself", line, col)
                self._resolving.add(name)
                assert sym.expr is not None and sym.stmt is not None
                sym.value = self._eval(sym.expr, sym.stmt.args[1], sym.stmt, early=early)
                self._resolving.discard(name)
            return sym.value
        if early:
            raise KeyError(name)  # section addresses are not known yet
        sec = self.sections[sym.section]
        off = sec.address + sym.offset
        return off // 8 if sec.space == "IRAM" else off

    def _address(self, sym: _Sym) -> int:
        """ELF address of a label."""
        assert sym.section is not None
        sec = self.sections[sym.section]
        base = {"IRAM": IRAM_BIT, "WRAM": 0, "MRAM": MRAM_BIT, "ATOMIC": ATOMIC_BASE}[sec.space]
        return base + sec.address + sym.offset

    def _abs(self, name: str, default: int) -> int:
        sym = self.symbols.get(name)
        if sym is None:
            return default
        if sym.section is not None or sym.stmt is None:
            raise self.err(f"{name} must be an absolute value (.set {name}, N)")
        try:
            return self._value(name, early=True)
        except KeyError:
            raise self.err(
                f"{name} must be a constant expression", sym.stmt.line, sym.stmt.col
            ) from None

    # -- layout -----------------------------------------------------------------------------------
    def _used(self, sec: _Section) -> bool:
        """A section is written to the ELF if it has contents or labels."""
        return sec.size > 0 or any(s.section == sec.name for s in self.symbols.values())

    def _runtime(self) -> None:
        """The sections and symbols the SDK's linker script adds (stacks, stack table…)."""
        nr = self._abs("NR_TASKLETS", 1)
        threads = T.CHIPS[self.chip][0]
        if not 1 <= nr <= threads:
            raise self.err(f"NR_TASKLETS={nr}: the {self.chip} DPU has 1 to {threads} threads")
        self.nr = nr
        default = self._abs("STACK_SIZE_DEFAULT", STACK_SIZE_DEFAULT)
        self.stack_sizes = []
        for i in range(MAX_TASKLETS):
            size = self._abs(f"STACK_SIZE_TASKLET_{i}", default if i < nr else 0)
            if size < 0 or size % 8 or (i < nr and size == 0):
                raise self.err(f"STACK_SIZE_TASKLET_{i}={size}: must be a positive multiple of 8")
            self.stack_sizes.append(size)

    def layout(self) -> None:
        self._runtime()
        order = {"IRAM": [], "WRAM": [], "MRAM": [], "ATOMIC": []}  # type: dict[str, list[_Section]]

        def rank(s: _Section) -> int:
            n = s.name
            if s.space == "WRAM":
                if n == ".data":
                    return 0
                if n == ".data.__sys_host":
                    return 4
                if n.startswith(".bss"):
                    return 3
                if n.startswith(".rodata"):
                    return 2
                return 1
            if s.space == "MRAM":
                return 1 if n.startswith(".mram.noinit") else 2
            return 0 if n == ".text.__bootstrap" else 1  # the bootstrap is IRAM index 0

        for sec in sorted(self.sections.values(), key=rank):  # stable: first use order
            order[sec.space].append(sec)
        # WRAM starts with the reserved zero word, like the SDK's __sys_zero
        ends: dict[str, int] = {"IRAM": 0, "WRAM": 8, "MRAM": 0, "ATOMIC": 0}
        for space, secs in order.items():
            addr = ends[space]
            for sec in secs:
                if not self._used(sec):
                    continue
                align = 8 if space == "IRAM" else sec.align if space != "ATOMIC" else 1
                addr = (addr + align - 1) // align * align
                sec.address = addr
                addr += sec.size
            ends[space] = addr
        # stack table, stacks, software cache, heap
        wram = (ends["WRAM"] + 7) & ~7
        self.table_addr = wram
        wram += 8 * self.nr
        self.stacks_addr = wram
        self.stack_bases = []
        for i in range(self.nr):
            self.stack_bases.append(wram)
            wram += self.stack_sizes[i]
        self.cache_addr = wram
        wram += 8 * self.nr
        self.heap_addr = wram
        self.mram_end = (ends["MRAM"] + 7) & ~7
        self.iram_end = ends["IRAM"]
        self.runtime_syms: list[tuple[str, int, int, str, int]] = [
            ("__sys_zero", 0, 8, ".data", STT_OBJECT),
            (
                "__sys_thread_stack_table_ptr",
                self.table_addr,
                8 * self.nr,
                ".data.__sys_thread_stack_table",
                STT_OBJECT,
            ),
            ("__sw_cache_buffer", self.cache_addr, 8 * self.nr, ".data.sw_cache", STT_OBJECT),
            ("__sys_heap_pointer_reset", self.heap_addr, 0, ".data.sw_cache", STT_NOTYPE),
        ]
        for i in range(self.nr):
            self.runtime_syms.append(
                (
                    f"__sys_stack_thread_{i}",
                    self.stack_bases[i],
                    self.stack_sizes[i],
                    ".data.stacks",
                    STT_OBJECT,
                )
            )
        mram_secs = [s for s in self.sections.values() if s.space == "MRAM" and self._used(s)]
        mram_name = max(mram_secs, key=lambda s: s.address).name if mram_secs else ".mram.noinit"
        self.runtime_syms.append(
            ("__sys_used_mram_end", MRAM_BIT + self.mram_end, 0, mram_name, STT_NOTYPE)
        )
        self.runtime_values = {name: addr & ~MRAM_BIT for name, addr, *_ in self.runtime_syms}
        self.runtime_values["NR_TASKLETS"] = self.nr
        for i in range(MAX_TASKLETS):
            self.runtime_values[f"STACK_SIZE_TASKLET_{i}"] = self.stack_sizes[i]
        _threads, iram_insns, wram_bytes, _mhz, _mutexes = T.CHIPS[self.chip]
        if self.iram_end > 8 * iram_insns:
            raise self.err(
                f"{self.iram_end // 8} instructions do not fit the {self.chip} IRAM "
                f"({iram_insns} instructions)"
            )
        if self.heap_addr > wram_bytes:
            raise self.err(
                f"WRAM data and stacks need {self.heap_addr} bytes; the {self.chip} WRAM has "
                f"{wram_bytes}"
            )
        if ends["MRAM"] > T.MRAM_BYTES:
            raise self.err(f"MRAM sections need {ends['MRAM']} bytes; MRAM has {T.MRAM_BYTES}")
        if ends["ATOMIC"] > T.ATOMIC_BITS:
            raise self.err(f".atomic needs {ends['ATOMIC']} bits; the DPU has {T.ATOMIC_BITS}")

    # -- pass 2 -----------------------------------------------------------------------------------
    def pass2(self) -> None:
        for sec in self.sections.values():
            buf = bytearray(sec.size)
            for stmt in sec.stmts:
                if sec.space == "IRAM" and stmt.name != ".fill":
                    word = self._encode(stmt)
                    struct.pack_into("<Q", buf, stmt.offset, word)
                elif stmt.name == ".fill":
                    n = int(stmt.args[0].text)
                    fill = 0
                    if len(stmt.args) > 1:
                        fill = self._eval(self._parse(stmt.args[1], stmt), stmt.args[1], stmt)
                    if sec.space == "IRAM":
                        for k in range(0, n, 8):
                            struct.pack_into("<Q", buf, stmt.offset + k, NOP_WORD)
                    elif not sec.nobits:
                        buf[stmt.offset : stmt.offset + n] = bytes([fill & 0xFF]) * n
                else:
                    self._data(stmt, buf)
            sec.data = buf

    def _data(self, stmt: _Stmt, buf: bytearray) -> None:
        pos = stmt.offset
        if stmt.name in _DATA_SIZES:
            size = _DATA_SIZES[stmt.name]
            for a in stmt.args:
                v = self._eval(self._parse(a, stmt), a, stmt)
                if not -(1 << (8 * size - 1)) <= v < (1 << (8 * size)):
                    raise self.err(f"{v} does not fit {size} bytes", stmt.line, a.col)
                buf[pos : pos + size] = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
                pos += size
            return
        for a in stmt.args:
            s = self._string(a, stmt)
            if stmt.name != ".ascii":
                s += b"\0"
            buf[pos : pos + len(s)] = s
            pos += len(s)

    def _encode(self, stmt: _Stmt) -> int:
        name = stmt.name
        if name in _SIG_NAMES:
            candidates: list[tuple[bool, int]] = [(False, signature_index(name))]
        else:
            candidates = _CANDIDATES[name]
        #: (operand reached, whether the reason is about the operand's own kind, why, column)
        reasons: list[tuple[int, bool, str, int]] = []
        for is_sugar, idx in candidates:
            ops = T.SUGARS[idx][6] if is_sugar else T.SIG_OPERANDS[idx]
            if len(ops) != len(stmt.args):
                continue
            raw: dict[str, int] = {}
            failed = False
            for k, (op, arg) in enumerate(zip(ops, stmt.args, strict=True)):
                result = self._operand(op, arg, stmt)
                if isinstance(result, str):
                    reasons.append((k, result != _NOT_A_VALUE, result, arg.col))
                    failed = True
                    break
                if op[2] >= 0:
                    raw[FIELD_NAMES[op[2]]] = result
            if failed:
                continue
            if is_sugar:
                target = T.SUGARS[idx][2]
                for fid, value in T.SUGARS[idx][5]:
                    raw[FIELD_NAMES[fid]] = value
            else:
                target = idx
            try:
                return encode(Instruction.make(target, **raw))
            except EncodeError as exc:
                reasons.append((len(ops), True, str(exc).split(": ", 1)[-1], stmt.col))
        if not reasons:
            counts = sorted(
                {len(T.SUGARS[i][6] if s else T.SIG_OPERANDS[i]) for s, i in candidates}
            )
            raise self.err(
                f"{name} takes {' or '.join(map(str, counts))} operands, got {len(stmt.args)}",
                stmt.line,
                stmt.col,
            )
        # the form that got furthest; at a tie, a register operand's reason for a register
        # rather than "a value expected" from the immediate form of the same keyword
        _k, _own, why, col = max(reasons, key=lambda r: r[:2])
        raise self.err(f"{name}: {why}", stmt.line, col)

    def _operand(self, op: T.OperandRow, arg: _Arg, stmt: _Stmt) -> int | str:
        """Raw field value of ``arg`` for operand descriptor ``op``, or why it does not fit."""
        _n, kind, _fid, bits, signed, ro, pair, safe, cmap, implicit, const = op
        text = arg.text
        if kind == T.KIND_CONST_REG:
            return 0 if text == _CONST_BY_CODE[const] else f"{_CONST_BY_CODE[const]} expected"
        if kind == T.KIND_ENDIAN:
            return {"!little": 0, "!big": 1}.get(text, "!little or !big expected")
        if kind == T.KIND_COND:
            names = _COND_BY_MAP[cmap]
            cond = text[1:] if text.startswith("?") else text
            if implicit >= 0:
                return 0 if cond == "false" else "false expected"
            if cond in names:
                return names[cond]
            known = ", ".join(sorted(names, key=names.__getitem__))
            return f"condition {text!r} is not one of {known}"
        if kind == T.KIND_REG:
            return self._register(text, bool(pair), bool(safe), bool(ro))
        if not text or text in REGISTER_NAMES or text.startswith(("!", "?")):
            return _NOT_A_VALUE
        v = self._eval(self._parse(arg, stmt), arg, stmt)
        if kind == T.KIND_PC:
            if not 0 <= v < (1 << bits):
                return f"target {v} out of range (0 to {(1 << bits) - 1})"
            return v
        lo = -(1 << (bits - 1))
        if not lo <= v < (1 << bits):
            kind_s = "signed" if signed else "unsigned"
            return f"{v} does not fit a {bits}-bit {kind_s} immediate"
        return v & ((1 << bits) - 1)

    @staticmethod
    def _register(text: str, pair: bool, safe: bool, ro: bool) -> int | str:
        if text in CONST_NAMES:
            if pair:
                return f"{text} is not a register pair"
            return CONST_NAMES[text] if ro else f"{text} is read-only here"
        m = re.fullmatch(r"([rds])(\d+)", text)
        if m is None or int(m.group(2)) > 23:
            return f"{'pair' if pair else 'register'} expected, got {text!r}"
        letter, n = m.group(1), int(m.group(2))
        want = "d" if pair else "s" if safe else "r"
        if pair and (letter != "d" or n % 2):
            return f"{text} is not a register pair: the pairs are {_PAIRS}"
        if letter != want:
            names = {"s": "a safe register s0..s23", "r": "r0..r23"}
            return f"{names[want]} expected, got {text!r}"
        return n

    # -- output -----------------------------------------------------------------------------------
    def _symbol_sizes(self) -> dict[str, int]:
        """``st_size`` of the program's labels: ``.size`` (bytes; instructions in ``.text``), or
        for data labels the distance to the next label of their section (or its end)."""
        sizes: dict[str, int] = {}
        for stmt in self.sizes:
            name = stmt.args[0].text
            if name not in self.symbols:
                raise self.err(f".size of undefined symbol {name!r}", stmt.line, stmt.args[0].col)
            v = self._eval(self._parse(stmt.args[1], stmt), stmt.args[1], stmt)
            home = self.sections.get(self.symbols[name].section or "")
            size = v * 8 if home is not None and home.space == "IRAM" else v
            if not 0 <= size <= 0xFFFFFFFF:
                raise self.err(
                    f".size {v} of {name!r} is out of range: a symbol's size is 0 to "
                    "4294967295 bytes",
                    stmt.line,
                    stmt.args[1].col,
                )
            sizes[name] = size
        # data labels without .size extend to the next label of their section (or its end)
        by_section: dict[str, list[int]] = {}
        for sym in self.symbols.values():
            if sym.section is not None:
                by_section.setdefault(sym.section, []).append(sym.offset)
        for sym in self.symbols.values():
            home = self.sections.get(sym.section or "")
            if home is None or home.space == "IRAM" or sym.name in sizes:
                continue
            later = [o for o in by_section[home.name] if o > sym.offset]
            sizes[sym.name] = min(later, default=home.size) - sym.offset
        return sizes

    def elf(self) -> Assembly:
        w = ElfWriter(chip=self.chip)
        text_words: list[int] = []
        placed: dict[str, str] = {}  # our section -> ELF section
        iram = [s for s in self.sections.values() if s.space == "IRAM"]
        blob = bytearray()
        for sec in sorted(iram, key=lambda s: s.address):
            blob += b"\0" * (sec.address - len(blob)) + sec.data
            placed[sec.name] = ".text"
        if iram:
            w.progbits(".text", IRAM_BIT, bytes(blob), SHF_ALLOC | SHF_EXECINSTR)
            text_words = list(struct.unpack(f"<{len(blob) // 8}Q", bytes(blob)))
        if ".data" not in self.sections:
            w.progbits(".data", 0, b"\0" * 8)  # the reserved zero word alone
        for sec in sorted(self.sections.values(), key=lambda s: (s.space, s.address)):
            if sec.space == "IRAM" or not (self._used(sec) or sec.name == ".data"):
                continue
            base = {"WRAM": 0, "MRAM": MRAM_BIT, "ATOMIC": ATOMIC_BASE}[sec.space]
            addr, data = base + sec.address, bytes(sec.data)
            if sec.name == ".data":  # starts at 0 with the reserved zero word
                addr, data = 0, bytes(sec.address) + data
            if sec.nobits:
                w.nobits(sec.name, addr, sec.size)
            else:
                w.progbits(sec.name, addr, data, SHF_ALLOC | SHF_WRITE)
            placed[sec.name] = sec.name
        # runtime pieces
        if not any(s.space == "MRAM" and self._used(s) for s in self.sections.values()):
            w.nobits(".mram.noinit", MRAM_BIT, 0)
        table = b"".join(
            struct.pack("<II", self.stack_sizes[i], self.stack_bases[i]) for i in range(self.nr)
        )
        w.progbits(".data.__sys_thread_stack_table", self.table_addr, table)
        w.nobits(".data.stacks", self.stacks_addr, self.cache_addr - self.stacks_addr)
        w.nobits(".data.sw_cache", self.cache_addr, 8 * self.nr)
        runtime = self.runtime_syms
        addresses: dict[str, int] = {}
        for name, addr, size, section, typ in runtime:
            if name not in self.symbols:
                w.symbol(name, addr, size, section=section, bind=STB_GLOBAL, type=typ)
                addresses[name] = addr
        abs_values = {"NR_TASKLETS": self.nr}
        for i in range(MAX_TASKLETS):
            abs_values[f"STACK_SIZE_TASKLET_{i}"] = self.stack_sizes[i]
        for name, value in abs_values.items():
            if name not in self.symbols:
                w.symbol(name, value, 0, section="ABS", bind=STB_GLOBAL, type=STT_NOTYPE)
                addresses[name] = value
        sizes = self._symbol_sizes()
        for name, stmt in self.globals.items():
            if name not in self.symbols:
                raise self.err(f"global symbol {name!r} is not defined", stmt.line, stmt.col)
        for sym in self.symbols.values():
            if sym.name.startswith(".L"):
                continue
            bind = (
                STB_WEAK
                if sym.name in self.weak
                else STB_GLOBAL
                if sym.name in self.globals
                else STB_LOCAL
            )
            typ = self.types.get(sym.name, STT_NOTYPE)
            size = sizes.get(sym.name, 0)
            if sym.section is None:
                value = self._value(sym.name)
                w.symbol(sym.name, value & 0xFFFFFFFF, size, section="ABS", bind=bind, type=typ)
                addresses[sym.name] = value
            else:
                addr = self._address(sym)
                w.symbol(sym.name, addr, size, section=placed[sym.section], bind=bind, type=typ)
                addresses[sym.name] = addr
        return Assembly(w.to_bytes(), text_words, addresses, self.nr)


_CONST_BY_CODE: Final = {code: name for name, code in T.CONSTANT_REGISTERS}
_NOT_A_VALUE: Final = "a value expected"
#: the register pairs: dN is rN and rN+1, N even
_PAIRS: Final = ", ".join(f"d{n}" for n in range(0, 24, 2))
_SIG_NAMES: Final = frozenset(f"{k}:{f}" for k, f in zip(T.SIG_KEYWORD, T.SIG_FORM, strict=True))


def _build_candidates() -> dict[str, list[tuple[bool, int]]]:
    out: dict[str, list[tuple[bool, int]]] = {}
    for i, kw in enumerate(T.SIG_KEYWORD):
        out.setdefault(kw, []).append((False, i))
    for i, row in enumerate(T.SUGARS):
        out.setdefault(row[0], []).append((True, i))
    return out


#: keyword -> (is alias, index) in trial order: the keyword's own signatures, then aliases
_CANDIDATES: Final = _build_candidates()


def assemble_program(text: str, chip: str = "v1B", *, source: str = "<asm>") -> Assembly:
    """Assemble ``text``; the :class:`Assembly` holds the ELF and the words and symbols."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    a = _Assembler(text, chip, source)
    a.pass1()
    a.layout()
    a.pass2()
    return a.elf()


def assemble(text: str, chip: str = "v1B", *, source: str = "<asm>") -> bytes:
    """Assemble toolchain-syntax DPU assembly into a DPU ELF executable (bytes) for ``chip``
    (``"v1B"`` or ``"v1A"``); :class:`AsmError` gives the line and column of a mistake."""
    return assemble_program(text, chip, source=source).elf
