"""The DPU instruction set: exact decoder and encoder, disassembler and assembler.

Generated from UPMEM's instruction tables (``_tables.py``, with UPMEM's notice): every one of
the 973 encodable instruction forms with its bit layout and operands, the 105 assembler
aliases and the condition maps.

>>> from aiopim.isa import Instruction, decode, encode, format_instruction
>>> word = encode(Instruction.make("sub:zrici", ra=1, imm=5, cc=20, pc=7))
>>> format_instruction(decode(word))
'jltu r1, 5, 7'

``assemble(text, chip)`` builds a DPU ELF that :func:`aiopim.elf.load_elf` loads;
``aiopim asm``/``aiopim disasm`` are the command-line tools. See docs/isa.md. A binary loaded
without a Python model runs on the interpreter (:class:`IsaRunner`, docs/isa-semantics.md).
"""

from __future__ import annotations

from ._asm import AsmError, Assembly, assemble, assemble_program
from ._codec import (
    FIELD_NAMES,
    DecodedProgram,
    DecodeStatus,
    EncodeError,
    Instruction,
    decode,
    decode_program,
    encode,
    signature_index,
)
from ._disasm import disassemble, format_listing, text_words
from ._engine import set_engine
from ._runner import IsaRunner, describe_instruction
from ._text import format_instruction, sugar_for
from .elfwriter import ElfWriter, dpu_attributes, sample_dpu_elf

#: the assembler's ELF writer (``aiopim.isa.elfwriter.ElfWriter``)
write_elf = ElfWriter

__all__ = [
    "IsaRunner",
    "describe_instruction",
    "set_engine",
    "FIELD_NAMES",
    "AsmError",
    "Assembly",
    "DecodeStatus",
    "DecodedProgram",
    "ElfWriter",
    "EncodeError",
    "Instruction",
    "assemble",
    "assemble_program",
    "decode",
    "decode_program",
    "disassemble",
    "dpu_attributes",
    "encode",
    "format_instruction",
    "format_listing",
    "sample_dpu_elf",
    "signature_index",
    "sugar_for",
    "text_words",
    "write_elf",
]
