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

from aiopim.elf import ElfProgram, load_elf
from aiopim.isa import _tables as T
from aiopim.isa._codec import EncodeError, Instruction, encode, signature_index
from aiopim.isa.elfwriter import STT_FUNC, SymbolSpec, sample_dpu_elf

IRAM = 0x80000000
_CONST = dict(T.CONSTANT_REGISTERS)


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
    raise ValueError(
        f"condition {name!r} is not available in {T.SIG_KEYWORD[sig]}:{T.SIG_FORM[sig]}"
    )


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
                elif name in ("pc", "off", "imm") and isinstance(value, str):
                    values[name] = self.labels[value]
                elif name == "endian" and isinstance(value, str):
                    values[name] = 1 if value == "big" else 0
                elif isinstance(value, str) and name in kinds:
                    values[name] = reg(value)
                else:
                    values[name] = int(value)
            ins = Instruction.make(sig, **values)
            got = ins.values()
            for name, value in values.items():
                width = {T.FIELD_NAMES[f[0]]: f[1] for f in T.SIG_FIELDS[sig]}[name]
                if got[name] != value and got[name] != value & ((1 << width) - 1):
                    raise ValueError(f"{signature}: {name}={value} does not fit")
            out.append(encode(ins))
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
    chip: str = "v1B",
) -> tuple[ElfProgram, dict[str, tuple[int, int, str]]]:
    """The program as a loaded ELF and its symbol layout ``name -> (address, size, section)``."""
    extra = [
        SymbolSpec(f, IRAM + 8 * i, 0, ".text", type=STT_FUNC) for f, i in asm.functions.items()
    ]
    data, lay = sample_dpu_elf(
        nr_tasklets=nr_tasklets,
        text=asm.text().ljust(16, b"\0"),
        host_vars=host_vars,
        mram_vars=mram_vars,
        wram_vars=wram_vars,
        stack_size=stack_size,
        extra=extra,
        chip=chip,
    )
    return load_elf(data, name=name), dict(lay.symbols)


def u32(*values: int) -> bytes:
    return np.array(values, np.uint32).tobytes()


class Machine:
    """One DPU's interpreter state outside the emulator: run hand-encoded code directly on the
    compiled engine (``jit=True``) or the same source as plain Python."""

    def __init__(
        self, asm: Asm, *, threads: int = 16, wram_size: int = 65536, jit: bool = False
    ) -> None:
        from aiopim.isa import _engine
        from aiopim.isa import _layout as I
        from aiopim.isa._codec import decode_program
        from aiopim.isa._semantics import compile_program

        self.I = I
        self.engine = _engine.engine("compiled" if jit else "python")
        self.code = compile_program(decode_program(np.array(asm.words(), np.uint64)))
        self.regs, self.th, self.dv, self.atomic, self.dma = self.engine.fresh_state(
            threads, 4096 * 8, 64 << 20
        )
        self.wram = np.zeros(wram_size, np.uint8)
        #: no MRAM page known: a transfer's completion stops the run (``R_DMA_DUE``)
        self.pmap = np.full(1024, I.PM_UNKNOWN, np.int64)
        self.hw = np.zeros((1, 4), np.int64)
        self.core = self.engine.Core(
            self.code,
            self.regs,
            self.th,
            self.dv,
            self.atomic,
            self.wram,
            self.dma,
            self.pmap,
            self.engine.PageTable(),
            self.hw,
        )

    def set(self, thread: int = 0, **values: int) -> Machine:
        """Set registers (``r3=5``), flags (``zf=1``, ``cf=0``)."""
        for name, value in values.items():
            if name in ("zf", "cf"):
                col = self.I.T_ZF if name == "zf" else self.I.T_CF
                self.th[thread, col] = value
            else:
                self.regs[thread, reg(name)] = value & 0xFFFFFFFF
        return self

    def run(self, cycles: int = 1 << 40, steps: int = 1 << 40) -> int:
        """Run until the end, a fault, a transfer's completion, ``cycles`` or ``steps``
        instructions."""
        return int(self.engine.run(self.core, cycles, steps))

    def r(self, name: str | int, thread: int = 0) -> int:
        return int(self.regs[thread, reg(name)])

    def d(self, name: str, thread: int = 0) -> int:
        """64-bit value of pair ``dN`` (even register = high word)."""
        n = reg(name)
        return (self.r(n, thread) << 32) | self.r(n + 1, thread)

    def zf(self, thread: int = 0) -> int:
        return int(self.th[thread, self.I.T_ZF])

    def cf(self, thread: int = 0) -> int:
        return int(self.th[thread, self.I.T_CF])

    def pc(self, thread: int = 0) -> int:
        return int(self.th[thread, self.I.T_PC])

    @property
    def fault_kind(self) -> int:
        return int(self.dv[self.I.D_FKIND])


_PC_FIELD = T.FIELD_NAMES.index("pc")


def random_instruction(draw: Any, sig: int, length: int) -> int:
    """Signature ``sig`` with random legal operands drawn by Hypothesis's ``draw`` (jump
    targets inside a program of ``length`` instructions); a ``nop`` if it does not encode."""
    from hypothesis import strategies as st

    raw = [0] * len(T.FIELD_NAMES)
    for fid, width, allowed, _pieces, implicit, zero, _rep in T.SIG_FIELDS[sig]:
        if implicit >= 0:
            raw[fid] = implicit
        elif fid == _PC_FIELD:  # jump targets inside the program (loops end at the step bound)
            raw[fid] = draw(st.integers(0, length))
        elif allowed >= 0:
            raw[fid] = draw(st.sampled_from([v for v in range(64) if (allowed >> v) & 1]))
        else:
            raw[fid] = draw(st.integers(0, (1 << width) - 1)) & ~zero
    try:
        return encode(Instruction(sig, tuple(raw)))
    except EncodeError:
        return encode(Instruction.make("nop:"))
