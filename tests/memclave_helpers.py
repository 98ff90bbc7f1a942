"""Shared pieces of the Memclave tests: a machine, subkernels, a ready rank."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

import aiopim
from aiopim import memclave as mc

KEY = bytes(range(32))
OTHER_KEY = bytes(range(100, 132))
N = 64


def machine(ranks: int = 2) -> aiopim.MachineConfig:
    return aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=64)


def run(backend: str, fn: Callable[..., Awaitable[Any]], *args: Any, ranks: int = 2) -> Any:
    emu = aiopim.Emulator(machine(ranks))
    return emu.run(fn, *args, backend=backend)


def add_program(name: str = "add") -> aiopim.Program:
    """The seed's ``add`` subkernel: ``c = a + b`` over 64 words of MRAM."""
    prog = aiopim.Program(name, nr_tasklets=1)
    a = prog.mram("a", np.uint64, N)
    b = prog.mram("b", np.uint64, N)
    c = prog.mram("c", np.uint64, N)
    prog.host("flag", np.uint32, 2, init=[5, 6])  # WRAM data: not reachable by vud transfers

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        wa, wb = t.mem_alloc(8 * N), t.mem_alloc(8 * N)
        await t.mram_read(t.mram_address(a), wa, 8 * N)
        await t.mram_read(t.mram_address(b), wb, 8 * N)
        t.view(wa, np.uint64, N)[:] += t.view(wb, np.uint64, N)
        t.compute(7 * N)
        await t.mram_write(wa, t.mram_address(c), 8 * N)

    return prog


ADD = add_program()


async def ready_rank(key: bytes = KEY, rank_nr: int = 0) -> mc.VudRank:
    """An allocated rank with its loader up and ``key`` installed."""
    r = await mc.vud_rank_alloc(rank_nr)
    await mc.vud_ime_wait(r)
    await mc.vud_ime_install_key(r, key)
    assert r.err == mc.VUD_OK, r.detail
    return r


async def run_add(r: mc.VudRank, program: aiopim.Program = ADD) -> np.ndarray:
    """Load, feed, launch and gather the add subkernel; returns ``c`` (64 x 64)."""
    await mc.vud_ime_load(r, program)
    await mc.vud_broadcast_to(r, N, np.arange(N, dtype=np.uint64), "a")
    await mc.vud_broadcast_to(r, N, 2 * np.arange(N, dtype=np.uint64), "b")
    await mc.vud_ime_launch(r)
    await mc.vud_ime_wait(r)
    c = np.zeros((64, N), dtype=np.uint64)
    await mc.vud_gather_from(r, N, "c", c)
    return c
