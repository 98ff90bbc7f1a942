"""Built-in scenario kernels: ``cycles``, ``sum`` and ``recorded`` (FIFO kernels: ``_fifo``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import timing
from .._machine._program import DPU_MRAM_HEAP_POINTER_NAME
from .._machine._wramfifo import READ_PTR, WRITE_PTR
from .._runtime._kernel import Delay
from ..dpu import DpuFault, FifoDecl, Program, Tasklet
from ._limits import MAX_XFER_BYTES, KernelCost
from ._spec import KernelKind, Param, ProgramSpec, parse_duration, register_kernel


def base_program(spec: ProgramSpec, nr_tasklets: int | None = None) -> Program:
    """A Python program named after the scenario table, with the table's extra symbols."""
    prog = Program(spec.name, nr_tasklets=nr_tasklets or spec.tasklets)
    for name, (space, size) in spec.symbols.items():
        if name in ("CLOCKS_PER_SEC", DPU_MRAM_HEAP_POINTER_NAME):
            continue
        if space == "wram":
            prog.host(name, np.uint8, size)
        else:
            prog.mram_noinit(name, np.uint8, size)
    return prog


def _cycles(spec: ProgramSpec) -> Program:
    prog = base_program(spec)
    cycles = int(spec.params["cycles"])
    if cycles >= 1 << 32:
        raise ValueError("cycles must fit 32 bits")
    var = prog.host("cycles", np.uint32, 1, init=[cycles])
    period = max(timing.REVOLVER_CYCLES, spec.tasklets)

    @prog.main
    async def main(t: Tasklet) -> None:
        t.compute(-(-int(t.view(var)[0]) // period))

    return prog


def _sum(spec: ProgramSpec) -> Program:
    prog = base_program(spec)
    nbytes = int(spec.params["input_bytes"])
    block = int(spec.params["block"])
    ipw = int(spec.params["instructions_per_word"])
    if nbytes <= 0 or nbytes % 8:
        raise ValueError("input_bytes must be a positive multiple of 8")
    if not 8 <= block <= 2048 or block % 8:
        raise ValueError("block must be a multiple of 8 between 8 and 2048 (one DMA)")
    tasklets = spec.tasklets
    inp = prog.mram_noinit("input", np.uint8, nbytes)
    result = prog.host("result", np.uint64, 1)
    partials = prog.wram("__partials", np.uint64, tasklets)
    bar = prog.barrier("__sum_barrier")

    @prog.main
    async def main(t: Tasklet) -> None:
        me = t.me()
        if me == 0:
            t.mem_reset()
        await t.barrier_wait(bar)
        buf = t.mem_alloc(block)
        base = t.mram_address(inp)
        acc = 0
        for off in range(me * block, nbytes, tasklets * block):
            size = min(block, nbytes - off)
            await t.mram_read(base + off, buf, size)
            acc += int(t.view(buf, np.uint32, size // 4).sum(dtype=np.uint64))
            t.compute(ipw * (size // 4))
        t.view(partials)[me] = acc & 0xFFFFFFFFFFFFFFFF
        await t.barrier_wait(bar)
        if me == 0:
            t.view(result)[0] = t.view(partials).sum(dtype=np.uint64)
            t.compute(4 * tasklets)

    return prog


def _sum_cost(spec: ProgramSpec) -> KernelCost:
    blocks = -(-int(spec.params["input_bytes"]) // max(8, int(spec.params["block"])))
    return KernelCost(8 * spec.tasklets + 2 * blocks)


def _recorded_cost(spec: ProgramSpec) -> KernelCost:
    most = 0  # pointer writes of one launch (the tables were checked by the build)
    for launches in spec.params["pointers"].values():
        for writes in launches if isinstance(launches, list) else ():
            most = max(most, len(writes) if isinstance(writes, list) else 1)
    return KernelCost(2 + most)


def _recorded(spec: ProgramSpec) -> Program:
    prog = base_program(spec)
    image = int(spec.params["image_bytes"])
    if image:
        prog.mram("__aiopim_image", np.uint8, image, init=np.zeros(image, np.uint8))
    runs: dict[str, list[int]] = {}
    for dpu, values in spec.params["runs"].items():
        if not isinstance(values, list):
            raise ValueError(f"runs.{dpu} must be a list of durations, one per launch")
        runs[dpu] = [parse_duration(v) for v in values]
    default = runs.get("all")
    fifos = _recorded_fifos(prog, spec.params["fifos"])
    pointers = _recorded_pointers(spec.params["pointers"], fifos, runs)
    boots: dict[str, int] = {}

    @prog.main
    async def main(t: Tasklet) -> None:
        if t.me():
            return
        name = t.dpu.name
        k = boots.get(name, 0)
        boots[name] = k + 1
        durations: Any = runs.get(name, default)
        if durations is None or k >= len(durations):
            raise DpuFault(f"the recording has no run #{k + 1} for DPU {name}")
        writes = pointers.get(name, pointers.get("all", []))
        elapsed = 0
        for offset, fifo, value in writes[k] if k < len(writes) else ():
            if offset > durations[k]:
                raise DpuFault(f"a recorded FIFO pointer write of DPU {name} is after its run")
            if offset > elapsed:
                await Delay(offset - elapsed)
                elapsed = offset
            decl = fifos[fifo]
            addr = prog.address_of(decl.struct) + (WRITE_PTR if decl.output else READ_PTR)
            t.wram[addr : addr + 8].view(np.uint64)[0] = value
            t.dpu.wram_written(addr, 8)
        if durations[k] > elapsed:
            await Delay(durations[k] - elapsed)

    return prog


def _recorded_fifos(prog: Program, table: dict[str, Any]) -> dict[str, FifoDecl]:
    """Declare the FIFOs of a recorded program (``fifos = { name = { direction, ... } }``)."""
    out: dict[str, FifoDecl] = {}
    for name, d in table.items():
        if not isinstance(d, dict) or set(d) != {"direction", "ptr_size", "data_size"}:
            raise ValueError(f"fifos.{name} must be a table with direction, ptr_size and data_size")
        if d["direction"] not in ("input", "output"):
            raise ValueError(f'fifos.{name}.direction must be "input" or "output"')
        declare = prog.input_fifo if d["direction"] == "input" else prog.output_fifo
        out[name] = declare(name, d["ptr_size"], d["data_size"])
    return out


def _recorded_pointers(
    table: dict[str, Any], fifos: dict[str, FifoDecl], runs: dict[str, list[int]]
) -> dict[str, list[list[tuple[int, str, int]]]]:
    """``pointers = { "r.c.m" = [[[offset ps, fifo, value], ...] per launch] }``, checked."""
    out: dict[str, list[list[tuple[int, str, int]]]] = {}
    for dpu, launches in table.items():
        durations = runs.get(dpu, runs.get("all", []))
        if dpu == "all":  # checked against every DPU's runs when it boots
            durations = [max(d) for d in zip(*runs.values(), strict=False)] if runs else []
        if not isinstance(launches, list) or len(launches) > len(durations):
            raise ValueError(f"pointers.{dpu} must be a list with one list per recorded run")
        out[dpu] = []
        for k, writes in enumerate(launches):
            checked: list[tuple[int, str, int]] = []
            for w in writes if isinstance(writes, list) else [None]:
                if not (
                    isinstance(w, list)
                    and len(w) == 3
                    and isinstance(w[0], int)
                    and w[1] in fifos
                    and isinstance(w[2], int)
                    and 0 <= w[0] <= durations[k]
                    and 0 <= w[2] < 1 << 64
                ):
                    raise ValueError(
                        f"pointers.{dpu}[{k}]: expected [offset ps within the run, FIFO name, "
                        f"pointer value], got {w!r}"
                    )
                checked.append((w[0], w[1], w[2]))
            out[dpu].append(sorted(checked, key=lambda x: x[0]))
    return out


register_kernel(
    KernelKind(
        "cycles",
        {"cycles": Param("count", True, doc="initial value of the __host uint32 `cycles`")},
        _cycles,
        cost=lambda spec: KernelCost(4 * spec.tasklets),
        doc="every tasklet computes so that the DPU runs for the __host variable `cycles` (rounded "
        "up to a multiple of max(11, tasklets)); the host may change it per rank or DPU",
    )
)
register_kernel(
    KernelKind(
        "sum",
        {
            "input_bytes": Param(
                "count", True, doc="size of the MRAM symbol `input`", maximum=MAX_XFER_BYTES
            ),
            "block": Param("int", default=1024, doc="bytes per DMA"),
            "instructions_per_word": Param("count", default=4, maximum=(1 << 32) - 1),
        },
        _sum,
        cost=_sum_cost,
        doc="sums the 32-bit words of MRAM `input` into the __host uint64 `result`, by DMA blocks",
    )
)
register_kernel(
    KernelKind(
        "recorded",
        {
            "runs": Param("table", True, doc="DPU name (or `all`) -> run durations per launch"),
            "image_bytes": Param(
                "count", default=0, doc="bytes written by dpu_load", maximum=MAX_XFER_BYTES
            ),
            "fifos": Param("table", default={}, doc="WRAM FIFOs: name -> geometry"),
            "pointers": Param("table", default={}, doc="DPU-side FIFO pointer writes"),
        },
        _recorded,
        cost=_recorded_cost,
        doc="replays recorded DPU run durations exactly (written by aiopim record)",
    )
)
