"""``dpu_load`` and symbol lookup: programs as the host library sees them."""

from __future__ import annotations

import numpy as np

from .. import timing
from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._dpu import Dpu
from .._machine._jobs import Job
from .._machine._program import DpuProgram, MemoryImage, MemorySpace, Symbol, space_offset
from .._machine._rank import Rank
from ._oplog import logged
from ._set import DpuSetBase
from ._submit import submit
from ._validate import check_str

E = DpuErrorCode


def common_program(dset: DpuSetBase) -> DpuProgram:
    """The one program loaded on every DPU of the set (symbol-name APIs)."""
    progs = dset.programs()
    first = progs[0] if progs else None
    if first is None or any(p is None for p in progs):
        raise DpuError(E.DPU_ERR_NO_PROGRAM_LOADED, "load a program (dpu_load) first")
    if any(p is not first for p in progs):
        raise DpuError(
            E.DPU_ERR_DIFFERENT_DPU_PROGRAMS,
            "the DPUs of this set run different programs; use a symbol (address, size) instead",
        )
    return first


def get_symbol(program: DpuProgram, name: str) -> Symbol:
    """``dpu_get_symbol``."""
    if not isinstance(program, DpuProgram):
        raise TypeError(f"program must be a DPU program, not {type(program).__name__}")
    sym = program.symbols().get(check_str(name, "symbol_name"))
    if sym is None:
        raise DpuError(
            E.DPU_ERR_UNKNOWN_SYMBOL,
            f"{program.name!r} has no host-visible symbol {name!r} "
            "(WRAM variables need __host; MRAM variables are always visible)",
        )
    return sym


class LoadJob(Job):
    """LOAD: write a program's images into every enabled DPU of the rank."""

    __slots__ = ("images", "program", "size")

    def __init__(self, rank: Rank, program: DpuProgram, images: list[MemoryImage]) -> None:
        size = sum(len(im.data) for im in images)
        super().__init__(rank, JobType.LOAD, info={"program": program.name, "bytes": size})
        self.program = program
        self.images = images
        self.size = size

    def start(self) -> int:
        return timing.load_time_ps(self.size)

    def complete(self) -> None:
        for d in self.rank.enabled_dpus:
            write_program(d, self.program, self.images)


@logged("load")
async def load(dset: DpuSetBase, program: DpuProgram) -> DpuProgram:
    """``dpu_load``: always synchronous (LOAD + SYNC on each rank)."""
    if not isinstance(program, DpuProgram):
        raise TypeError(f"dpu_load needs a DPU program, not {type(program).__name__}")
    emu = dset.emulator
    chip = emu.config.chip_profile
    if program.nr_tasklets > chip.nr_threads:
        raise DpuError(
            E.DPU_ERR_TOO_MANY_TASKLETS,
            f"{program.name!r} uses {program.nr_tasklets} tasklets; {chip.name} DPUs have "
            f"{chip.nr_threads} hardware threads",
        )
    if program.chip is not None and program.chip != chip.name:
        # the SDK's loader returns DPU_ERR_INTERNAL here (sdk-reference.md §2.1, §7)
        raise DpuError(
            E.DPU_ERR_INTERNAL,
            f"{program.name!r} was built for {program.chip} but the machine is {chip.name}: "
            f'allocate {program.chip} DPUs with dpu_alloc(n, "chip={program.chip}") or run on '
            f'MachineConfig(chip="{program.chip}")',
        )
    program.check_fits(chip)
    images = program.images()
    if dset.is_single_dpu:
        dpu = dset.dpu_list[0]
        if dpu.running:
            raise DpuError(E.DPU_ERR_DPU_ALREADY_RUNNING, f"DPU {dpu.name} is running")
        await emu.delay(timing.load_time_ps(sum(len(im.data) for im in images)), "a program load")
        write_program(dpu, program, images)
        return program
    await submit(
        dset, lambda rank: LoadJob(rank, program, images), wait=True, parallel=False, what="load"
    )
    return program


def write_program(d: Dpu, program: DpuProgram, images: list[MemoryImage]) -> None:
    """Zero WRAM, write the program's images (and CLOCKS_PER_SEC): MRAM outside the images
    and the program's zero-initialised variables keeps its bytes, as with the SDK's loader."""
    d.clear_wram()
    d.persistent.clear()
    for offset, length in program.zeroed_mram():
        d.mram.zero(offset, length)
    for im in images:
        _write_image(d, im.address, im.data)
    _patch_clocks_per_sec(d, program)
    d.program = program


def _write_image(d: Dpu, address: int, data: bytes) -> None:
    buf = np.frombuffer(data, dtype=np.uint8)
    space, off = MemorySpace.of(address), space_offset(address)
    if space is MemorySpace.WRAM:
        d.wram[off : off + len(buf)] = buf
    elif space is MemorySpace.MRAM:
        d.mram.write(off, buf)
    else:
        d.iram[off : off + len(buf)] = buf


def _patch_clocks_per_sec(d: Dpu, program: DpuProgram) -> None:
    sym = program.symbols().get("CLOCKS_PER_SEC")
    if sym is not None and sym.space is MemorySpace.WRAM and sym.size >= 4:
        d.wram[sym.offset : sym.offset + 4] = np.frombuffer(
            np.uint32(d.chip.frequency_hz).tobytes(), dtype=np.uint8
        )
