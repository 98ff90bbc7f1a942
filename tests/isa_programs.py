"""Hand-encoded DPU programs for the interpreter tests: a tiny list-of-tuples assembler.

``Asm`` collects ``(signature, fields)`` tuples; field values may be ints, register names
(``"r3"``, ``"zero"``, ``"id8"``, pairs ``"d4"``), condition names (``cc="nz"``) or labels
(``pc="loop"``, resolved to instruction indexes). ``elf(...)`` wraps the words into a DPU
ELF with the test ELF writer (imported here only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiopim._core._elfwriter import STT_FUNC, SymbolSpec, sample_dpu_elf
from aiopim.elf import ElfProgram, load_elf
from aiopim.isa import _tables as T
from aiopim.isa._codec import Instruction, encode, signature_index

IRAM = 0x80000000
_CONST = {name: code for name, code in T.CONSTANT_REGISTERS}


def reg(value: Any) -> int:
    """Register code of ``"r5"``, ``"d4"``, ``"zero"``, ``"id8"`` or an int."""
    if isinstance(value, int):
        return value
    if value in _CONST:
        return _CONST[value]
    if value[0] in "rdsS" and value[1:].isdigit():
        return int(value[1:])
    raise ValueError(f"not a register: {value!r}")


def cond_code(sig: int, name: str) -> int:
    """Code of condition ``name`` in signature ``sig``'s condition map."""
    idx = T.CONDITION_NAMES.index(name)
    for op in T.SIG_OPERANDS[sig]:
        if op[1] == T.KIND_COND and op[8] >= 0:
            for code, n in T.CONDITION_MAPS[op[8]]:
                if n == idx:
                    return code
    raise ValueError(f"condition {name!r} is not available in {T.SIG_KEYWORD[sig]}:{T.SIG_FORM[sig]}")


@dataclass
class Asm:
    """Instructions and labels; :meth:`words` resolves them."""

    items: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)

    def __call__(self, signature: str, **fields: Any) -> Asm:
        self.items.append((signature, fields))
        return self

    def label(self, name: str, *, function: bool = False) -> Asm:
        self.labels[name] = len(self.items)
        if function:
            self.functions[name] = len(self.items)
        return self

    def raw(self, word: int) -> Asm:
        """A raw 48-bit word (malformed-program tests)."""
        self.items.append(("raw", {"word": word}))
        return self

    def __len__(self) -> int:
        return len(self.items)

    def words(self) -> list[int]:
        out = []
        for signature, fields in self.items:
            if signature == "raw":
                out.append(fields["word"])
                continue
            sig = signature_index(signature)
            kinds = {T.FIELD_NAMES[op[2]]: op for op in T.SIG_OPERANDS[sig] if op[2] >= 0}
            values: dict[str, int] = {}
            for name, value in fields.items():
                if name == "cc" and isinstance(value, str):
                    values[name] = cond_code(sig, value)
                elif name == "pc" and isinstance(value, str):
                    values[name] = self.labels[value]
                elif name in ("off", "imm") and isinstance(value, str):
                    values[name] = self.labels[value]
                elif isinstance(value, str) and name in kinds:
                    values[name] = reg(value)
                elif name == "endian" and isinstance(value, str):
                    values[name] = 1 if value == "big" else 0
                else:
                    values[name] = int(value)
            out.append(encode(Instruction.make(sig, **values)))
        return out

    def text(self) -> bytes:
        return b"".join(w.to_bytes(8, "little") for w in self.words())


def elf(
    asm: Asm,
    *,
    nr_tasklets: int = 1,
    host_vars: Mapping[str, bytes] | None = None,
    mram_vars: Mapping[str, bytes] | None = None,
    wram_vars: Mapping[str, bytes] | None = None,
    stack_size: int = 256,
    name: str = "isa-test",
) -> tuple[ElfProgram, dict[str, tuple[int, int, str]]]:
    """The program as a loaded ELF and its symbol layout ``name -> (address, size, section)``."""
    extra = [
        SymbolSpec(f, IRAM + 8 * i, 0, ".text", type=STT_FUNC)
        for f, i in asm.functions.items()
    ]
    data, lay = sample_dpu_elf(
        nr_tasklets=nr_tasklets,
        text=asm.text(),
        host_vars=host_vars,
        mram_vars=mram_vars,
        wram_vars=wram_vars,
        stack_size=stack_size,
        extra=extra,
    )
    return load_elf(data, name=name), dict(lay.symbols)


def u32(*values: int) -> bytes:
    return np.array(values, np.uint32).tobytes()
