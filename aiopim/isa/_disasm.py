"""Disassembly: re-assemblable source for a list of words, and an objdump-like ELF listing."""

from __future__ import annotations

import argparse
import bisect
import operator
import os
import struct
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..elf import ElfProgram, load_elf
from ._asm import AsmError, assemble
from ._codec import decode
from ._coreapi import IRAM_BIT
from ._text import format_instruction

__all__ = ["disassemble", "format_listing", "main_asm", "main_disasm", "text_words"]


class _Labels:
    """Jump-target names: the nearest text symbol at or before an instruction index."""

    def __init__(self, labels: Mapping[int, str], count: int) -> None:
        self.index = sorted(labels)
        self.names = [labels[i] for i in self.index]
        self.count = count

    def __call__(self, pc: int) -> str | None:
        if pc >= self.count:
            return None
        k = bisect.bisect_right(self.index, pc) - 1
        if k < 0:
            return None
        off = pc - self.index[k]
        return self.names[k] if off == 0 else f"{self.names[k]}+{off}"


def _text_labels(program: ElfProgram) -> dict[int, str]:
    """Instruction index -> symbol name (globals before locals, then by name)."""
    out: dict[int, str] = {}
    syms = [s for s in program.all_symbols() if s.defined and s.section != "ABS"]
    syms.sort(key=lambda s: (s.bind == "LOCAL", s.type != "FUNC", s.name))
    for s in syms:
        if IRAM_BIT <= s.address < 0xF0000000 and (s.address - IRAM_BIT) % 8 == 0:
            out.setdefault((s.address - IRAM_BIT) // 8, s.name)
    return out


def text_words(data: bytes, program: ElfProgram | None = None) -> list[int]:
    """The instruction words of the ``.text`` section of DPU ELF ``data``."""
    prog = program if program is not None else load_elf(data)
    for sec in prog.sections():
        if sec.name == ".text" and not sec.nobits:
            raw = data[sec.offset : sec.offset + sec.size - sec.size % 8]
            return list(struct.unpack(f"<{len(raw) // 8}Q", raw))
    return []


def disassemble(words: Sequence[int], labels: Mapping[int, str] | None = None) -> str:
    """Assembly source for ``words`` (instruction ``i`` at index ``i``): labels on their own
    lines, jump targets as ``label+offset``; undecodable or illegal words as ``.quad``
    comments would not re-assemble, so they raise ``ValueError``."""
    names = dict(labels or {})
    resolve = _Labels(names, len(words))
    out: list[str] = []
    for i, item in enumerate(words):
        try:
            w = operator.index(item)
        except TypeError:
            raise TypeError(f"words must be integers, got {type(item).__name__}") from None
        if i in names:
            out.append(f"{names[i]}:")
        ins = decode(w & ((1 << 48) - 1)) if w >> 48 == 0 else None
        if ins is None or ins.illegal:
            raise ValueError(f"word {i} ({w:#014x}) is not a legal instruction")
        out.append("    " + format_instruction(ins, resolve=resolve))
    return "\n".join(out) + "\n"


def format_listing(source: str | os.PathLike[str] | bytes) -> str:
    """objdump-like listing of a DPU ELF's ``.text``: symbols as labels, then per instruction
    its IRAM address, the 48-bit word and its text (jump targets as ``symbol+offset``)."""
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    program = load_elf(data)
    words = text_words(data, program)
    labels = _text_labels(program)
    resolve = _Labels(labels, len(words))
    name = "<memory>" if isinstance(source, bytes) else str(source)
    lines = [
        f"{name}:     file format elf32-dpu ({program.chip or 'any chip'})",
        "",
        "Disassembly of section .text:",
    ]
    for i, w in enumerate(words):
        addr = IRAM_BIT + 8 * i
        if i in labels:
            lines += ["", f"{addr:08x} <{labels[i]}>:"]
        ins = decode(w) if w >> 48 == 0 else None
        if ins is None:
            text = "(undecodable)"
        else:
            text = format_instruction(ins, resolve=resolve)
            if ins.illegal:
                text += f"    // illegal: {ins.illegal}"
        lines.append(f"{addr:8x}:  {w:012x}    {text}")
    return "\n".join(lines) + "\n"


def main_disasm(argv: Sequence[str] | None = None) -> int:
    """``aiopim disasm FILE``."""
    ap = argparse.ArgumentParser(
        prog="aiopim disasm", description="Disassemble the .text of a DPU ELF binary."
    )
    ap.add_argument("file", help="DPU ELF binary")
    ap.add_argument(
        "--source",
        action="store_true",
        help="print the instructions as assembly source (labels, no addresses) that "
        "`aiopim asm` turns back into the same words",
    )
    args = ap.parse_args(None if argv is None else list(argv))
    from .. import DpuError

    try:
        if args.source:
            data = Path(args.file).read_bytes()
            program = load_elf(data)
            print(disassemble(text_words(data, program), _text_labels(program)), end="")
        else:
            print(format_listing(args.file), end="")
    except ValueError as err:
        print(f"aiopim disasm: {args.file}: {err}", file=sys.stderr)
        return 1
    except DpuError as err:
        print(f"{err.code.name}: {err.detail}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"aiopim disasm: {args.file}: {err.strerror or err}", file=sys.stderr)
        return 2
    return 0


def main_asm(argv: Sequence[str] | None = None) -> int:
    """``aiopim asm FILE.S -o FILE [--chip v1A|v1B]``."""
    ap = argparse.ArgumentParser(
        prog="aiopim asm", description="Assemble DPU assembly into a DPU ELF binary."
    )
    ap.add_argument("file", help="assembly source (.S)")
    ap.add_argument("-o", "--output", required=True, help="output DPU ELF")
    ap.add_argument(
        "--chip", choices=["v1A", "v1B"], default="v1B", help="DPU chip version (default: v1B)"
    )
    args = ap.parse_args(None if argv is None else list(argv))
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        print(f"aiopim asm: {args.file}: {reason}", file=sys.stderr)
        return 2
    try:
        elf = assemble(text, args.chip, source=args.file)
    except AsmError as err:
        print(err, file=sys.stderr)
        return 1
    Path(args.output).write_bytes(elf)
    return 0
