"""Malformed text gets a positioned error, never an internal one.

The shipped sources (``examples/isa/*.S``, ``examples/*.didl``) are mutated token by token —
a token deleted, doubled, or replaced by another token of the sources or by a troublesome one
(a stray bracket, a number with a leading zero, a huge or negative number) — and assembled or
parsed. Each mutant either works or raises :class:`AsmError` / :class:`DidlError` with its file,
line and column; anything else is an aiopim bug (``aiopim asm`` / ``aiopim didl`` exit 3).
A few hundred mutants run by default, 1,500 per source in ``pytest -m long``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiopim.cli import EXIT_FAILED
from aiopim.cli import main as cli_main
from aiopim.isa import AsmError, assemble_program
from aiopim.kelonia import DidlError
from aiopim.kelonia._didl import parse_didl
from aiopim.kelonia._generate import generate

ROOT = Path(__file__).resolve().parent.parent
ASM_SOURCES = sorted((ROOT / "examples" / "isa").glob("*.S"))
DIDL_SOURCES = sorted((ROOT / "examples").glob("**/*.didl"))

_ASM_TOKEN = re.compile(
    r"\s+|//[^\n]*|\"(?:[^\"\\\n]|\\.)*\"|0[xX][0-9a-fA-F]+|\d+|[A-Za-z_.$][A-Za-z0-9_.$@]*|.",
    re.S,
)
_DIDL_TOKEN = re.compile(
    r"\s+|//[^\n]*|/\*.*?\*/|0[xX][0-9a-fA-F]+|\d+|[A-Za-z_][A-Za-z0-9_]*|<-|\.\.|.", re.S
)
#: tokens that are not in the sources but trouble parsers
_ASM_EXTRA = [
    "0", "-1", "0x", "09", "1e5", "0b2", "99999999999999999999999", "-2147483649", "4294967296",
    "(", ")", ",", ":", ".", "%", "~", "!", "@", "'", '"', "\\", "#", "<<", ">>", "/", "*", "+",
    "-", "r99", "d5", "id8", "lo", "__sys_end", ".set", ".space", ".p2align", ".balign",
    ".section", ".size", ".type", ".zero", ".asciz", ".globl", ".data", ".mram", ".atomic", "\n",
]  # fmt: skip
_DIDL_EXTRA = [
    "0", "00", "08", "015", "0x", "0xG", "99999999999999999999", "-1", "(", ")", "{", "}", "[",
    "]", ",", ":", "..", "<-", "->", "in", "out", "inout", "u8", "u64", "i32", "sysmbox", "mbox",
    "dram", "function", "/*", "*/", "//", "\n", '"', "\\", "é", "1..0",
]  # fmt: skip


def _mutants(path: Path, token: re.Pattern[str], extra: list[str]) -> st.SearchStrategy[str]:
    """``path``'s text with one to three tokens deleted, doubled or replaced."""
    tokens = token.findall(path.read_text(encoding="utf-8"))
    pool = sorted({t for t in tokens if not t.isspace()} | set(extra))

    @st.composite
    def build(draw: st.DrawFn) -> str:
        ts = list(tokens)
        for _ in range(draw(st.integers(1, 3))):
            k = draw(st.integers(0, len(ts) - 1))
            how = draw(st.sampled_from(("delete", "double", "replace")))
            if how == "delete":
                del ts[k]
            elif how == "double":
                ts.insert(k, ts[k])
            else:
                ts[k] = draw(st.sampled_from(pool))
        return "".join(ts)

    return build()


def check_asm(path: Path, text: str, chip: str) -> None:
    try:
        assemble_program(text, chip, source=path.name)
    except AsmError as err:
        assert str(err).startswith(f"{path.name}:" if err.line else path.name), err
        assert 0 <= err.line <= text.count("\n") + 1, err
        assert err.column >= (1 if err.line else 0), err


def check_didl(path: Path, text: str) -> None:
    try:
        iface = parse_didl(text, path.name)
    except DidlError as err:
        assert 1 <= err.line <= text.count("\n") + 1 and err.column >= 1, err
        assert str(err).startswith(f"{path.name}:{err.line}:{err.column}:"), err
    else:
        compile(generate(iface), "interface.py", "exec")  # the generated module is Python


def test_the_sources_to_mutate_are_there() -> None:
    assert [p.name for p in ASM_SOURCES] == ["hello.S", "keysum.S"]
    assert [p.name for p in DIDL_SOURCES] == ["charcount.didl"]


@pytest.mark.parametrize("path", ASM_SOURCES, ids=lambda p: p.name)
def test_mutated_assembly_gets_a_positioned_error(path: Path) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=_mutants(path, _ASM_TOKEN, _ASM_EXTRA), chip=st.sampled_from(("v1A", "v1B")))
    def mutant(text: str, chip: str) -> None:
        check_asm(path, text, chip)

    mutant()


@pytest.mark.long
@pytest.mark.parametrize("path", ASM_SOURCES, ids=lambda p: p.name)
def test_mutated_assembly_gets_a_positioned_error_long(path: Path) -> None:
    @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=_mutants(path, _ASM_TOKEN, _ASM_EXTRA), chip=st.sampled_from(("v1A", "v1B")))
    def mutant(text: str, chip: str) -> None:
        check_asm(path, text, chip)

    mutant()


@pytest.mark.parametrize("path", DIDL_SOURCES, ids=lambda p: p.name)
def test_mutated_didl_gets_a_positioned_error(path: Path) -> None:
    @settings(max_examples=150, deadline=None)
    @given(text=_mutants(path, _DIDL_TOKEN, _DIDL_EXTRA))
    def mutant(text: str) -> None:
        check_didl(path, text)

    mutant()


@pytest.mark.long
@pytest.mark.parametrize("path", DIDL_SOURCES, ids=lambda p: p.name)
def test_mutated_didl_gets_a_positioned_error_long(path: Path) -> None:
    @settings(max_examples=1500, deadline=None)
    @given(text=_mutants(path, _DIDL_TOKEN, _DIDL_EXTRA))
    def mutant(text: str) -> None:
        check_didl(path, text)

    mutant()


# --- what the fuzzing found, through the command line ------------------------------------------
@pytest.mark.parametrize(
    ("before", "after", "where"),
    [
        ("jnz id, __sys_start_thread", "jnz:id, __sys_start_thread", "unknown instruction"),
        (".size main, . - main", ".size main, -1 - main", ".size"),
    ],
)
def test_aiopim_asm_reports_what_the_fuzzing_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], before: str, after: str, where: str
) -> None:
    text = (ROOT / "examples" / "isa" / "hello.S").read_text(encoding="utf-8")
    assert before in text
    src = tmp_path / "bad.S"
    src.write_text(text.replace(before, after, 1), encoding="utf-8")
    assert cli_main(["asm", str(src), "-o", str(tmp_path / "bad.dpu")]) == EXIT_FAILED
    err = capsys.readouterr().err
    line = 1 + text[: text.index(before)].count("\n")
    assert err.startswith(f"{src}:{line}:") and where in err, err
    assert "Traceback" not in err


def test_aiopim_didl_reports_a_number_with_a_leading_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "examples" / "charcount.didl").read_text(encoding="utf-8")
    src = tmp_path / "bad.didl"
    src.write_text(text.replace("u32[16]", "u32[016]", 1), encoding="utf-8")
    assert cli_main(["didl", str(src), "-o", str(tmp_path / "bad.py")]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{src}:" in err and "'016' has a leading zero" in err and "(16)" in err, err
    assert "Traceback" not in err
