"""DIDL: the seed's interface parses as written; every error class names file, line, column
and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiopim.dpu import MailboxLayout
from aiopim.kelonia import DidlError, load_didl, parse_didl
from aiopim.kelonia._didl import check_resources

ROOT = Path(__file__).resolve().parent.parent
MRAM = 64 << 20


def test_the_seed_interface_parses_with_positions() -> None:
    iface = load_didl(ROOT / "examples" / "charcount.didl")
    assert iface.name == "charcount" and iface.class_name == "CharcountInterface"
    (f,) = iface.functions
    assert (f.name, f.python_name) == ("countCharacters", "count_characters")
    assert [(p.python_name, p.direction, p.scalar, p.length) for p in f.params] == [
        ("document_length", "in", "u32", None),
        ("requested_char", "in", "u8", None),
        ("counters", "out", "u32", 16),
    ]
    m = f.mapping("counters")
    assert (m.kind, m.tasklets, m.words) == ("mbox", (0, 15), (0, 0))
    assert (m.pos.line, m.pos.column) == (18, 5)
    assert f.mapping("requestedChar").words == (1, 1)
    assert [w for _, w in f.mapping("documentLength").word_slots()] == [0]
    layout = MailboxLayout(2, (1,) * 16)
    check_resources(iface, layout, MRAM)  # the seed's run-time configuration fits


def test_comments_trailing_commas_hex_offsets_and_several_functions() -> None:
    text = """/* block
    comment */ function a(x: inout u64[2], y: out u16,) {  // line comment
        x <- dram[0x100], y <- mbox[1][0..0],
    }
    function bB(z: in u8[4]) { z <- sysmbox[0..3] }"""
    iface = parse_didl(text, "t.didl")
    a, b = iface.functions
    assert a.mapping("x").offset == 0x100 and a.mapping("x").kind == "dram"
    assert [p.name for p in a.outputs] == ["x", "y"] and [p.name for p in a.inputs] == ["x"]
    assert b.python_name == "b_b" and b.mapping("z").nr_words == 4
    assert a.mapping("y").word_slots() == [(1, 0)]


def _error(text: str) -> DidlError:
    with pytest.raises(DidlError) as info:
        parse_didl(text, "bad.didl")
    err = info.value
    assert err.file == "bad.didl"
    assert str(err).startswith(f"bad.didl:{err.line}:{err.column}: ")
    return err


GOOD = "function f(a: in u32) { a <- sysmbox[0] }"


@pytest.mark.parametrize(
    ("text", "line", "column", "message", "expected"),
    [
        # syntax: a token where another was expected
        ("function f(a in u32) {}", 1, 14, "unexpected 'in'", "':'"),
        ("function f(a: in u32) {\n  a -> sysmbox[0] }", 2, 5, "unexpected character '-'", "'<-'"),
        ("function f(a: u32) {}", 1, 15, "unexpected 'u32'", "a direction (in, out, inout)"),
        ("fn f() {}", 1, 1, "unexpected 'fn'", "'function'"),
        # end of file, unterminated comment, a stray character
        ("function f(a: in u32) {\n  a <- sysmbox[0]", 2, 18, "unexpected end of file", "}"),
        (GOOD + "\n/* never closed", 2, 1, "unterminated /* comment", "'*/'"),
        (GOOD + " #", 1, 43, "unexpected character '#'", "'function'"),
        # types and ranges
        ("function f(a: in u24) {a <- sysmbox[0]}", 1, 18, "unknown type 'u24'", "u8, u16"),
        ("function f(a: in u8[0]) {a <- sysmbox[0]}", 1, 21, "is empty", "a length >= 1"),
        ("function f(a: in u8[08]) {a <- sysmbox[0]}", 1, 21, "'08' has a leading zero", "(8)"),
        ("function f(a: in u32) {a <- sysmbox[0..010]}", 1, 40, "leading zero", "0x hex"),
        ("function f(a: out u32) {a <- dram[00]}", 1, 35, "'00' has a leading zero", "(0)"),
        ("function f(a: in u32) {a <- sysmbox[3..1]}", 1, 37, "empty word range", "first <= "),
        ("function f(a: out u32[2]) {a <- mbox[2..1][0]}", 1, 38, "empty tasklet range", ""),
        # names
        ("function f(a: in u32) {a <- sysmbox[0]}\nfunction f(b: in u32) {b <- sysmbox[0]}",
         2, 10, "same Python name 'f'", "a unique function name"),
        ("function memoryCopy() {}", 1, 10, "clashes with the memory-copy task", ""),
        ("function f(a: in u32, a: in u8) {a <- sysmbox[0]}", 1, 23, "declared twice", ""),
        ("function f(class: in u32) {class <- sysmbox[0]}", 1, 12, "cannot be a Python name", ""),
        ("function f(self: in u32) {self <- sysmbox[0]}", 1, 12, "is reserved", "another name"),
        ("function invoke() {}", 1, 10, "'invoke' is reserved", ""),
        ("function _f() {}", 1, 10, "cannot be a Python name", ""),
        ("function f(a: in u32) {b <- sysmbox[0]}", 1, 24, "'b' is not a parameter", "'a'"),
        ("function f(a: in u32) {a <- sysmbox[0], a <- sysmbox[1]}", 1, 41, "mapped twice", ""),
        ("function f(a: in u32) {}", 1, 10, "'a' of 'f' is not mapped", "'a <- ...'"),
        ("", 1, 1, "no function declared", "'function'"),
        # directions and sizes
        ("function f(a: out u32) {a <- sysmbox[0]}", 1, 25, "only carries host requests", "'in'"),
        ("function f(a: in u64) {a <- sysmbox[0]}", 1, 24, "needs 2 system mailbox word", ""),
        ("function f(a: out u32[4]) {a <- mbox[0..2][0]}", 1, 28, "covers 3", "4 word"),
        ("function f(a: out u64[2]) {a <- mbox[0..1][0]}", 1, 28, "each element takes 2", ""),
        ("function f(a: in u32) {a <- dram[4]}", 1, 24, "not 8-byte aligned", "multiple of 8"),
        # overlaps
        ("function f(a: in u32, b: inout u32) {a <- mbox[0][0], b <- mbox[0][0]}",
         1, 55, "both use mbox[0][0] as inputs", "disjoint mailbox words"),
        ("function f(a: out u8[16], b: out u32) {a <- dram[0], b <- dram[8]}",
         1, 54, "overlap as outputs", "disjoint MRAM regions"),
    ],
)  # fmt: skip
def test_every_error_names_its_place_and_what_was_expected(
    text: str, line: int, column: int, message: str, expected: str
) -> None:
    err = _error(text)
    assert (err.line, err.column) == (line, column), str(err)
    assert message in err.message, str(err)
    assert expected in err.expected, str(err)


def test_an_in_and_an_out_may_share_a_mailbox_word() -> None:
    f = parse_didl("function f(a: in u32, b: out u32) {a <- mbox[0][0], b <- mbox[0][0]}")
    assert [m.word_slots() for m in f.functions[0].mappings] == [[(0, 0)], [(0, 0)]]


@pytest.mark.parametrize(
    ("text", "layout", "message", "expected"),
    [
        (GOOD.replace("[0]", "[2]"), MailboxLayout(2, (1,)), "declares sysmbox 2", "words 0..1"),
        (GOOD, MailboxLayout(0, (1,)), "declares sysmbox 0", "a program with a system mailbox"),
        ("function f(a: out u32[17]) {a <- mbox[0..16][0]}", MailboxLayout(2, (1,) * 16),
         "has 16 tasklets", "tasklets 0..15"),
        ("function f(a: out u32[2]) {a <- mbox[0..1][1]}", MailboxLayout(0, (2, 1)),
         "gives tasklet 1 a mailbox of 1 word", "words 0..0"),
        ("function f(a: out u32) {a <- mbox[1][0]}", MailboxLayout(0, (1, 0)),
         "mailbox of 0 word", "a tasklet with a mailbox"),
        (GOOD, None, "declares no mailboxes", "Program.mailboxes"),
        ("function f(a: out u64[2]) {a <- dram[0x3fffff8]}", None, "beyond the", "inside MRAM"),
    ],
)  # fmt: skip
def test_mappings_are_checked_against_the_program(
    text: str, layout: MailboxLayout | None, message: str, expected: str
) -> None:
    iface = parse_didl(text, "r.didl")
    with pytest.raises(DidlError) as info:
        check_resources(iface, layout, MRAM, "program 'p'")
    err = info.value
    assert (err.file, err.line) == ("r.didl", 1)
    assert err.column == text.index("a <-") + 1
    assert message in err.message and expected in err.expected, str(err)
