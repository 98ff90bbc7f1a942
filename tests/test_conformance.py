"""Conformance: real DPU binaries against expectations kept as data (aiopim.conformance).

With ``AIOPIM_CONFORMANCE_DIR`` set to a directory of UPMEM-built binaries (the corpus that
``tests/conformance/*.toml`` describes), every binary runs on both anyio backends and must
pass. The other tests need no corpus: validation messages, every check kind on crafted logs,
generated inputs, and whole runs of binaries built by aiopim's assembler.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aiopim.cli import EXIT_FAILED, EXIT_INPUT
from aiopim.cli import main as cli_main
from aiopim.conformance import (
    ExpectationError,
    expectation_dir,
    load_expectation,
    parse_expectation,
    run_expectation,
    shipped_expectations,
    use_engine,
)

ROOT = Path(__file__).resolve().parent.parent
EXPECTATIONS = ROOT / "tests" / "conformance"
CORPUS = os.environ.get("AIOPIM_CONFORMANCE_DIR", "")
needs_corpus = pytest.mark.skipif(
    not CORPUS,
    reason="set AIOPIM_CONFORMANCE_DIR to the directory of UPMEM-built binaries that "
    "tests/conformance/*.toml describes to run them",
)


# ================================================================================================
# the corpus
# ================================================================================================
@needs_corpus
@pytest.mark.parametrize("toml", sorted(EXPECTATIONS.glob("*.toml")), ids=lambda p: p.stem)
def test_corpus_binary_conforms(toml: Path, backend: str) -> None:
    result = run_expectation(load_expectation(toml), CORPUS, backend=backend)
    assert result.passed, result.reason
    assert result.virtual_ps is not None and result.virtual_ps > 0


@needs_corpus
def test_every_corpus_binary_has_expectations() -> None:
    binaries = {p.stem for p in Path(CORPUS).glob("*.dpu")}
    assert binaries, f"{CORPUS} holds no *.dpu binaries"
    assert binaries == {p.stem for p in EXPECTATIONS.glob("*.toml")}


def test_shipped_expectations_cover_the_eight_samples() -> None:
    assert shipped_expectations() == EXPECTATIONS
    names = {p.stem for p in EXPECTATIONS.glob("*.toml")}
    assert names == {
        "helloworld", "tasklet_stack_check", "mutex_example", "barrier_example",
        "fsb_example", "vmutex_example", "NTT", "test",
    }  # fmt: skip
    for toml in EXPECTATIONS.glob("*.toml"):
        exp = load_expectation(toml)
        assert exp.chip == "v1A" and exp.nr_dpus == 1 and exp.binary == f"{toml.stem}.dpu"
        assert exp.log, f"{toml.name} checks no log"


def test_vmutex_input_is_the_documented_array() -> None:
    exp = load_expectation(EXPECTATIONS / "vmutex_example.toml")
    (step,) = exp.copy_to
    data = step.data.build(lambda name: b"")
    expected = (np.arange(1 << 20, dtype=np.uint64) * 2654435761 >> 7).astype(np.uint8)
    assert step.symbol == "input_table" and step.offset == 0 and step.length == 1 << 20
    assert data.dtype == np.uint8 and np.array_equal(data, expected)


# ================================================================================================
# validation: every error names the file, the line and the key
# ================================================================================================
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[launch", "x.toml:1: not valid TOML: Expected ']' at the end of a table declaration "
         "(at end of document)"),
        ("[launch]\nexpect = ok\n", "x.toml:2: not valid TOML: Invalid value "
         "(at line 2, column 10)"),
        ("[lunch]\n", "x.toml:1: lunch: unknown key (allowed: binary, machine, copy_to, launch, "
         "log, symbol)"),
        ("[binary]\nnr_tasklets = 25\n", "x.toml:2: binary.nr_tasklets: 25 is more than 24"),
        ("[binary]\nfile = '../x.dpu'\n", "x.toml:2: binary.file: '../x.dpu' must name a file "
         "inside the binary directory (a relative path)"),
        ("[machine]\nchip = 'v2'\n", "x.toml:2: machine.chip: 'v2' is not one of v1A, v1B"),
        ("[machine]\nnr_dpus = 0\n", "x.toml:2: machine.nr_dpus: 0 is less than 1"),
        ("[machine]\n", "x.toml: nothing to check: add [launch], [[log]] or [[symbol]]"),
        ("[launch]\nexpect = 'DPU_ERR_NOPE'\n", "x.toml:2: launch.expect: 'DPU_ERR_NOPE' is "
         'neither "ok" nor an error code such as "DPU_ERR_DPU_FAULT"'),
        ("[launch]\nexpect = 'DPU_OK'\n", 'x.toml:2: launch.expect: write "ok" for a launch '
         "that succeeds"),
        ("[launch]\nfault = 3\n", 'x.toml:2: launch.fault: a fault code needs expect = '
         '"DPU_ERR_DPU_FAULT"'),
        ("[launch]\ntimeout = '2 days'\n", "x.toml:2: launch.timeout: expected a duration: "
         "integer picoseconds or a string like '10us' (units ps, ns, us, ms, s), got '2 days'"),
        ("[[log]]\nlines = []\n", "x.toml:1: log[0]: a log check needs kind (lines, text, "
         "match, mutex_chain)"),
        ("[[log]]\nkind = 'regex'\n", "x.toml:2: log[0].kind: 'regex' is not one of lines, "
         "text, match, mutex_chain"),
        ("[[log]]\nkind = 'lines'\n", "x.toml:1: log[0]: give exactly one of lines, lines_file"),
        ("[[log]]\nkind = 'lines'\nlines = ['a']\npattern = 'a'\n", "x.toml:4: log[0].pattern: "
         "unknown key (allowed: kind, lines, lines_file, order)"),
        ("[[log]]\nkind = 'lines'\nlines = ['a']\norder = 'sorted'\n", "x.toml:4: "
         "log[0].order: 'sorted' is not one of exact, any"),
        ("[[log]]\nkind = 'lines'\nlines_file = '/etc/passwd'\n", "x.toml:3: log[0].lines_file: "
         "'/etc/passwd' must name a file inside the binary directory (a relative path)"),
        ("[[log]]\nkind = 'text'\ntext = 'a'\norder = 'any'\n", "x.toml:4: log[0].order: order "
         "goes with pieces or pieces_file"),
        ("[[log]]\nkind = 'match'\n", "x.toml:1: log[0]: a match check needs pattern"),
        ("[[log]]\nkind = 'match'\npattern = '(a'\n", "x.toml:3: log[0].pattern: not a valid "
         "regular expression: missing ), unterminated subpattern at position 0"),
        ("[[log]]\nkind = 'match'\npattern = 'a'\ncount = 1\nmin_count = 1\n", "x.toml:4: "
         "log[0].count: give count, or min_count and/or max_count"),
        ("[[log]]\nkind = 'match'\npattern = '(?P<T>a)'\ngroups.X = { min = 1 }\n", "x.toml:4: "
         "log[0].groups.X: unknown key (allowed: T)"),
        ("[[log]]\nkind = 'match'\npattern = '(?P<T>a)'\ngroups.T = { once_each = [3, 1] }\n",
         "x.toml:4: log[0].groups.T.once_each: first 3 is after last 1"),
        ("[[log]]\nkind = 'match'\npattern = '(?P<T>a)'\ngroups.T = { plus = 1 }\n",
         "x.toml:4: log[0].groups.T.plus: plus goes with equals_group"),
        ("[[log]]\nkind = 'match'\npattern = '(?P<T>a)'\ngroups.T = { equals_group = 'F' }\n",
         "x.toml:4: log[0].groups.T.equals_group: the pattern has no group 'F'"),
        ("[[log]]\nkind = 'mutex_chain'\npattern = '(?P<T>\\d+)'\nfirst = -1\n", "x.toml:3: "
         "log[0].pattern: a mutex_chain pattern needs the named groups T (tasklet) and V (value):"
         " (?P<T>\\d+) and (?P<V>-?\\d+)"),
        ("[[log]]\nkind = 'mutex_chain'\npattern = '(?P<T>\\d+) (?P<V>\\d+)'\n", "x.toml:1: "
         "log[0]: a mutex_chain check needs first (the first value read)"),
        ("[[copy_to]]\nsymbol = 'x'\n", "x.toml:1: copy_to[0]: [[copy_to]] needs symbol and data"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { values = [1], fill = 0 }\n", "x.toml:3: "
         "copy_to[0].data: give exactly one of values, arange, fill, file"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { values = [256] }\n", "x.toml:3: "
         "copy_to[0].data.values[0]: 256 is more than 255"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { arange = 300 }\n", "x.toml:3: "
         "copy_to[0].data.arange: 299 does not fit uint8"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { fill = 1 }\n", "x.toml:3: copy_to[0].data: fill "
         "needs count (the number of elements)"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { values = [1], dtype = 'float32' }\n", "x.toml:3: "
         "copy_to[0].data.dtype: 'float32' is not one of int8, uint8, int16, uint16, int32, "
         "uint32, int64, uint64"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { values = [1], ops = [{ pow = 2 }] }\n", "x.toml:3:"
         " copy_to[0].data.ops[0].pow: unknown operation (known: add, sub, mul, shl, shr, and, "
         "or, xor, mod)"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { values = [1], ops = [{ shr = 8 }] }\n", "x.toml:3:"
         " copy_to[0].data.ops[0].shr: 8 is more than 7"),
        ("[[copy_to]]\nsymbol = 'x'\ndata = { values = [1], ops = [{ mul = 2, add = 1 }] }\n",
         "x.toml:3: copy_to[0].data.ops[0]: expected one operation such as { mul = 3 }, got "
         "{'add': 1, 'mul': 2}"),
        ("[[symbol]]\nname = 'counter'\n", "x.toml:1: symbol[0]: [[symbol]] needs name and "
         "values"),
        ("[[symbol]]\nname = 'c'\ndtype = 'int8'\nvalues = [-129]\n", "x.toml:4: "
         "symbol[0].values[0]: -129 is less than -128"),
    ],
)  # fmt: skip
def test_invalid_expectations_say_where_and_what(text: str, message: str) -> None:
    with pytest.raises(ExpectationError) as info:
        parse_expectation(text, "x.toml")
    assert str(info.value) == message


def test_unreadable_expectation_file(tmp_path: Path) -> None:
    with pytest.raises(ExpectationError) as info:
        load_expectation(tmp_path)
    assert (
        str(info.value) == f"{tmp_path}: is a directory, not a TOML expectation file (regular file)"
    )
    (tmp_path / "bad.toml").write_bytes(b"[launch]\n# \xff\n")
    with pytest.raises(ExpectationError) as info:
        load_expectation(tmp_path / "bad.toml")
    assert str(info.value) == f"{tmp_path / 'bad.toml'}:2: not valid UTF-8 (byte 0xff)"


def test_defaults() -> None:
    exp = parse_expectation("[launch]\n", "dir/prog.toml")
    assert (exp.name, exp.binary, exp.chip, exp.nr_dpus) == ("prog", "prog.dpu", "v1B", 1)
    assert exp.launch_error is None and exp.fault is None and exp.timeout_ps is None
    assert exp.copy_to == () and exp.log == () and exp.symbols == ()


# ================================================================================================
# check kinds on crafted logs
# ================================================================================================
FILES = {"four.expected": "a\nb\nc\nd\n", "pieces.expected": "ab\nc\nabc\n"}


def failure(check_toml: str, log: str) -> str | None:
    """What the one [[log]] check of ``check_toml`` finds wrong with ``log``."""
    exp = parse_expectation("[[log]]\n" + check_toml, "x.toml")
    (check,) = exp.log
    return check.failure(log, lambda name: FILES[name])


def test_lines_in_order() -> None:
    check = "kind = 'lines'\nlines = ['a', 'b']\n"
    assert failure(check, "a\nb\n") is None
    assert failure(check, "a\nc\n") == "line 2 is 'c', expected 'b'"
    assert failure(check, "a\nb\nc\n") == "the log has 3 lines, expected 2; line 3 is 'c'"
    assert failure(check, "a\n") == "the log has 1 line, expected 2; line 2 should be 'b'"
    assert failure(check, "a\nb") == "the last line 'b' does not end with a newline"
    assert failure("kind = 'lines'\nlines = []\n", "") is None
    assert failure("kind = 'lines'\nlines_file = 'four.expected'\n", "a\nb\nc\nd\n") is None


def test_lines_in_any_order() -> None:
    check = "kind = 'lines'\nlines_file = 'four.expected'\norder = 'any'\n"
    assert failure(check, "d\nb\na\nc\n") is None
    assert failure(check, "d\nb\na\na\n") == "missing 1 line(s): 'c'; 1 unexpected line(s): 'a'"
    assert failure(check, "a\nb\nc\n") == "missing 1 line(s): 'd'"
    assert failure(check, "a\nb\nc\nd\ne\nf\ng\nh\n") == (
        "4 unexpected line(s): 'e', 'f', 'g' and 1 more"
    )


def test_text_exact_and_as_pieces() -> None:
    assert failure('kind = "text"\ntext = "ab\\n"\n', "ab\n") is None
    assert failure("kind = 'text'\ntext = 'abc'\n", "abd") == (
        "the log differs from the expected text at character 2: 'd' instead of 'c'"
    )
    assert failure("kind = 'text'\ntext = 'abc'\n", "ab") == (
        "the log differs from the expected text at character 2: '' instead of 'c'"
    )
    any_order = "kind = 'text'\npieces_file = 'pieces.expected'\norder = 'any'\n"
    # "ab", "c", "abc" in some order: a prefix piece ("ab" of "abc") needs backtracking
    assert failure(any_order, "abcabc") is None
    assert failure(any_order, "cababc") is None
    assert failure(any_order, "abcab") == (
        "the log is not the concatenation of the 3 pieces in any order; "
        "no remaining piece fits at character 5: ''"
    )
    assert failure(any_order, "abcabc\n") == (
        "the log is not the concatenation of the 3 pieces in any order; "
        "no remaining piece fits at character 6: '\\n'"
    )
    exact = "kind = 'text'\npieces = ['x', 'y']\n"
    assert failure(exact, "xy") is None
    assert failure(exact, "yx") == "the log is not the concatenation of the 2 pieces in this order"


def test_match_counts_and_scope() -> None:
    check = "kind = 'match'\npattern = 'v=\\d+'\nall = true\ncount = 2\n"
    assert failure(check, "v=1\nv=2\n") is None
    assert failure(check, "v=1\nw=2\n") == "line 2 'w=2' does not match 'v=\\\\d+'"
    assert failure(check, "v=1\n") == "lines matching 'v=\\\\d+': 1, expected 2"
    some = "kind = 'match'\npattern = 'v=\\d+'\nmin_count = 1\nmax_count = 2\n"
    assert failure(some, "x\nv=1\n") is None
    assert failure(some, "x\n") == "lines matching 'v=\\\\d+': 0, expected at least 1"
    assert failure(some, "v=1\nv=2\nv=3\n") == "lines matching 'v=\\\\d+': 3, expected at most 2"
    after = "kind = 'match'\nafter = '--'\npattern = 'r'\nall = true\ncount = 2\n"
    assert failure(after, "x\n--\nr\nr\n") is None
    assert failure(after, "x\n--\nr\nr\nx\n") == "line 5 'x' after '--' does not match 'r'"
    assert failure(after, "r\nr\n") == "no line '--' in the log, expected one"
    assert failure(after, "--\nr\n--\nr\n") == "2 lines '--' in the log, expected one"


def test_match_group_rules() -> None:
    head = "kind = 'match'\npattern = 't(?P<T>\\d+) s(?P<S>-?\\d+) e(?P<E>\\w+)'\n"
    log = "t1 s5 e6\nt0 s9 e10\n"

    def rule(group: str, rules: str, text: str = log) -> str | None:
        return failure(f"{head}groups.{group} = {{ {rules} }}\n", text)

    assert rule("T", "once_each = [0, 1]") is None
    assert rule("T", "once_each = [0, 2]") == "group T: expected 0..2 each once; missing 2"
    assert rule("T", "once_each = [0, 1]", log + "t1 s0 e1\nt7 s0 e1\n") == (
        "group T: expected 0..1 each once; repeated 1; outside 7"
    )
    assert rule("T", "sequence = [0, 1]", "t0 s5 e6\nt1 s9 e10\n") is None
    assert rule("T", "sequence = [0, 1]") == (
        "group T: 1 on line 1, expected 0 (the values run 0..1 in order)"
    )
    assert rule("T", "sequence = [1, 2]", "t1 s5 e6\n") == (
        "group T: the values stop at 1, expected 1..2 in order"
    )
    assert rule("S", "min = 5") is None
    assert rule("S", "min = 6") == "group S: 5 on line 1 is less than 6"
    assert rule("S", "max = 8") == "group S: 9 on line 2 is more than 8"
    assert rule("S", "equals = 5") == "group S: 9 on line 2, expected 5"
    assert rule("E", "equals = '6'") == "group E: '10' on line 2, expected '6'"
    assert rule("E", "equals_group = 'S', plus = 1") is None
    assert rule("E", "equals_group = 'S', plus = 2") == "group E: 6 on line 1, expected S + 2 = 7"
    assert rule("T", "unique = true") is None
    assert rule("T", "unique = true", log + "t1 s0 e1\n") == (
        "group T: '1' on lines 1 and 3, expected each value once"
    )
    assert rule("E", "min = 0", "t1 s5 ex\n") == "group E: 'x' on line 1 is not an integer"


def test_mutex_chain() -> None:
    check = "kind = 'mutex_chain'\npattern = '\\{(?P<T>\\d+) :\\} v = (?P<V>-?\\d+)'\nfirst = -1\n"
    assert failure(check, "{3 :} v = -1\n{0 :} v = 8\n{2 :} v = 1\nother\n{1 :} v = 4\n") is None
    assert failure(check, "{3 :} v = 0\n") == "the first value (line 1) is 0, expected -1"
    assert failure(check, "{3 :} v = -1\n{0 :} v = 4\n") == (
        "line 2: V = 4, expected 1 << 3 = 8 (what tasklet 3, the line before, wrote)"
    )
    assert failure(check, "{3 :} v = -1\n{70 :} v = 8\n{1 :} v = 0\n") == (
        "line 3: V = 0, expected 1 << T' (what tasklet 70, the line before, wrote)"
    )
    assert failure(check, "nothing\n") == (
        "no line matches '\\\\{(?P<T>\\\\d+) :\\\\} v = (?P<V>-?\\\\d+)'"
    )


# ================================================================================================
# generated inputs
# ================================================================================================
def data_of(spec: str, files: dict[str, bytes] | None = None) -> Any:
    exp = parse_expectation(f"[launch]\n[[copy_to]]\nsymbol = 'x'\ndata = {spec}\n", "x.toml")
    return exp.copy_to[0].data.build(lambda name: (files or {})[name])


def test_generated_inputs() -> None:
    assert data_of("{ values = [1, 2, 255] }").tolist() == [1, 2, 255]
    got = data_of("{ arange = 5, dtype = 'int16', ops = [{ mul = -3 }, { add = 1 }] }")
    assert got.dtype == np.int16 and got.tolist() == [1, -2, -5, -8, -11]
    got = data_of("{ fill = 7, count = 3, dtype = 'uint32', ops = [{ shl = 30 }] }")
    assert got.tolist() == [(7 << 30) & 0xFFFFFFFF] * 3  # wraps in the dtype
    got = data_of("{ arange = 6, ops = [{ mod = 4 }, { xor = 1 }, { and = 3 }, { or = 8 }] }")
    assert got.tolist() == [9, 8, 11, 10, 9, 8]
    got = data_of(
        "{ file = 'in.bin', dtype = 'uint16', ops = [{ sub = 1 }], astype = 'uint8' }",
        {"in.bin": b"\x00\x01\x00\x00"},
    )
    assert got.dtype == np.uint8 and got.tolist() == [255, 255]
    with pytest.raises(ValueError, match=r"'odd\.bin' holds 3 bytes, not a whole number of uint16"):
        data_of("{ file = 'odd.bin', dtype = 'uint16' }", {"odd.bin": b"abc"})


# ================================================================================================
# whole runs: binaries built by aiopim's assembler, each with its TOML in tmp_path
# ================================================================================================
FAULT_S = """\
        .set NR_TASKLETS, 1
        .text
        .globl __bootstrap
__bootstrap:
        fault 3
"""
SPIN_S = FAULT_S.replace("fault 3", "jump __bootstrap")
HELLO_TOML = """\
[binary]
nr_tasklets = 4

[launch]
expect = "ok"
timeout = "1 ms"

[[copy_to]]
symbol = "counter"
data = { values = [5], dtype = "uint32" }

[[log]]
kind = "match"
pattern = 'hello from tasklet (?P<T>\\d+)'
all = true
count = 4
groups.T = { once_each = [0, 3] }

[[symbol]]
name = "counter"
dtype = "uint32"
values = [15]
"""


def assemble(capsys: pytest.CaptureFixture[str], source: str, out: Path) -> None:
    src = out.with_suffix(".S")
    src.write_text(source)
    assert cli_main(["asm", str(src), "-o", str(out)]) == 0
    src.unlink()
    capsys.readouterr()


@pytest.fixture
def binaries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """hello.dpu (examples/isa/hello.S), fault.dpu and spin.dpu with their TOML files."""
    assemble(capsys, (ROOT / "examples" / "isa" / "hello.S").read_text(), tmp_path / "hello.dpu")
    assemble(capsys, FAULT_S, tmp_path / "fault.dpu")
    assemble(capsys, SPIN_S, tmp_path / "spin.dpu")
    (tmp_path / "hello.toml").write_text(HELLO_TOML)
    (tmp_path / "fault.toml").write_text('[launch]\nexpect = "DPU_ERR_DPU_FAULT"\nfault = 3\n')
    (tmp_path / "spin.toml").write_text('[launch]\ntimeout = "20 us"\n')
    return tmp_path


def conformance(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    rc = cli_main(["conformance", *argv])
    out, err = capsys.readouterr()
    assert err == ""
    return rc, out.splitlines()


def test_a_directory_runs_and_prints_the_table(
    binaries: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    rc, lines = conformance(capsys, str(binaries), "--backend", backend)
    assert rc == EXIT_FAILED  # spin never stops
    assert lines[0].split() == ["binary", "result", "virtual", "time", "reason"]
    rows = rows_of(lines)
    assert rows.keys() == {"fault", "hello", "spin"}
    assert rows["fault"][::2] == ("PASS", "") and rows["hello"][::2] == ("PASS", "")
    assert rows["spin"] == (  # the load, then 20 us of launch
        "FAIL",
        "120.001 us",
        "launch: not done after 20.000 us of virtual time",
    )
    assert lines[-1] == "conformance 2/3"
    (binaries / "spin.toml").unlink()
    (binaries / "spin.dpu").unlink()
    rc, lines = conformance(capsys, str(binaries), "--backend", backend)
    assert rc == 0 and lines[-1] == "conformance 2/2"


ROW = re.compile(r"(\S+) +(PASS|FAIL) +(-|\S+ [mu]?s)(?:  (.*))?")


def rows_of(lines: list[str]) -> dict[str, tuple[str, str, str]]:
    """binary -> (result, virtual time, reason) of the table's rows."""
    rows = {}
    for line in lines[1:-1]:
        m = ROW.fullmatch(line)
        assert m is not None, line
        rows[m.group(1)] = (m.group(2), m.group(3), m.group(4) or "")
    return rows


def test_each_failure_says_why(binaries: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expect = binaries / "expect"
    expect.mkdir()
    wrong = HELLO_TOML.replace("values = [15]", "values = [16]").replace("[0, 3]", "[1, 4]")
    (expect / "hello.toml").write_text(wrong.replace("nr_tasklets = 4", "nr_tasklets = 8"))
    (expect / "fault.toml").write_text('[launch]\nexpect = "DPU_ERR_DPU_FAULT"\nfault = 5\n')
    (expect / "gone.toml").write_text('[launch]\nexpect = "ok"\n')
    rc, lines = conformance(capsys, str(binaries), "--expect", str(expect))
    assert rc == EXIT_FAILED and lines[-1] == "conformance 0/4"
    rows = rows_of(lines)
    assert list(rows) == ["fault", "gone", "hello", "spin"]  # spin.dpu: after the expectations
    assert all(result == "FAIL" for result, _, _ in rows.values())
    assert rows["hello"][2] == (
        "NR_TASKLETS is 4, expected 8; log[0] match: group T: expected 1..4 each once; "
        "missing 4; outside 0; symbol[0] counter: element 0 is 15, expected 16"
    )
    assert rows["fault"][2].startswith("launch: fault code 3, expected 5 (DPU ")
    assert "thread 0 at PC 0 (__bootstrap): fault 3 (assertion failed)" in rows["fault"][2]
    assert rows["gone"] == ("FAIL", "-", f"no binary {binaries / 'gone.dpu'}")
    assert rows["spin"] == (
        "FAIL",
        "-",
        "no expectations: write spin.toml (see docs/conformance.md)",
    )


def test_wrong_launch_outcomes(binaries: Path) -> None:
    ok = parse_expectation('[launch]\nexpect = "ok"\n', str(binaries / "fault.toml"))
    result = run_expectation(ok, binaries)
    assert not result.passed and result.reason.startswith(
        "launch: failed with DPU_ERR_DPU_FAULT, expected ok (DPU "
    )
    assert "thread 0 at PC 0 (__bootstrap): fault 3 (assertion failed)" in result.reason
    busy = parse_expectation(
        '[launch]\nexpect = "DPU_ERR_DPU_FAULT"\n', str(binaries / "hello.toml")
    )
    result = run_expectation(busy, binaries)
    assert result.reason == "launch: succeeded, expected DPU_ERR_DPU_FAULT"
    other = parse_expectation(
        '[launch]\nexpect = "DPU_ERR_TIMEOUT"\n', str(binaries / "fault.toml")
    )
    assert run_expectation(other, binaries).reason.startswith(
        "launch: failed with DPU_ERR_DPU_FAULT, expected DPU_ERR_TIMEOUT ("
    )


def test_a_load_error_is_a_failure(binaries: Path) -> None:
    v1a = parse_expectation('[machine]\nchip = "v1A"\n[launch]\n', str(binaries / "fault.toml"))
    result = run_expectation(v1a, binaries)
    assert not result.passed and result.virtual_ps == 0
    assert result.reason == (
        "dpu_load: DPU_ERR_INTERNAL (1): 'fault' was built for v1B but the machine is v1A: "
        'allocate v1B DPUs with dpu_alloc(n, "chip=v1B") or run on MachineConfig(chip="v1B")'
    )
    nowhere = parse_expectation(
        "[launch]\n[[copy_to]]\nsymbol = 'nope'\ndata = { values = [1] }\n",
        str(binaries / "hello.toml"),
    )
    assert run_expectation(nowhere, binaries).reason.startswith(
        "copy_to[0]: DPU_ERR_UNKNOWN_SYMBOL (29): 'hello' has no host-visible symbol 'nope'"
    )


def test_several_dpus_are_each_checked(binaries: Path) -> None:
    exp = parse_expectation(
        HELLO_TOML.replace("[launch]", "[machine]\nnr_dpus = 3\n\n[launch]"),
        str(binaries / "hello.toml"),
    )
    assert run_expectation(exp, binaries, backend="trio").passed
    faults = parse_expectation(
        '[machine]\nnr_dpus = 2\n[launch]\nexpect = "DPU_ERR_DPU_FAULT"\nfault = 3\n',
        str(binaries / "fault.toml"),
    )
    assert run_expectation(faults, binaries).passed  # both DPUs stop with fault 3
    wrong = parse_expectation(
        "[machine]\nnr_dpus = 2\n[[symbol]]\nname = 'counter'\ndtype = 'uint32'\nvalues = [9]\n",
        str(binaries / "hello.toml"),
    )
    assert run_expectation(wrong, binaries).problems == (
        "DPU 0: symbol[0] counter: element 0 is 10, expected 9",
        "DPU 1: symbol[0] counter: element 0 is 10, expected 9",
    )


def test_expectation_directory_and_input_errors(
    binaries: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert expectation_dir(binaries) == binaries
    assert expectation_dir(binaries, "elsewhere") == Path("elsewhere")
    empty = tmp_path_factory.mktemp("empty")
    assert expectation_dir(empty) == EXPECTATIONS  # aiopim's own, for UPMEM's samples
    (binaries / "bad.toml").write_text("[launch]\nexpect = 1\n")
    assert cli_main(["conformance", str(binaries)]) == EXIT_INPUT
    out, err = capsys.readouterr()
    assert out == ""
    bad = binaries / "bad.toml"
    assert err == f"aiopim conformance: {bad}:2: launch.expect: expected a string, got 1\n"
    assert cli_main(["conformance", str(binaries / "hello.dpu")]) == EXIT_INPUT
    assert capsys.readouterr().err == (
        f"aiopim conformance: {binaries / 'hello.dpu'}: not a directory of binaries\n"
    )


def test_engine_option_sets_the_environment(
    binaries: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiopim.isa import _engine

    monkeypatch.delenv("AIOPIM_ISA_ENGINE", raising=False)
    (binaries / "spin.dpu").unlink()
    (binaries / "spin.toml").unlink()
    try:
        rc, lines = conformance(capsys, str(binaries), "--engine", "python")
        assert rc == 0 and lines[-1] == "conformance 2/2"
        assert _engine.engine_name() == "python"
        use_engine("compiled")
        assert _engine.engine_name() == "compiled"
    finally:
        use_engine(None)
    with pytest.raises(ValueError, match="engine must be one of python, compiled, not 'numba'"):
        use_engine("numba")
