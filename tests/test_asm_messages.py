"""The assembler's operand errors for register pairs name the operand and list the pairs
(issue 35, item 7)."""

from __future__ import annotations

import pytest

from aiopim.isa import AsmError, assemble

PAIRS = "d0, d2, d4, d6, d8, d10, d12, d14, d16, d18, d20, d22"


def _error(line: str) -> AsmError:
    with pytest.raises(AsmError) as exc:
        assemble(f"        .text\n__bootstrap:\n        {line}\n        stop true, __bootstrap\n")
    return exc.value


@pytest.mark.parametrize(
    ("line", "operand", "column"),
    [
        ("sd r5, 0, d7", "d7", 19),  # the store's other form takes an immediate there
        ("sd r5, 0, r6", "r6", 19),
        ("ld d3, r0, 0", "d3", 12),
        ("movd d2, d21", "d21", 18),
    ],
)
def test_a_bad_pair_is_named_and_the_pairs_listed(line: str, operand: str, column: int) -> None:
    err = _error(line)
    keyword = line.split()[0]
    assert str(err) == (
        f"<asm>:3:{column}: error: {keyword}: {operand} is not a register pair: "
        f"the pairs are {PAIRS}"
    )
    assert (err.line, err.column) == (3, column)


def test_even_pairs_assemble() -> None:
    for n in range(0, 24, 2):
        assert assemble(f"        .text\n__bootstrap:\n        sd r5, 0, d{n}\n")
