"""``struct dpu_set_t``: a list of whole ranks, or exactly one DPU."""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum
from typing import TYPE_CHECKING, Self

from .._errors import DpuError, DpuErrorCode

if TYPE_CHECKING:
    from .._emulator import Emulator
    from .._machine._dpu import Dpu
    from .._machine._program import DpuProgram
    from .._machine._rank import Rank


def check_control(ranks: list[Rank], owner: str | None = None) -> None:
    """Refuse callers other than the library that owns a rank's control plane (``None``: the
    SDK; Memclave locks the ranks it holds)."""
    for r in ranks:
        if r.control_owner != owner:
            raise DpuError(
                DpuErrorCode.DPU_ERR_DRIVER,
                f"rank {r.index} is owned by {r.control_owner or 'the SDK'}: its control plane is "
                f"locked for {owner or 'the SDK'}",
            )


class DpuSetKind(IntEnum):
    """``dpu_set_kind_t``."""

    DPU_SET_RANKS = 0
    DPU_SET_DPU = 1


class Allocation:
    """The identity of one ``dpu_alloc``: shared by its set and every child set, recorded by its
    ranks as their owner while it lasts (a freed or stale handle is refused at every call)."""

    __slots__ = ("freed",)

    def __init__(self) -> None:
        self.freed = False


class DpuSetBase:
    """Structure shared by both host API faces; the operations live in ``_ops``."""

    def __init__(
        self,
        emulator: Emulator,
        ranks: list[Rank],
        dpu: Dpu | None = None,
        *,
        root: bool = False,
        owner: Allocation | None = None,
    ) -> None:
        self._emulator = emulator
        self._ranks = ranks
        self._dpu = dpu
        self._root = root
        self._owner = owner if owner is not None else Allocation()

    @property
    def _freed(self) -> bool:
        return self._owner.freed

    def check_owned(self) -> None:
        """Raise ``DPU_ERR_INVALID_DPU_SET`` unless the allocation is live and owns the ranks."""
        dpu = self._dpu
        if dpu is not None:  # the common case of per-DPU calls, without a list
            rank = dpu.rank
            if rank.control_owner is None and not self._owner.freed and rank.owner is self._owner:
                return
        ranks = [dpu.rank] if dpu is not None else self._ranks
        check_control(ranks)
        if self._owner.freed or any(r.owner is not self._owner for r in ranks):
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_DPU_SET,
                "this DPU set was freed (dpu_free); its ranks may belong to a newer allocation",
            )

    @property
    def kind(self) -> DpuSetKind:
        """Whether this set is a list of ranks or a single DPU."""
        return DpuSetKind.DPU_SET_DPU if self._dpu is not None else DpuSetKind.DPU_SET_RANKS

    @property
    def emulator(self) -> Emulator:
        """The emulator owning these DPUs."""
        return self._emulator

    @property
    def rank_list(self) -> list[Rank]:
        """Ranks covered by the set (the DPU's rank for a single-DPU set)."""
        return [self._dpu.rank] if self._dpu is not None else list(self._ranks)

    @property
    def dpu_list(self) -> list[Dpu]:
        """Enabled DPUs in DPU_FOREACH order."""
        if self._dpu is not None:
            return [self._dpu]
        return [d for r in self._ranks for d in r.dpus if d.enabled]

    @property
    def single_dpu(self) -> Dpu | None:
        """The DPU of a ``DPU_SET_DPU`` set, None for a set of ranks."""
        return self._dpu

    @property
    def is_single_dpu(self) -> bool:
        """True for a ``DPU_SET_DPU`` set."""
        return self._dpu is not None

    def _child_dpu(self, dpu: Dpu) -> Self:
        return type(self)(self._emulator, [dpu.rank], dpu, owner=self._owner)

    def _child_rank(self, rank: Rank) -> Self:
        return type(self)(self._emulator, [rank], owner=self._owner)

    def iter_dpus(self) -> Iterator[Self]:
        """Single-DPU sets in DPU_FOREACH order."""
        self.check_owned()
        if self._dpu is not None:
            yield self
            return
        for d in self.dpu_list:
            yield self._child_dpu(d)

    def iter_ranks(self) -> Iterator[Self]:
        """Single-rank sets in DPU_RANK_FOREACH order."""
        self.check_owned()
        if self._dpu is not None:
            yield self
            return
        for r in self._ranks:
            yield self._child_rank(r)

    def programs(self) -> list[DpuProgram | None]:
        """Program loaded on each enabled DPU."""
        self.check_owned()
        return [d.program for d in self.dpu_list]

    def __repr__(self) -> str:
        freed = " (freed)" if self._owner.freed else ""
        if self._dpu is not None:
            return f"<DpuSet DPU {self._dpu.name}{freed}>"
        ranks = [r.index for r in self._ranks]
        return f"<DpuSet {len(self.dpu_list)} DPUs in ranks {ranks}{freed}>"
