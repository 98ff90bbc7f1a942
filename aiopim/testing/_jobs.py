"""Host-API operations as data, a DPU program to run them against, and their interpreter.

An operation sequence is what Hypothesis generates and shrinks; :func:`run_ops` plays it
through ``aiopim.sdk`` on a :class:`~aiopim.DpuSet` and logs what the host observed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import timing
from .._emulator import current_emulator
from .._errors import DpuError
from .._machine._config import MachineConfig
from ..dpu import Program, Tasklet
from ..host import DpuSet
from ..sdk import (
    DPU_ASYNCHRONOUS,
    DPU_SYNCHRONOUS,
    DPU_XFER_FROM_DPU,
    DPU_XFER_TO_DPU,
    dpu_broadcast_to,
    dpu_callback,
    dpu_launch,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_sync,
)

#: a whole set (None), one rank (its index) or one DPU ((rank, DPU index in the rank))
Target = int | tuple[int, int] | None

#: host-visible symbols of :func:`ops_program`
WRAM_SYMBOL = "x"
MRAM_SYMBOL = "m"
INSTRUCTIONS_SYMBOL = "instructions"


@dataclass(frozen=True)
class Launch:
    """``dpu_launch(target, DPU_SYNCHRONOUS if wait else DPU_ASYNCHRONOUS)``."""

    target: Target
    wait: bool


@dataclass(frozen=True)
class Transfer:
    """``dpu_prepare_xfer`` on every DPU of ``target`` then ``dpu_push_xfer``.

    ``data`` holds one buffer per DPU of the target for a transfer to the DPUs (None for a
    transfer from the DPUs, which reads into fresh buffers).
    """

    target: Target
    to_dpu: bool
    symbol: str
    offset: int
    length: int
    flags: int
    data: tuple[bytes, ...] | None = None


@dataclass(frozen=True)
class Broadcast:
    """``dpu_broadcast_to(target, symbol, offset, data, len(data), flags)``."""

    target: Target
    symbol: str
    offset: int
    data: bytes
    flags: int


@dataclass(frozen=True)
class Callback:
    """``dpu_callback(target, fn, None, flags)``; ``fn`` logs its call and works ``duration_ps``."""

    target: Target
    flags: int
    duration_ps: int = 0


@dataclass(frozen=True)
class Sync:
    """``dpu_sync(target)``."""

    target: Target


Op = Launch | Transfer | Broadcast | Callback | Sync


def ops_program(
    instructions: int = 400, *, wram_bytes: int = 64, mram_bytes: int = 1024
) -> Program:
    """A one-tasklet DPU program that issues ``instructions`` then stops.

    It exposes the WRAM symbol ``x`` and the MRAM symbol ``m`` (both zero after load) for
    transfers; the run time is :func:`run_time_ps`.
    """
    if wram_bytes % 4 or mram_bytes % 8 or wram_bytes <= 0 or mram_bytes <= 0:
        raise ValueError("wram_bytes must be a positive multiple of 4, mram_bytes of 8")
    prog = Program("aiopim-testing-ops", nr_tasklets=1)
    prog.host(WRAM_SYMBOL, np.uint8, wram_bytes)
    prog.mram(MRAM_SYMBOL, np.uint8, mram_bytes)
    count = prog.host(INSTRUCTIONS_SYMBOL, np.uint32, 1, init=[instructions])

    @prog.main
    async def main(t: Tasklet) -> None:
        t.compute(int(t.view(count)[0]))

    return prog


def run_time_ps(chip: str, instructions: int) -> int:
    """Virtual run time of one tasklet issuing ``instructions`` alone on a DPU of ``chip``."""
    if instructions <= 0:
        return 0
    cycle = timing.CHIPS[chip].cycle_ps
    return math.ceil(instructions * timing.REVOLVER_CYCLES * cycle - 1e-6)


def target_set(dpus: DpuSet, target: Target) -> DpuSet:
    """The sub-set of ``dpus`` that ``target`` names."""
    if target is None:
        return dpus
    if isinstance(target, int):
        return dpus.ranks[target]
    rank, dpu = target
    return dpus.ranks[rank].dpus[dpu]


def target_dpus(machine: MachineConfig, target: Target) -> list[tuple[int, int]]:
    """``(rank, DPU)`` pairs of ``target`` in DPU_FOREACH order, on a fully enabled machine."""
    if target is None:
        return [(r, d) for r in range(machine.nr_ranks) for d in range(machine.nr_dpus_per_rank)]
    if isinstance(target, int):
        return [(target, d) for d in range(machine.nr_dpus_per_rank)]
    return [target]


@dataclass(frozen=True)
class OpResult:
    """What the host saw for one operation: call and return times, error value (or None)."""

    index: int
    called_ps: int
    returned_ps: int
    error: int | None


@dataclass(frozen=True)
class CallbackCall:
    """One invocation of an operation's callback."""

    op: int
    rank_id: int
    nr_dpus: int
    time_ps: int


@dataclass
class OpsLog:
    """Everything :func:`run_ops` observed; ``reads`` maps an op index to its DPUs' bytes."""

    results: list[OpResult] = field(default_factory=list)
    calls: list[CallbackCall] = field(default_factory=list)
    reads: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def errors(self) -> list[int | None]:
        """The error value of each operation (None when it succeeded)."""
        return [r.error for r in self.results]


async def run_ops(dpus: DpuSet, ops: Sequence[Op], *, final_sync: bool = True) -> OpsLog:
    """Play ``ops`` on ``dpus`` (a set of whole ranks with :func:`ops_program` loaded).

    A :class:`~aiopim.DpuError` raised by an operation is logged and the sequence goes on.
    With ``final_sync`` the set is synced at the end, so every read buffer is filled, then
    1 ps passes so that a non-blocking callback dispatched at that instant has started.
    """
    emu = current_emulator()
    log = OpsLog()
    for i, op in enumerate(ops):
        called = emu.now_ps
        error: int | None = None
        try:
            await _play(dpus, i, op, log)
        except DpuError as exc:
            error = exc.value
        log.results.append(OpResult(i, called, emu.now_ps, error))
    if final_sync:
        await dpu_sync(dpus)
        await emu.delay(1, "non-blocking callbacks to start")
    return log


async def _play(dpus: DpuSet, i: int, op: Op, log: OpsLog) -> None:
    dset = target_set(dpus, op.target)
    if isinstance(op, Launch):
        await dpu_launch(dset, DPU_SYNCHRONOUS if op.wait else DPU_ASYNCHRONOUS)
    elif isinstance(op, Transfer):
        members = list(dset.iter_dpus())
        if op.to_dpu:
            if op.data is None or len(op.data) != len(members):
                raise ValueError(f"op {i}: a transfer to the DPUs needs one buffer per DPU")
            bufs = [np.frombuffer(b, np.uint8) for b in op.data]
        else:
            out = np.zeros((len(members), op.length), np.uint8)
            log.reads[i] = out
            bufs = list(out)
        for one, buf in zip(members, bufs, strict=True):
            dpu_prepare_xfer(one, buf)
        xfer = DPU_XFER_TO_DPU if op.to_dpu else DPU_XFER_FROM_DPU
        await dpu_push_xfer(dset, xfer, op.symbol, op.offset, op.length, op.flags)
    elif isinstance(op, Broadcast):
        await dpu_broadcast_to(dset, op.symbol, op.offset, op.data, len(op.data), op.flags)
    elif isinstance(op, Callback):
        emu = current_emulator()
        duration = op.duration_ps

        async def fn(s: DpuSet, rank_id: int, args: object) -> None:
            log.calls.append(CallbackCall(i, rank_id, len(s), emu.now_ps))
            if duration:
                await emu.delay(duration, f"callback of op {i}")

        await dpu_callback(dset, fn, None, op.flags)
    else:
        await dpu_sync(dset)
