"""The toolkit against the project's example host programs (short runs; long ones: -m long)."""

from __future__ import annotations

from typing import Any

import pytest
import vector_add
import wram_fifo_keysum as keysum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim.testing import (
    Pim,
    assert_fifo_conservation,
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


# --- the key-sum WRAM FIFO example ------------------------------------------------------------
#: tasklet counts for which NR_ELEMS / NR_TASKLETS is a whole number of CACHE_SIZE blocks
KEYSUM_ALL_TASKLETS = [n for n in range(1, 17) if keysum.NR_ELEMS % (n * keysum.CACHE_SIZE) == 0]


def test_keysum_all_mode_rejects_tasklet_counts_that_split_cache_blocks() -> None:
    assert keysum.ALL_MODE_TASKLETS == KEYSUM_ALL_TASKLETS == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="multiple of 256"):
        keysum.build_program(6, "all")
    keysum.build_program(6, "each")  # each tasklet scans everything: any count works
    with pytest.raises(SystemExit):
        keysum.main(["--dpus", "1", "--tasklets", "3"])


@st.composite
def keysum_cases(draw: st.DrawFn) -> tuple[aiopim.MachineConfig, int, int, int, str, int]:
    """A small v1B machine, whole ranks (0) or a DPU count, tasklets, mode and data seed."""
    machine = draw(machines(max_ranks=2, max_dpus_per_rank=4, chips=("v1B",)))
    ranks = draw(st.integers(1, machine.nr_ranks))
    nr_dpus = draw(st.sampled_from([0, draw(st.integers(1, machine.nr_dpus_per_rank))]))
    mode = draw(st.sampled_from(["all", "each"]))
    # "all" splits the 4,096 elements between the tasklets in whole 256-element cache blocks
    # (see the test above); "each" scans them all
    tasklets = draw(st.sampled_from(KEYSUM_ALL_TASKLETS) if mode == "all" else st.integers(1, 16))
    return machine, ranks, nr_dpus, tasklets, mode, draw(st.integers(0, 2**16))


def check_keysum(
    backend: str,
    case: tuple[aiopim.MachineConfig, int, int, int, str, int],
    explore_seed: int | None,
) -> None:
    machine, ranks, nr_dpus, tasklets, mode, seed = case
    run = Pim(backend).execute(
        keysum.host, ranks, nr_dpus, tasklets, mode, seed, machine=machine,
        explore_seed=explore_seed,
    )  # fmt: skip
    result: dict[str, Any] = assert_never_deadlocks(run)
    n = nr_dpus if nr_dpus else ranks * machine.nr_dpus_per_rank
    assert result["dpus"] == n
    assert result["wrong"] == []  # every (key, sum) is the host-computed sum
    idents = sorted({ident for ident, _, _ in result["received"]})
    assert len(idents) == n
    # the host pushed keys 0..63 to every DPU, every push succeeded: each comes back once
    pushed = [(ident, k) for ident in idents for k in range(keysum.NR_KEYS)]
    drained = [(ident, k) for ident, k, _ in result["received"]]
    assert_fifo_conservation(
        pushed, [True] * len(pushed), drained, channel=lambda e: e[0], ordered=mode == "all"
    )
    assert result["complete"]
    assert_sync_semantics(run)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=keysum_cases(), explore_seed=explore_seeds())
def test_keysum_under_any_schedule(
    pim: Pim,
    case: tuple[aiopim.MachineConfig, int, int, int, str, int],
    explore_seed: int | None,
) -> None:
    check_keysum(pim.backend, case, explore_seed)


@pytest.mark.long
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=keysum_cases(),
    explore_seed=explore_seeds(),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_keysum_under_any_schedule_long(
    backend: str,
    case: tuple[aiopim.MachineConfig, int, int, int, str, int],
    explore_seed: int | None,
) -> None:
    """1,000 examples in all, the backend drawn with the rest (a few minutes on one core)."""
    check_keysum(backend, case, explore_seed)
