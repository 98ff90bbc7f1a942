"""The emulated machine: its configuration and its ranks, built when first allocated."""

from __future__ import annotations

from .._errors import DpuError, DpuErrorCode
from .._runtime._kernel import Kernel
from ._config import MachineConfig, Profile, machine_from_profile
from ._rank import Rank
from ._recorder import Recorder


class Machine:
    """Ranks of DPUs on one kernel; a rank and its DPUs exist once something uses them."""

    def __init__(self, kernel: Kernel, config: MachineConfig, recorder: Recorder | None) -> None:
        self.kernel = kernel
        self.config = config
        #: the trace recorder of the emulator (None when not recording)
        self.recorder = recorder
        self._ranks: dict[int, Rank] = {}

    def ranks(self) -> list[Rank]:
        """The ranks built so far, by index."""
        return [self._ranks[i] for i in sorted(self._ranks)]

    def held_bytes(self) -> int:
        """The most host memory the machine's memories hold: the WRAM and IRAM of its ranks
        as mapped, and the MRAM pages of their DPUs."""
        return sum(
            r.wram_memory.nbytes + r.iram_memory.nbytes + sum(d.mram.resident_bytes for d in r.dpus)
            for r in self._ranks.values()
        )

    def is_allocated(self, index: int) -> bool:
        """True if rank ``index`` is held by an allocation (without building it)."""
        r = self._ranks.get(index)
        return r is not None and r.allocated

    def rank(self, index: int) -> Rank:
        """Rank ``index`` of the machine (created on first use)."""
        r = self._ranks.get(index)
        if r is None:
            r = self._ranks[index] = Rank(
                self, index, self.config.chip_profile, self.config.nr_dpus_per_rank
            )
        return r

    def configure(self, profile: Profile) -> None:
        """Apply the machine keys of an allocation profile (only while nothing is allocated)."""
        cfg = machine_from_profile(self.config, profile)
        if cfg == self.config:
            return
        if any(r.allocated for r in self._ranks.values()):
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_PROFILE,
                f"the profile asks for a {cfg} machine but ranks of the current {self.config} "
                "machine are allocated; free them first",
            )
        for r in self._ranks.values():
            self.kernel.blocked_reporters.remove(r.describe_blocked)
        self._ranks.clear()
        self.config = cfg

    def allocate_ranks(self, profile: Profile, nr_ranks: int) -> list[Rank]:
        """Take ``nr_ranks`` free ranks (all of them for ``nr_ranks < 0``) and reset them."""
        free = [i for i in range(self.config.nr_ranks) if not self.is_allocated(i)]
        taken = [self.rank(i) for i in (free if nr_ranks < 0 else free[:nr_ranks])]
        if not taken or (nr_ranks >= 0 and len(taken) < nr_ranks):
            raise DpuError(
                DpuErrorCode.DPU_ERR_ALLOCATION,
                f"{len(free)} free rank(s) of {self.config.nr_dpus_per_rank} DPUs; asked for "
                f"{'all' if nr_ranks < 0 else nr_ranks}",
            )
        for r in taken:
            r.allocated = True
            r.nr_job_slots = r.free_slots = profile.nr_jobs_per_rank
            r.job_error = 0
            r.xfer_matrix.clear()
            r.callback_matrix.clear()
            for d in r.dpus:
                d.enabled = not (profile.disabled_mask >> d.index) & 1
                if not profile.disable_reset_on_alloc:
                    d.reset_memories()
                    d.program = None
        return taken
