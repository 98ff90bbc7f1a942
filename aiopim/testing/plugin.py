"""pytest plugin (entry point ``pytest11``): aiopim fixtures on both anyio backends.

Fixtures
  ``aiopim_backend``  "asyncio" / "trio" (session scope, parametrised)
  ``pim``             a :class:`~aiopim.testing.Pim` for that backend: every ``pim.run``
                      builds a fresh machine and clock, so it is safe inside ``@given``
  ``pim_emulator``    one fresh :class:`~aiopim.Emulator` for the test (marker ``pim_machine``)
  ``pim_anyio_backend``  ``pim_emulator.anyio_backend(aiopim_backend)``: return it from your
                      ``anyio_backend`` fixture to run ``@pytest.mark.anyio`` tests in virtual time
  ``pim_trio_clock``  ``pim_emulator.trio_clock()``: request it in ``@pytest.mark.trio`` tests
                      and pytest-trio runs them in virtual time
  ``pim_explore``     ``pim_explore(fn, schedules=N, ...)``: schedule exploration as a campaign
                      (``aiopim.campaign.explore``), fanned out by ``--aiopim-jobs N`` or
                      ``--aiopim-dask local:N|ADDRESS``; returns an ``ExploreReport``
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest
import trio

from .._emulator import BACKENDS, Emulator
from .._machine._config import MachineConfig
from ._harness import DEFAULT_MACHINE, Pim, new_emulator

if TYPE_CHECKING:
    from ..campaign import Explorer


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiopim")
    group.addoption(
        "--aiopim-jobs",
        type=int,
        default=None,
        metavar="N",
        help="run pim_explore's schedules on N local processes",
    )
    group.addoption(
        "--aiopim-dask",
        default=None,
        metavar="ADDRESS",
        help="run pim_explore's schedules on Dask: local:N (a LocalCluster) or tcp://host:port",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "pim_machine(nr_ranks=4, nr_dpus_per_rank=8, chip='v1B', explore_seed=None): the "
        "machine (and schedule) of the pim_emulator fixture",
    )


@pytest.fixture(scope="session", params=BACKENDS)
def aiopim_backend(request: pytest.FixtureRequest) -> str:
    """Each anyio backend aiopim supports, in turn."""
    return str(request.param)


@pytest.fixture(scope="session")
def pim(aiopim_backend: str) -> Pim:
    """Runs host programs on fresh emulated machines on ``aiopim_backend``."""
    return Pim(aiopim_backend)


def _marker_machine(request: pytest.FixtureRequest) -> tuple[MachineConfig, int | None]:
    marker = request.node.get_closest_marker("pim_machine")
    if marker is None:
        return DEFAULT_MACHINE, None
    kwargs: dict[str, Any] = dict(marker.kwargs)
    seed = kwargs.pop("explore_seed", None)
    unknown = set(kwargs) - {f.name for f in dataclasses.fields(MachineConfig)}
    if unknown:
        raise pytest.UsageError(f"pim_machine: unknown argument(s) {sorted(unknown)}")
    return dataclasses.replace(DEFAULT_MACHINE, **kwargs), seed


@pytest.fixture
def pim_emulator(request: pytest.FixtureRequest) -> Emulator:
    """A fresh emulator for this test (configure it with ``@pytest.mark.pim_machine``)."""
    machine, seed = _marker_machine(request)
    return new_emulator(machine, explore_seed=seed)


@pytest.fixture
def pim_anyio_backend(pim_emulator: Emulator, aiopim_backend: str) -> tuple[str, dict[str, Any]]:
    """``anyio_backend`` value running the test in ``pim_emulator``'s virtual time."""
    return pim_emulator.anyio_backend(aiopim_backend)


@pytest.fixture
def pim_trio_clock(pim_emulator: Emulator) -> trio.abc.Clock:
    """A trio clock that pytest-trio uses to run the test in ``pim_emulator``'s virtual time."""
    return pim_emulator.trio_clock()


@pytest.fixture
def pim_explore(request: pytest.FixtureRequest) -> Explorer:
    """Explores a host program's schedules as a campaign (``aiopim.campaign.explore``), on the
    executor the ``--aiopim-jobs`` / ``--aiopim-dask`` options choose (default: this process)."""
    from ..campaign import Explorer

    options = request.config.option
    return Explorer(jobs=options.aiopim_jobs, dask=options.aiopim_dask)
