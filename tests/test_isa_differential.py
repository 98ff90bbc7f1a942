"""Every instruction form, executed by the interpreter and by the independent reference
(``tests/isa_reference.py``, written separately from the same ISA notes): same registers, flags,
next PC, WRAM and faults, for random legal operands and random state."""

from __future__ import annotations

import random

import numpy as np
import pytest
from isa_helpers import random_instruction
from isa_programs import Machine
from isa_reference import EV_EXTERNAL, EV_MEMORY_FAULT, EV_OK, EV_UNIMPLEMENTED, execute, new_state

from aiopim.isa import FIELD_NAMES, Instruction, decode_program, encode
from aiopim.isa import _layout as I
from aiopim.isa import _tables as T

WRAM = 65536
#: padding after the instruction: jump targets are drawn inside it
PAD = 16
#: random instances of each form: in the default run, and in the ``long`` one
TRIALS = 3
LONG_TRIALS = 20
PC_FIELD = FIELD_NAMES.index("pc")


class _Words:
    """An ``Asm`` stand-in holding raw words (the Machine only needs ``words()``)."""

    def __init__(self, words: list[int]) -> None:
        self._words = words

    def words(self) -> list[int]:
        return self._words


def _state(rng: random.Random) -> tuple[list[int], int, int, np.ndarray]:
    """Registers (mostly small aligned addresses, some random and edge values), flags, WRAM."""
    regs = []
    for _ in range(24):
        kind = rng.random()
        if kind < 0.5:
            regs.append(rng.randrange(0, WRAM // 2, 8))
        elif kind < 0.8:
            regs.append(rng.getrandbits(32))
        else:
            regs.append(rng.choice([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 31, 32, 33]))
    wram = np.frombuffer(rng.randbytes(WRAM), np.uint8).copy()
    return regs, rng.getrandbits(1), rng.getrandbits(1), wram


SIGS = pytest.mark.parametrize(
    "sig", range(len(T.SIG_KEYWORD)), ids=lambda s: f"{T.SIG_KEYWORD[s]}:{T.SIG_FORM[s]}"
)


@SIGS
def test_interpreter_agrees_with_the_reference(sig: int) -> None:
    check_against_the_reference(sig, random.Random(sig), TRIALS)


@pytest.mark.long
@SIGS
def test_interpreter_agrees_with_the_reference_long(sig: int) -> None:
    check_against_the_reference(sig, random.Random(f"long {sig}"), LONG_TRIALS)


def check_against_the_reference(sig: int, rng: random.Random, trials: int) -> None:
    """``trials`` random instances of form ``sig`` on random state: the interpreter and the
    reference agree."""
    stop = encode_stop()
    for _ in range(trials):
        ins = random_instruction(sig, rng)
        row = decode_program(np.array([encode(ins)], np.uint64)).values[0].copy()
        if any(op[1] == T.KIND_PC for op in T.SIG_OPERANDS[sig]):
            row[PC_FIELD] = rng.randrange(1, PAD)  # a jump target inside the program
            fields = list(ins.fields)
            fields[PC_FIELD] = int(row[PC_FIELD])
            ins = Instruction(ins.sig, tuple(fields))
        word = encode(ins)
        regs, zf, cf, wram = _state(rng)

        ref_regs, pcs, ref_zf, ref_cf, ref_wram = new_state(16, WRAM)
        ref_regs[0, :] = regs
        ref_zf[0], ref_cf[0] = zf, cf
        ref_wram[:] = wram
        event = execute(sig, row, 0, ref_regs, pcs, ref_zf, ref_cf, ref_wram)
        if event in (EV_EXTERNAL, EV_UNIMPLEMENTED):
            pytest.skip("threads, atomics, DMA, time, hash/sats: checked by the run tests")

        m = Machine(_Words([word] + [stop] * PAD), wram_size=WRAM)
        m.wram[:] = wram
        m.set(**{f"r{i}": v for i, v in enumerate(regs)}, zf=zf, cf=cf)
        result = m.run(steps=1)
        text = f"{T.SIG_KEYWORD[sig]}:{T.SIG_FORM[sig]} {ins.values()} regs={regs} zf={zf} cf={cf}"
        if event == EV_MEMORY_FAULT:
            assert result == I.R_FAULT, text
            continue
        assert event == EV_OK, text
        assert result != I.R_FAULT, (text, m.dv)
        assert [m.r(i) for i in range(24)] == [int(x) for x in ref_regs[0]], text
        assert (m.zf(), m.cf()) == (int(ref_zf[0]), int(ref_cf[0])), text
        assert m.pc() == int(pcs[0]), text
        assert np.array_equal(m.wram, ref_wram), text


def encode_stop() -> int:
    return encode(Instruction.make("stop:ci", cc=0, pc=0))
