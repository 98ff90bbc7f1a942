"""The performance counter (``perfcounter.h``, sdk-reference.md §5.9): cycles or instructions of
the DPU, read with 4 bits of imprecision (values are multiples of 16)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import timing
from ._base import TaskletBase
from ._runner import DpuFault

COUNT_SAME = 0
COUNT_CYCLES = 1
COUNT_INSTRUCTIONS = 2
COUNT_NOTHING = 3
COUNT_DISABLE_BOTH = 6
COUNT_ENABLE_BOTH = 7
#: software fault of a v1B-only counter configuration on v1A (dpufault.h)
FAULT_PERFCOUNTER_CONFIG = 9
#: ``BIT_IMPRECISION``: the register counts in units of 16
PERFCOUNTER_IMPRECISION_BITS = 4


@dataclass
class _Counter:
    mode: int  # COUNT_CYCLES, COUNT_INSTRUCTIONS or COUNT_ENABLE_BOTH
    cycles_origin_ps: int
    instructions_origin: int
    frozen_cycles: int | None = None
    frozen_instructions: int | None = None


def _selected(mode: int, cycles: int, instructions: int) -> int:
    """What ``perfcounter_get`` returns in ``mode``."""
    return instructions if mode == COUNT_INSTRUCTIONS else cycles


class PerfcounterMixin(TaskletBase):
    """``perfcounter_config`` / ``perfcounter_get`` / ``perfcounter_get_both``."""

    def _counter(self) -> _Counter:
        c: _Counter | None = self.dpu.boot_state.get("perfcounter")
        if c is None:  # never configured: aiopim counts cycles from the boot
            c = _Counter(COUNT_CYCLES, self.dpu.boot_time, 0)
            self.dpu.boot_state["perfcounter"] = c
        return c

    def _raw(self, c: _Counter) -> tuple[int, int]:
        if c.frozen_cycles is not None:
            cycles = c.frozen_cycles
        else:
            elapsed = self.dpu.kernel.now - c.cycles_origin_ps
            cycles = math.floor(elapsed / self.dpu.chip.cycle_ps + 1e-9)
        if c.frozen_instructions is not None:
            instructions = c.frozen_instructions
        else:
            instructions = self.runner.pipeline.instructions - c.instructions_origin
        mask = ~((1 << PERFCOUNTER_IMPRECISION_BITS) - 1)
        return cycles & mask, instructions & mask

    async def perfcounter_get(self) -> int:
        """``perfcounter_get``: the configured count (a multiple of 16)."""
        self._pending += timing.PERFCOUNTER_GET_INSTRUCTIONS
        await self.flush()
        c = self._counter()
        return _selected(c.mode, *self._raw(c))

    async def perfcounter_config(self, config: int, reset_value: bool) -> int:
        """``perfcounter_config``: count cycles, instructions or nothing from now (resetting
        the value if ``reset_value``); returns the value read before the change. The v1B-only
        ``COUNT_ENABLE_BOTH`` / ``COUNT_DISABLE_BOTH`` fault (9) on v1A."""
        self._pending += timing.PERFCOUNTER_CONFIG_INSTRUCTIONS
        await self.flush()
        config = int(config)
        if config in (COUNT_DISABLE_BOTH, COUNT_ENABLE_BOTH) and self.dpu.chip.name == "v1A":
            raise DpuFault(
                f"perfcounter configuration {config} needs a v1B DPU", FAULT_PERFCOUNTER_CONFIG
            )
        if config not in (
            COUNT_SAME,
            COUNT_CYCLES,
            COUNT_INSTRUCTIONS,
            COUNT_NOTHING,
            COUNT_DISABLE_BOTH,
            COUNT_ENABLE_BOTH,
        ):
            raise ValueError(f"unknown perfcounter configuration {config}")
        c = self._counter()
        cycles, instructions = self._raw(c)
        previous = _selected(c.mode, cycles, instructions)
        now, issued = self.dpu.kernel.now, self.runner.pipeline.instructions
        stop = config in (COUNT_NOTHING, COUNT_DISABLE_BOTH) or (
            config == COUNT_SAME and c.frozen_cycles is not None
        )
        mode = c.mode if config in (COUNT_SAME, COUNT_NOTHING, COUNT_DISABLE_BOTH) else config
        if reset_value:
            cycles = instructions = 0
        new = _Counter(mode, now, issued)
        if stop:
            new.frozen_cycles, new.frozen_instructions = cycles, instructions
        else:
            new.cycles_origin_ps = now - self.dpu.chip.cycles_to_ps(cycles)
            new.instructions_origin = issued - instructions
        self.dpu.boot_state["perfcounter"] = new
        return previous

    async def perfcounter_get_both(self, reset_value: bool = False) -> tuple[int, int]:
        """``perfcounter_get_both`` (v1B): ``(cycles, instructions)``; fault 9 on v1A."""
        if self.dpu.chip.name == "v1A":
            raise DpuFault("perfcounter_get_both needs a v1B DPU", FAULT_PERFCOUNTER_CONFIG)
        self._pending += timing.PERFCOUNTER_GET_INSTRUCTIONS
        await self.flush()
        c = self._counter()
        both = self._raw(c)
        if reset_value:
            self.dpu.boot_state["perfcounter"] = _Counter(
                c.mode, self.dpu.kernel.now, self.runner.pipeline.instructions
            )
        return both
