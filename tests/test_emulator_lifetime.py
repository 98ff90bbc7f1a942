"""A finished run leaves nothing behind: the emulator is freed when its user drops it, the
memories of dropped emulators are collected by the bytes they hold, and no error of one run is
raised again by the next."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from helpers import emu, spin_program
from isa_hello import HELLO_S

import aiopim
import aiopim._emulator
from aiopim._machine._dpu import Dpu
from aiopim.isa import assemble
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_NONBLOCKING,
    DPU_SYNCHRONOUS,
    dpu_alloc,
    dpu_callback,
    dpu_copy_from,
    dpu_copy_to,
    dpu_launch,
    dpu_load,
    dpu_load_from_memory,
)


@contextlib.contextmanager
def no_garbage_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def python_kernels() -> int:
    dpus = await dpu_alloc(16, "")
    await dpu_load(dpus, spin_program(1_000))
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    return len(dpus.dpu_list)


async def binary() -> int:
    dpus = await dpu_alloc(8, "")
    await dpu_load_from_memory(dpus, assemble(HELLO_S.read_text()), name="hello")
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    counter = np.zeros(1, np.uint32)
    await dpu_copy_from(dpus.dpus[3], "counter", 0, counter, 4)
    return int(counter[0])


async def still_running_at_the_end() -> int:
    dpus = await dpu_alloc(8, "")
    await dpu_load(dpus, spin_program(10_000_000))
    await dpu_launch(dpus, DPU_ASYNCHRONOUS)
    return 0


@pytest.mark.parametrize(
    ("program", "result"),
    [(python_kernels, 16), (binary, 10), (still_running_at_the_end, 0)],
    ids=["python_kernels", "binary", "still_running_at_the_end"],
)
def test_a_finished_emulator_is_freed_as_soon_as_it_is_dropped(
    backend: str, program: Callable[[], Awaitable[int]], result: int
) -> None:
    # nothing of the run (its bridge, host tasks, errors) keeps it, so it is finalized at once
    with no_garbage_collector():
        e = emu(ranks=2, dpus=8)
        assert e.run(program, backend=backend) == result
        ref = weakref.ref(e)
        del e
        assert ref() is None


def test_the_test_plugin_form_keeps_its_emulator_alive(backend: str) -> None:
    # the loop factory / clock handed to anyio keeps the emulator its loop runs on
    name, options = aiopim.Emulator().anyio_backend(backend)

    async def main() -> float:
        await aiopim.current_emulator().delay(5_000)
        return aiopim.now()

    with no_garbage_collector():
        assert anyio.run(main, backend=name, backend_options=options) == 5e-9


def test_a_callback_error_is_raised_by_its_own_run_only(backend: str) -> None:
    e = emu(ranks=1)

    async def failing() -> None:
        dpus = await dpu_alloc(4, "")

        def callback(s: Any, rank: int, args: Any) -> None:
            raise ValueError("bug in my callback")

        await dpu_callback(dpus, callback, None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING)
        await aiopim.current_emulator().delay(1_000_000)

    async def fine() -> str:
        await aiopim.current_emulator().delay(1_000)
        return "next run"

    with pytest.raises(ValueError, match="bug in my callback"):
        e.run(failing, backend=backend)
    assert e.run(fine, backend=backend) == "next run"


MIB = 1 << 20


def mram_writer() -> aiopim.Program:
    prog = aiopim.Program("mram_writer", nr_tasklets=1)
    prog.mram("m", np.uint8, MIB)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(10)

    return prog


async def fill_mram() -> None:
    dpus = await dpu_alloc(8, "")
    await dpu_load(dpus, mram_writer())
    await dpu_copy_to(dpus, "m", 0, np.full(MIB, 7, np.uint8), MIB)


def live_dpus_after_dropping(
    nr_emulators: int, budget: int, backend: str, monkeypatch: pytest.MonkeyPatch
) -> int:
    monkeypatch.setattr(aiopim._emulator, "GC_AFTER_DROPPED_BYTES", budget)
    monkeypatch.setattr(aiopim._emulator, "_dropped_bytes", 0)
    try:
        with no_garbage_collector():
            before = sum(type(o) is Dpu for o in gc.get_objects())
            for _ in range(nr_emulators):
                emu(ranks=1, dpus=8).run(fill_mram, backend=backend)  # dropped at once
            return sum(type(o) is Dpu for o in gc.get_objects()) - before
    finally:
        gc.collect()


def test_dropped_emulators_are_collected_by_the_bytes_they_hold(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each counts 8 MiB of MRAM (a broadcast page counts in every bank that shares it) and its
    # WRAM and IRAM: with a 20 MiB budget every third drop collects the others; the last two
    # machines are still there
    assert live_dpus_after_dropping(10, 20 * MIB, backend, monkeypatch) == 2 * 8
    # the garbage collector alone (off here, and run by counts of objects) would keep them all
    assert live_dpus_after_dropping(10, 1 << 60, backend, monkeypatch) == 10 * 8
