"""DPU programs as the core sees them: symbols, initial memory images, and how to boot.

A program is anything implementing :class:`DpuProgram`: today a Python kernel
(:class:`aiopim.dpu.Program`) or an ELF binary bound to a Python model; later possibly an
interpreter of the DPU instruction set. The core never looks further than this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..timing import ChipProfile
    from ._dpu import Dpu
    from ._dpulog import LogBuffer

IRAM_BIT = 0x80000000
MRAM_BIT = 0x08000000
ATOMIC_BASE = 0xF0000000
DPU_MRAM_HEAP_POINTER_NAME = "__sys_used_mram_end"
#: MRAM bytes per DPU: the SDK's ``mram_size_hint``, which sizes the MRAM heap pointer symbol
MRAM_SIZE = 64 << 20


class MemorySpace(Enum):
    """Where a DPU address points, by the SDK's address-bit rules (sdk-reference.md §1.4)."""

    WRAM = "WRAM"
    MRAM = "MRAM"
    IRAM = "IRAM"

    @staticmethod
    def of(address: int) -> MemorySpace:
        """Classify a DPU address: IRAM bit first, then MRAM bit, else WRAM."""
        if address & IRAM_BIT:
            return MemorySpace.IRAM
        if address & MRAM_BIT:
            return MemorySpace.MRAM
        return MemorySpace.WRAM


def space_offset(address: int) -> int:
    """Byte offset of ``address`` inside its memory."""
    if address & IRAM_BIT:
        return address & ~IRAM_BIT
    if address & MRAM_BIT:
        return address & ~MRAM_BIT
    return address


@dataclass(frozen=True)
class Symbol:
    """A host-visible symbol: ``struct dpu_symbol_t`` plus its name."""

    name: str
    address: int
    size: int

    @property
    def space(self) -> MemorySpace:
        """Memory the symbol lives in."""
        return MemorySpace.of(self.address)

    @property
    def offset(self) -> int:
        """Byte offset inside its memory."""
        return space_offset(self.address)


def mram_heap_pointer_symbol(address: int) -> Symbol:
    """``DPU_MRAM_HEAP_POINTER_NAME`` at ``address``; its size is the rest of MRAM
    (sdk-reference.md §1.4)."""
    return Symbol(DPU_MRAM_HEAP_POINTER_NAME, address, max(0, MRAM_SIZE - (address & ~MRAM_BIT)))


@dataclass(frozen=True)
class MemoryImage:
    """Initial contents written at load: ``data`` at DPU ``address``."""

    address: int
    data: bytes


class DpuProgram(ABC):
    """What a loadable DPU program provides to the emulator."""

    #: name used in logs, traces and fault messages
    name: str

    @property
    @abstractmethod
    def nr_tasklets(self) -> int:
        """``NR_TASKLETS`` of the program."""

    @property
    def chip(self) -> str | None:
        """Hardware version the program was built for ("v1A"/"v1B"), None if any."""
        return None

    @abstractmethod
    def symbols(self) -> Mapping[str, Symbol]:
        """Host-visible symbols by name (visibility rules already applied)."""

    @abstractmethod
    def images(self) -> list[MemoryImage]:
        """Memory images written into every DPU at load (the rest of MRAM, ``.mram.noinit``
        included, keeps its bytes)."""

    def zeroed_mram(self) -> list[tuple[int, int]]:
        """MRAM ``(offset, length)`` ranges the load fills with zeros besides the images:
        ``__mram`` variables with no initial value that no image holds."""
        return []

    def log_buffer(self) -> LogBuffer | None:
        """Where the program's ``printf`` writes its log (None if it does not use printf)."""
        return None

    def check_fits(self, chip: ChipProfile) -> None:  # noqa: B027
        """Raise :class:`DpuError` if the program cannot run on ``chip``."""

    @abstractmethod
    def boot(self, dpu: Dpu) -> None:
        """Start executing on ``dpu`` (called by a launch job at the current virtual time)."""
