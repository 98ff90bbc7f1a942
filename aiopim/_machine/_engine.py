"""The DPU-execution interface: how a loaded program runs on a DPU.

Two engines implement it: Python kernels (:mod:`aiopim.dpu`, tasklets as kernel coroutines)
and the instruction-set interpreter of DPU binaries. Ranks, jobs and the host API only see a
:class:`~aiopim._machine._dpu.Dpu` that is running or not; the engine behind it is chosen by
the loaded program (``DpuProgram.boot`` asks the DPU for a runner of its engine with
:meth:`Dpu.runner_of <aiopim._machine._dpu.Dpu.runner_of>`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._memory import Bytes


class DpuRunner(ABC):
    """One engine's execution state on one DPU, kept across runs (counters, DMA engine).

    The runner starts threads when its program boots, ends the run with
    :meth:`Dpu.run_ended` when no thread is left, and stops the DPU in fault with
    :meth:`Dpu.stop_in_fault`.
    """

    #: whether :meth:`wram_written` does anything (host writes may skip calling it if not)
    watches_wram = False

    def __init__(self, dpu: Dpu) -> None:
        self.dpu = dpu

    @abstractmethod
    def live_threads(self) -> int:
        """Threads (tasklets) of the current run that have not finished."""

    @abstractmethod
    def halt(self) -> None:
        """Stop every thread at once (the run ended, or the DPU faulted)."""

    def wram_written(self, start: int, length: int) -> None:  # noqa: B027
        """The host (or a FIFO operation) wrote WRAM ``[start, start+length)`` during a run."""

    def blocked(self) -> list[str]:
        """What the threads of a run are waiting on (for deadlock reports)."""
        return []

    def location(self) -> list[tuple[int, str]]:
        """``(tasklet, where)`` for each live thread of the run, ``where`` as ``at ...`` (for
        the reports of Ctrl-C and time limits); empty when the engine cannot tell."""
        return []

    def needs_synced_events(self) -> bool:
        """Whether a host event that writes this DPU's WRAM must bring the running DPUs to its
        time (the host writes itself), rather than schedule the write with :meth:`write_at`."""
        return False

    def write_at(
        self, time_ps: int, address: int, data: Bytes, source: int | None = None
    ) -> int | None:
        """Schedule a host write of ``data`` (read when it is made) to WRAM ``address`` at
        ``time_ps`` into the run; its number for :meth:`wrote`, or None when this engine does
        not take such writes (the host then writes at that time itself). ``source``: the
        address of ``data``'s first byte, if the caller knows it."""
        return None

    def wrote(self, write: int) -> bool:
        """Whether scheduled write ``write`` was made; if not, the host makes it now and it
        counts as made."""
        return False
