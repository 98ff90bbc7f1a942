"""Reading a DPU ELF: layout checks on the raw bytes, pyelftools for sections and symbols, the
hardware version from ``.dpu.attributes``."""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from .._errors import DpuError
from .._files import InputFileError, read_input_file
from .._machine._program import (
    MemoryImage,
)
from ._records import (
    _EHDR,
    _ET_CORE,
    _ET_EXEC,
    _MACHINES,
    _SHDR,
    _SHF_ALLOC,
    _SHF_COMPRESSED,
    _SHN_ABS,
    _SHN_XINDEX,
    _SHT_DYNSYM,
    _SHT_NOBITS,
    _SHT_NULL,
    _SHT_PROGBITS,
    _SHT_STRTAB,
    _SHT_SYMTAB,
    ABS_SYMBOLS_VISIBLE,
    EM_DPU,
    MAX_ELF_SIZE,
    E,
    ElfSection,
    ElfSymbol,
    _invalid,
)


# ================================================================================================
# parsing
# ================================================================================================
@dataclass(frozen=True)
class _RawSection:
    name_offset: int
    type: int
    flags: int
    address: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


def _check_layout(data: bytes, origin: str) -> list[_RawSection]:
    """Validate the ELF header and every table bound before pyelftools touches the bytes."""
    n = len(data)
    if n < 4 or data[:4] != b"\x7fELF":
        raise _invalid(f"{origin}: not an ELF file (bad magic number)")
    if n < 16:
        raise _invalid(f"{origin}: truncated ELF identification ({n} bytes)")
    ei_class, ei_data, ei_version = data[4], data[5], data[6]
    if ei_class != 1:
        what = "ELF64" if ei_class == 2 else f"unknown ELF class {ei_class}"
        raise _invalid(f"{origin}: {what} file; DPU binaries are ELF32")
    if ei_data != 1:
        what = "big-endian" if ei_data == 2 else f"unknown data encoding {ei_data}"
        raise _invalid(f"{origin}: {what} file; DPU binaries are little-endian")
    if ei_version != 1:
        raise _invalid(f"{origin}: unsupported ELF identification version {ei_version}")
    if n < 16 + _EHDR.size:
        raise _invalid(f"{origin}: truncated ELF header ({n} bytes)")
    (
        e_type, e_machine, e_version, _entry, e_phoff, e_shoff, _flags,
        _ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx,
    ) = _EHDR.unpack_from(data, 16)  # fmt: skip
    if e_machine != EM_DPU:
        what = _MACHINES.get(e_machine, "unknown")
        raise _invalid(
            f"{origin}: e_machine is {e_machine} ({what}), not {EM_DPU} (EM_DPU): not a DPU binary"
        )
    if e_type not in (_ET_EXEC, _ET_CORE):
        raise _invalid(
            f"{origin}: e_type is {e_type}, not an executable (ET_EXEC); link the DPU program"
        )
    if e_version != 1:
        raise _invalid(f"{origin}: unsupported ELF version {e_version}")
    if e_phnum and (e_phentsize != 32 or e_phoff + e_phnum * 32 > n):
        raise _invalid(f"{origin}: program header table is truncated or malformed")
    if e_shoff == 0:
        return []
    if e_shentsize != _SHDR.size:
        raise _invalid(f"{origin}: section header size is {e_shentsize}, not {_SHDR.size}")

    def header(i: int) -> _RawSection:
        return _RawSection(*_SHDR.unpack_from(data, e_shoff + i * _SHDR.size))

    if e_shoff + _SHDR.size > n:
        raise _invalid(f"{origin}: section header table starts beyond the end of the file")
    shnum = e_shnum or header(0).size  # extended numbering: the count is in section 0
    if e_shoff + shnum * _SHDR.size > n:
        raise _invalid(
            f"{origin}: section header table ({shnum} entries at {e_shoff:#x}) is truncated"
        )
    sections = [header(i) for i in range(shnum)]
    shstrndx = sections[0].link if e_shstrndx == _SHN_XINDEX and shnum else e_shstrndx
    if not 0 < shstrndx < shnum:
        raise _invalid(f"{origin}: no section name table (e_shstrndx={shstrndx})")
    names = sections[shstrndx]
    if names.type != _SHT_STRTAB:
        raise _invalid(f"{origin}: section name table (section {shstrndx}) is not a STRTAB")
    for i, s in enumerate(sections):
        if s.type in (_SHT_NULL, _SHT_NOBITS):
            continue
        if s.offset + s.size > n:
            raise _invalid(
                f"{origin}: section {i} data [{s.offset:#x}, {s.offset + s.size:#x}) extends "
                f"beyond the end of the file ({n:#x} bytes)"
            )
        if s.flags & _SHF_ALLOC and s.flags & _SHF_COMPRESSED:
            raise _invalid(f"{origin}: section {i} is both allocated and compressed")
    for i, s in enumerate(sections):
        if i and (
            s.name_offset >= names.size
            or data.find(b"\0", names.offset + s.name_offset, names.offset + names.size) < 0
        ):
            raise _invalid(f"{origin}: name of section {i} is outside the section name table")
        if s.type in (_SHT_SYMTAB, _SHT_DYNSYM):
            if s.entsize != 16:
                raise _invalid(f"{origin}: symbol table {i} has entry size {s.entsize}, not 16")
            if not 0 < s.link < shnum or sections[s.link].type != _SHT_STRTAB:
                raise _invalid(f"{origin}: symbol table {i} is not linked to a string table")
    return sections


@dataclass
class _Parsed:
    sections: list[ElfSection]
    symbols: list[ElfSymbol]
    entry: int
    attributes: bytes | None
    images: list[MemoryImage]


def _parse(data: bytes, origin: str) -> _Parsed:
    try:
        return _parse_unchecked(data, origin)
    except DpuError:
        raise
    except Exception as exc:  # pyelftools: ELFError, struct.error, ValueError, RecursionError…
        detail = str(exc)
        if len(detail) > 160:
            detail = detail[:160] + "…"
        raise _invalid(f"{origin}: corrupted ELF file ({type(exc).__name__}: {detail})") from exc


def _parse_unchecked(data: bytes, origin: str) -> _Parsed:
    raw = _check_layout(data, origin)
    elf = ELFFile(io.BytesIO(data))
    if elf.num_sections() != len(raw):
        raise _invalid(f"{origin}: inconsistent section count")
    sections: list[ElfSection] = []
    for i, sec in enumerate(elf.iter_sections()):
        r = raw[i]
        sections.append(ElfSection(i, sec.name, r.type, r.flags, r.address, r.size, r.offset))

    def find(name: str) -> ElfSection:
        for s in sections:
            if s.name == name:
                return s
        raise DpuError(E.DPU_ERR_ELF_NO_SUCH_SECTION, f"{origin}: no {name} section")

    symtab_header = find(".symtab")
    find(".strtab")
    if symtab_header.type != _SHT_SYMTAB:
        raise _invalid(f"{origin}: .symtab is not a symbol table (type {symtab_header.type})")
    symtab = elf.get_section(symtab_header.index)
    if not isinstance(symtab, SymbolTableSection):
        raise _invalid(f"{origin}: .symtab is not a symbol table")
    strtab_size = raw[raw[symtab_header.index].link].size

    symbols: list[ElfSymbol] = []
    for sym in symtab.iter_symbols():
        entry = sym.entry
        if entry["st_name"] >= strtab_size or not sym.name:
            continue  # unnamed (or name outside the table): the SDK records nothing
        shndx = entry["st_shndx"]
        bind = str(entry["st_info"]["bind"]).removeprefix("STB_")
        kind = str(entry["st_info"]["type"]).removeprefix("STT_")
        value, size = int(entry["st_value"]), int(entry["st_size"])
        if shndx == "SHN_ABS" or shndx == _SHN_ABS:
            section, index = "ABS", len(sections)
            visible = ABS_SYMBOLS_VISIBLE and kind != "FILE"
        elif isinstance(shndx, int) and 0 < shndx < len(sections) and sections[shndx].name:
            section, index = sections[shndx].name, shndx
            visible = not section.startswith(".data") or section == ".data.__sys_host"
        else:
            labels = {"SHN_UNDEF": "UND", "SHN_COMMON": "COMMON"}
            section, index, visible = labels.get(str(shndx), f"#{shndx}"), -1, False
        symbols.append(ElfSymbol(sym.name, value, size, section, visible, bind, kind, index))

    attributes: bytes | None = None
    for s in sections:
        if s.name == ".dpu.attributes":
            attributes = b"" if s.nobits else data[s.offset : s.offset + s.size]
            break

    images: list[MemoryImage] = []
    for s in sections:
        if not s.allocated or s.type != _SHT_PROGBITS or s.size == 0 or s.space == "ATOMIC":
            continue
        if s.space == "MRAM" and s.name.startswith(".mram.noinit"):
            continue
        images.append(MemoryImage(s.address, data[s.offset : s.offset + s.size]))
    return _Parsed(sections, symbols, int(elf.header["e_entry"]), attributes, images)


def _read_source(source: object) -> tuple[bytes, str, str]:
    """(bytes, origin for messages, default program name)."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source), "<memory>", "<memory>"
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"an ELF program is loaded from a path or bytes, not {source!r}")
    path = Path(os.fspath(source))
    try:
        data = read_input_file(path, limit=MAX_ELF_SIZE, what="DPU binary")
    except InputFileError as exc:  # could not open: NO_SUCH_FILE; opened but unusable: INVALID
        code = E.DPU_ERR_ELF_NO_SUCH_FILE if exc.reason == "open" else E.DPU_ERR_ELF_INVALID_FILE
        raise DpuError(code, str(exc)) from exc
    return data, str(path), path.stem


# ================================================================================================
# hardware version from .dpu.attributes
# ================================================================================================
_CHIP_TOKENS = (("v1a", "v1A"), ("v1b", "v1B"), ("v1.4", "v1B"), ("v1_4", "v1B"), ("1.4", "v1B"))


def _chip_of_text(text: str) -> str | None:
    low = text.lower()
    best: tuple[int, str] | None = None
    for token, chip in _CHIP_TOKENS:
        at = low.find(token)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, chip)
    return None if best is None else best[1]


def _uleb(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 35:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
    raise ValueError("bad ULEB128")


def _cpu_name(raw: bytes) -> str | None:
    """``Tag_CPU_name`` (5) of an ELF build-attributes blob, or None."""
    if not raw or raw[0] != ord("A"):
        return None
    pos = 1
    while pos + 4 <= len(raw):
        (length,) = struct.unpack_from("<I", raw, pos)
        end = pos + length
        if length < 5 or end > len(raw):
            return None
        vend = raw.find(b"\0", pos + 4, end)
        if vend < 0:
            return None
        sub = vend + 1
        while sub + 5 <= end:
            tag = raw[sub]
            (sub_len,) = struct.unpack_from("<I", raw, sub + 1)
            sub_end = sub + sub_len
            if sub_len < 5 or sub_end > end:
                return None
            p = sub + 5
            while tag == 1 and p < sub_end:  # Tag_File: attributes follow
                attr, p = _uleb(raw, p, sub_end)
                if attr == 5 or attr % 2 == 1:  # CPU_name, or an odd (string) tag
                    z = raw.find(b"\0", p, sub_end)
                    if z < 0:
                        return None
                    if attr == 5:
                        return raw[p:z].decode("utf-8", "replace")
                    p = z + 1
                else:
                    _, p = _uleb(raw, p, sub_end)
            sub = sub_end
        pos = end
    return None


def chip_from_attributes(raw: bytes | None) -> tuple[str | None, str | None]:
    """``(chip, cpu_name)`` from ``.dpu.attributes`` bytes (None: no such section).

    The structured form the DPU LLVM backend writes is read first (``Tag_CPU_name``); failing
    that, the raw bytes are searched, case-insensitively, for ``v1A``/``v1B`` (or ``v1.4``,
    ``v1_4``, ``1.4`` meaning v1B); the earliest match wins. No match: chip None (any).
    """
    if raw is None:
        return None, None
    try:
        cpu = _cpu_name(raw)
    except (ValueError, struct.error):
        cpu = None
    if cpu is not None:
        chip = _chip_of_text(cpu)
        if chip is not None:
            return chip, cpu
    return _chip_of_text(raw.decode("latin-1")), cpu
