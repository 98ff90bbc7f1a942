"""``ElfProgram``: a DPU binary as a loadable program (symbols, images, how it boots)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import (
    TYPE_CHECKING,
)

import numpy as np
import numpy.typing as npt

from .. import timing
from .._errors import DpuError
from .._machine._dpulog import STDOUT_BUFFER, STDOUT_BUFFER_STATE, LogBuffer
from .._machine._program import (
    DPU_MRAM_HEAP_POINTER_NAME,
    MRAM_SIZE,
    DpuProgram,
    MemoryImage,
    Symbol,
    mram_heap_pointer_symbol,
    space_offset,
)
from ..dpu._program import BarrierDecl, MutexDecl, Var
from ._models import _REGISTRY, DpuBehaviour, Model, _as_behaviour
from ._parse import _parse, _read_source, chip_from_attributes
from ._records import MAX_TASKLETS, E, ElfSection, ElfSymbol, SymbolRow, _align8, _invalid

if TYPE_CHECKING:
    from .._machine._dpu import Dpu


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
            from ..isa._runner import boot_binary

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
