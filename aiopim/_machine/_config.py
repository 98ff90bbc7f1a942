"""Machine configuration and the SDK profile string."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from .. import timing
from .._errors import DpuError, DpuErrorCode

MAX_NR_DPUS_PER_RANK = 64
NR_THREADS_PER_RANK_MAX = 8

_CHIP_IDS = {"0x42": "v1B", "66": "v1B", "0x2": "v1A", "2": "v1A", "0x0": "v1A", "0": "v1A"}


@dataclass(frozen=True)
class MachineConfig:
    """The emulated system: ranks, DPUs per rank and chip version."""

    nr_ranks: int = 40
    nr_dpus_per_rank: int = 64
    chip: str = "v1B"

    def __post_init__(self) -> None:
        if self.chip not in timing.CHIPS:
            raise ValueError(f"chip must be one of {sorted(timing.CHIPS)}, not {self.chip!r}")
        if not 1 <= self.nr_dpus_per_rank <= MAX_NR_DPUS_PER_RANK:
            raise ValueError("nr_dpus_per_rank must be between 1 and 64")
        if self.nr_ranks < 1:
            raise ValueError("nr_ranks must be at least 1")

    @property
    def chip_profile(self) -> timing.ChipProfile:
        """Hardware characteristics of the chip."""
        return timing.CHIPS[self.chip]


@dataclass
class Profile:
    """Parsed ``key=value`` profile (only the keys that matter to an emulator are kept)."""

    nr_jobs_per_rank: int = 16
    nr_threads_per_rank: int = 1
    sg_xfer_enable: bool = False
    sg_xfer_max_blocks_per_dpu: int = 0
    disable_reset_on_alloc: bool = False
    disabled_mask: int = 0
    machine: dict[str, object] = field(default_factory=dict)
    unused: list[str] = field(default_factory=list)


def _bad(msg: str) -> DpuError:
    return DpuError(DpuErrorCode.DPU_ERR_INVALID_PROFILE, msg)


def _int(key: str, value: str) -> int:
    try:
        return int(value, 0)
    except ValueError:
        raise _bad(f"profile key {key!r} needs an integer, got {value!r}") from None


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise _bad(f"profile key {key!r} needs a boolean (true/false), got {value!r}")


def parse_profile(profile: str | None, *, use_environment: bool = True) -> Profile:
    """Parse ``$UPMEM_PROFILE_BASE``, ``profile`` and ``$UPMEM_PROFILE`` (later keys win)."""
    parts = []
    if use_environment:
        parts.append(os.environ.get("UPMEM_PROFILE_BASE", ""))
    parts.append(profile or "")
    if use_environment:
        parts.append(os.environ.get("UPMEM_PROFILE", ""))
    entries: dict[str, str] = {}
    for text in parts:
        for raw in text.replace("&", ",").split(","):
            item = raw.strip()
            if not item:
                continue
            if "=" not in item:
                raise _bad(f"profile entry {item!r} is not of the form key=value")
            key, value = item.split("=", 1)
            entries[key.strip()] = value.strip()
    p = Profile()
    for key, value in entries.items():
        if key == "backend":
            if value not in ("hw", "simulator", "cas", "model", "spi", "scenario", "aiopim", ""):
                raise _bad(f"unknown backend {value!r}")
            if value == "simulator":
                p.machine["nr_dpus_per_rank"] = 1
                p.machine.setdefault("nr_ranks", 64)
        elif key == "nrJobsPerRank":
            p.nr_jobs_per_rank = _int(key, value)
            if p.nr_jobs_per_rank < 2:
                raise _bad("nrJobsPerRank must be at least 2 (a synchronous call needs 2 slots)")
        elif key == "nrThreadsPerRank":
            p.nr_threads_per_rank = _int(key, value)
            if not 1 <= p.nr_threads_per_rank <= NR_THREADS_PER_RANK_MAX:
                raise _bad("nrThreadsPerRank must be between 1 and 8 (0 is unsupported)")
        elif key == "sgXferEnable":
            p.sg_xfer_enable = _bool(key, value)
        elif key == "sgXferMaxBlocksPerDpu":
            p.sg_xfer_max_blocks_per_dpu = _int(key, value)
        elif key == "disableResetOnAlloc":
            p.disable_reset_on_alloc = _bool(key, value)
        elif key == "disabledMask":
            p.disabled_mask = _int(key, value)
        elif key == "chipId":
            chip = _CHIP_IDS.get(value.lower())
            if chip is None:
                raise _bad(f"unknown chipId {value!r} (0x2: v1A, 0x42: v1B)")
            p.machine["chip"] = chip
        elif key == "chip":
            if value not in timing.CHIPS:
                raise _bad(f"chip must be v1A or v1B, got {value!r}")
            p.machine["chip"] = value
        elif key in ("nrRanks", "nrDpusPerRank", "nrDpusPerCi"):
            n = _int(key, value)
            name = {"nrRanks": "nr_ranks", "nrDpusPerRank": "nr_dpus_per_rank"}.get(key)
            if key == "nrDpusPerCi":
                name, n = "nr_dpus_per_rank", n * 8
            if name == "nr_ranks" and n < 1:
                raise _bad("nrRanks must be at least 1")
            if name == "nr_dpus_per_rank" and not 1 <= n <= MAX_NR_DPUS_PER_RANK:
                raise _bad("nrDpusPerRank must be between 1 and 64")
            assert name is not None
            p.machine[name] = n
        else:
            p.unused.append(key)
    if p.sg_xfer_max_blocks_per_dpu and not p.sg_xfer_enable:
        raise _bad("sgXferMaxBlocksPerDpu needs sgXferEnable=true")
    return p


def machine_from_profile(base: MachineConfig, profile: Profile) -> MachineConfig:
    """``base`` with the machine keys of ``profile`` applied."""
    if not profile.machine:
        return base
    try:
        return replace(base, **profile.machine)  # type: ignore[arg-type]
    except ValueError as exc:
        raise _bad(str(exc)) from None
