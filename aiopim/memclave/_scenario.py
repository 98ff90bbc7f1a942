"""Memclave steps for scenario files: ``vud_alloc``, ``vud_install_key``, ``vud_load``, ...

Registered with :func:`aiopim.scenario.register_action` when :mod:`aiopim.scenario` is imported,
so ``aiopim replay`` runs Memclave host programs written as data. A step whose call sets the
rank's error fails the replay with the error's name and reason. The kernel ``vud_add`` is the
seed's ``add`` subkernel (MRAM ``c = a + b`` over ``words`` 64-bit words).
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dpu import Program, Tasklet
from ..scenario import (
    ActionCost,
    ActionKind,
    KernelCost,
    KernelKind,
    Param,
    ProgramSpec,
    register_action,
    register_kernel,
)
from ..scenario import _limits as L
from . import _vud as vud
from ._enclave import MSG_BUFFER
from ._errors import VudError, vud_error_str

if TYPE_CHECKING:
    from ..scenario import ReplayContext, Step

_RANKS: weakref.WeakKeyDictionary[ReplayContext, dict[str, vud.VudRank]] = (
    weakref.WeakKeyDictionary()
)
RANK = {"rank": Param("str", default="vud", doc="name given by a vud_alloc step")}

#: 64-bit words of one transfer: the MRAM of a DPU
MAX_WORDS = vud.MRAM_BYTES // 8
#: the largest 64-bit value (``key_seed``, ``scale``)
MAX_U64 = (1 << 64) - 1
#: MRAM the trusted loader's buffers take at its top (messages, load buffer, debug output)
LOADER_BYTES = vud.MRAM_BYTES - MSG_BUFFER

# Work per DPU of the rank, in the units of the scenario work estimate, measured on the replay
# with a margin: one key exchange runs three default subkernels with their X25519 and
# ChaCha20-Poly1305 steps (~50 ms per exchange); booting the firmware, loading a sealed
# subkernel and the loader's part of a launch are a few operations; a transfer costs one per
# 4 KiB it moves.
KEY_EXCHANGE_WORK = 256
BOOT_WORK = 8
LOAD_WORK = 4
LAUNCH_WORK = 32
XFER_BYTES_PER_WORK = 4096


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
        rows = np.broadcast_to(words, (vud.NR_DPUS, p["words"]))  # the same row, not 64 copies
        await vud.vud_transfer_to(r, p["words"], rows, p["symbol"])
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
    "words": Param("count", True, doc="64-bit words per DPU", maximum=MAX_WORDS),
}


def _rank_work(per_dpu: int) -> int:
    return 1 + vud.NR_DPUS * per_dpu


def _xfer_work(words: int) -> int:
    return _rank_work(1 + -(-8 * words // XFER_BYTES_PER_WORK))


def _cost(per_dpu: int, **more: Any) -> Callable[[dict[str, Any], KernelCost], ActionCost]:
    """A cost of ``per_dpu`` operations on each DPU of the rank."""
    return lambda p, kernel: ActionCost(_rank_work(per_dpu), **more)


def _to_cost(p: dict[str, Any], kernel: KernelCost) -> ActionCost:
    nbytes = 8 * p["words"]
    host = (vud.NR_DPUS + 2) * nbytes if p["per_dpu"] else 3 * nbytes  # words, scaled, sent
    return ActionCost(_xfer_work(p["words"]), host, writes=(f"vud {p['symbol']}", nbytes))


def _from_cost(p: dict[str, Any], kernel: KernelCost) -> ActionCost:
    return ActionCost(_xfer_work(p["words"]), vud.NR_DPUS * 8 * p["words"])


def _launch_cost(p: dict[str, Any], kernel: KernelCost) -> ActionCost:
    return ActionCost(_rank_work(LAUNCH_WORK + kernel.launch))


def _alloc_check(p: dict[str, Any]) -> None:
    if p["rank_nr"] < vud.VUD_ALLOC_ANY:
        raise ValueError("rank_nr", f"{p['rank_nr']} is not a rank: give -1 (any) or 0, 1, ...")


for _kind in (
    ActionKind(
        "vud_alloc",
        {
            **RANK,
            "rank_nr": Param(
                "int", default=vud.VUD_ALLOC_ANY, doc="-1: any free rank", maximum=L.MAX_RANKS - 1
            ),
        },
        _alloc,
        "vud_rank_alloc (the rank is named by `rank`)",
        check=_alloc_check,
        cost=_cost(BOOT_WORK, dpus=vud.NR_DPUS, writes=("vud loader", LOADER_BYTES)),
    ),
    ActionKind("vud_free", RANK, _free, "vud_rank_free", cost=_cost(1)),
    ActionKind("vud_wait", RANK, _wait, "vud_ime_wait", cost=_cost(1)),
    ActionKind(
        "vud_workers",
        {**RANK, "n": Param("count", True, maximum=vud.MAX_WORKERS)},
        _workers,
        "vud_rank_nr_workers",
        cost=_cost(0),
    ),
    ActionKind(
        "vud_install_key",
        {
            **RANK,
            "key_seed": Param(
                "count", default=0, doc="seed of the random 32-byte key", maximum=MAX_U64
            ),
        },
        _install_key,
        "vud_ime_install_key with a seeded random key",
        cost=_cost(KEY_EXCHANGE_WORK),
    ),
    ActionKind(
        "vud_load",
        {**RANK, "program": Param("str", True), "auth_only": Param("bool", default=False)},
        _load,
        "vud_ime_load / vud_ime_load_auth_only of a [programs] entry",
        cost=_cost(LOAD_WORK),
    ),
    ActionKind("vud_launch", RANK, _launch, "vud_ime_launch", cost=_launch_cost),
    ActionKind(
        "vud_to",
        {
            **XFER,
            "fill": Param("fill", default=0, doc='every word, "iota" or "iota%N"'),
            "scale": Param("count", default=1, doc="multiply every word by this", maximum=MAX_U64),
            "per_dpu": Param("bool", default=False, doc="vud_transfer_to, not vud_broadcast_to"),
        },
        _to,
        "vud_broadcast_to (or vud_transfer_to) of 64-bit words",
        cost=_to_cost,
    ),
    ActionKind(
        "vud_from",
        {**XFER, "into": Param("str", doc="host buffer for [expect] checks")},
        _from,
        "vud_gather_from",
        cost=_from_cost,
    ),
):
    register_action(_kind)


#: most words of the add subkernel (its three WRAM buffers, 8 bytes a word)
ADD_MAX_WORDS = 256


def _add_kernel(spec: ProgramSpec) -> Program:
    n = int(spec.params["words"])
    if not 1 <= n <= ADD_MAX_WORDS:
        raise ValueError(f"words must be between 1 and {ADD_MAX_WORDS}")
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
        {
            "words": Param(
                "count", default=64, doc="64-bit words of a, b and c", maximum=ADD_MAX_WORDS
            )
        },
        _add_kernel,
        "Memclave's add subkernel: MRAM c = a + b",
        cost=lambda spec: KernelCost(8),  # three DMAs, one vector addition
    )
)
