"""The assembler: syntax, layout, errors with positions, ELFs aiopim's loader accepts, the
example program, and disassemble -> reassemble identity; the asm/disasm commands."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiopim
from aiopim.cli import main as cli_main
from aiopim.elf import load_elf
from aiopim.isa import (
    AsmError,
    Instruction,
    assemble,
    assemble_program,
    decode,
    disassemble,
    encode,
    format_listing,
    text_words,
)
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    dpu_alloc,
    dpu_copy_from,
    dpu_copy_to,
    dpu_foreach,
    dpu_launch,
    dpu_load,
)

HELLO = Path(__file__).resolve().parent.parent / "examples" / "isa" / "hello.S"

PROGRAM = """
        .set NR_TASKLETS, 3
        .set STACK_SIZE_TASKLET_1, 512
        .text
        .globl __bootstrap
__bootstrap:
        jnz id, start           // comment
start:  ld d22, id8, __sys_thread_stack_table_ptr
        call r23, main
end:    stop true, end
        .globl main
        .type main, @function
main:
        move r0, table + 4
        lw r1, r0, 0 ; /* block
        comment */ add r1, r1, 1, nz, .+2
        sw zero, answer, r1
        jump r23
        .size main, . - main
        .data
table:  .word 1, 2, -1, 0xdeadbeef
bytes:  .byte 1, 255, -128
        .balign 8
text:   .ascii "ab"
        .asciz "c\\n"
        .rodata
ro:     .short 7, 8
        .quad 0x0102030405060708
        .bss
scratch: .zero 24
        .host
        .globl answer
answer: .long 0
        .mram
        .globl mtable
mtable: .quad 1, 2
        .section .mram.noinit
big:    .space 4096
        .atomic
lock0:  .byte 0
lock1:  .byte 0
        .set limit, (1 << 4) * 3 - ~0
"""


def test_program_layout_and_symbols() -> None:
    asm = assemble_program(PROGRAM, "v1B")
    prog = load_elf(asm.elf)
    assert prog.nr_tasklets == 3 and prog.chip == "v1B"
    assert prog.stack_sizes == [1024, 512, 1024]
    sym = {s.name: s for s in prog.all_symbols()}
    assert sym["__bootstrap"].address == 0x80000000 and sym["__bootstrap"].bind == "GLOBAL"
    assert sym["main"].address == 0x80000000 + 8 * 4
    assert sym["main"].size == 5 * 8 and sym["main"].type == "FUNC"
    assert sym["start"].bind == "LOCAL"
    assert sym["table"].address == 8  # after the reserved zero word
    assert sym["mtable"].address & 0x08000000 and sym["big"].address == 0x08000000
    assert sym["lock0"].address == 0xF0000000 and sym["lock1"].address == 0xF0000001
    assert sym["limit"].section == "ABS" and sym["limit"].address == 49
    assert sym["NR_TASKLETS"].address == 3
    # host visibility follows the SDK rule: __host variables yes, plain WRAM data no
    assert "answer" in prog.symbols() and "table" not in prog.symbols()
    assert "mtable" in prog.symbols()
    assert prog.symbols()["__sys_used_mram_end"].address == sym["mtable"].address + 16
    # images: .text words, data bytes, .mram; the stack table holds each stack's base at +4
    images = {img.address: img.data for img in prog.images()}
    words = asm.text
    assert images[0x80000000] == struct.pack(f"<{len(words)}Q", *words)
    data = images[0]
    assert data[8:24] == struct.pack("<IIiI", 1, 2, -1, 0xDEADBEEF)
    assert data[24:27] == bytes([1, 255, 128])
    text = sym["text"].address
    assert data[text : text + 5] == b"abc\n\0"
    table = sym["__sys_thread_stack_table_ptr"].address
    entries = images[table]
    bases = [struct.unpack_from("<II", entries, 8 * i)[1] for i in range(3)]
    assert bases == [sym[f"__sys_stack_thread_{i}"].address for i in range(3)]
    assert bases[1] - bases[0] == 1024 and bases[2] - bases[1] == 512
    assert prog.heap_start == sym["__sys_heap_pointer_reset"].address
    assert images[sym["mtable"].address] == struct.pack("<QQ", 1, 2)
    # instructions: label arithmetic, data addresses, `.` in instruction units
    first = decode(words[4])
    assert first is not None and first.values()["imm"] == sym["table"].address + 4
    add = decode(words[6])
    assert add is not None and add.values()["pc"] == 8
    assert decode(words[0]).values()["pc"] == 1  # type: ignore[union-attr]


def _run_counter(elf: bytes, chip: str) -> int:
    prog = load_elf(elf)

    async def main(t: aiopim.Tasklet) -> None:  # stands in for the code until it can run
        if t.me() == 0:
            v = t.view(prog.address_of("answer"), np.uint32, 1)
            v[0] += 5

    prog.bind(main)

    async def host() -> int:
        dpus = await dpu_alloc(1, "")
        await dpu_load(dpus, prog)
        await dpu_copy_to(dpus, "answer", 0, np.array([37], np.uint32), 4)
        await dpu_launch(dpus, DPU_SYNCHRONOUS)
        out = np.zeros(1, np.uint32)
        for d, _ in dpu_foreach(dpus):
            await dpu_copy_from(d, "answer", 0, out, 4)
        return int(out[0])

    return int(aiopim.run(host, machine=aiopim.MachineConfig(chip=chip)))


@pytest.mark.parametrize("chip", ["v1A", "v1B"])
def test_elf_loads_on_its_chip(chip: str) -> None:
    elf = assemble(PROGRAM, chip)
    assert load_elf(elf).chip == chip
    assert _run_counter(elf, chip) == 42


def test_too_many_tasklets_for_the_chip() -> None:
    src = ".set NR_TASKLETS, 20\n nop\n"
    assert load_elf(assemble(src, "v1A")).nr_tasklets == 20
    with pytest.raises(AsmError, match="NR_TASKLETS=20"):
        assemble(src, "v1B")


def test_hello_example_disassembles_and_reassembles_identically() -> None:
    elf = assemble(HELLO.read_text(), "v1B", source=str(HELLO))
    prog = load_elf(elf)
    assert prog.nr_tasklets == 4 and "counter" in prog.symbols()
    words = text_words(elf)
    assert len(words) == 49
    labels = {
        (s.address - 0x80000000) // 8: s.name for s in prog.all_symbols() if s.section == ".text"
    }
    source = disassemble(words, labels)
    # the listing's data addresses are numbers; the runtime symbols are re-created the same
    again = assemble_program(source, "v1B")
    assert again.text == words
    listing = format_listing(elf)
    assert "80000000 <__bootstrap>:" in listing
    assert "jnz id, __sys_start_thread" in listing
    assert "call r23, main" in listing and "stop true, __sys_end" in listing
    assert "acquire zero, 0, nz, __main_lock" in listing


def test_cli_asm_and_disasm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hello.dpu"
    assert cli_main(["asm", str(HELLO), "-o", str(out)]) == 0
    assert load_elf(out).chip == "v1B"
    assert cli_main(["asm", str(HELLO), "-o", str(tmp_path / "a.dpu"), "--chip", "v1A"]) == 0
    assert load_elf(tmp_path / "a.dpu").chip == "v1A"
    capsys.readouterr()
    assert cli_main(["disasm", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Disassembly of section .text:" in text and "<main>:" in text
    assert cli_main(["disasm", "--source", str(out)]) == 0
    source = capsys.readouterr().out
    assert source.startswith("__bootstrap:\n    jnz id, __sys_start_thread\n")
    assert assemble_program(source).text == text_words(out.read_bytes())
    bad = tmp_path / "bad.S"
    bad.write_text("nop\n  frobnicate r0\n")
    assert cli_main(["asm", str(bad), "-o", str(tmp_path / "x")]) == 1
    assert f"{bad}:2:3: error: unknown instruction 'frobnicate'" in capsys.readouterr().err
    assert cli_main(["disasm", str(bad)]) == 2
    assert "DPU_ERR_ELF_INVALID_FILE" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "line", "column", "message"),
    [
        ("nop\n  frobnicate r0", 2, 3, "unknown instruction 'frobnicate'"),
        ("  add r0, r1", 1, 3, "add takes"),
        ("  add r0, r1, r99", 1, 15, "r99"),
        ("  jump nowhere", 1, 8, "undefined symbol 'nowhere'"),
        ("x: nop\nx: nop", 2, 1, "already defined"),
        ("  .data\n  add r0, r0, 1", 2, 3, "outside a .text section"),
        ("  .word 1", 1, 3, "not allowed in .text"),
        ("  .data\n  .byte 256", 2, 9, "does not fit 1 bytes"),
        ("  .bss\n  .word 1", 2, 3, "NOBITS"),
        ("  .frob 1", 1, 3, "unknown directive"),
        ("  move r0, (1 +", 1, 16, "expression expected"),
        ("  move r0, 1 $ 2", 1, 14, "unexpected '$'"),
        ("  add r0, r1, 5, z, 70000", 1, 21, "out of range"),
        ("  add r0, r1, 300, z, 1", 1, 15, "does not fit"),
        ("  add one, r1, 2", 1, 7, "read-only"),
        ("  .balign 3", 1, 11, "not a power of 2"),
        ("  .set a, b\n  .set b, a\n  move r0, a", 1, 3, "itself"),
        ("  .globl ghost\n nop", 1, 3, "not defined"),
        ('  .data\n  .ascii "abc', 2, 10, "string literal"),
        ("  .set NR_TASKLETS, 0", 0, 0, "NR_TASKLETS=0"),
        ("  .set STACK_SIZE_TASKLET_0, 12", 0, 0, "multiple of 8"),
        ("r3: nop", 1, 1, "register name"),
        # found by the token-level fuzzing of the examples (tests/test_text_fuzz.py)
        ("  jnz:id, x\nx: nop", 1, 3, "unknown instruction 'jnz:id'"),
        ("  .data\nx: .long 1\n  .size x, -1", 3, 12, ".size -1 of 'x' is out of range"),
        ("main: nop\n  .size main, 1 << 40", 2, 15, "out of range"),
    ],
)
def test_errors_have_line_and_column(source: str, line: int, column: int, message: str) -> None:
    with pytest.raises(AsmError) as info:
        assemble(source)
    err = info.value
    assert message in err.message, err
    assert err.line == line
    if column:
        assert err.column == column, err
    assert str(err).startswith("<asm>")


def test_oversized_program_is_rejected() -> None:
    with pytest.raises(AsmError, match="do not fit the v1B IRAM"):
        assemble("nop\n" * 3969, "v1B")
    assert len(assemble_program("nop\n" * 3969, "v1A").text) == 3969
    with pytest.raises(AsmError, match="WRAM"):
        assemble(".data\n.zero 70000\n", "v1A")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="chip"):
        assemble("nop", "v2")
    with pytest.raises(TypeError, match="text"):
        assemble(b"nop")  # type: ignore[arg-type]


def test_text_padding_uses_nop_and_exact_spelling_is_accepted() -> None:
    words = assemble_program("nop\n.balign 32\nadd:rri r0, r1, 2\n").text
    nop = encode(Instruction.make("nop:"))
    assert words[:4] == [nop, nop, nop, nop]
    assert decode(words[4]).signature == "add:rri"  # type: ignore[union-attr]


def test_bootstrap_section_goes_first_in_iram() -> None:
    src = """
        .text
    main:   nop
        .section .text.__bootstrap,"ax",@progbits
    __bootstrap:
        jump main
    """
    asm = assemble_program(src)
    assert asm.symbols["__bootstrap"] == 0x80000000 and asm.symbols["main"] == 0x80000008
    assert decode(asm.text[0]).values()["off"] == 1  # type: ignore[union-attr]


def test_listing_marks_undecodable_and_illegal_words() -> None:
    from aiopim.isa.elfwriter import SHF_ALLOC, SHF_EXECINSTR, ElfWriter

    illegal = encode(Instruction.make("movd:rrci", dc=3, db=4, cc=1, pc=0))
    good = encode(Instruction.make("nop:"))
    w = ElfWriter(chip="v1A")
    code = struct.pack("<3Q", good, 0xFFFFFFFFFFFF, illegal)
    w.progbits(".text", 0x80000000, code, SHF_ALLOC | SHF_EXECINSTR)
    w.symbol("start", 0x80000000, 24, section=".text")
    listing = format_listing(w.to_bytes())
    lines = listing.splitlines()
    assert "file format elf32-dpu (v1A)" in lines[0]
    assert lines[-3].endswith("nop") and lines[-2].endswith("(undecodable)")
    assert "movd d3, d4, true, start" in lines[-1] and "illegal: odd register pair" in lines[-1]
    with pytest.raises(ValueError, match="word 1"):
        disassemble([good, 0xFFFFFFFFFFFF])


_TOKENS = [
    "add", "jump", "move", "lw", "sd", ".word", ".zero", ".set", ".section", ".balign", ".ascii",
    ".text", ".data", ".mram", ".atomic", "r0", "d2", "zero", "id8", "z", "?nz", "!big", "x",
    "x:", "1", "-5", "0x10", "(", ")", "+", "<<", ",", ",", '"a\\n"', "'c'", ".", "#", "//",
    "/*", "*/", ";", ":", "$", "\\", "\t", "add:rri", "1 << 40", ".p2align", ".globl", "@",
]  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=3)), max_size=8),
        max_size=6,
    )
)
def test_any_text_assembles_or_fails_with_a_position(lines: list[list[str]]) -> None:
    text = "\n".join(" ".join(tokens) for tokens in lines)
    try:
        elf = assemble(text)
    except AsmError as err:
        assert 0 <= err.line <= text.count("\n") + 1 and err.column >= 0
    else:
        assert load_elf(elf).nr_tasklets == 1


def test_labels_in_empty_sections() -> None:
    prog = load_elf(assemble("x:\n .mram\n .data\ny:\n"))
    assert prog.symbol("x").address == 0x80000000 and prog.symbol("y").address == 8


def test_line_endings() -> None:
    assert assemble_program("nop\r\nnop\r\n").text == [encode(Instruction.make("nop:"))] * 2
    with pytest.raises(AsmError) as info:
        assemble("nop\n\rnop 1")
    assert info.value.line == 2
