"""The aiopim.testing pytest plugin: entry point, fixtures, anyio plugin and pytest-trio."""

from __future__ import annotations

import importlib.metadata

import anyio
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import aiopim
from aiopim import timing
from aiopim.testing import DEFAULT_MACHINE, Pim, ops_program, run_time_ps

PLUGIN = "aiopim.testing.plugin"


def test_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    # Passes once the package is (re)installed from a tree with the entry point.
    eps = importlib.metadata.entry_points(group="pytest11")
    assert PLUGIN in {ep.value for ep in eps if ep.name == PLUGIN}


def test_plugin_is_active(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.get_plugin(PLUGIN) is not None


def test_pim_runs_on_each_backend(
    pim: Pim, aiopim_backend: str, request: pytest.FixtureRequest
) -> None:
    async def main() -> str | None:
        return aiopim.current_emulator().bridge.backend

    assert request.node.callspec.params["aiopim_backend"] == aiopim_backend
    assert pim.backend == aiopim_backend
    assert pim.run(main) == aiopim_backend


@settings(max_examples=10, deadline=None)
@given(wait_s=st.integers(1, 1000))
def test_each_hypothesis_example_gets_a_fresh_clock(pim: Pim, wait_s: int) -> None:
    async def main() -> tuple[float, float]:
        start = aiopim.now()
        await anyio.sleep(wait_s)
        return start, aiopim.now()

    start, end = pim.run(main)
    assert start == 0.0  # not the previous example's end time
    assert end == wait_s


def test_fresh_machine_per_run(pim: Pim) -> None:
    machine = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=2)

    async def main() -> bytes:
        dpus = await aiopim.DpuSet.alloc(nr_ranks=1)
        await dpus.load(ops_program())
        before = bytes(await dpus.copy_from("x", count=4))
        await dpus.copy_to("x", bytes([7] * 4))
        return before

    assert pim.run(main, machine=machine) == bytes(8)
    assert pim.run(main, machine=machine) == bytes(8)  # nothing left from the first run


# --- anyio pytest plugin -------------------------------------------------------------------------
@pytest.fixture
def anyio_backend(
    pim_anyio_backend: tuple[str, dict[str, object]],
) -> tuple[str, dict[str, object]]:
    return pim_anyio_backend


@pytest.mark.anyio
@pytest.mark.pim_machine(nr_ranks=1, nr_dpus_per_rank=4)
async def test_anyio_plugin_runs_in_virtual_time(
    pim_emulator: aiopim.Emulator, aiopim_backend: str
) -> None:
    assert aiopim.current_emulator() is pim_emulator
    assert pim_emulator.bridge.backend == aiopim_backend
    dpus = await aiopim.DpuSet.alloc()
    assert len(dpus) == 4
    await dpus.load(ops_program(100))
    t0 = aiopim.now()
    await dpus.launch()
    await anyio.sleep(10)
    expected = timing.LAUNCH_BOOT_LATENCY_PS + run_time_ps("v1B", 100)
    expected += timing.COMPLETION_POLL_LATENCY_PS
    assert round((aiopim.now() - t0 - 10) * 1e12) == expected


# --- pytest-trio ---------------------------------------------------------------------------------
@pytest.mark.trio
async def test_pytest_trio_runs_in_virtual_time(
    pim_trio_clock: trio.abc.Clock, pim_emulator: aiopim.Emulator
) -> None:
    assert aiopim.current_emulator() is pim_emulator
    dpus = await aiopim.DpuSet.alloc(nr_ranks=1)
    assert len(dpus) == DEFAULT_MACHINE.nr_dpus_per_rank
    await trio.sleep(3600)
    assert aiopim.now() == 3600.0


@pytest.mark.pim_machine(nr_ranks=2, chip="v1A", explore_seed=5)
def test_pim_machine_marker(pim_emulator: aiopim.Emulator) -> None:
    assert pim_emulator.config == aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=8, chip="v1A")
    assert pim_emulator.seed == 5
