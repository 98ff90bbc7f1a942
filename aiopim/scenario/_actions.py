"""Built-in scenario actions: the host calls of ``dpu.h`` plus host work, events and loops.

Each action is an :class:`ActionKind` in the registry; more (FIFO links, pushes, drains) can
be added with :func:`aiopim.scenario.register_action` without changing the file format.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _ops
from .._ops import CallbackMode, XferMode
from ..host import DpuSet
from ._limits import MAX_XFER_BYTES
from ._replay import ReplayContext
from ._spec import ActionKind, Param, Step, register_action

#: keys of every action that addresses DPUs
TARGET = {
    "set": Param("str", default="dpus", doc="name given by an alloc step"),
    "rank": Param("count", doc="only this rank of the set (DPU_RANK_FOREACH order)"),
    "dpu": Param("count", doc="only this DPU of the set (DPU_FOREACH order)"),
}
XFER = {
    **TARGET,
    "symbol": Param("str", True, doc="host-visible symbol of the loaded program"),
    "bytes": Param("count", True, doc="bytes per DPU", maximum=MAX_XFER_BYTES),
    "offset": Param("count", default=0, maximum=MAX_XFER_BYTES),
    "async": Param("bool", default=False, doc="DPU_XFER_ASYNC"),
    "parallel": Param("bool", default=False, doc="DPU_XFER_PARALLEL"),
    "no_reset": Param("bool", default=False, doc="DPU_XFER_NO_RESET"),
    "dpus": Param("ints", doc="DPUs (indices in the set) that get a buffer; default all"),
}


def _target_check(p: dict[str, Any]) -> None:
    if p.get("rank") is not None and p.get("dpu") is not None:
        raise ValueError("dpu", "give rank or dpu, not both")


#: step key -> flag bit, in the order ``aiopim record`` writes the keys
XFER_FLAGS = (
    ("async", _ops.DPU_XFER_ASYNC),
    ("parallel", _ops.DPU_XFER_PARALLEL),
    ("no_reset", _ops.DPU_XFER_NO_RESET),
)
FIFO_XFER_FLAGS = (("async", _ops.DPU_XFER_ASYNC), ("no_reset", _ops.DPU_XFER_NO_RESET))
CALLBACK_FLAGS = (
    ("async", _ops.DPU_CALLBACK_ASYNC),
    ("nonblocking", _ops.DPU_CALLBACK_NONBLOCKING),
    ("single_call", _ops.DPU_CALLBACK_SINGLE_CALL),
    ("parallel", _ops.DPU_CALLBACK_PARALLEL),
)


def flags_of(p: dict[str, Any], table: tuple[tuple[str, int], ...]) -> int:
    """The flag bits of ``table`` whose keys are true in the step parameters ``p``."""
    out = 0
    for key, bit in table:
        if p[key]:
            out |= bit
    return out


def fill_buffer(nbytes: int, fill: Any) -> np.ndarray:
    """``nbytes`` bytes whose 32-bit words are ``fill`` (an integer), 0, 1, 2, ... (``"iota"``)
    or 0, 1, ..., N-1, 0, 1, ... (``"iota%N"``)."""
    out = np.zeros(nbytes, np.uint8)
    words = out[: nbytes - nbytes % 4].view(np.uint32)
    if fill == "iota":
        words[:] = np.arange(words.size, dtype=np.uint32)
    elif isinstance(fill, str) and fill.startswith("iota%"):
        words[:] = np.arange(words.size, dtype=np.uint32) % np.uint32(int(fill[5:]))
    else:
        words[:] = np.uint32(int(fill) & 0xFFFFFFFF)
    return out


def chosen_dpus(ctx: ReplayContext, step: Step, n: int) -> set[int]:
    """Indices the step's ``dpus`` key picks among the ``n`` DPUs of its target (default all)."""
    chosen = step.params.get("dpus")
    if chosen is None:
        return set(range(n))
    bad = [i for i in chosen if not 0 <= i < n]
    if bad:
        raise ctx.error(step, f"dpus {bad} out of range: the target has {n} DPUs")
    return set(chosen)


def _prepare(ctx: ReplayContext, step: Step, dset: DpuSet, bufs: list[Any]) -> None:
    """Give each DPU of the set its buffer (None clears, like a DPU the host skipped)."""
    members = list(dset.iter_dpus())
    picked = chosen_dpus(ctx, step, len(members))
    for i, (one, buf) in enumerate(zip(members, bufs, strict=True)):
        _ops.prepare_xfer(one, buf if i in picked else None)


# -- allocation and programs ---------------------------------------
async def _alloc(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    dset = await _ops.alloc(ctx.emulator, DpuSet, p["dpus"], p["ranks"], p["profile"])
    ctx.sets[p["set"]] = dset


async def _free(ctx: ReplayContext, step: Step) -> None:
    await _ops.free(ctx.target(step))


async def _load(ctx: ReplayContext, step: Step) -> None:
    await _ops.load(ctx.target(step), ctx.programs[step.params["program"]])


# -- execution ---------------------------------------
async def _launch(ctx: ReplayContext, step: Step) -> None:
    await _ops.launch(ctx.target(step), not step.params["async"])


async def _sync(ctx: ReplayContext, step: Step) -> None:
    await _ops.sync(ctx.target(step))


async def _status(ctx: ReplayContext, step: Step) -> None:
    await _ops.status(ctx.target(step))


# -- transfers ---------------------------------------
async def _copy_to(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    dset = ctx.target(step)
    data = fill_buffer(p["bytes"], p["fill"])
    mode = XferMode.from_flags(flags_of(p, XFER_FLAGS))
    if p["broadcast"]:
        await _ops.broadcast_to(dset, p["symbol"], p["offset"], data, p["bytes"], mode)
        return
    _prepare(ctx, step, dset, [data] * len(dset))
    await _ops.push_xfer(dset, True, p["symbol"], p["offset"], p["bytes"], mode)


async def _copy_from(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    dset = ctx.target(step)
    out = np.zeros((len(dset), p["bytes"]), np.uint8)
    _prepare(ctx, step, dset, list(out))
    if p["into"] is not None:
        ctx.buffers[p["into"]] = out
    mode = XferMode.from_flags(flags_of(p, XFER_FLAGS))
    await _ops.push_xfer(dset, False, p["symbol"], p["offset"], p["bytes"], mode)


async def _dpu_copy_from(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    out = np.zeros((1, p["bytes"]), np.uint8)
    if p["into"] is not None:
        ctx.buffers[p["into"]] = out
    await _ops.copy_from(ctx.target(step), p["symbol"], p["offset"], out[0], p["bytes"])


# -- callbacks ---------------------------------------
async def _callback(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    mode = CallbackMode.from_flags(flags_of(p, CALLBACK_FLAGS))
    calls = [0]

    def nth(value: Any, i: int) -> int:
        if isinstance(value, list):
            if i >= len(value):
                raise ctx.error(step, f"{len(value)} values given but call #{i + 1} happened")
            return int(value[i])
        return int(value)

    async def fn(_set: Any, _rank_id: int, _args: Any) -> int:
        i = calls[0]
        calls[0] += 1
        emu = ctx.emulator
        await ctx.sleep_until(emu.now_ps + nth(p["host_time"], i))
        return nth(p["result"], i)

    await _ops.callback(ctx.target(step), fn, None, mode)


# -- host side ---------------------------------------
async def _work(ctx: ReplayContext, step: Step) -> None:
    emu = ctx.emulator
    t0 = emu.now_ps
    await ctx.sleep_until(t0 + step.params["time"])
    if emu.recorder is not None:
        emu.recorder.host_work(step.params["name"], t0)


async def _sleep(ctx: ReplayContext, step: Step) -> None:
    await ctx.sleep_until(ctx.emulator.now_ps + step.params["time"])


async def _signal(ctx: ReplayContext, step: Step) -> None:
    ctx.event(step.params["event"]).set()


async def _wait(ctx: ReplayContext, step: Step) -> None:
    await ctx.event(step.params["event"]).wait()


async def _repeat(ctx: ReplayContext, step: Step) -> None:
    for _ in range(step.params["times"]):
        await ctx.run_steps(step.body)


def _check_alloc(p: dict[str, Any]) -> None:
    for key in ("ranks", "dpus"):
        if p[key] is not None and p[key] <= 0:
            raise ValueError(key, "must be at least 1")


for _kind in (
    ActionKind(
        "alloc",
        {
            "set": Param("str", default="dpus", doc="name of the new DPU set"),
            "ranks": Param("int", doc="dpu_alloc_ranks(ranks)"),
            "dpus": Param("int", doc="dpu_alloc(dpus)"),
            "profile": Param("text", default="", doc="SDK profile string"),
        },
        _alloc,
        "dpu_alloc / dpu_alloc_ranks",
        one_of=("ranks", "dpus"),
        check=_check_alloc,
    ),
    ActionKind("free", dict(TARGET), _free, "dpu_free", check=_target_check),
    ActionKind(
        "load",
        {**TARGET, "program": Param("str", True, doc="a [programs.NAME] table")},
        _load,
        "dpu_load",
        check=_target_check,
    ),
    ActionKind(
        "launch",
        {**TARGET, "async": Param("bool", default=False, doc="DPU_ASYNCHRONOUS")},
        _launch,
        "dpu_launch",
        check=_target_check,
    ),
    ActionKind("sync", dict(TARGET), _sync, "dpu_sync", check=_target_check),
    ActionKind("status", dict(TARGET), _status, "dpu_status (syncs first)", check=_target_check),
    ActionKind(
        "copy_to",
        {
            **XFER,
            "fill": Param("fill", default=0, doc='32-bit word value, "iota" or "iota%N"'),
            "broadcast": Param("bool", default=False, doc="dpu_broadcast_to one buffer"),
        },
        _copy_to,
        "dpu_prepare_xfer + dpu_push_xfer(DPU_XFER_TO_DPU), or dpu_broadcast_to",
        check=_target_check,
    ),
    ActionKind(
        "copy_from",
        {**XFER, "into": Param("str", doc="name the host buffer (for [expect] data checks)")},
        _copy_from,
        "dpu_prepare_xfer + dpu_push_xfer(DPU_XFER_FROM_DPU)",
        check=_target_check,
    ),
    ActionKind(
        "dpu_copy_from",
        {
            **TARGET,
            "symbol": Param("str", True),
            "bytes": Param("count", True, maximum=MAX_XFER_BYTES),
            "offset": Param("count", default=0, maximum=MAX_XFER_BYTES),
            "into": Param("str"),
        },
        _dpu_copy_from,
        "dpu_copy_from (one DPU: give dpu = N)",
        check=_target_check,
    ),
    ActionKind(
        "callback",
        {
            **TARGET,
            "async": Param("bool", default=False, doc="DPU_CALLBACK_ASYNC"),
            "nonblocking": Param("bool", default=False, doc="DPU_CALLBACK_NONBLOCKING"),
            "single_call": Param("bool", default=False, doc="DPU_CALLBACK_SINGLE_CALL"),
            "parallel": Param("bool", default=False, doc="DPU_CALLBACK_PARALLEL"),
            "host_time": Param("durations", default=0, doc="host time of each call"),
            "result": Param("int_or_ints", default=0, doc="value each call returns"),
        },
        _callback,
        "dpu_callback with a host function that computes for host_time",
        check=_target_check,
    ),
    ActionKind(
        "work",
        {"name": Param("str", default="host work"), "time": Param("duration", True)},
        _work,
        "the host task computes for `time` (drawn on its host lane)",
    ),
    ActionKind("sleep", {"time": Param("duration", default=0)}, _sleep, "the host task sleeps"),
    ActionKind("signal", {"event": Param("str", True)}, _signal, "set a named event"),
    ActionKind("wait", {"event": Param("str", True)}, _wait, "wait for a named event"),
    ActionKind(
        "repeat",
        {
            # bounded by the steps limit (each iteration counts), which names the flag raising it
            "times": Param("count", True),
            "steps": Param("any", True),
        },
        _repeat,
        "run `steps` `times` times",
    ),
):
    register_action(_kind)
