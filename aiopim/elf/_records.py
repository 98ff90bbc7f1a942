"""Constants and the records of a parsed DPU ELF: sections, symbols, symbol-table rows."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    NamedTuple,
)

from .._errors import DpuError, DpuErrorCode
from .._machine._program import (
    ATOMIC_BASE,
    MemorySpace,
)

if TYPE_CHECKING:
    pass


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
