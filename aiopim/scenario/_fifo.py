"""WRAM FIFOs in scenarios: link, push and drain actions; ``stream`` and ``keysum`` kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import timing
from .._ops import XferMode, _fifo
from .._ops._fifo import FifoLink
from ..dpu import FifoDecl, Program, Tasklet
from ..host import DpuSet
from ._actions import FIFO_XFER_FLAGS, TARGET, _target_check, chosen_dpus, flags_of
from ._kernels import base_program
from ._limits import MAX_RETRIES, MAX_RETRY_US, KernelCost
from ._replay import ReplayContext
from ._spec import (
    ActionKind,
    KernelKind,
    Param,
    ProgramSpec,
    Step,
    register_action,
    register_kernel,
)

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_U32 = (1 << 32) - 1
_WRAM = timing.V1A.wram_size
_MRAM = timing.V1B.mram_size


# ================================================================================================
# actions
# ================================================================================================
def _link(ctx: ReplayContext, step: Step) -> FifoLink:
    name: str = step.params["fifo"]
    link = ctx.links.get(name)
    if link is None:
        raise ctx.error(step, f"the FIFO {name!r} is not linked (yet): run its fifo_link first")
    return link


def _retry_settings(link: FifoLink, dset: DpuSet, p: dict[str, Any]) -> None:
    if p.get("max_retries") is not None:
        _fifo.set_push_max_retries(link, dset, p["max_retries"])
    if p.get("time_for_retry_us") is not None:
        _fifo.set_time_for_push_retries(link, dset, p["time_for_retry_us"])


def element_bytes(link: FifoLink, value: Any, add: int) -> np.ndarray:
    """One ``data_size``-byte element: its 64-bit words from ``value`` (+ ``add`` on word 0)."""
    out = np.zeros(link.data_size, np.uint8)
    words = out.view(np.uint64)
    given = [value] if isinstance(value, int) else list(value)
    if len(given) > words.size:
        raise ValueError(
            f"{len(given)} words for FIFO {link.name!r}, whose elements hold {words.size} "
            f"64-bit word(s)"
        )
    given[0] = given[0] + add
    words[: len(given)] = [int(w) & _MASK64 for w in given]
    return out


async def _fifo_link(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    dset = ctx.target(step)
    direction = _fifo.DPU_INPUT_FIFO if p["direction"] == "input" else _fifo.DPU_OUTPUT_FIFO
    link = _fifo.link_fifo(dset, p["fifo"], direction)
    _retry_settings(link, dset, p)
    ctx.links[p["name"] or p["fifo"]] = link


async def _fifo_push(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    dset = ctx.target(step)
    link = _link(ctx, step)
    _retry_settings(link, dset, p)
    n = ctx.runs.get(id(step), 0)
    ctx.runs[id(step)] = n + 1
    add = n * p["increment"]
    try:
        if p["values"] is not None:
            members = list(dset.iter_dpus())
            if len(p["values"]) != len(members):
                raise ctx.error(
                    step, f"{len(p['values'])} values for a target of {len(members)} DPUs"
                )
            chosen = chosen_dpus(ctx, step, len(members))
            for i, (one, v) in enumerate(zip(members, p["values"], strict=True)):
                buf = element_bytes(link, v, add) if i in chosen else None
                _fifo.fifo_prepare_xfer(one, link, buf)
        elif p["value"] is not None:
            buf = element_bytes(link, p["value"], add)
            if p["dpus"] is None:
                _fifo.fifo_prepare_xfer(dset, link, buf)
            else:
                members = list(dset.iter_dpus())
                chosen = chosen_dpus(ctx, step, len(members))
                for i, one in enumerate(members):
                    _fifo.fifo_prepare_xfer(one, link, buf if i in chosen else None)
    except ValueError as exc:
        raise ctx.error(step, str(exc)) from None
    await _fifo.fifo_push_xfer(dset, link, XferMode.from_flags(flags_of(p, FIFO_XFER_FLAGS)))


async def _fifo_drain(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    dset = ctx.target(step)
    link = _link(ctx, step)
    members = list(dset.iter_dpus())
    chosen = chosen_dpus(ctx, step, len(members))
    rings: list[tuple[Any, np.ndarray]] = []
    for i, one in enumerate(members):
        if i in chosen:
            ring = np.zeros(link.ring_bytes, np.uint8)
            rings.append((one.dpu_list[0], ring))
            _fifo.fifo_prepare_xfer(one, link, ring)
        else:
            _fifo.fifo_prepare_xfer(one, link, None)
    await _fifo.fifo_push_xfer(dset, link, XferMode.from_flags(flags_of(p, FIFO_XFER_FLAGS)))
    into = p["into"]
    if into is None:
        return
    stream = ctx.streams.setdefault(into, {})
    for dpu, ring in rings:
        got = stream.setdefault((dpu.rank.index, dpu.index), [])
        for k in range(_fifo.fifo_size(link, dpu)):
            got.append(np.array(_fifo.fifo_elem(link, dpu, ring, k), dtype=np.uint8))
    parts = [e for key in sorted(stream) for e in stream[key]]
    ctx.buffers[into] = np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def _check_words(key: str, v: Any) -> None:
    if isinstance(v, int) and not isinstance(v, bool):
        return
    if isinstance(v, list) and v and all(isinstance(w, int) and not isinstance(w, bool) for w in v):
        return
    raise ValueError(key, f"expected an integer or a list of integers (64-bit words), got {v!r}")


def _check_push(p: dict[str, Any]) -> None:
    _target_check(p)
    if p["value"] is not None and p["values"] is not None:
        raise ValueError("values", "give value (every DPU) or values (one per DPU), not both")
    if p["value"] is not None:
        _check_words("value", p["value"])
    if p["values"] is not None:
        if not isinstance(p["values"], list) or not p["values"]:
            raise ValueError("values", "expected a list with one element per DPU")
        for v in p["values"]:
            _check_words("values", v)
    if p["dpus"] is not None and p["value"] is None and p["values"] is None:
        raise ValueError("dpus", "dpus picks who gets value/values; give one of them")


def _check_drain(p: dict[str, Any]) -> None:
    _target_check(p)
    if p["async"] and p["into"] is not None:
        raise ValueError(
            "into", "an asynchronous drain returns before the elements arrive: drop async or into"
        )


def _check_link(p: dict[str, Any]) -> None:
    _target_check(p)
    if p["direction"] not in ("input", "output"):
        raise ValueError("direction", f'expected "input" or "output", got {p["direction"]!r}')


RETRIES = {
    "max_retries": Param(
        "count", doc="dpu_fifo_set_push_max_retries (default 1000)", maximum=MAX_RETRIES
    ),
    "time_for_retry_us": Param(
        "count", doc="dpu_fifo_set_time_for_push_retries (default 10)", maximum=MAX_RETRY_US
    ),
}

for _kind in (
    ActionKind(
        "fifo_link",
        {
            **TARGET,
            "fifo": Param("str", True, doc="the FIFO variable of the loaded program"),
            "direction": Param("str", True, doc='"input" or "output"'),
            "name": Param("str", doc="name used by fifo_push/fifo_drain (default: fifo)"),
            **RETRIES,
        },
        _fifo_link,
        "dpu_link_input_fifo / dpu_link_output_fifo (+ retry settings)",
        check=_check_link,
    ),
    ActionKind(
        "fifo_push",
        {
            **TARGET,
            "fifo": Param("str", True, doc="a linked input FIFO"),
            "value": Param("any", doc="element for every DPU: integer or 64-bit words"),
            "values": Param("any", doc="one element per DPU of the target"),
            "increment": Param("int", default=0, doc="added to word 0 on each run of the step"),
            "dpus": Param("ints", doc="DPUs (indices in the target) that get an element"),
            "async": Param("bool", default=False, doc="DPU_XFER_ASYNC"),
            "no_reset": Param("bool", default=False, doc="DPU_XFER_NO_RESET"),
            **RETRIES,
        },
        _fifo_push,
        "dpu_fifo_prepare_xfer + dpu_fifo_push_xfer on an input link (one element per DPU)",
        check=_check_push,
    ),
    ActionKind(
        "fifo_drain",
        {
            **TARGET,
            "fifo": Param("str", True, doc="a linked output FIFO"),
            "into": Param("str", doc="collect the elements in this FIFO stream buffer"),
            "dpus": Param("ints", doc="DPUs (indices in the target) that get a ring buffer"),
            "async": Param("bool", default=False, doc="DPU_XFER_ASYNC"),
            "no_reset": Param("bool", default=False, doc="DPU_XFER_NO_RESET"),
        },
        _fifo_drain,
        "dpu_fifo_prepare_xfer (one ring per DPU) + dpu_fifo_push_xfer on an output link",
        check=_check_drain,
    ),
):
    register_action(_kind)


# ================================================================================================
# kernels
# ================================================================================================
def _stream(spec: ProgramSpec) -> Program:
    prog = base_program(spec)
    p = spec.params
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("input_fifo", p["ptr_size"], p["data_size"])
    fout: FifoDecl | None = None
    if p["output"]:
        out_size = p["output_data_size"] or p["data_size"]
        fout = prog.output_fifo("output_fifo", p["output_ptr_size"], out_size)
    per_element = -(-int(p["cycles"]) // timing.REVOLVER_CYCLES)
    add = int(p["add"])

    @prog.main
    async def main(t: Tasklet) -> None:
        if t.me():
            return
        flag = t.view(active)

        def room() -> bool:
            return fout is None or not t.is_output_fifo_full(fout)

        while True:
            await t.poll_until(
                lambda: not t.is_input_fifo_empty(fin) or not flag[0],
                fin,
                active,
                label="input FIFO 'input_fifo' or `active`",
            )
            if t.is_input_fifo_empty(fin):
                return
            t.compute(per_element)
            if fout is not None:
                await t.poll_until(room, fout, label="output FIFO 'output_fifo'")
                head = t.input_fifo_peek(fin)
                out = t.tmp_data(fout)
                out[:] = 0
                n = min(len(out), len(head))
                out[:n] = head[:n]
                word = out[:8].view(np.uint64)
                word[0] = (int(word[0]) + add) & _MASK64
                t.output_fifo_push(fout, out)
            t.input_fifo_pop(fin)

    return prog


def _check_geometry(p: dict[str, Any], prefix: str = "") -> None:
    ptr, size = p[f"{prefix}ptr_size"], p[f"{prefix}data_size"]
    if not 1 <= ptr <= 10:
        raise ValueError(f"{prefix}ptr_size must be between 1 and 10")
    if size and size % 8:
        raise ValueError(f"{prefix}data_size must be a positive multiple of 8")


def _build_stream(spec: ProgramSpec) -> Program:
    _check_geometry(spec.params)
    if not spec.params["data_size"]:
        raise ValueError("data_size must be a positive multiple of 8")
    _check_geometry(spec.params, "output_")
    return _stream(spec)


def _keysum(spec: ProgramSpec) -> Program:
    p = spec.params
    tasklets = spec.tasklets
    nr_elems, cache, ipe = int(p["elements"]), int(p["cache"]), int(p["instructions_per_element"])
    mode = p["mode"]
    if mode not in ("all", "each"):
        raise ValueError(f'mode must be "all" or "each", not {mode!r}')
    if not 2 <= cache <= 512 or cache % 2:
        raise ValueError("cache must be an even number of keys between 2 and 512 (one DMA)")
    share = tasklets * cache if mode == "all" else cache
    if nr_elems <= 0 or nr_elems % share:
        raise ValueError(f"elements must be a positive multiple of {share} in mode {mode!r}")
    prog = base_program(spec)
    active = prog.host("active", np.uint64, 1, init=[1])
    barrier = prog.barrier("barrier", tasklets)
    mutex = prog.mutex("fifo_mutex")
    fin = prog.input_fifo("input_fifo", p["input_ptr_size"], 8)
    fout = prog.output_fifo("output_fifo", p["output_ptr_size"], 16)
    keys = prog.mram_noinit("keys", np.uint32, nr_elems)
    values = prog.mram_noinit("values", np.uint32, nr_elems)
    cache_keys = prog.wram("cache_keys", np.uint32, tasklets * cache)
    cache_values = prog.wram("cache_values", np.uint32, tasklets * cache)
    sums = prog.wram("sum_tasklets", np.uint64, tasklets)

    async def scan(t: Tasklet, key: int, first: int, last: int) -> int:
        ck = prog.address_of(cache_keys) + t.me() * cache * 4
        cv = prog.address_of(cache_values) + t.me() * cache * 4
        total = 0
        for i in range(first, last, cache):
            await t.mram_read(t.mram_address(keys, i * 4), ck, cache * 4)
            await t.mram_read(t.mram_address(values, i * 4), cv, cache * 4)
            k = t.view(ck, np.uint32, cache)
            v = t.view(cv, np.uint32, cache)
            total += int(v[k == key].sum(dtype=np.uint64))
            t.compute(ipe * cache)
        return total

    async def compute(t: Tasklet, element: np.ndarray) -> None:
        per = nr_elems // tasklets
        key = int(element.view(np.uint32)[0])
        t.view(sums)[t.me()] = await scan(t, key, t.me() * per, (t.me() + 1) * per)

    async def reduce(t: Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        total = int(t.view(sums).sum(dtype=np.uint64))
        t.compute(3 * tasklets + 6)
        out.view(np.uint64)[:2] = (int(element.view(np.uint32)[0]), total)

    async def each(t: Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        key = int(element.view(np.uint32)[0])
        out.view(np.uint64)[:2] = (key, await scan(t, key, 0, nr_elems))

    @prog.main
    async def main(t: Tasklet) -> None:
        if mode == "all":
            await t.process_inputs_all_tasklets(fin, fout, compute, reduce, barrier, active)
        else:
            await t.process_inputs_each_tasklet(fin, fout, each, mutex, active)

    return prog


def _keysum_cost(spec: ProgramSpec) -> KernelCost:
    p = spec.params
    scans = 2 * -(-int(p["elements"]) // max(1, int(p["cache"])))  # two DMAs per cache block
    per_element = scans + (8 * spec.tasklets if p["mode"] == "all" else 8)
    return KernelCost(8 * spec.tasklets, per_element)


def _build_keysum(spec: ProgramSpec) -> Program:
    for key in ("input_ptr_size", "output_ptr_size"):
        if not 1 <= spec.params[key] <= 10:
            raise ValueError(f"{key} must be between 1 and 10")
    return _keysum(spec)


register_kernel(
    KernelKind(
        "stream",
        {
            "cycles": Param(
                "count", True, doc="cycles of work per element (x11 rounding)", maximum=_U32
            ),
            "ptr_size": Param("int", default=4, doc="input FIFO: log2 of its capacity"),
            "data_size": Param(
                "int", default=8, doc="input FIFO: bytes per element", maximum=_WRAM
            ),
            "output": Param("bool", default=True, doc="push a result per element"),
            "output_ptr_size": Param("int", default=4),
            "output_data_size": Param("int", default=0, doc="0: same as data_size", maximum=_WRAM),
            "add": Param("int", default=0, doc="added to word 0 of each result"),
        },
        _build_stream,
        cost=lambda spec: KernelCost(8, 8),
        doc="tasklet 0 consumes an element of `input_fifo` every `cycles` cycles (and pushes it, "
        "plus `add`, to `output_fifo`, waiting while that is full) until the host clears the "
        "__host uint64 `active` and the input FIFO is empty",
    )
)
register_kernel(
    KernelKind(
        "keysum",
        {
            "elements": Param(
                "count", default=4096, doc="key/value pairs in MRAM", maximum=_MRAM // 8
            ),
            "mode": Param("str", default="all", doc='"all" or "each" tasklets per input'),
            "cache": Param("count", default=256, doc="keys per DMA block"),
            "instructions_per_element": Param("count", default=6, maximum=_U32),
            "input_ptr_size": Param("int", default=5),
            "output_ptr_size": Param("int", default=6),
        },
        _build_keysum,
        cost=_keysum_cost,
        doc="the SDK guide's key-sum: for each key popped from `input_fifo` (8 bytes), push "
        "(key, sum of `values` where `keys` == key) to `output_fifo` (2 x uint64); MRAM "
        "uint32 `keys`/`values`; stops when the host clears `active`",
    )
)
