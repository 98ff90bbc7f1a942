"""Memclave steps for scenario files: ``vud_alloc``, ``vud_install_key``, ``vud_load``, ...

Registered with :func:`aiopim.scenario.register_action` when :mod:`aiopim.scenario` is imported,
so ``aiopim replay`` runs Memclave host programs written as data. A step whose call sets the
rank's error fails the replay with the error's name and reason. The kernel ``vud_add`` is the
seed's ``add`` subkernel (MRAM ``c = a + b`` over ``words`` 64-bit words).
"""

from __future__ import annotations

import random
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dpu import Program, Tasklet
from ..scenario import ActionKind, KernelKind, Param, ProgramSpec, register_action, register_kernel
from . import _vud as vud
from ._errors import VudError, vud_error_str

if TYPE_CHECKING:
    from ..scenario import ReplayContext, Step

_RANKS: weakref.WeakKeyDictionary[ReplayContext, dict[str, vud.VudRank]] = (
    weakref.WeakKeyDictionary()
)
RANK = {"rank": Param("str", default="vud", doc="name given by a vud_alloc step")}


def _ranks(ctx: ReplayContext) -> dict[str, vud.VudRank]:
    table = _RANKS.get(ctx)
    if table is None:
        table = _RANKS[ctx] = {}
    return table


def _rank(ctx: ReplayContext, step: Step) -> vud.VudRank:
    r = _ranks(ctx).get(step.params["rank"])
    if r is None:
        raise ctx.error(step, f"no Memclave rank {step.params['rank']!r} (vud_alloc first)")
    return r


def _check(ctx: ReplayContext, step: Step, r: vud.VudRank) -> None:
    if r.err != VudError.VUD_OK:
        raise ctx.error(step, f"{r.err.name} ({vud_error_str(r.err)}): {r.detail}")


def _words(n: int, fill: Any) -> np.ndarray:
    """``n`` 64-bit words: ``fill`` (an integer), 0, 1, 2, ... or 0, 1, ..., N-1, 0, ..."""
    if fill == "iota":
        return np.arange(n, dtype=np.uint64)
    if isinstance(fill, str):
        return np.arange(n, dtype=np.uint64) % np.uint64(int(fill[5:]))
    return np.full(n, int(fill) & 0xFFFF_FFFF_FFFF_FFFF, dtype=np.uint64)


async def _alloc(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    r = await vud.vud_rank_alloc(p["rank_nr"])
    _check(ctx, step, r)
    _ranks(ctx)[p["rank"]] = r


async def _free(ctx: ReplayContext, step: Step) -> None:
    await vud.vud_rank_free(_rank(ctx, step))


async def _wait(ctx: ReplayContext, step: Step) -> None:
    r = _rank(ctx, step)
    await vud.vud_ime_wait(r)
    _check(ctx, step, r)


async def _workers(ctx: ReplayContext, step: Step) -> None:
    r = _rank(ctx, step)
    vud.vud_rank_nr_workers(r, step.params["n"])
    _check(ctx, step, r)


async def _install_key(ctx: ReplayContext, step: Step) -> None:
    r = _rank(ctx, step)
    await vud.vud_ime_install_key(r, random.Random(step.params["key_seed"]).randbytes(32))
    _check(ctx, step, r)


async def _load(ctx: ReplayContext, step: Step) -> None:
    r = _rank(ctx, step)
    program = ctx.programs.get(step.params["program"])
    if program is None:
        raise ctx.error(step, f"no program {step.params['program']!r} in [programs]")
    if step.params["auth_only"]:
        await vud.vud_ime_load_auth_only(r, program)
    else:
        await vud.vud_ime_load(r, program)
    _check(ctx, step, r)


async def _launch(ctx: ReplayContext, step: Step) -> None:
    r = _rank(ctx, step)
    await vud.vud_ime_launch(r)
    _check(ctx, step, r)


async def _to(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    r = _rank(ctx, step)
    words = _words(p["words"], p["fill"]) * np.uint64(p["scale"])
    if p["per_dpu"]:
        await vud.vud_transfer_to(r, p["words"], np.tile(words, (64, 1)), p["symbol"])
    else:
        await vud.vud_broadcast_to(r, p["words"], words, p["symbol"])
    _check(ctx, step, r)


async def _from(ctx: ReplayContext, step: Step) -> None:
    p = step.params
    r = _rank(ctx, step)
    out = np.zeros((64, p["words"]), dtype=np.uint64)
    await vud.vud_gather_from(r, p["words"], p["symbol"], out)
    _check(ctx, step, r)
    if p["into"] is not None:
        ctx.buffers[p["into"]] = out.view(np.uint8)


XFER = {
    **RANK,
    "symbol": Param("str", True, doc="MRAM symbol of the loaded subkernel"),
    "words": Param("count", True, doc="64-bit words per DPU"),
}

for _kind in (
    ActionKind(
        "vud_alloc",
        {**RANK, "rank_nr": Param("int", default=vud.VUD_ALLOC_ANY, doc="-1: any free rank")},
        _alloc,
        "vud_rank_alloc (the rank is named by `rank`)",
    ),
    ActionKind("vud_free", RANK, _free, "vud_rank_free"),
    ActionKind("vud_wait", RANK, _wait, "vud_ime_wait"),
    ActionKind("vud_workers", {**RANK, "n": Param("count", True)}, _workers, "vud_rank_nr_workers"),
    ActionKind(
        "vud_install_key",
        {**RANK, "key_seed": Param("count", default=0, doc="seed of the random 32-byte key")},
        _install_key,
        "vud_ime_install_key with a seeded random key",
    ),
    ActionKind(
        "vud_load",
        {**RANK, "program": Param("str", True), "auth_only": Param("bool", default=False)},
        _load,
        "vud_ime_load / vud_ime_load_auth_only of a [programs] entry",
    ),
    ActionKind("vud_launch", RANK, _launch, "vud_ime_launch"),
    ActionKind(
        "vud_to",
        {
            **XFER,
            "fill": Param("fill", default=0, doc='every word, "iota" or "iota%N"'),
            "scale": Param("count", default=1, doc="multiply every word by this"),
            "per_dpu": Param("bool", default=False, doc="vud_transfer_to, not vud_broadcast_to"),
        },
        _to,
        "vud_broadcast_to (or vud_transfer_to) of 64-bit words",
    ),
    ActionKind(
        "vud_from",
        {**XFER, "into": Param("str", doc="host buffer for [expect] checks")},
        _from,
        "vud_gather_from",
    ),
):
    register_action(_kind)


def _add_kernel(spec: ProgramSpec) -> Program:
    n = int(spec.params["words"])
    if not 1 <= n <= 256:
        raise ValueError("words must be between 1 and 256")
    prog = Program(spec.name, nr_tasklets=1)
    a, b, c = (prog.mram(name, np.uint64, n) for name in "abc")

    @prog.main
    async def main(t: Tasklet) -> None:
        wa, wb = t.mem_alloc(8 * n), t.mem_alloc(8 * n)
        await t.mram_read(t.mram_address(a), wa, 8 * n)
        await t.mram_read(t.mram_address(b), wb, 8 * n)
        t.view(wa, np.uint64, n)[:] += t.view(wb, np.uint64, n)
        t.compute(7 * n)
        await t.mram_write(wa, t.mram_address(c), 8 * n)

    return prog


register_kernel(
    KernelKind(
        "vud_add",
        {"words": Param("count", default=64, doc="64-bit words of a, b and c")},
        _add_kernel,
        "Memclave's add subkernel: MRAM c = a + b",
    )
)
