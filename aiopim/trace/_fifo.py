"""How WRAM FIFO events are drawn: push/flush slices, retry instants, fill counters per DPU.

The host side of the FIFOs (``aiopim._ops._fifo``) records ``fifo_push``, ``fifo_retry``,
``fifo_full`` and ``fifo_flush`` (with the virtual time the push or flush algorithm started) and
``fifo_ptrs`` (the pointer pairs the host read from WRAM, or holds after its own writes). They
go on a ``FIFO <name>`` track of the rank, next to its jobs; the pointers become one
``<name> fill <dpu>`` counter per DPU.
"""

from __future__ import annotations

from typing import Any

from ._timeline import TRACK_DPUS, Timeline, dpu_name, rank_pid, register_event_kind

#: FIFO tracks sort with the rank's "DPUs" track, after it ("DPUs" < "FIFO ...")
TRACK_FIFO = TRACK_DPUS
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF


def fifo_track(fifo: str) -> str:
    """Name of the rank track of FIFO ``fifo``."""
    return f"FIFO {fifo}"


def fill_counter(fifo: str, rank: int, dpu: int) -> str:
    """Name of the fill counter of FIFO ``fifo`` on DPU ``rank``.``dpu``."""
    return f"{fifo} fill {dpu_name(rank, dpu)}"


def _push(tl: Timeline, t: int, f: dict[str, Any]) -> None:
    retries = int(f["retries"])
    name = "push" if not retries else f"push ({retries} {'retry' if retries == 1 else 'retries'})"
    tl.add_slice(
        rank_pid(f["rank"]),
        fifo_track(f["fifo"]),
        name,
        "fifo_push",
        f["start"],
        t,
        order=TRACK_FIFO,
        args={"dpus": f["dpus"], "retries": retries},
    )


def _retry(tl: Timeline, t: int, f: dict[str, Any]) -> None:
    tl.add_instant(
        rank_pid(f["rank"]),
        fifo_track(f["fifo"]),
        "retry",
        "fifo_retry",
        t,
        order=TRACK_FIFO,
        args={"retry": f["retry"], "full": f["full"]},
    )


def _full(tl: Timeline, t: int, f: dict[str, Any]) -> None:
    tl.add_slice(
        rank_pid(f["rank"]),
        fifo_track(f["fifo"]),
        "push failed: DPU_ERR_WRAM_FIFO_FULL",
        "fifo_full",
        f["start"],
        t,
        order=TRACK_FIFO,
        args={"full_dpus": list(f["dpus"]), "retries": f["retries"]},
    )


def _flush(tl: Timeline, t: int, f: dict[str, Any]) -> None:
    n = int(f["elements"])
    tl.add_slice(
        rank_pid(f["rank"]),
        fifo_track(f["fifo"]),
        f"flush ({n} element{'' if n == 1 else 's'})",
        "fifo_flush",
        f["start"],
        t,
        order=TRACK_FIFO,
        args={"dpus": f["dpus"], "elements": n},
    )


def _ptrs(tl: Timeline, t: int, f: dict[str, Any]) -> None:
    rank = f["rank"]
    pid = rank_pid(rank)
    for dpu, rd, wr in zip(f["dpus"], f["rd"], f["wr"], strict=True):
        name = fill_counter(f["fifo"], rank, dpu)
        fill = (wr - rd) & _MASK64
        samples = tl.counters.get((pid, name))
        if samples and samples[-1][1] == fill:
            continue
        tl.add_counter(pid, name, t, fill)


for _kind, _fn in (
    ("fifo_push", _push),
    ("fifo_retry", _retry),
    ("fifo_full", _full),
    ("fifo_flush", _flush),
    ("fifo_ptrs", _ptrs),
):
    register_event_kind(_kind, _fn)
