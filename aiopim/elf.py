"""Load real UPMEM DPU ELF binaries (as built by ``dpu-upmem-dpurte-clang``) with pyelftools.

An :class:`ElfProgram` is a :class:`~aiopim.DpuProgram`: it gives the host the binary's host-visible
symbols (with the SDK's visibility rules and address encoding, sdk-reference.md §1.4), the memory
images ``dpu_load`` writes (IRAM from ``.text``, WRAM from the ``.data*`` sections, MRAM from
``.mram``), ``NR_TASKLETS``, the stack sizes and the hardware version it was built for.

Launching an ELF program runs its instructions on aiopim's DPU instruction-set interpreter
(:mod:`aiopim.isa`), in exact virtual time. A Python model of the kernel can stand in for the
binary instead: written exactly like an :class:`aiopim.Program` entry point
(``async def main(t: Tasklet)``), it sees the binary's own symbol addresses::

    prog = load_elf("checksum.dpu", model=checksum_main)
    # or, keyed by a name you choose (default: the file's stem):
    register_model("checksum", checksum_main)

A bound or registered model wins over the interpreter. A model
is never looked up from anything written inside the file (no module is ever imported by name).

Errors use the SDK's codes: a missing file is ``DPU_ERR_ELF_NO_SUCH_FILE``; anything that is
not a well-formed little-endian ELF32 ``EM_DPU`` executable is ``DPU_ERR_ELF_INVALID_FILE``; a
file without ``.symtab``/``.strtab`` is ``DPU_ERR_ELF_NO_SUCH_SECTION``. No other exception
escapes the parser, whatever the bytes (see docs/elf.md).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import struct
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    NamedTuple,
    Protocol,
    TypeVar,
    cast,
    overload,
    runtime_checkable,
)

import numpy as np
import numpy.typing as npt
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from . import timing
from ._errors import DpuError, DpuErrorCode
from ._files import InputFileError, read_input_file
from ._machine._dpulog import STDOUT_BUFFER, STDOUT_BUFFER_STATE, LogBuffer
from ._machine._program import (
    ATOMIC_BASE,
    DPU_MRAM_HEAP_POINTER_NAME,
    MRAM_SIZE,
    DpuProgram,
    MemoryImage,
    MemorySpace,
    Symbol,
    mram_heap_pointer_symbol,
    space_offset,
)
from .dpu._program import BarrierDecl, MutexDecl, Var
from .dpu._tasklet import start_tasklets

if TYPE_CHECKING:
    from ._machine._dpu import Dpu
    from .dpu._tasklet import Tasklet

__all__ = [
    "ABS_SYMBOLS_VISIBLE",
    "ELF_ERROR_CODES",
    "EM_DPU",
    "DpuBehaviour",
    "ElfProgram",
    "ElfSection",
    "ElfSymbol",
    "PythonModel",
    "SymbolRow",
    "chip_from_attributes",
    "format_symbols",
    "load_elf",
    "main_symbols",
    "register_model",
    "registered_model",
    "unregister_model",
]

E = DpuErrorCode

#: ``e_machine`` of DPU binaries
EM_DPU = 245
#: files larger than this are rejected before being read (a real DPU binary is a few MiB)
MAX_ELF_SIZE = 256 << 20
#: most tasklets any DPU version has (``STACK_SIZE_TASKLET_0`` … ``_23``)
MAX_TASKLETS = 24
#: the codes a load of a malformed or missing file can raise
ELF_ERROR_CODES = frozenset(
    {E.DPU_ERR_ELF_INVALID_FILE, E.DPU_ERR_ELF_NO_SUCH_FILE, E.DPU_ERR_ELF_NO_SUCH_SECTION}
)
#: Whether absolute (``SHN_ABS``) symbols such as ``NR_TASKLETS`` are host-visible.
#: sdk-reference.md §1.4 says they are. NOTE: in the SDK's ``dpu_elf.c``/``dpu_program.c`` the
#: ABS symbols are stored in the extra map at index ``shnum``, which the visible-symbol loop
#: (``each_section < shnum``) never reaches, so real ``dpu_get_symbol`` may not find them.
#: Flip this constant if that is confirmed for 2025.1 (docs/elf.md, "Visibility").
ABS_SYMBOLS_VISIBLE = True

_ET_EXEC, _ET_CORE = 2, 4
_SHT_NULL, _SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_NOBITS, _SHT_DYNSYM = 0, 1, 2, 3, 8, 11
_SHF_ALLOC, _SHF_COMPRESSED = 0x2, 0x800
_SHN_ABS = 0xFFF1
_SHN_XINDEX = 0xFFFF
_EHDR = struct.Struct("<HHIIIIIHHHHHH")
_SHDR = struct.Struct("<IIIIIIIIII")
_MACHINES = {3: "x86", 40: "ARM", 62: "x86-64", 183: "AArch64", 243: "RISC-V"}

MainFn = Callable[["Tasklet"], Awaitable[None]]


def _invalid(message: str) -> DpuError:
    return DpuError(E.DPU_ERR_ELF_INVALID_FILE, message)


def _align8(x: int) -> int:
    return (x + 7) & ~7


# ================================================================================================
# public records
# ================================================================================================
@dataclass(frozen=True)
class ElfSection:
    """A section header of the binary."""

    index: int
    name: str
    type: int
    flags: int
    address: int
    size: int
    offset: int

    @property
    def allocated(self) -> bool:
        """``SHF_ALLOC``: the section occupies DPU memory."""
        return bool(self.flags & _SHF_ALLOC)

    @property
    def nobits(self) -> bool:
        """NOBITS (zero-initialised, nothing stored in the file)."""
        return self.type == _SHT_NOBITS

    @property
    def space(self) -> str:
        """``"IRAM"``, ``"MRAM"``, ``"WRAM"`` or ``"ATOMIC"`` (addresses ≥ 0xF0000000)."""
        if self.address >= ATOMIC_BASE:
            return "ATOMIC"
        return MemorySpace.of(self.address).value


@dataclass(frozen=True)
class ElfSymbol:
    """One named symbol of ``.symtab`` and what the host can do with it.

    ``section`` is the section name, ``"ABS"`` for absolute symbols, ``"UND"``/``"COMMON"``
    or ``"#<index>"`` for symbols the SDK ignores. ``size`` is the ELF size; the host-visible
    :class:`~aiopim.Symbol` of ``__sys_used_mram_end`` has the SDK's special size instead.
    """

    name: str
    address: int
    size: int
    section: str
    visible: bool
    bind: str
    type: str
    section_index: int

    @property
    def defined(self) -> bool:
        """In a real section, or absolute."""
        return self.section_index >= 0

    @property
    def space(self) -> MemorySpace:
        """Memory a host access to this address goes to (sdk-reference.md §1.4 bit rules)."""
        return MemorySpace.of(self.address)


class SymbolRow(NamedTuple):
    """One line of :meth:`ElfProgram.symbol_table`."""

    name: str
    space: MemorySpace
    address: int
    size: int


# ================================================================================================
# behaviours: what runs when an ELF program is launched
# ================================================================================================
@runtime_checkable
class DpuBehaviour(Protocol):
    """What executes a loaded ELF program when its DPU boots.

    ``start`` is called by :meth:`ElfProgram.boot` at the launch's virtual time; it must spawn
    the tasklets with ``dpu.runner_of(TaskletRunner).spawn(tid, coroutine)`` (or spawn none:
    the DPU then stops at once). :class:`PythonModel` is the implementation for Python
    kernels.
    """

    def start(self, dpu: Dpu, program: ElfProgram) -> None:
        """Spawn the program's tasklets on ``dpu``."""


class PythonModel:
    """A Python kernel standing in for the binary: ``main(t)`` runs on every tasklet.

    The :class:`~aiopim.Tasklet` it receives resolves names against the binary:
    ``t.view(program.address_of("x"), np.uint32, n)``, ``t.view(program.var("x", np.uint32))``,
    ``t.mram_heap_pointer``, ``t.mem_alloc`` (heap from ``__sys_heap_pointer_reset``) …
    """

    def __init__(self, main: MainFn) -> None:
        if not callable(main):
            raise TypeError(f"a model must be an async main(t) function, not {main!r}")
        self.main = main

    def start(self, dpu: Dpu, program: ElfProgram) -> None:
        """Spawn one :class:`~aiopim.Tasklet` per ``NR_TASKLETS``, as ``Program.boot`` does."""
        start_tasklets(dpu, program, self.main)

    def __repr__(self) -> str:
        return f"PythonModel({getattr(self.main, '__qualname__', self.main)!r})"


Model = MainFn | DpuBehaviour
_M = TypeVar("_M")
#: program name -> (model as registered, its behaviour), converted once at registration
_REGISTRY: dict[str, tuple[Model, DpuBehaviour]] = {}


def _as_behaviour(model: object) -> DpuBehaviour:
    if isinstance(model, DpuBehaviour):
        return model
    if callable(model):
        return PythonModel(cast(MainFn, model))
    raise TypeError(
        f"a model must be an async main(t) function or have start(dpu, program), not {model!r}"
    )


@overload
def register_model(program_name: str) -> Callable[[_M], _M]: ...
@overload
def register_model(program_name: str, model: _M) -> _M: ...
def register_model(program_name: str, model: Any = None) -> Any:
    """Bind ``model`` to every ELF program called ``program_name`` (default name: file stem).

    ``model`` is an ``async def main(t)`` Python kernel or a :class:`DpuBehaviour`. The lookup
    happens at launch, so a model may be registered before or after loading. Without ``model``
    this is a decorator: ``@register_model("checksum")``. Registering again replaces.
    """
    if model is None:

        def decorate(fn: _M) -> _M:
            register_model(program_name, fn)
            return fn

        return decorate
    _REGISTRY[program_name] = (model, _as_behaviour(model))  # validated now, not at launch
    return model


def unregister_model(program_name: str) -> None:
    """Remove the model registered for ``program_name`` (no error if there is none)."""
    _REGISTRY.pop(program_name, None)


def registered_model(program_name: str) -> Model | None:
    """The model registered for ``program_name``, if any."""
    entry = _REGISTRY.get(program_name)
    return None if entry is None else entry[0]


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


# ================================================================================================
# the program
# ================================================================================================
class ElfProgram(DpuProgram):
    """A DPU ELF binary: symbols, images, tasklets, hardware version, and a bound behaviour.

    ``source`` is a path or the file's bytes. ``name`` defaults to the file's stem
    (``"<memory>"`` for bytes) and is the key :func:`register_model` binds models to.
    ``model`` binds an ``async def main(t)`` Python kernel or a :class:`DpuBehaviour` now.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | bytes | bytearray | memoryview,
        *,
        name: str | None = None,
        model: Model | None = None,
    ) -> None:
        data, origin, stem = _read_source(source)
        parsed = _parse(data, origin)
        self.path: Path | None = None if origin == "<memory>" else Path(origin)
        self.name = name if name is not None else stem
        self.entry = parsed.entry
        self._sections = parsed.sections
        self._all = parsed.symbols
        self._images = parsed.images
        self._chip, self.cpu_name = chip_from_attributes(parsed.attributes)
        self._model: Model | None = None
        self._behaviour: DpuBehaviour | None = None
        #: the interpreter's decoded ``.text`` (built at the first interpreted boot, shared)
        self._interpreter: object | None = None
        if model is not None:
            self.bind(model)

        # defined symbols by name: global/weak first, then locals, each in table order
        self._defined: dict[str, ElfSymbol] = {}
        for sym in sorted((s for s in self._all if s.defined), key=lambda s: s.bind == "LOCAL"):
            self._defined.setdefault(sym.name, sym)
        # host-visible symbols, in the SDK's order (by section index, ABS last): first match wins
        self._visible: dict[str, ElfSymbol] = {}
        for sym in sorted((s for s in self._all if s.visible), key=lambda s: s.section_index):
            self._visible.setdefault(sym.name, sym)
        self._symbols = {
            name: mram_heap_pointer_symbol(sym.address)
            if name == DPU_MRAM_HEAP_POINTER_NAME
            else Symbol(name, sym.address, sym.size)
            for name, sym in self._visible.items()
        }

        nr = self._defined.get("NR_TASKLETS")
        self._nr_tasklets = 1 if nr is None else nr.address
        if self._nr_tasklets == 0:
            raise _invalid(f"{origin}: NR_TASKLETS is 0")
        self.stack_sizes: list[int] = []
        for i in range(min(self._nr_tasklets, MAX_TASKLETS)):
            s = self._defined.get(f"STACK_SIZE_TASKLET_{i}")
            self.stack_sizes.append(0 if s is None else s.address)

        # extents of the allocated sections in each memory
        end = dict.fromkeys(("WRAM", "MRAM", "IRAM", "ATOMIC"), 0)
        for sec in self._sections:
            if sec.allocated and sec.size:
                end[sec.space] = max(end[sec.space], space_offset(sec.address) + sec.size)
        self.wram_end, self.mram_end, self.iram_end = end["WRAM"], end["MRAM"], end["IRAM"]
        reset = self._defined.get("__sys_heap_pointer_reset")
        #: start of the WRAM heap (``__sys_heap_pointer_reset``, else end of WRAM sections)
        self.heap_start = reset.address if reset is not None else _align8(self.wram_end)

    def __repr__(self) -> str:
        return (
            f"<ElfProgram {self.name!r} NR_TASKLETS={self._nr_tasklets} chip={self._chip} "
            f"symbols={len(self._symbols)} model={'bound' if self._model is not None else 'none'}>"
        )

    # -- DpuProgram -------------------------------------------------------------------------------
    @property
    def nr_tasklets(self) -> int:
        """``NR_TASKLETS`` (1 when the binary has no such symbol)."""
        return self._nr_tasklets

    @property
    def chip(self) -> str | None:
        """ "v1A"/"v1B" from ``.dpu.attributes``; None (any) if absent or unrecognised."""
        return self._chip

    def symbols(self) -> Mapping[str, Symbol]:
        """Host-visible symbols (sdk-reference.md §1.4)."""
        return self._symbols

    def images(self) -> list[MemoryImage]:
        """IRAM/WRAM/MRAM contents written at load (``.mram.noinit``, NOBITS, ``.atomic``,
        non-allocated sections are not loaded)."""
        return list(self._images)

    def check_fits(self, chip: timing.ChipProfile) -> None:
        """``DPU_ERR_TOO_MANY_TASKLETS``, or ``DPU_ERR_INVALID_{W,M,I}RAM_ACCESS`` when the
        sections do not fit the DPU's memories."""
        if self._nr_tasklets > chip.nr_threads:
            raise DpuError(
                E.DPU_ERR_TOO_MANY_TASKLETS,
                f"{self.name!r} has NR_TASKLETS={self._nr_tasklets}; the DPU has "
                f"{chip.nr_threads} hardware threads",
            )
        wram_need = max(self.wram_end, self.heap_start)
        if wram_need > chip.wram_size:
            raise DpuError(
                E.DPU_ERR_INVALID_WRAM_ACCESS,
                f"{self.name!r} needs {wram_need} bytes of WRAM (its WRAM sections end at "
                f"{self.wram_end:#x}, heap at {self.heap_start:#x}) but the DPU has "
                f"{chip.wram_size}",
            )
        if self.mram_end > MRAM_SIZE:
            raise DpuError(
                E.DPU_ERR_INVALID_MRAM_ACCESS,
                f"{self.name!r} has MRAM sections up to offset {self.mram_end:#x}; MRAM is 64 MiB",
            )
        iram = chip.iram_instructions * 8
        if self.iram_end > iram:
            raise DpuError(
                E.DPU_ERR_INVALID_IRAM_ACCESS,
                f"{self.name!r} has {self.iram_end} bytes of code; the DPU's IRAM holds {iram}",
            )

    def boot(self, dpu: Dpu) -> None:
        """Start the bound (or registered) model, else run the binary's instructions."""
        behaviour = self._bound_behaviour()
        if behaviour is None:
            from .isa._runner import boot_binary

            boot_binary(dpu, self)
        else:
            behaviour.start(dpu, self)

    # -- models -----------------------------------------------------------------------------------
    @property
    def model(self) -> Model | None:
        """The model bound with :meth:`bind` (or ``model=``), if any."""
        return self._model

    def bind(self, model: Model) -> ElfProgram:
        """Bind ``model`` (``async def main(t)`` or a :class:`DpuBehaviour`) to this program."""
        self._behaviour = _as_behaviour(model)
        self._model = model
        return self

    def _bound_behaviour(self) -> DpuBehaviour | None:
        if self._behaviour is not None:
            return self._behaviour
        entry = _REGISTRY.get(self.name)
        return None if entry is None else entry[1]

    def behaviour(self) -> DpuBehaviour:
        """The model a launch runs instead of the binary: the bound model, else the one
        registered under :attr:`name`; ``DpuError(DPU_ERR_INTERNAL)`` if there is neither
        (a launch then runs the binary's instructions on the interpreter)."""
        behaviour = self._bound_behaviour()
        if behaviour is None:
            raise DpuError(
                E.DPU_ERR_INTERNAL,
                f"{self.name!r} has no model bound to it (a launch runs its instructions on "
                f"the interpreter); bind one with register_model({self.name!r}, main) or "
                "ElfProgram(..., model=main)",
            )
        return behaviour

    # -- symbols ----------------------------------------------------------------------------------
    def sections(self) -> list[ElfSection]:
        """Every section header, in file order."""
        return list(self._sections)

    def all_symbols(self) -> list[ElfSymbol]:
        """Every named symbol of ``.symtab``, in table order, with its ``visible`` flag."""
        return list(self._all)

    def symbol(self, name: str) -> ElfSymbol:
        """The defined symbol ``name`` (visible or not; globals before locals)."""
        sym = self._defined.get(name)
        if sym is None:
            raise DpuError(E.DPU_ERR_UNKNOWN_SYMBOL, f"{self.name!r} has no symbol {name!r}")
        return sym

    def log_buffer(self) -> LogBuffer | None:
        """The binary's ``__stdout_buffer`` and ``__stdout_buffer_state``, if it links printf."""
        buf, state = self._defined.get(STDOUT_BUFFER), self._defined.get(STDOUT_BUFFER_STATE)
        if buf is None or state is None:
            return None
        return LogBuffer(buf.address, buf.size, state.address)

    def address_of(self, where: str | Var) -> int:
        """DPU address of a symbol by name (or of a :class:`~aiopim.dpu.Var` by its name),
        including WRAM symbols the host cannot see."""
        name = where if isinstance(where, str) else where.name
        return self.symbol(name).address

    def var(self, name: str, dtype: npt.DTypeLike = np.uint8, count: int | None = None) -> Var:
        """A :class:`~aiopim.dpu.Var` for the binary's symbol ``name``, for ``t.view(var)``,
        ``t.mram_read(var, …)``: ``count`` defaults to the symbol size over the item size."""
        sym = self.symbol(name)
        dt = np.dtype(dtype)
        n = count if count is not None else max(1, sym.size // dt.itemsize)
        return Var(name, sym.section, dt, n, None)

    def barrier(self, name: str, count: int | None = None) -> BarrierDecl:
        """Declare a barrier for the Python model (``count`` defaults to NR_TASKLETS)."""
        return BarrierDecl(name, count)

    def mutex(self, name: str) -> MutexDecl:
        """Declare a mutex for the Python model."""
        return MutexDecl(name)

    def symbol_table(self) -> list[SymbolRow]:
        """Host-visible symbols as ``(name, space, address, size)`` rows, by address."""
        rows = [SymbolRow(s.name, s.space, s.address, s.size) for s in self._symbols.values()]
        return sorted(rows, key=lambda r: (r.address, r.name))


def load_elf(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview,
    *,
    name: str | None = None,
    model: Model | None = None,
) -> ElfProgram:
    """Parse a DPU ELF binary from a path or bytes (see :class:`ElfProgram`)."""
    return ElfProgram(source, name=name, model=model)


# ================================================================================================
# inspection and the `aiopim symbols` command
# ================================================================================================
def format_symbols(program: ElfProgram, *, all_symbols: bool = False) -> str:
    """A readelf-like table of the host-visible symbols (every named symbol with
    ``all_symbols``), plus the tasklet count, stack sizes and hardware version."""
    chip = program.chip or "any (no recognised .dpu.attributes)"
    if program.cpu_name is not None and program.cpu_name != program.chip:
        chip += f" [cpu {program.cpu_name!r}]"
    origin = str(program.path) if program.path is not None else "<memory>"
    lines = [
        f"DPU program {program.name!r} ({origin}): ELF32 EM_DPU, entry {program.entry:#010x}",
        f"Hardware version: {chip}",
        f"Tasklets: {program.nr_tasklets} (NR_TASKLETS)",
        f"Stack sizes: {' '.join(str(s) for s in program.stack_sizes) or '-'}",
        f"WRAM heap start: {program.heap_start:#x}",
        "",
    ]

    def order(address: int, name: str, section: str) -> tuple[int, int, Any]:
        # memory symbols by address, then absolute ones by name (STACK_SIZE_TASKLET_2 < _10)
        if section != "ABS":
            return (0, address, name)
        key = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
        return (1, 0, [(isinstance(k, int), k) for k in key])

    if all_symbols:
        syms = sorted(program.all_symbols(), key=lambda s: order(s.address, s.name, s.section))
        lines.append(f"All symbols ({len(syms)}):")
        lines.append(f"  {'Address':<10}  {'Size':>8}  Space  Host  {'Section':<18}  Name")
        for s in syms:
            host = "yes" if s.visible else "no"
            lines.append(
                f"  {s.address:#010x}  {s.size:>8}  {s.space.value:<5}  {host:<4}  "
                f"{s.section:<18}  {s.name}"
            )
    else:
        rows = program.symbol_table()
        visible = program._visible
        rows.sort(key=lambda r: order(r.address, r.name, visible[r.name].section))
        lines.append(f"Host-visible symbols ({len(rows)}):")
        lines.append(f"  {'Address':<10}  {'Size':>8}  Space  {'Section':<18}  Name")
        lines.extend(
            f"  {r.address:#010x}  {r.size:>8}  {r.space.value:<5}  "
            f"{visible[r.name].section:<18}  {r.name}"
            for r in rows
        )
    return "\n".join(lines)


def main_symbols(argv: Sequence[str] | None = None) -> int:
    """``aiopim symbols FILE``: print the symbol table; on a bad file print the SDK error name
    and message to stderr and return 2."""
    parser = argparse.ArgumentParser(
        prog="aiopim symbols",
        description="Print the host-visible symbols of a DPU ELF binary (dpu_get_symbol view).",
    )
    parser.add_argument("file", help="DPU ELF binary")
    parser.add_argument(
        "-a", "--all", action="store_true", help="list every symbol, with its host visibility"
    )
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        program = ElfProgram(args.file)
    except DpuError as err:
        print(f"{err.code.name}: {err.detail}", file=sys.stderr)
        return 2
    print(format_symbols(program, all_symbols=args.all))
    return 0
