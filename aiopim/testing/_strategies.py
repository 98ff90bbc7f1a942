"""Hypothesis strategies for machines, host-API operation sequences, data and schedules.

Every strategy that depends on the machine takes a :class:`~aiopim.MachineConfig`, so they
compose with ``flatmap``: ``machines().flatmap(lambda m: st.tuples(st.just(m), job_sequences(m)))``
(or :func:`scenarios`, which does exactly that).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import timing
from .._core._machine import MachineConfig
from ..sdk import (
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_NONBLOCKING,
    DPU_CALLBACK_PARALLEL,
    DPU_CALLBACK_SINGLE_CALL,
    DPU_XFER_ASYNC,
    DPU_XFER_NO_RESET,
    DPU_XFER_PARALLEL,
)
from ._jobs import (
    MRAM_SYMBOL,
    WRAM_SYMBOL,
    Broadcast,
    Callback,
    Launch,
    Op,
    Sync,
    Target,
    Transfer,
    target_dpus,
)

#: the largest explore seed drawn by :func:`explore_seeds`
MAX_EXPLORE_SEED = 2**32 - 1


def machines(
    *,
    min_ranks: int = 1,
    max_ranks: int = 3,
    min_dpus_per_rank: int = 1,
    max_dpus_per_rank: int = 4,
    chips: tuple[str, ...] = ("v1A", "v1B"),
) -> st.SearchStrategy[MachineConfig]:
    """Machine configurations (small by default: every example builds a fresh machine)."""
    return st.builds(
        MachineConfig,
        nr_ranks=st.integers(min_ranks, max_ranks),
        nr_dpus_per_rank=st.integers(min_dpus_per_rank, max_dpus_per_rank),
        chip=st.sampled_from(chips),
    )


def _flag_sets(bits: list[int]) -> st.SearchStrategy[int]:
    return st.sets(st.sampled_from(bits)).map(sum)


def xfer_flags(*, parallel: bool = True) -> st.SearchStrategy[int]:
    """Every combination of ``DPU_XFER_NO_RESET | DPU_XFER_ASYNC | DPU_XFER_PARALLEL``."""
    bits = [DPU_XFER_NO_RESET, DPU_XFER_ASYNC] + ([DPU_XFER_PARALLEL] if parallel else [])
    return _flag_sets(bits)


def callback_flags(*, valid_only: bool = False) -> st.SearchStrategy[int]:
    """Every combination of the four ``DPU_CALLBACK_*`` bits.

    ``NONBLOCKING`` without ``ASYNC`` is an error the SDK reports at the call; leave it out
    with ``valid_only``.
    """
    bits = [
        DPU_CALLBACK_ASYNC,
        DPU_CALLBACK_NONBLOCKING,
        DPU_CALLBACK_SINGLE_CALL,
        DPU_CALLBACK_PARALLEL,
    ]
    flags = _flag_sets(bits)
    if valid_only:
        return flags.filter(lambda f: not (f & DPU_CALLBACK_NONBLOCKING and not f & 1))
    return flags


def targets(
    machine: MachineConfig, *, whole: bool = True, ranks: bool = True, dpus: bool = True
) -> st.SearchStrategy[Target]:
    """A whole set (None), one rank index, or one ``(rank, DPU)`` of ``machine``."""
    options: list[st.SearchStrategy[Target]] = []
    if whole:
        options.append(st.none())
    if ranks:
        options.append(st.integers(0, machine.nr_ranks - 1))
    if dpus:
        options.append(
            st.tuples(
                st.integers(0, machine.nr_ranks - 1),
                st.integers(0, machine.nr_dpus_per_rank - 1),
            )
        )
    if not options:
        raise ValueError("allow at least one kind of target")
    return st.one_of(options)


def transfer_data(nr_dpus: int, nbytes: int) -> st.SearchStrategy[tuple[bytes, ...]]:
    """One buffer of ``nbytes`` per DPU (for a transfer to the DPUs)."""
    return st.lists(
        st.binary(min_size=nbytes, max_size=nbytes), min_size=nr_dpus, max_size=nr_dpus
    ).map(tuple)


def transfer_arrays(
    nr_dpus: int,
    count: int,
    dtype: npt.DTypeLike = np.int32,
    *,
    elements: st.SearchStrategy[object] | None = None,
) -> st.SearchStrategy[np.ndarray]:
    """An array of shape ``(nr_dpus, count)``: one row per DPU, as ``DpuSet.copy_to`` takes."""
    return hnp.arrays(np.dtype(dtype), (nr_dpus, count), elements=elements)


def launches(machine: MachineConfig) -> st.SearchStrategy[Launch]:
    """``dpu_launch`` on a target, synchronous or not."""
    return st.builds(Launch, targets(machine), st.booleans())


def syncs(machine: MachineConfig) -> st.SearchStrategy[Sync]:
    """``dpu_sync`` on a target."""
    return st.builds(Sync, targets(machine))


def _span(draw: st.DrawFn, size: int, unit: int) -> tuple[int, int]:
    units = size // unit
    first = draw(st.integers(0, units - 1))
    count = draw(st.integers(1, units - first))
    return first * unit, count * unit


def transfers(
    machine: MachineConfig,
    *,
    wram_bytes: int = 64,
    mram_bytes: int = 1024,
    flags: st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[Transfer]:
    """``dpu_push_xfer`` to or from ``x`` (WRAM) or ``m`` (MRAM) of :func:`ops_program`.

    Offsets and lengths are aligned (4 bytes in WRAM, 8 in MRAM); flags cover every
    combination, so ``DPU_XFER_PARALLEL`` to MRAM (refused at the call) is included.
    """
    flag_strategy = flags if flags is not None else xfer_flags()

    @st.composite
    def build(draw: st.DrawFn) -> Transfer:
        target = draw(targets(machine))
        to_dpu = draw(st.booleans())
        wram = draw(st.booleans())
        symbol = WRAM_SYMBOL if wram else MRAM_SYMBOL
        offset, length = _span(draw, wram_bytes if wram else mram_bytes, 4 if wram else 8)
        data = None
        if to_dpu:
            data = draw(transfer_data(len(target_dpus(machine, target)), length))
        return Transfer(target, to_dpu, symbol, offset, length, draw(flag_strategy), data)

    return build()


def broadcasts(
    machine: MachineConfig, *, wram_bytes: int = 64, mram_bytes: int = 1024
) -> st.SearchStrategy[Broadcast]:
    """``dpu_broadcast_to`` with any transfer flags (PARALLEL is ignored by the SDK)."""

    @st.composite
    def build(draw: st.DrawFn) -> Broadcast:
        target = draw(targets(machine))
        wram = draw(st.booleans())
        symbol = WRAM_SYMBOL if wram else MRAM_SYMBOL
        offset, length = _span(draw, wram_bytes if wram else mram_bytes, 4 if wram else 8)
        data = draw(st.binary(min_size=length, max_size=length))
        return Broadcast(target, symbol, offset, data, draw(xfer_flags()))

    return build()


def callbacks(
    machine: MachineConfig,
    *,
    flags: st.SearchStrategy[int] | None = None,
    durations: st.SearchStrategy[int] | None = None,
    modelled_only: bool = True,
) -> st.SearchStrategy[Callback]:
    """``dpu_callback`` with every flag combination and an optional callback duration.

    With ``modelled_only`` (default) a synchronous ``SINGLE_CALL`` on several ranks, which
    :class:`RankQueueModel` does not cover, is left out.
    """
    flag_strategy = flags if flags is not None else callback_flags()
    dur = (
        durations
        if durations is not None
        else st.sampled_from([0, timing.PS_PER_US, 50 * timing.PS_PER_US])
    )
    ops = st.builds(Callback, targets(machine), flag_strategy, dur)
    if modelled_only and machine.nr_ranks > 1:
        return ops.filter(
            lambda c: (
                not (
                    c.target is None
                    and c.flags & DPU_CALLBACK_SINGLE_CALL
                    and not c.flags & DPU_CALLBACK_ASYNC
                )
            )
        )
    return ops


def host_ops(machine: MachineConfig, *, modelled_only: bool = True) -> st.SearchStrategy[Op]:
    """Any one operation over the host API."""
    return st.one_of(
        launches(machine),
        transfers(machine),
        broadcasts(machine),
        callbacks(machine, modelled_only=modelled_only),
        syncs(machine),
    )


def job_sequences(
    machine: MachineConfig,
    *,
    min_size: int = 1,
    max_size: int = 12,
    ops: st.SearchStrategy[Op] | None = None,
) -> st.SearchStrategy[list[Op]]:
    """Lists of operations (``ops`` defaults to :func:`host_ops`)."""
    return st.lists(
        ops if ops is not None else host_ops(machine), min_size=min_size, max_size=max_size
    )


def scenarios(
    machine_strategy: st.SearchStrategy[MachineConfig] | None = None,
    *,
    min_size: int = 1,
    max_size: int = 12,
) -> st.SearchStrategy[tuple[MachineConfig, list[Op]]]:
    """``(machine, operations)`` pairs: a machine, then a job sequence for it."""
    ms = machine_strategy if machine_strategy is not None else machines()
    return ms.flatmap(
        lambda m: st.tuples(st.just(m), job_sequences(m, min_size=min_size, max_size=max_size))
    )


def explore_seeds() -> st.SearchStrategy[int | None]:
    """A schedule: None (the stable order) or a seed that permutes simultaneous events.

    Failing seeds shrink towards None, then towards small integers, and replay exactly.
    """
    return st.none() | st.integers(0, MAX_EXPLORE_SEED)
