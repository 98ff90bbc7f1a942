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
from .._machine._config import MachineConfig
from .._machine._wramfifo import MAX_PTR_SIZE as MAX_FIFO_PTR_SIZE
from ..sdk import (
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_NONBLOCKING,
    DPU_CALLBACK_PARALLEL,
    DPU_CALLBACK_SINGLE_CALL,
    DPU_XFER_ASYNC,
    DPU_XFER_NO_RESET,
    DPU_XFER_PARALLEL,
)
from ._fifo import (
    MODES,
    FifoDelay,
    FifoDrain,
    FifoGeometry,
    FifoOp,
    FifoPush,
    FifoRetries,
    FifoStop,
    FifoStream,
    FifoSync,
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
        return flags.filter(
            lambda f: not (f & DPU_CALLBACK_NONBLOCKING and not f & DPU_CALLBACK_ASYNC)
        )
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


# --- WRAM FIFOs ----------------------------------------------------------------------------------
#: data sizes drawn by :func:`fifo_geometries` unless told otherwise (multiples of 8)
FIFO_DATA_SIZES = (8, 16, 24, 32)


def fifo_geometries(
    *,
    min_ptr_size: int = 1,
    max_ptr_size: int = 4,
    data_sizes: tuple[int, ...] = FIFO_DATA_SIZES,
) -> st.SearchStrategy[FifoGeometry]:
    """FIFO shapes the DPU side accepts: ``ptr_size`` in 1..10, ``data_size`` a multiple of 8.

    Small by default; above ``ptr_size`` 8 the SDK addresses wrong slots (a quirk aiopim
    warns about with ``DpuQuirkWarning``).
    """
    if not 1 <= min_ptr_size <= max_ptr_size <= MAX_FIFO_PTR_SIZE:
        raise ValueError(f"need 1 <= min_ptr_size <= max_ptr_size <= {MAX_FIFO_PTR_SIZE}")
    return st.builds(
        FifoGeometry, st.integers(min_ptr_size, max_ptr_size), st.sampled_from(data_sizes)
    )


def fifo_streams(
    *,
    geometries: st.SearchStrategy[FifoGeometry] | None = None,
    max_tasklets: int = 4,
    modes: tuple[str, ...] = MODES,
    works: st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[FifoStream]:
    """Shapes of :func:`~aiopim.testing.fifo_echo_program`: input and output geometry
    (the output elements at least as large as the input ones), tasklets, mode, work."""
    geo = geometries if geometries is not None else fifo_geometries()
    work = works if works is not None else st.sampled_from([0, 20, 200])

    @st.composite
    def build(draw: st.DrawFn) -> FifoStream:
        fin = draw(geo)
        fout = draw(geo)
        if fout.data_size < fin.data_size:
            fout = FifoGeometry(fout.ptr_size, fin.data_size)
        return FifoStream(
            fin,
            fout,
            draw(st.integers(1, max_tasklets)),
            draw(st.sampled_from(modes)),
            draw(work),
        )

    return build()


def fifo_values(
    nr_dpus: int,
    *,
    values: st.SearchStrategy[int] | None = None,
    skip: bool = True,
) -> st.SearchStrategy[tuple[int | None, ...]]:
    """One element value per DPU; with ``skip`` some may be None (that DPU gets nothing)."""
    one: st.SearchStrategy[int | None] = values if values is not None else st.integers(0, 2**32 - 1)
    if skip:
        one = st.one_of(one, st.none())
    return st.lists(one, min_size=nr_dpus, max_size=nr_dpus).map(tuple)


#: the longest a generated push or drain may go before the host cancels it (µs)
MAX_CANCEL_US = 40


def fifo_cancels(max_us: int = MAX_CANCEL_US) -> st.SearchStrategy[int | None]:
    """When the host cancels a push or a drain: never (None), or after 0..``max_us`` µs."""
    return st.one_of(st.none(), st.integers(0, max_us))


def fifo_pushes(
    machine: MachineConfig,
    *,
    values: st.SearchStrategy[int] | None = None,
    skip: bool = True,
    asynchronous: bool = True,
    cancels: bool = False,
) -> st.SearchStrategy[FifoPush]:
    """``InputFifo.push`` of one value per DPU of ``machine``, waiting or (``asynchronous``)
    not; a push that skips DPUs always waits (see :class:`~aiopim.testing.FifoPush`). With
    ``cancels`` the host may cancel it after a while (``FifoPush.cancel_us``), unless it
    skips DPUs."""
    n = machine.nr_ranks * machine.nr_dpus_per_rank

    @st.composite
    def build(draw: st.DrawFn) -> FifoPush:
        vals = draw(fifo_values(n, values=values, skip=skip))
        wait = True
        if asynchronous and all(v is not None for v in vals):
            wait = draw(st.booleans())
        skips = any(v is None for v in vals)
        cancel_us = draw(fifo_cancels()) if cancels and not skips else None
        return FifoPush(vals, wait, cancel_us)

    return build()


def fifo_drains(*, cancels: bool = False) -> st.SearchStrategy[FifoDrain]:
    """``OutputFifo.drain``; with ``cancels`` the host may cancel it after a while."""
    return st.builds(FifoDrain, fifo_cancels()) if cancels else st.just(FifoDrain())


def fifo_retry_settings(
    *, max_retries: int = 3, max_time_for_retry_us: int = 10
) -> st.SearchStrategy[FifoRetries]:
    """Push retry settings (small, so that back-pressure makes pushes fail)."""
    return st.builds(
        FifoRetries, st.integers(0, max_retries), st.integers(0, max_time_for_retry_us)
    )


def fifo_delays(max_us: int = 50) -> st.SearchStrategy[FifoDelay]:
    """The host waits a while (the DPUs keep working)."""
    return st.builds(FifoDelay, st.integers(1, max_us))


def fifo_stops(*, asynchronous: bool = True) -> st.SearchStrategy[FifoStop]:
    """The parallel write that clears ``active``, waiting or not."""
    return st.builds(FifoStop, st.booleans() if asynchronous else st.just(True))


def fifo_host_ops(
    machine: MachineConfig, *, skip: bool = True, asynchronous: bool = True, cancels: bool = False
) -> st.SearchStrategy[FifoOp]:
    """One FIFO operation that may come before the stop: push, drain, retry setting, delay
    (with ``cancels``, pushes and drains the host may cancel)."""
    push = fifo_pushes(machine, skip=skip, asynchronous=asynchronous, cancels=cancels)
    # pushes weigh 5 to 1 against each other kind of operation
    drain = fifo_drains(cancels=cancels)
    return st.one_of(*[push] * 5, drain, fifo_retry_settings(), fifo_delays())


def fifo_sequences(
    machine: MachineConfig,
    *,
    min_size: int = 0,
    max_size: int = 24,
    ops: st.SearchStrategy[FifoOp] | None = None,
    asynchronous: bool = True,
    sync_before_stop: bool = False,
    cancels: bool = False,
) -> st.SearchStrategy[list[FifoOp]]:
    """A FIFO host program: maybe retry settings, ``ops`` (default :func:`fifo_host_ops`),
    then the stop, drains or delays, a safe sync and a last drain. With ``cancels`` the host
    may cancel pushes and drains at any point (the sync and the last drain excepted).

    With ``sync_before_stop`` the program makes the classic mistake instead: a plain
    ``dpu_sync`` queued before the stop, which deadlocks (the DPUs wait for ``active``).
    Use ``asynchronous=False`` with it: a rank broken by an asynchronous push failure
    refuses the sync at the call instead.
    """
    body_op = (
        ops
        if ops is not None
        else fifo_host_ops(machine, asynchronous=asynchronous, cancels=cancels)
    )
    body = st.tuples(
        st.lists(fifo_retry_settings(), max_size=1),
        st.lists(body_op, min_size=min_size, max_size=max_size),
    ).map(lambda parts: [*parts[0], *parts[1]])
    if sync_before_stop:
        return body.map(lambda b: [*b, FifoSync(safe=False), FifoStop()])
    tail = st.lists(st.one_of(fifo_drains(cancels=cancels), fifo_delays()), max_size=2)
    stop = fifo_stops(asynchronous=asynchronous)
    return st.tuples(body, stop, tail).map(
        lambda parts: [*parts[0], parts[1], *parts[2], FifoSync(), FifoDrain()]
    )


def fifo_scenarios(
    machine_strategy: st.SearchStrategy[MachineConfig] | None = None,
    stream_strategy: st.SearchStrategy[FifoStream] | None = None,
    *,
    min_size: int = 0,
    max_size: int = 24,
    asynchronous: bool = True,
    cancels: bool = False,
) -> st.SearchStrategy[tuple[MachineConfig, FifoStream, list[FifoOp]]]:
    """``(machine, stream, operations)``: a v1B machine, an echo program shape and a FIFO
    host program for them (play it with :func:`~aiopim.testing.fifo_host`); with
    ``cancels``, a program that cancels some of its pushes and drains."""
    ms = (
        machine_strategy
        if machine_strategy is not None
        else machines(max_ranks=2, max_dpus_per_rank=3, chips=("v1B",))
    )
    ss = (
        stream_strategy
        if stream_strategy is not None
        else fifo_streams(geometries=fifo_geometries(max_ptr_size=3))
    )
    return st.tuples(ms, ss).flatmap(
        lambda ms_: st.tuples(
            st.just(ms_[0]),
            st.just(ms_[1]),
            fifo_sequences(
                ms_[0],
                min_size=min_size,
                max_size=max_size,
                asynchronous=asynchronous,
                cancels=cancels,
            ),
        )
    )
