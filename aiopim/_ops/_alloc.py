"""``dpu_alloc``, ``dpu_alloc_ranks`` and ``dpu_free``."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from .._errors import DpuError, DpuErrorCode
from .._machine._config import parse_profile
from .._machine._rank import Rank
from ._flags import DPU_ALLOCATE_ALL
from ._oplog import logged
from ._set import Allocation, DpuSetBase
from ._submit import counted_callback
from ._validate import UINT32_MAX, check_int, check_optional_str

if TYPE_CHECKING:
    from .._emulator import Emulator

E = DpuErrorCode
S = TypeVar("S", bound=DpuSetBase)


@logged("alloc")
async def alloc(
    emu: Emulator, cls: type[S], nr_dpus: int | None, nr_ranks: int | None, profile: str | None
) -> S:
    """``dpu_alloc`` / ``dpu_alloc_ranks``."""
    profile = check_optional_str(profile, "profile")
    if nr_dpus is None and nr_ranks is None:
        raise TypeError("nr_dpus must be an int, not NoneType")
    if nr_dpus is not None:
        nr_dpus = check_int(nr_dpus, "nr_dpus", E.DPU_ERR_ALLOCATION, high=UINT32_MAX)
    if nr_ranks is not None:
        nr_ranks = check_int(nr_ranks, "nr_ranks", E.DPU_ERR_ALLOCATION, high=UINT32_MAX)
    parsed = parse_profile(profile)
    emu.machine.configure(parsed)
    if nr_dpus is not None:
        if nr_dpus == 0:
            raise DpuError(E.DPU_ERR_ALLOCATION, "cannot allocate 0 DPUs")
        if nr_dpus == DPU_ALLOCATE_ALL:
            ranks = emu.machine.allocate_ranks(parsed, -1)
        else:
            needed = -(-nr_dpus // emu.config.nr_dpus_per_rank)
            ranks = emu.machine.allocate_ranks(parsed, needed)
            enabled = sum(len(r.enabled_dpus) for r in ranks)
            if enabled < nr_dpus:
                for r in ranks:
                    r.allocated = False
                raise DpuError(
                    E.DPU_ERR_ALLOCATION,
                    f"asked for {nr_dpus} DPUs but the allocated ranks have only {enabled} enabled",
                )
            _disable_surplus(ranks, enabled - nr_dpus)
    else:
        assert nr_ranks is not None
        if nr_ranks == 0:
            raise DpuError(E.DPU_ERR_ALLOCATION, "cannot allocate 0 ranks")
        ranks = emu.machine.allocate_ranks(parsed, -1 if nr_ranks == DPU_ALLOCATE_ALL else nr_ranks)
    owner = Allocation()
    for r in ranks:
        r.owner = owner
    return cls(emu, ranks, root=True, owner=owner)


def _disable_surplus(ranks: list[Rank], surplus: int) -> None:
    """Disable DPUs from the ranks with most enabled DPUs, a whole 'line' (member) at a time."""
    while surplus > 0:
        rank = max(ranks, key=lambda r: (len(r.enabled_dpus), -r.index))
        candidates = sorted(rank.enabled_dpus, key=lambda d: (-d.member, d.ci))
        candidates[0].enabled = False
        surplus -= 1


@logged("free")
async def free(dset: DpuSetBase) -> None:
    """``dpu_free``: queued jobs are abandoned; waits for running DPUs to stop and for the
    non-blocking callbacks still running on the set's ranks (freeing joins the rank workers)."""
    if not dset._root or dset._freed:
        raise DpuError(E.DPU_ERR_INVALID_DPU_SET, "only a set returned by dpu_alloc can be freed")
    emu = dset.emulator
    ranks = dset.rank_list
    dset._owner.freed = True
    for r in ranks:
        r.fail_queue_on_free()
    counted = counted_callback.get()
    for r in ranks:
        if counted is not None and r in counted:  # freed from its own callback: do not wait
            counted.remove(r)
            r.running_callbacks -= 1
    rec = emu.recorder
    for r in ranks:
        while r.running_dpus or r.current is not None or r.running_callbacks:
            w = emu.kernel.new_waiter(f"rank {r.index} to stop before dpu_free")
            r.stop_waiters.append(w)
            t0 = emu.kernel.now
            await emu.bridge.wait(w)
            if rec is not None:
                rec.host_wait("free", t0, (r,))
        r.allocated = False
        r.owner = None
        r.job_error = 0
