"""A small ELF writer that builds DPU-shaped binaries (pure Python, ``struct``).

It is the back end of the assembler (:func:`aiopim.isa.assemble`) and of tests: aiopim cannot
compile DPU C code, but it can write files with the same shape as what
``dpu-upmem-dpurte-clang`` produces (sections at the DPU address spaces,
``__host`` variables in ``.data.__sys_host``, absolute ``NR_TASKLETS``/``STACK_SIZE_TASKLET_<i>``
symbols, a ``.dpu.attributes`` target description) so that :mod:`aiopim.elf` can be exercised
without the UPMEM toolchain. Every knob a malformed-file test needs (class, byte order,
``e_machine``, ``e_type``, missing tables) is an option.

>>> w = ElfWriter(chip="v1B")
>>> _ = w.progbits(".data.__sys_host", 0x10, b"\\x00" * 4)
>>> w.symbol("CLOCKS_PER_SEC", 0x10, 4, section=".data.__sys_host")
>>> data = w.to_bytes()
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ._coreapi import ATOMIC_BASE, IRAM_BIT, MRAM_BIT

EM_DPU = 245
ELFCLASS32 = 1
ELFCLASS64 = 2
ELFDATA2LSB = 1
ELFDATA2MSB = 2
ET_REL = 1
ET_EXEC = 2
EV_CURRENT = 1

SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_NOBITS = 8
#: section type of ``.dpu.attributes`` (``SHT_LOPROC + 3``, like ARM/RISC-V build attributes)
SHT_DPU_ATTRIBUTES = 0x70000003

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

SHN_UNDEF = 0
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2

STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2
STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_FILE = 4

#: build-attribute tag of the CPU name in ``.dpu.attributes`` (LLVM ``DPUBuildAttrs::CPU_name``)
TAG_CPU_NAME = 5
#: format-version byte that starts every ELF build-attributes section
ATTRIBUTES_FORMAT_VERSION = ord("A")
#: vendor name the DPU LLVM backend writes
ATTRIBUTES_VENDOR = b"upmem"
_TAG_FILE = 1

IRAM_BASE = IRAM_BIT
MRAM_BASE = MRAM_BIT
MAX_TASKLETS = 24


def _uleb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def dpu_attributes(cpu_name: str, vendor: bytes = ATTRIBUTES_VENDOR) -> bytes:
    """The ``.dpu.attributes`` contents the DPU LLVM backend writes for ``-mcpu=<cpu_name>``.

    Layout (ELF build attributes, as for ARM/RISC-V): ``'A'``; then one vendor subsection
    ``u32 length | vendor NUL | 0x01 (Tag_File) | u32 size | ULEB128 tag 5 (CPU_name) |
    cpu_name NUL``. All integers little-endian; lengths include their own 4 bytes.
    """
    attrs = _uleb128(TAG_CPU_NAME) + cpu_name.encode() + b"\0"
    file_sub = bytes([_TAG_FILE]) + struct.pack("<I", 1 + 4 + len(attrs)) + attrs
    vendor_sub = vendor + b"\0" + file_sub
    return bytes([ATTRIBUTES_FORMAT_VERSION]) + struct.pack("<I", 4 + len(vendor_sub)) + vendor_sub


@dataclass
class SectionSpec:
    """One section to write. ``data`` is ignored for NOBITS sections (``size`` is used)."""

    name: str
    type: int = SHT_PROGBITS
    flags: int = SHF_ALLOC | SHF_WRITE
    address: int = 0
    data: bytes = b""
    size: int | None = None
    align: int = 8
    link: int = 0
    info: int = 0
    entsize: int = 0

    @property
    def sh_size(self) -> int:
        """Value written into ``sh_size``."""
        return self.size if self.size is not None else len(self.data)


@dataclass
class SymbolSpec:
    """One symbol; ``section`` is a section name, ``"ABS"``, ``"UND"``, ``"COMMON"`` or an index."""

    name: str
    value: int
    size: int = 0
    section: str | int = "ABS"
    bind: int = STB_GLOBAL
    type: int = STT_OBJECT


@dataclass
class ElfWriter:
    """Accumulate sections and symbols, then :meth:`to_bytes`.

    ``chip``: CPU name written into ``.dpu.attributes`` (None: no such section);
    ``attributes``: raw ``.dpu.attributes`` bytes instead (overrides ``chip``);
    ``symtab``/``strtab``: write the ``.symtab``/``.strtab`` sections (names can be changed
    with ``symtab_name``/``strtab_name`` to produce a file where they are missing).
    """

    machine: int = EM_DPU
    elf_class: int = ELFCLASS32
    data_encoding: int = ELFDATA2LSB
    e_type: int = ET_EXEC
    version: int = EV_CURRENT
    entry: int = IRAM_BASE
    flags: int = 0
    chip: str | None = "v1B"
    attributes: bytes | None = None
    symtab: bool = True
    strtab: bool = True
    symtab_name: str = ".symtab"
    strtab_name: str = ".strtab"
    sections: list[SectionSpec] = field(default_factory=list)
    symbols: list[SymbolSpec] = field(default_factory=list)

    # -- building ---------------------------------------------------------------------------------
    def add(self, section: SectionSpec) -> SectionSpec:
        """Append a section (written in the order added, after the NULL section)."""
        self.sections.append(section)
        return section

    def progbits(
        self,
        name: str,
        address: int,
        data: bytes,
        flags: int = SHF_ALLOC | SHF_WRITE,
        align: int = 8,
    ) -> SectionSpec:
        """A PROGBITS section holding ``data`` at ``address``."""
        return self.add(SectionSpec(name, SHT_PROGBITS, flags, address, bytes(data), None, align))

    def nobits(
        self, name: str, address: int, size: int, flags: int = SHF_ALLOC | SHF_WRITE
    ) -> SectionSpec:
        """A NOBITS (zero-initialised, not stored) section of ``size`` bytes at ``address``."""
        return self.add(SectionSpec(name, SHT_NOBITS, flags, address, b"", size))

    def symbol(
        self,
        name: str,
        value: int,
        size: int = 0,
        section: str | int = "ABS",
        bind: int = STB_GLOBAL,
        type: int = STT_OBJECT,
    ) -> None:
        """Add a symbol (``section="ABS"`` for an absolute symbol)."""
        self.symbols.append(SymbolSpec(name, value, size, section, bind, type))

    # -- encoding ---------------------------------------------------------------------------------
    def _fmt(self, fmt: str) -> str:
        return (">" if self.data_encoding == ELFDATA2MSB else "<") + fmt

    def _symtab_bytes(self, index_of: Mapping[str, int], strtab: bytearray) -> tuple[bytes, int]:
        ordered = sorted(self.symbols, key=lambda s: s.bind != STB_LOCAL)  # locals first
        is64 = self.elf_class == ELFCLASS64
        entry = self._fmt("IBBHQQ" if is64 else "IIIBBH")
        out = bytearray(24 if is64 else 16)  # the NULL symbol
        first_global = 1
        for s in ordered:
            if s.bind == STB_LOCAL:
                first_global += 1
            if isinstance(s.section, int):
                shndx = s.section
            else:
                shndx = {"ABS": SHN_ABS, "UND": SHN_UNDEF, "COMMON": SHN_COMMON}.get(s.section, -1)
                if shndx < 0:
                    shndx = index_of[s.section]
            name = len(strtab)
            strtab += s.name.encode() + b"\0"
            info = (s.bind << 4) | (s.type & 0xF)
            if is64:
                out += struct.pack(entry, name, info, 0, shndx, s.value, s.size)
            else:
                out += struct.pack(entry, name, s.value, s.size, info, 0, shndx)
        return bytes(out), first_global

    def to_bytes(self) -> bytes:
        """The ELF file."""
        is64 = self.elf_class == ELFCLASS64
        sections = list(self.sections)
        attrs = self.attributes
        if attrs is None and self.chip is not None:
            attrs = dpu_attributes(self.chip)
        if attrs is not None:
            sections.append(
                SectionSpec(".dpu.attributes", SHT_DPU_ATTRIBUTES, 0, 0, attrs, None, 1)
            )
        # section indexes: 0 = NULL, then user sections, then symtab/strtab/shstrtab
        index_of = {s.name: i + 1 for i, s in reversed(list(enumerate(sections)))}
        strtab = bytearray(b"\0")
        symtab_data, first_global = self._symtab_bytes(index_of, strtab)
        n = len(sections)
        strtab_index = n + 1 + int(self.symtab)
        if self.symtab:
            sections.append(
                SectionSpec(
                    self.symtab_name,
                    SHT_SYMTAB,
                    0,
                    0,
                    symtab_data,
                    None,
                    8 if is64 else 4,
                    link=strtab_index if self.strtab else 0,
                    info=first_global,
                    entsize=24 if is64 else 16,
                )
            )
        if self.strtab:
            sections.append(SectionSpec(self.strtab_name, SHT_STRTAB, 0, 0, bytes(strtab), None, 1))
        shstrtab = bytearray(b"\0")
        names: list[int] = [0]
        for s in sections:
            names.append(len(shstrtab))
            shstrtab += s.name.encode() + b"\0"
        names.append(len(shstrtab))
        shstrtab += b".shstrtab\0"
        sections.append(SectionSpec(".shstrtab", SHT_STRTAB, 0, 0, bytes(shstrtab), None, 1))

        ehsize = 64 if is64 else 52
        shentsize = 64 if is64 else 40
        body = bytearray()
        offsets: list[int] = [0]
        for s in sections:
            pos = ehsize + len(body)
            pad = (-pos) % max(1, s.align)
            body += b"\0" * pad
            offsets.append(ehsize + len(body))
            if s.type != SHT_NOBITS:
                body += s.data
        body += b"\0" * ((-(ehsize + len(body))) % 8)
        shoff = ehsize + len(body)

        shdr = self._fmt("IIQQQQIIQQ" if is64 else "IIIIIIIIII")
        shdrs = bytearray(shentsize)  # NULL section header
        for i, s in enumerate(sections, start=1):
            shdrs += struct.pack(
                shdr,
                names[i], s.type, s.flags, s.address, offsets[i], s.sh_size,
                s.link, s.info, s.align, s.entsize,
            )  # fmt: skip

        ident = b"\x7fELF" + bytes([self.elf_class, self.data_encoding, EV_CURRENT, 0])
        ident += b"\0" * 8
        shnum = len(sections) + 1
        shstrndx = len(sections)
        header = struct.pack(
            self._fmt("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"),
            self.e_type, self.machine, self.version, self.entry, 0, shoff, self.flags,
            ehsize, 56 if is64 else 32, 0, shentsize, shnum, shstrndx,
        )  # fmt: skip
        return ident + header + bytes(body) + bytes(shdrs)

    def write(self, path: str | Path) -> Path:
        """Write the file to ``path``."""
        p = Path(path)
        p.write_bytes(self.to_bytes())
        return p


# ================================================================================================
# a representative DPU binary
# ================================================================================================
@dataclass
class SampleLayout:
    """Where :func:`sample_dpu_elf` put things (for assertions)."""

    symbols: dict[str, tuple[int, int, str]] = field(default_factory=dict)  # name → addr, size, sec
    sections: dict[str, tuple[int, int]] = field(default_factory=dict)  # name → addr, size
    text: bytes = b""
    data: bytes = b""
    host_data: bytes = b""
    mram: bytes = b""


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def sample_dpu_elf(
    *,
    nr_tasklets: int | None = 2,
    stack_size: int = 1024,
    chip: str | None = "v1B",
    host_vars: Mapping[str, bytes] | None = None,
    wram_vars: Mapping[str, bytes] | None = None,
    mram_vars: Mapping[str, bytes] | None = None,
    mram_noinit_vars: Mapping[str, int] | None = None,
    text: bytes | None = None,
    extra: Iterable[SymbolSpec] = (),
    heap_pointer_reset: bool = True,
    **writer_options: object,
) -> tuple[bytes, SampleLayout]:
    """Build a DPU-shaped ELF like the SDK toolchain lays it out (sdk-reference.md §5.3).

    WRAM: ``.data`` (``__sys_zero`` then non-``__host`` globals) at 0, ``.data.__sys_host``
    (``CLOCKS_PER_SEC`` then ``host_vars``), ``.data.stacks`` (NOBITS, one stack per tasklet),
    ``.data.sw_cache`` (NOBITS, 8 bytes per tasklet, with ``__sys_heap_pointer_reset`` at its
    end). IRAM: ``.text`` at 0x80000000 (functions ``__bootstrap`` and ``main``). ``.atomic``
    at 0xF0000000. MRAM: ``.mram.noinit`` (NOBITS, the weak 1 MiB ``__stdout_buffer`` plus
    ``mram_noinit_vars``) then ``.mram`` (``mram_vars``, then ``__sys_used_mram_end``).
    Non-allocated: ``.stack_sizes``, ``.debug_info``, ``.dpu.attributes`` (from ``chip``).
    ABS: ``NR_TASKLETS`` (omitted if None) and ``STACK_SIZE_TASKLET_0`` … ``_23``.
    ``writer_options`` go to :class:`ElfWriter` (``machine``, ``elf_class``, ``symtab`` …).
    """
    n = 1 if nr_tasklets is None else nr_tasklets
    w = ElfWriter(chip=chip, **writer_options)  # type: ignore[arg-type]
    lay = SampleLayout()

    def place(sec: str, base: int, items: Mapping[str, bytes], start: int) -> tuple[bytes, int]:
        blob = bytearray()
        addr = start
        for name, init in items.items():
            addr = _align(addr, 8)
            blob += b"\0" * (addr - start - len(blob))
            w.symbol(name, base + addr, len(init), section=sec)
            lay.symbols[name] = (base + addr, len(init), sec)
            blob += init
            addr += len(init)
        return bytes(blob), addr

    # .text
    code = text if text is not None else bytes(range(8)) * 4
    w.progbits(".text", IRAM_BASE, code, SHF_ALLOC | SHF_EXECINSTR)
    lay.sections[".text"] = (IRAM_BASE, len(code))
    lay.text = code
    w.symbol("__bootstrap", IRAM_BASE, 16, section=".text", type=STT_FUNC)
    w.symbol("main", IRAM_BASE + 16, len(code) - 16, section=".text", type=STT_FUNC)
    lay.symbols["main"] = (IRAM_BASE + 16, len(code) - 16, ".text")
    # .atomic: one mutex bit
    w.progbits(".atomic", ATOMIC_BASE, b"\0" * 8)
    w.symbol("my_mutex", ATOMIC_BASE, 1, section=".atomic")
    lay.symbols["my_mutex"] = (ATOMIC_BASE, 1, ".atomic")
    # WRAM
    data_items = {"__sys_zero": b"\0" * 8, **(wram_vars or {})}
    data, end = place(".data", 0, data_items, 0)
    w.progbits(".data", 0, data)
    lay.sections[".data"] = (0, len(data))
    lay.data = data
    host_start = _align(end, 8)
    host_items = {"CLOCKS_PER_SEC": struct.pack("<I", 0), **(host_vars or {})}
    host, end = place(".data.__sys_host", 0, host_items, host_start)
    w.progbits(".data.__sys_host", host_start, host)
    lay.sections[".data.__sys_host"] = (host_start, len(host))
    lay.host_data = host
    stacks = _align(end, 8)
    w.nobits(".data.stacks", stacks, stack_size * n)
    lay.sections[".data.stacks"] = (stacks, stack_size * n)
    for i in range(n):
        w.symbol(f"__sys_stack_thread_{i}", stacks + i * stack_size, section=".data.stacks")
    cache = stacks + stack_size * n
    w.nobits(".data.sw_cache", cache, 8 * n)
    lay.sections[".data.sw_cache"] = (cache, 8 * n)
    w.symbol("__sw_cache_buffer", cache, 8 * n, section=".data.sw_cache")
    if heap_pointer_reset:
        w.symbol(
            "__sys_heap_pointer_reset", cache + 8 * n, section=".data.sw_cache", type=STT_NOTYPE
        )
        lay.symbols["__sys_heap_pointer_reset"] = (cache + 8 * n, 0, ".data.sw_cache")
    # MRAM
    noinit: dict[str, int] = {"__stdout_buffer": 1 << 20, **(mram_noinit_vars or {})}
    addr = 0
    for name, size in noinit.items():
        addr = _align(addr, 8)
        bind = STB_WEAK if name == "__stdout_buffer" else STB_GLOBAL
        w.symbol(name, MRAM_BASE + addr, size, section=".mram.noinit", bind=bind)
        lay.symbols[name] = (MRAM_BASE + addr, size, ".mram.noinit")
        addr += size
    w.nobits(".mram.noinit", MRAM_BASE, addr)
    lay.sections[".mram.noinit"] = (MRAM_BASE, addr)
    mram_start = _align(addr, 8)
    mram, end = place(".mram", MRAM_BASE, dict(mram_vars or {}), mram_start)
    heap = _align(end, 8)
    mram += b"\0" * (heap - mram_start - len(mram))
    w.progbits(".mram", MRAM_BASE + mram_start, mram)
    lay.sections[".mram"] = (MRAM_BASE + mram_start, len(mram))
    lay.mram = mram
    w.symbol("__sys_used_mram_end", MRAM_BASE + heap, 0, section=".mram", type=STT_NOTYPE)
    lay.symbols["__sys_used_mram_end"] = (MRAM_BASE + heap, 0, ".mram")
    # non-allocated sections
    w.progbits(".stack_sizes", 0, struct.pack("<IB", IRAM_BASE + 16, 16), flags=0, align=1)
    w.progbits(".debug_info", 0, b"\xde\xad\xbe\xef" * 4, flags=0, align=1)
    # ABS symbols
    if nr_tasklets is not None:
        w.symbol("NR_TASKLETS", nr_tasklets)
    for i in range(MAX_TASKLETS):
        w.symbol(f"STACK_SIZE_TASKLET_{i}", stack_size if i < n else 0)
    w.symbol("main.c", 0, section="ABS", bind=STB_LOCAL, type=STT_FILE)
    w.symbols.extend(extra)
    return w.to_bytes(), lay
