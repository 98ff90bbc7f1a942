"""DPU ELF binaries: symbols and visibility, images, tasklets, chip tag, errors, models, CLI."""

from __future__ import annotations

import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from elftools.common.exceptions import ELFError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim import timing
from aiopim._machine._program import space_offset
from aiopim.elf import (
    ELF_ERROR_CODES,
    ElfProgram,
    SymbolRow,
    chip_from_attributes,
    format_symbols,
    load_elf,
    main_symbols,
    register_model,
    registered_model,
    unregister_model,
)
from aiopim.elf import _parse as elfparse
from aiopim.isa._runner import decoded_binary
from aiopim.isa.elfwriter import (
    ELFCLASS64,
    ELFDATA2MSB,
    ET_REL,
    IRAM_BASE,
    MRAM_BASE,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    STB_LOCAL,
    STT_FUNC,
    ElfWriter,
    SymbolSpec,
    dpu_attributes,
    sample_dpu_elf,
)
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    DpuError,
    DpuErrorCode,
    dpu_alloc,
    dpu_copy_from,
    dpu_copy_to,
    dpu_foreach,
    dpu_get_symbol,
    dpu_launch,
    dpu_load,
)

E = DpuErrorCode
MIB = 1 << 20
V1A, V1B = timing.CHIPS["v1A"], timing.CHIPS["v1B"]


def _build(**kw: Any) -> Any:
    kw.setdefault("host_vars", {"input": struct.pack("<I", 5), "result": bytes(8)})
    kw.setdefault("wram_vars", {"hidden": b"\x01\x02\x03\x04"})
    kw.setdefault("mram_vars", {"table": bytes(range(16))})
    kw.setdefault("mram_noinit_vars", {"scratch": 4096})
    return sample_dpu_elf(**kw)


def sample(**kw: Any) -> bytes:
    return _build(**kw)[0]


def layout(**kw: Any) -> Any:
    return _build(**kw)[1]


SAMPLE = sample()


def err_of(source: Any, **kw: Any) -> DpuError:
    with pytest.raises(DpuError) as info:
        ElfProgram(source, **kw)
    return info.value


def minimal(**kw: Any) -> ElfWriter:
    """A tiny valid binary: .text, .data.__sys_host with ``v``."""
    w = ElfWriter(**kw)
    w.progbits(".text", IRAM_BASE, bytes(16), SHF_ALLOC | SHF_EXECINSTR)
    w.progbits(".data.__sys_host", 0x8, b"\x07\0\0\0")
    w.symbol("v", 0x8, 4, section=".data.__sys_host")
    return w


def patch_u32(data: bytes, offset: int, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into("<I", b, offset, value)
    return bytes(b)


def patch_u16(data: bytes, offset: int, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into("<H", b, offset, value)
    return bytes(b)


def section_header_offset(data: bytes, name: str) -> int:
    """File offset of the section header of ``name`` (parsed independently of aiopim)."""
    (shoff,) = struct.unpack_from("<I", data, 32)
    shnum, shstrndx = struct.unpack_from("<HH", data, 48)
    str_off = struct.unpack_from("<I", data, shoff + shstrndx * 40 + 16)[0]
    for i in range(shnum):
        nm = struct.unpack_from("<I", data, shoff + i * 40)[0]
        end = data.index(b"\0", str_off + nm)
        if data[str_off + nm : end].decode() == name:
            return shoff + i * 40
    raise KeyError(name)


# ================================================================================================
# symbols and visibility (sdk-reference.md §1.4)
# ================================================================================================
def test_host_visible_symbols_follow_the_sdk_rules() -> None:
    prog = load_elf(SAMPLE)
    syms = prog.symbols()
    lay = layout()
    # WRAM data: only .data.__sys_host is visible
    for name in ("CLOCKS_PER_SEC", "input", "result"):
        assert syms[name].address == lay.symbols[name][0]
        assert syms[name].space is aiopim.MemorySpace.WRAM
    for hidden in ("hidden", "__sys_zero", "__sys_stack_thread_0", "__sw_cache_buffer"):
        assert hidden not in syms
        assert any(s.name == hidden and not s.visible for s in prog.all_symbols())
    assert "__sys_heap_pointer_reset" not in syms
    # every symbol of a non-.data section: .mram, .mram.noinit, .text, .atomic, ABS
    assert syms["table"] == aiopim.Symbol("table", lay.symbols["table"][0], 16)
    assert syms["table"].space is aiopim.MemorySpace.MRAM
    assert syms["scratch"].size == 4096 and syms["scratch"].space is aiopim.MemorySpace.MRAM
    assert syms["__stdout_buffer"] == aiopim.Symbol("__stdout_buffer", MRAM_BASE, MIB)
    assert syms["main"].space is aiopim.MemorySpace.IRAM
    assert syms["main"].address == IRAM_BASE + 16
    assert syms["my_mutex"].address == 0xF0000000
    assert syms["NR_TASKLETS"].address == 2
    assert syms["STACK_SIZE_TASKLET_0"].address == 1024
    # STT_FILE symbols are not addresses
    assert "main.c" not in syms
    assert next(s for s in prog.all_symbols() if s.name == "main.c").section == "ABS"


def test_hidden_wram_symbol_is_unknown_to_the_host_but_known_to_the_model() -> None:
    prog = load_elf(SAMPLE)
    with pytest.raises(DpuError) as info:
        dpu_get_symbol(prog, "hidden")
    assert info.value.code is E.DPU_ERR_UNKNOWN_SYMBOL
    assert dpu_get_symbol(prog, "input").size == 4
    assert prog.address_of("hidden") == layout().symbols["hidden"][0]
    with pytest.raises(DpuError) as info:
        prog.address_of("nope")
    assert info.value.code is E.DPU_ERR_UNKNOWN_SYMBOL


def test_other_data_sections_are_hidden_and_local_mram_symbols_visible() -> None:
    w = minimal()
    w.progbits(".data.__sys_profiling", 0x10, bytes(8))
    w.symbol("prof", 0x10, 8, section=".data.__sys_profiling")
    w.progbits(".data.custom", 0x18, bytes(8))
    w.symbol("custom", 0x18, 8, section=".data.custom")
    w.progbits(".mram", MRAM_BASE, bytes(8))
    w.symbol("local_m", MRAM_BASE, 8, section=".mram", bind=STB_LOCAL)
    w.symbol("und", 0, section="UND")
    w.symbol("com", 0, 4, section="COMMON")
    w.symbol("outside", 0x40, 4, section=999)
    prog = load_elf(w.to_bytes())
    syms = prog.symbols()
    assert set(syms) == {"v", "local_m"}
    by_name = {s.name: s for s in prog.all_symbols()}
    assert by_name["prof"].section == ".data.__sys_profiling" and not by_name["prof"].visible
    assert by_name["custom"].section == ".data.custom" and not by_name["custom"].visible
    assert by_name["und"].section == "UND" and not by_name["und"].defined
    assert by_name["com"].section == "COMMON" and not by_name["com"].visible
    assert by_name["outside"].section == "#999" and not by_name["outside"].visible


def test_duplicate_names_first_visible_wins_and_model_prefers_globals() -> None:
    w = minimal()
    w.progbits(".data", 0x20, bytes(8))
    w.symbol("counter", 0x20, 4, section=".data", bind=STB_LOCAL)  # a static, invisible
    w.symbol("counter", 0x8, 4, section=".data.__sys_host")
    prog = load_elf(w.to_bytes())
    assert prog.symbols()["counter"].address == 0x8
    assert prog.address_of("counter") == 0x8  # global before local
    assert [s.address for s in prog.all_symbols() if s.name == "counter"] == [0x20, 0x8]
    # the table names the section of the symbol the host sees, not the first one in .symtab
    line = next(ln for ln in format_symbols(prog).splitlines() if ln.endswith(" counter"))
    assert line.split() == ["0x00000008", "4", "WRAM", ".data.__sys_host", "counter"]


def test_mram_heap_pointer_size_is_the_rest_of_mram() -> None:
    prog = load_elf(SAMPLE)
    heap = prog.symbols()["__sys_used_mram_end"]
    offset = layout().symbols["__sys_used_mram_end"][0] & ~MRAM_BASE
    assert heap.address == MRAM_BASE | offset
    assert heap.size == 64 * MIB - offset
    elf_size = next(s.size for s in prog.all_symbols() if s.name == "__sys_used_mram_end")
    assert elf_size == 0


def test_symbol_table_rows_sorted_by_address() -> None:
    prog = load_elf(SAMPLE)
    rows = prog.symbol_table()
    assert all(isinstance(r, SymbolRow) for r in rows)
    assert [r.address for r in rows] == sorted(r.address for r in rows)
    assert {r.name for r in rows} == set(prog.symbols())
    row = next(r for r in rows if r.name == "input")
    assert row == ("input", aiopim.MemorySpace.WRAM, prog.symbols()["input"].address, 4)


# ================================================================================================
# tasklets, stacks, chip
# ================================================================================================
def test_nr_tasklets_and_stack_sizes() -> None:
    prog = load_elf(sample(nr_tasklets=5, stack_size=512))
    assert prog.nr_tasklets == 5
    assert prog.stack_sizes == [512] * 5
    w = minimal()
    w.symbol("NR_TASKLETS", 3)
    w.symbol("STACK_SIZE_TASKLET_0", 2048)
    w.symbol("STACK_SIZE_TASKLET_1", 256)  # STACK_SIZE_TASKLET_2 missing: 0
    prog = load_elf(w.to_bytes())
    assert (prog.nr_tasklets, prog.stack_sizes) == (3, [2048, 256, 0])


def test_no_nr_tasklets_means_one_and_zero_is_invalid() -> None:
    prog = load_elf(sample(nr_tasklets=None))
    assert prog.nr_tasklets == 1 and prog.stack_sizes == [1024]
    w = minimal()
    w.symbol("NR_TASKLETS", 0)
    assert err_of(w.to_bytes()).code is E.DPU_ERR_ELF_INVALID_FILE


@pytest.mark.parametrize("chip", ["v1A", "v1B"])
def test_chip_tag_from_dpu_attributes(chip: str) -> None:
    prog = load_elf(sample(chip=chip))
    assert prog.chip == chip and prog.cpu_name == chip
    raw = next(s for s in prog.sections() if s.name == ".dpu.attributes")
    assert raw.type == 0x70000003 and not raw.allocated


def test_chip_tag_absent_means_any() -> None:
    prog = load_elf(sample(chip=None))
    assert prog.chip is None and prog.cpu_name is None
    assert all(s.name != ".dpu.attributes" for s in prog.sections())


@pytest.mark.parametrize(
    ("raw", "chip"),
    [
        (dpu_attributes("v1a"), "v1A"),
        (dpu_attributes("V1B"), "v1B"),
        (dpu_attributes("v1.4"), "v1B"),
        (b"garbage\0target=V1A\0", "v1A"),
        (b"\x00\x01cpu:v1_4", "v1B"),
        (b"upmem dpu 1.4", "v1B"),
        (b"A\xff\xff\xff\xffupmem\0 v1b", "v1B"),  # broken structure: raw search
        (dpu_attributes("generic"), None),
        (b"", None),
    ],
)
def test_chip_encodings(raw: bytes, chip: str | None) -> None:
    assert chip_from_attributes(raw)[0] == chip
    assert load_elf(minimal(attributes=raw).to_bytes()).chip == chip


def test_structured_attributes_give_the_cpu_name() -> None:
    raw = dpu_attributes("v1A")
    assert raw[:1] == b"A" and b"upmem\0" in raw
    assert chip_from_attributes(raw) == ("v1A", "v1A")
    assert chip_from_attributes(dpu_attributes("generic")) == (None, "generic")
    assert chip_from_attributes(None) == (None, None)


# ================================================================================================
# images
# ================================================================================================
def test_images_iram_wram_mram_and_what_is_not_loaded() -> None:
    text = bytes(range(64))
    prog = load_elf(sample(text=text))
    lay = layout(text=text)
    images = {im.address: im.data for im in prog.images()}
    assert images[IRAM_BASE] == text
    assert images[0] == lay.data and lay.data[8:12] == b"\x01\x02\x03\x04"  # .data with hidden
    host_addr = lay.sections[".data.__sys_host"][0]
    assert images[host_addr] == lay.host_data
    assert images[host_addr][8:12] == struct.pack("<I", 5)  # input's initial value
    mram_addr = lay.sections[".mram"][0]
    assert images[mram_addr][:16] == bytes(range(16))
    # not loaded: .mram.noinit (NOBITS), .data.stacks/.data.sw_cache (NOBITS), .atomic,
    # non-allocated .stack_sizes/.debug_info/.dpu.attributes
    assert set(images) == {IRAM_BASE, 0, host_addr, mram_addr}


def test_progbits_mram_noinit_is_not_loaded() -> None:
    w = minimal()
    w.progbits(".mram.noinit", MRAM_BASE, b"\xaa" * 16)
    w.progbits(".mram", MRAM_BASE + 16, b"\xbb" * 8)
    w.progbits(".rodata_wram", 0x40, b"\xcc" * 8)
    prog = load_elf(w.to_bytes())
    images = {im.address: im.data for im in prog.images()}
    assert MRAM_BASE not in images
    assert images[MRAM_BASE + 16] == b"\xbb" * 8
    assert images[0x40] == b"\xcc" * 8
    assert images[0x8] == b"\x07\0\0\0"


def test_heap_start_from_reset_symbol_or_end_of_wram() -> None:
    lay = layout()
    assert load_elf(SAMPLE).heap_start == lay.symbols["__sys_heap_pointer_reset"][0]
    prog = load_elf(sample(heap_pointer_reset=False))
    cache_addr, cache_size = lay.sections[".data.sw_cache"]
    assert prog.heap_start == (cache_addr + cache_size + 7) // 8 * 8
    assert prog.wram_end == cache_addr + cache_size


# ================================================================================================
# check_fits
# ================================================================================================
def test_too_many_tasklets() -> None:
    prog = load_elf(sample(nr_tasklets=20))
    with pytest.raises(DpuError) as info:
        prog.check_fits(V1B)
    assert info.value.code is E.DPU_ERR_TOO_MANY_TASKLETS
    prog.check_fits(V1A)


def test_wram_budget() -> None:
    prog = load_elf(sample(wram_vars={"big": bytes(64000)}))
    with pytest.raises(DpuError) as info:
        prog.check_fits(V1B)
    assert info.value.code is E.DPU_ERR_INVALID_WRAM_ACCESS
    assert "WRAM" in info.value.detail and str(V1B.wram_size) in info.value.detail
    load_elf(SAMPLE).check_fits(V1B)


def test_mram_and_iram_budgets() -> None:
    w = minimal()
    w.nobits(".mram.noinit", MRAM_BASE, 65 * MIB)
    with pytest.raises(DpuError) as info:
        load_elf(w.to_bytes()).check_fits(V1A)
    assert info.value.code is E.DPU_ERR_INVALID_MRAM_ACCESS

    w = ElfWriter()
    w.progbits(".text", IRAM_BASE, bytes(V1B.iram_instructions * 8 + 8), SHF_ALLOC | SHF_EXECINSTR)
    prog = load_elf(w.to_bytes())
    with pytest.raises(DpuError) as info:
        prog.check_fits(V1B)
    assert info.value.code is E.DPU_ERR_INVALID_IRAM_ACCESS
    prog.check_fits(V1A)  # v1A has 4096 instructions


# ================================================================================================
# errors
# ================================================================================================
def test_missing_file(tmp_path: Path) -> None:
    e = err_of(tmp_path / "nope.dpu")
    assert e.code is E.DPU_ERR_ELF_NO_SUCH_FILE
    assert "nope.dpu" in e.detail


def test_directory_is_invalid(tmp_path: Path) -> None:
    assert err_of(tmp_path).code is E.DPU_ERR_ELF_INVALID_FILE


@pytest.mark.parametrize(
    "data",
    [b"", b"\x7fEL", b"hello world, not an ELF", b"\x7fELF", SAMPLE[:16], SAMPLE[:51]],
    ids=["empty", "short-magic", "text", "magic-only", "ident-only", "header-cut"],
)
def test_not_an_elf_or_truncated_header(data: bytes) -> None:
    assert err_of(data).code is E.DPU_ERR_ELF_INVALID_FILE


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"elf_class": ELFCLASS64}, "ELF64"),
        ({"data_encoding": ELFDATA2MSB}, "big-endian"),
        ({"machine": 243}, "RISC-V"),
        ({"machine": 62}, "x86-64"),
        ({"e_type": ET_REL}, "ET_EXEC"),
        ({"version": 7}, "version"),
    ],
)
def test_wrong_class_endianness_machine_type(options: dict[str, Any], needle: str) -> None:
    e = err_of(minimal(**options).to_bytes())
    assert e.code is E.DPU_ERR_ELF_INVALID_FILE
    assert needle in e.detail


def test_wrong_class_and_encoding_bytes_alone() -> None:
    data = bytearray(SAMPLE)
    data[4] = 2
    assert err_of(bytes(data)).code is E.DPU_ERR_ELF_INVALID_FILE
    data = bytearray(SAMPLE)
    data[5] = 2
    assert err_of(bytes(data)).code is E.DPU_ERR_ELF_INVALID_FILE


def test_corrupted_tables_are_invalid_files() -> None:
    shoff = struct.unpack_from("<I", SAMPLE, 32)[0]
    cases = {
        "section table cut": SAMPLE[:-10],
        "section table beyond eof": patch_u32(SAMPLE, 32, len(SAMPLE) + 100),
        "shentsize": patch_u16(SAMPLE, 46, 64),
        "shstrndx out of range": patch_u16(SAMPLE, 50, 200),
        "shstrndx zero": patch_u16(SAMPLE, 50, 0),
        "shnum huge": patch_u16(SAMPLE, 48, 0xFEFF),
        "phdr beyond eof": patch_u16(patch_u32(SAMPLE, 28, 0x10000), 44, 3),
        "section data beyond eof": patch_u32(
            SAMPLE, section_header_offset(SAMPLE, ".data.__sys_host") + 20, 1 << 30
        ),
        "symtab entsize": patch_u32(SAMPLE, section_header_offset(SAMPLE, ".symtab") + 36, 0),
        "symtab link": patch_u32(SAMPLE, section_header_offset(SAMPLE, ".symtab") + 24, 1),
        "section name offset": patch_u32(SAMPLE, shoff + 40, 0xFFFFFF),
    }
    for label, data in cases.items():
        e = err_of(data)
        assert e.code is E.DPU_ERR_ELF_INVALID_FILE, label


def test_missing_symbol_or_string_table_is_no_such_section() -> None:
    e = err_of(minimal(symtab=False).to_bytes())
    assert e.code is E.DPU_ERR_ELF_NO_SUCH_SECTION and ".symtab" in e.detail
    e = err_of(minimal(symtab_name=".symbols").to_bytes())
    assert e.code is E.DPU_ERR_ELF_NO_SUCH_SECTION
    e = err_of(minimal(strtab_name=".names").to_bytes())
    assert e.code is E.DPU_ERR_ELF_NO_SUCH_SECTION and ".strtab" in e.detail
    no_sections = patch_u16(patch_u32(SAMPLE, 32, 0), 48, 0)
    assert err_of(no_sections).code is E.DPU_ERR_ELF_NO_SUCH_SECTION


def test_dot_symtab_of_the_wrong_type_is_invalid() -> None:
    off = section_header_offset(SAMPLE, ".symtab")
    assert err_of(patch_u32(SAMPLE, off + 4, 1)).code is E.DPU_ERR_ELF_INVALID_FILE


@pytest.mark.parametrize(
    "exc",
    [
        ELFError("boom"),
        struct.error("boom"),
        ValueError("boom"),
        IndexError("boom"),
        KeyError("boom"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "boom"),
        OverflowError("boom"),
        MemoryError(),
        RecursionError("boom"),
        AssertionError("boom"),
    ],
)
def test_pyelftools_failures_become_invalid_file(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    def explode(*args: object, **kw: object) -> None:
        raise exc

    monkeypatch.setattr(elfparse, "ELFFile", explode)
    e = err_of(SAMPLE)
    assert e.code is E.DPU_ERR_ELF_INVALID_FILE
    assert type(exc).__name__ in e.detail
    assert e.__cause__ is exc


def test_every_truncation_fails_cleanly() -> None:
    for n in range(len(SAMPLE)):
        with pytest.raises(DpuError) as info:
            ElfProgram(SAMPLE[:n])
        assert info.value.code in ELF_ERROR_CODES, n


def test_every_header_byte_flip_is_handled() -> None:
    shoff = struct.unpack_from("<I", SAMPLE, 32)[0]
    positions = list(range(52)) + list(range(shoff, len(SAMPLE), 3))
    for pos in positions:
        for mask in (0x01, 0x80, 0xFF):
            data = bytearray(SAMPLE)
            data[pos] ^= mask
            check_outcome(bytes(data))


# ================================================================================================
# fuzzing
# ================================================================================================
FIT_CODES = {
    E.DPU_ERR_TOO_MANY_TASKLETS,
    E.DPU_ERR_INVALID_WRAM_ACCESS,
    E.DPU_ERR_INVALID_MRAM_ACCESS,
    E.DPU_ERR_INVALID_IRAM_ACCESS,
}


def check_outcome(data: bytes) -> None:
    """Parse ``data``: a clean ELF DpuError or a program every accessor works on."""
    start = time.monotonic()
    try:
        prog = ElfProgram(data, name="fuzz")
    except DpuError as err:
        assert err.code in ELF_ERROR_CODES, err
    else:
        assert prog.nr_tasklets >= 1
        assert prog.chip in (None, "v1A", "v1B")
        prog.symbols()
        prog.symbol_table()
        prog.all_symbols()
        format_symbols(prog, all_symbols=True)
        format_symbols(prog)
        for chip in (V1A, V1B):
            try:
                prog.check_fits(chip)
            except DpuError as err:
                assert err.code in FIT_CODES, err
            else:  # what passes check_fits can really be written into a DPU
                limit = {
                    aiopim.MemorySpace.IRAM: chip.iram_instructions * 8,
                    aiopim.MemorySpace.MRAM: chip.mram_size,
                    aiopim.MemorySpace.WRAM: chip.wram_size,
                }
                for im in prog.images():
                    end = space_offset(im.address) + len(im.data)
                    assert end <= limit[aiopim.MemorySpace.of(im.address)]
        with pytest.raises(DpuError) as info:
            prog.behaviour()
        assert info.value.code is E.DPU_ERR_INTERNAL
        # the interpreter decodes whatever .text holds (bad words only fault when executed)
        decoded = decoded_binary(prog)
        assert len(decoded.code) == len(decoded.words)
    assert time.monotonic() - start < 5.0, "a parse must finish quickly"


_INTERESTING = [0, 1, 2, 3, 8, 16, 40, 52, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
_position = st.one_of(st.integers(0, 63), st.integers(-1000, -1), st.integers(0, 1 << 16))
_mutation = st.one_of(
    st.tuples(st.just("flip"), _position, st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 16)),
    st.tuples(st.just("insert"), _position, st.binary(min_size=1, max_size=24)),
    st.tuples(st.just("delete"), _position, st.integers(1, 24)),
    st.tuples(st.just("word"), _position, st.sampled_from(_INTERESTING)),
)


def mutate(data: bytes, mutations: list[tuple[Any, ...]]) -> bytes:
    b = bytearray(data)
    for m in mutations:
        if not b:
            break
        kind, arg = m[0], m[1]
        pos = arg % len(b)
        if kind == "flip":
            b[pos] ^= m[2]
        elif kind == "truncate":
            del b[arg % (len(b) + 1) :]
        elif kind == "insert":
            b[pos:pos] = m[2]
        elif kind == "delete":
            del b[pos : pos + m[2]]
        else:
            b[pos : pos + 4] = struct.pack("<I", m[2])
    return bytes(b)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutation, min_size=1, max_size=6))
def test_fuzz_mutated_binaries_only_raise_elf_errors(mutations: list[tuple[Any, ...]]) -> None:
    check_outcome(mutate(SAMPLE, mutations))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_fuzz_random_tails_after_a_valid_header(tail: bytes) -> None:
    check_outcome(SAMPLE[:52] + tail)


# ================================================================================================
# models and booting
# ================================================================================================
def test_without_model_there_is_no_behaviour_and_boot_interprets() -> None:
    prog = load_elf(SAMPLE, name="lonely")
    assert registered_model("lonely") is None
    with pytest.raises(DpuError) as info:
        prog.behaviour()  # a launch runs the instructions instead (tests/test_isa_run.py)
    assert info.value.code is E.DPU_ERR_INTERNAL
    assert "register_model('lonely'" in info.value.detail and "model=" in info.value.detail


def test_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "checksum.dpu"
    path.write_bytes(SAMPLE)
    prog = load_elf(path)
    assert prog.name == "checksum" and prog.path == path
    assert load_elf(str(path), name="other").name == "other"
    assert load_elf(SAMPLE).name == "<memory>"


def test_bad_model_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        load_elf(SAMPLE, model=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        register_model("x", "not callable")


async def _roundtrip(prog: ElfProgram, value: int) -> tuple[np.ndarray, int, int]:
    dpus = await dpu_alloc(1, "")
    await dpu_load(dpus, prog)
    await dpu_copy_to(dpus, "input", 0, np.array([value], np.uint32), 4)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    out = np.zeros(2, np.uint32)
    cps = np.zeros(1, np.uint32)
    table = np.zeros(16, np.uint8)
    for d, _ in dpu_foreach(dpus):
        await dpu_copy_from(d, "result", 0, out, 8)
        await dpu_copy_from(d, "CLOCKS_PER_SEC", 0, cps, 4)
        await dpu_copy_from(d, "table", 0, table, 16)
    assert table.tolist() == list(range(16))  # .mram image loaded
    return out, int(cps[0]), aiopim.now()


def make_model(prog: ElfProgram, seen: dict[str, Any]) -> Any:
    result = prog.var("result", np.uint32, 2)
    barrier = prog.barrier("sync")

    async def main(t: aiopim.Tasklet) -> None:
        seen.setdefault("tasklets", set()).add(t.me())
        if t.me() == 0:
            seen["heap"] = t.mem_alloc(16)
        await t.barrier_wait(barrier)
        if t.me() == 0:
            buf = seen["heap"]
            await t.mram_read(prog.address_of("table"), buf, 16)
            total = int(t.view(buf, np.uint8, 16).sum())
            hidden = int(t.view(prog.address_of("hidden"), np.uint8, 4).sum())
            value = int(t.view(prog.address_of("input"), np.uint32, 1)[0])
            t.compute(50)
            t.view(result)[:] = [value * 2, total + hidden]
            seen["heap_pointer"] = t.mram_heap_pointer

    return main


def test_end_to_end_with_a_bound_model() -> None:
    prog = load_elf(sample(nr_tasklets=4), name="e2e")
    seen: dict[str, Any] = {}
    prog.bind(make_model(prog, seen))
    out, cps, now = aiopim.run(_roundtrip, prog, 21)
    assert out.tolist() == [42, 120 + 10]
    assert cps == V1B.frequency_hz  # CLOCKS_PER_SEC patched at load
    assert seen["tasklets"] == {0, 1, 2, 3}
    assert seen["heap"] == prog.heap_start
    assert seen["heap_pointer"] == prog.symbols()["__sys_used_mram_end"].address
    assert now > 0


def test_end_to_end_with_a_registered_model(tmp_path: Path) -> None:
    path = tmp_path / "kernel.dpu"
    path.write_bytes(sample(nr_tasklets=2))
    prog = load_elf(path)
    seen: dict[str, Any] = {}
    try:
        register_model("kernel", make_model(prog, seen))  # after loading: looked up at launch
        out, _, _ = aiopim.run(_roundtrip, prog, 4)
        assert out.tolist() == [8, 130]
        assert seen["tasklets"] == {0, 1}
    finally:
        unregister_model("kernel")
    assert registered_model("kernel") is None


def test_register_model_as_decorator_and_explicit_model_wins() -> None:
    prog = load_elf(SAMPLE, name="deco")
    calls: list[str] = []

    class Recorder:
        def __init__(self, label: str) -> None:
            self.label = label

        def start(self, dpu: Any, program: ElfProgram) -> None:
            calls.append(self.label)
            assert program is prog

    try:

        @register_model("deco")
        async def main(t: aiopim.Tasklet) -> None:  # pragma: no cover - replaced below
            return None

        assert registered_model("deco") is main
        register_model("deco", Recorder("registry"))
        prog.boot(None)  # type: ignore[arg-type]
        prog.bind(Recorder("explicit"))
        prog.boot(None)  # type: ignore[arg-type]
        assert calls == ["registry", "explicit"]
    finally:
        unregister_model("deco")


def test_behaviour_spawning_nothing_completes_a_launch() -> None:
    started: list[int] = []

    class Idle:
        def start(self, dpu: Any, program: ElfProgram) -> None:
            started.append(dpu.index)

    prog = load_elf(SAMPLE, model=Idle())

    async def host() -> None:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, prog)
        await dpu_launch(dpus, DPU_SYNCHRONOUS)

    aiopim.run(host)
    assert len(started) == 2 and len(set(started)) == 2  # once per enabled DPU


def test_chip_mismatch_at_load_is_internal_error() -> None:
    prog = load_elf(sample(chip="v1A"), model=lambda t: None)

    async def host(profile: str) -> None:
        dpus = await dpu_alloc(1, profile)
        await dpu_load(dpus, prog)

    with pytest.raises(DpuError) as info:
        aiopim.run(host, "")  # default machine: v1B
    assert info.value.code is E.DPU_ERR_INTERNAL  # what the SDK's loader returns
    assert info.value.detail == (
        "'<memory>' was built for v1A but the machine is v1B: allocate v1A DPUs with "
        'dpu_alloc(n, "chip=v1A") or run on MachineConfig(chip="v1A")'
    )
    aiopim.run(host, "", machine=aiopim.MachineConfig(chip="v1A"))  # both fixes work
    aiopim.run(host, "chip=v1A")


def test_chip_mismatch_names_the_fix_for_a_v1b_binary_too() -> None:
    prog = load_elf(sample(chip="v1B"), model=lambda t: None)

    async def host() -> None:
        await dpu_load(await dpu_alloc(1, ""), prog)

    with pytest.raises(DpuError) as info:
        aiopim.run(host, machine=aiopim.MachineConfig(chip="v1A"))
    assert info.value.code is E.DPU_ERR_INTERNAL
    assert 'dpu_alloc(n, "chip=v1B")' in info.value.detail
    assert 'MachineConfig(chip="v1B")' in info.value.detail


def test_loading_never_imports_anything() -> None:
    before = set(sys.modules)
    extra = [SymbolSpec("os.system", IRAM_BASE, 8, ".text", type=STT_FUNC)]
    prog = load_elf(sample(extra=extra), name="json")
    assert "os.system" in prog.symbols()
    with pytest.raises(DpuError):
        prog.behaviour()
    assert set(sys.modules) == before


# ================================================================================================
# the `aiopim symbols` command
# ================================================================================================
def test_format_symbols() -> None:
    text = format_symbols(load_elf(SAMPLE, name="sample"))
    assert "DPU program 'sample'" in text
    assert "Hardware version: v1B" in text
    assert "Tasklets: 2 (NR_TASKLETS)" in text
    assert "Stack sizes: 1024 1024" in text
    lines = text.splitlines()
    line = next(ln for ln in lines if ln.endswith(" input"))
    assert line.split() == ["0x00000018", "4", "WRAM", ".data.__sys_host", "input"]
    assert not any(ln.endswith(" hidden") for ln in lines)
    heap = next(ln for ln in lines if ln.endswith("__sys_used_mram_end")).split()
    assert int(heap[1]) == load_elf(SAMPLE).symbols()["__sys_used_mram_end"].size
    everything = format_symbols(load_elf(SAMPLE), all_symbols=True)
    hidden = next(ln for ln in everything.splitlines() if ln.endswith(" hidden")).split()
    assert hidden[3:] == ["no", ".data", "hidden"]
    assert "Hardware version: any" in format_symbols(load_elf(sample(chip=None)))


def test_cli_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "prog.dpu"
    path.write_bytes(SAMPLE)
    assert main_symbols([str(path)]) == 0
    out = capsys.readouterr().out
    assert "DPU program 'prog'" in out and "CLOCKS_PER_SEC" in out and "Tasklets: 2" in out
    assert " hidden" not in out
    assert main_symbols(["--all", str(path)]) == 0
    assert " hidden" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"#!/bin/sh\necho not elf\n", "DPU_ERR_ELF_INVALID_FILE"),
        (None, "DPU_ERR_ELF_NO_SUCH_FILE"),
        (minimal(symtab=False).to_bytes(), "DPU_ERR_ELF_NO_SUCH_SECTION"),
    ],
)
def test_cli_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, code: str
) -> None:
    path = tmp_path / "bad.dpu"
    if content is not None:
        path.write_bytes(content)
    assert main_symbols([str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{code}: ")
    assert "bad.dpu" in captured.err


def test_cli_usage_error_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_symbols([]) == 2
    assert "usage: aiopim symbols" in capsys.readouterr().err


def test_writer_round_trip_section_flags() -> None:
    prog = load_elf(SAMPLE)
    secs = {s.name: s for s in prog.sections()}
    assert secs[".text"].flags == SHF_ALLOC | SHF_EXECINSTR and secs[".text"].space == "IRAM"
    assert secs[".data"].flags == SHF_ALLOC | SHF_WRITE and secs[".data"].space == "WRAM"
    assert secs[".atomic"].space == "ATOMIC"
    assert secs[".mram.noinit"].nobits and secs[".mram.noinit"].size >= MIB + 4096
    assert not secs[".debug_info"].allocated
