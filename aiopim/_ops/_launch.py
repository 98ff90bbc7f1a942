"""``dpu_launch``, ``dpu_sync`` and ``dpu_status``."""

from __future__ import annotations

import contextlib

from .. import timing
from .._errors import DpuError, DpuErrorCode, JobType
from .._machine._dpu import Dpu
from .._machine._jobs import Job, JobFailed
from .._machine._rank import Rank
from ._oplog import logged
from ._set import DpuSetBase
from ._submit import submit

E = DpuErrorCode


class LaunchJob(Job):
    """LAUNCH_RANK / LAUNCH_DPU: boot ``dpus`` at the end of the job."""

    __slots__ = ("dpus",)

    def __init__(self, rank: Rank, dpus: list[Dpu], job_type: JobType) -> None:
        super().__init__(rank, job_type, info={"dpus": len(dpus)})
        self.dpus = dpus

    def start(self) -> int:
        if any(d.running for d in self.dpus):
            raise JobFailed(E.DPU_ERR_DPU_ALREADY_RUNNING, "the DPUs are already running")
        return timing.LAUNCH_BOOT_LATENCY_PS

    def complete(self) -> None:
        self.rank.boot_dpus(self.dpus, self.type)


@logged("launch")
async def launch(dset: DpuSetBase, wait: bool) -> None:
    """``dpu_launch``: without ``wait`` it returns once enqueued (the boot happens in the job)."""
    for d in dset.dpu_list:
        if d.program is None:
            raise DpuError(E.DPU_ERR_NO_PROGRAM_LOADED, f"DPU {d.name} has no program loaded")
    single = dset._dpu

    def make(rank: Rank) -> Job:
        if single is not None:
            return LaunchJob(rank, [single], JobType.LAUNCH_DPU)
        return LaunchJob(rank, rank.enabled_dpus, JobType.LAUNCH_RANK)

    await submit(dset, make, wait=wait, parallel=False, what="launch")


@logged("sync")
async def sync(dset: DpuSetBase) -> None:
    """``dpu_sync``: a non-parallel SYNC per rank; waits for earlier jobs and the DPUs."""
    await submit(dset, lambda r: None, wait=True, parallel=False, what="sync")


@logged("status")
async def status(dset: DpuSetBase) -> tuple[bool, bool]:
    """``dpu_status``: QUIRK reproduced — it syncs first, so it blocks until the DPUs stop."""
    with contextlib.suppress(DpuError):  # the SDK ignores sync's return value here
        await sync(dset)
    dpus = dset.dpu_list
    return (not any(d.running for d in dpus), any(d.fault is not None for d in dpus))
