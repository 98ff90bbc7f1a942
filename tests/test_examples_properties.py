"""The toolkit against the project's example host programs (short runs; long ones: -m long)."""

from __future__ import annotations

from typing import Any

import pytest
import vector_add
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim.testing import (
    Pim,
    assert_never_deadlocks,
    assert_sync_semantics,
    explore_seeds,
    machines,
)


@st.composite
def vector_add_cases(draw: st.DrawFn) -> tuple[aiopim.MachineConfig, int, int, int]:
    """A machine, a DPU count it can hold, an element count and a data seed."""
    machine = draw(machines(max_ranks=3, max_dpus_per_rank=8))
    nr_dpus = draw(st.integers(1, machine.nr_ranks * machine.nr_dpus_per_rank))
    return machine, nr_dpus, draw(st.integers(1, 4096)), draw(st.integers(0, 2**16))


def check_vector_add(
    pim: Pim, case: tuple[aiopim.MachineConfig, int, int, int], explore_seed: int | None
) -> None:
    machine, nr_dpus, nr_elements, seed = case
    run = pim.execute(
        vector_add.host, nr_dpus, nr_elements, seed, machine=machine, explore_seed=explore_seed
    )
    result: dict[str, Any] = assert_never_deadlocks(run)
    assert result["correct"] is True
    assert result["dpus"] == nr_dpus
    assert_sync_semantics(run)  # includes no overtaking


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=vector_add_cases(), explore_seed=explore_seeds())
def test_vector_add_under_any_schedule(
    pim: Pim, case: tuple[aiopim.MachineConfig, int, int, int], explore_seed: int | None
) -> None:
    check_vector_add(pim, case, explore_seed)


@pytest.mark.long
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=vector_add_cases(), explore_seed=explore_seeds())
def test_vector_add_under_any_schedule_long(
    pim: Pim, case: tuple[aiopim.MachineConfig, int, int, int], explore_seed: int | None
) -> None:
    check_vector_add(pim, case, explore_seed)
