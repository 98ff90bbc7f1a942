"""One emulated DPU: memories and run state. What runs on it is an engine's :class:`DpuRunner`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .. import timing
from .._runtime._kernel import Kernel
from ._engine import DpuRunner
from ._memory import Bytes, MramBank

if TYPE_CHECKING:
    from ._program import DpuProgram
    from ._rank import Rank

R = TypeVar("R", bound=DpuRunner)


@dataclass(frozen=True)
class FaultInfo:
    """Why and where a DPU stopped in fault (the host itself only sees DPU_ERR_DPU_FAULT).

    A binary's ``reason`` starts with where it happened (``DPU 0.0.0 thread 0 at PC 12
    (main+3): ...; instruction ...``); a Python kernel's says what happened, and ``where`` where
    (``DPU 0.0.0 tasklet 1 at kernel.py:11 in main``).
    """

    reason: str
    code: int | None
    tasklet: int | None
    time_ps: int
    exception: BaseException | None = None
    where: str = ""

    def describe(self) -> str:
        """The whole story in one line: where, the fault code if any, the reason."""
        if not self.where:
            return self.reason
        code = "" if self.code is None else f"fault {self.code}: "
        return f"{self.where}: {code}{self.reason}"


class Dpu:
    """Memories and run state of one DPU."""

    def __init__(self, rank: Rank, index: int, chip: timing.ChipProfile, kernel: Kernel) -> None:
        self.rank = rank
        self.index = index
        self.ci, self.member = divmod(index, 8)
        self.chip = chip
        self.kernel = kernel
        self.enabled = True
        self.actor = ((rank.index + 1) << 16) | ((index + 1) << 5)
        # host memory is committed only where these memories are written
        self.wram: Bytes = rank.wram_memory.rows[index]
        self.iram: Bytes = rank.iram_memory.rows[index]
        self.mram = MramBank(chip.mram_size)
        self.program: DpuProgram | None = None
        self.running = False
        self.fault: FaultInfo | None = None
        #: the engine state of the last program run here (see :meth:`runner_of`)
        self.runner: DpuRunner | None = None
        #: runtime state that persists across boots (heap pointer, ...); reset by load
        self.persistent: dict[str, Any] = {}
        #: runtime state reset at every boot (atomic bits, ...)
        self.boot_state: dict[str, Any] = {}
        self.boot_time = 0
        self.last_run_ps = 0
        self.on_stop: Callable[[Dpu], None] | None = None

    @property
    def dpu_id(self) -> int:
        """The id printed by ``dpu_log_read``: rank_id << 16 | ci << 8 | member."""
        return (self.rank.index << 16) | (self.ci << 8) | self.member

    @property
    def name(self) -> str:
        """``rank.ci.member`` as the SDK prints it."""
        return f"{self.rank.index}.{self.ci}.{self.member}"

    def reset_memories(self) -> None:
        """Zero every memory (allocation reset)."""
        self.clear_wram()
        self.rank.iram_memory.clear(self.index)
        self.mram.clear()
        self.persistent.clear()

    def clear_wram(self) -> None:
        """Zero WRAM (without committing host memory to blocks that are zero already)."""
        self.rank.wram_memory.clear(self.index)

    # -- running ---------------------------------------
    def runner_of(self, engine: type[R]) -> R:
        """This DPU's runner for ``engine``, created on first use and kept across runs."""
        runner = self.runner
        if type(runner) is not engine:
            runner = self.runner = engine(self)
        return runner

    def boot(self) -> None:
        """Start the loaded program at the current virtual time."""
        program = self.program
        assert program is not None
        self.running = True
        self.fault = None
        self.boot_state = {}
        self.boot_time = self.kernel.now
        try:
            program.boot(self)
        except BaseException:
            self.running = False
            if self.runner is not None:
                self.runner.halt()
            raise
        if self.running and (self.runner is None or self.runner.live_threads() == 0):
            self.run_ended()

    def run_ended(self) -> None:
        """Every thread has finished: the DPU stops (called by its runner)."""
        if self.running:
            self._stop()

    def stop_in_fault(
        self,
        reason: str,
        code: int | None,
        tasklet: int | None,
        exc: BaseException | None = None,
        where: str = "",
    ) -> None:
        """Stop every thread; the DPU is in fault (see :class:`FaultInfo`)."""
        if not self.running:
            return
        self.fault = FaultInfo(reason, code, tasklet, self.kernel.now, exc, where)
        self._stop()

    def _stop(self) -> None:
        self.running = False
        self.last_run_ps = self.kernel.now - self.boot_time
        if self.runner is not None:
            self.runner.halt()
        if self.on_stop is not None:
            self.on_stop(self)

    def runner_wrote(self, write: int) -> bool:
        """Whether the runner made host write ``write`` it scheduled (``DpuRunner.wrote``); if
        not, the caller makes it now."""
        return self.runner is not None and self.runner.wrote(write)

    def wram_written(self, start: int, length: int) -> None:
        """WRAM ``[start, start+length)`` changed from outside the DPU's threads."""
        if self.running and self.runner is not None:
            self.runner.wram_written(start, length)

    def blocked_tasklets(self) -> list[str]:
        """Descriptions of threads waiting forever (for deadlock reports)."""
        return self.runner.blocked() if self.runner is not None else []
