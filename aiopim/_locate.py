"""Where the DPUs still running are: the reports of a Ctrl-C and of a time limit.

Each engine says where its threads are (``DpuRunner.location``); a DPU binary's threads are
read here from the interpreter's state (PC, function, instruction). DPUs at the same place
share one line, so a rank running in lockstep is one line.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ._dpulist import format_dpu_list, format_numbers

if TYPE_CHECKING:
    from ._machine._dpu import Dpu
    from ._machine._machine import Machine

#: lines of a report at most (DPUs at more places are counted, not listed)
MAX_PLACES = 16


def running_dpus(machine: Machine) -> list[str]:
    """One line per place where DPUs still run: ``DPU 0.0.0: thread 0 at PC 2 (main+2): ...``,
    or ``DPUs 0.0.0, 0.0.1 …: ...`` for DPUs at the same place (the first few named)."""
    places: dict[str, list[Dpu]] = {}
    for rank in machine.ranks():
        for dpu in rank.dpus:
            if dpu.running:
                places.setdefault(dpu_location(dpu), []).append(dpu)
    lines = []
    for where, dpus in list(places.items())[:MAX_PLACES]:
        names = format_dpu_list(dpus, limit=4)
        lines.append(f"DPU{'s' if len(dpus) > 1 else ''} {names}: {where}")
    rest = list(places.values())[MAX_PLACES:]
    if rest:
        n = sum(len(dpus) for dpus in rest)
        lines.append(f"… and {n} more DPU{'s' if n > 1 else ''} at {len(rest)} other places")
    return lines


def dpu_location(dpu: Dpu) -> str:
    """Where the threads of a running DPU are: ``tasklets 0-2, 5 at ...; tasklet 3 at ...``
    (``thread`` for a binary's threads)."""
    runner = dpu.runner
    if runner is None:
        return "booting"
    isa = sys.modules.get("aiopim.isa._runner")  # no binary runs unless it was imported
    if isa is not None and isinstance(runner, isa.IsaRunner):
        noun, threads = "thread", _binary_location(runner, isa)
    else:
        noun, threads = "tasklet", runner.location()
    if not threads:
        n = runner.live_threads()
        return f"{n} {noun}{'s' if n != 1 else ''} running" if n else "no thread running"
    places: dict[str, list[int]] = {}
    for t, where in threads:
        places.setdefault(where, []).append(t)
    return "; ".join(f"{format_numbers(noun, ts)} {where}" for where, ts in places.items())


def _binary_location(runner: Any, isa: Any) -> list[tuple[int, str]]:
    """``(thread, at PC N (function+offset): instruction)`` for each running thread of a DPU
    binary (its state as of the interpreter's last step)."""
    program = runner.program
    if not runner.active or program is None:
        return []
    pc_col, run_col = _thread_columns()
    out = []
    for t, row in enumerate(runner.th):
        if not row[run_col]:
            continue
        pc = int(row[pc_col])
        func = isa.enclosing_function(program, pc)
        where = f" ({func})" if func is not None else ""
        out.append((t, f"at PC {pc}{where}: {isa.describe_instruction(program, pc)}"))
    return out


def _thread_columns() -> tuple[int, int]:
    """The columns of an interpreter thread row holding its PC and its run state (0: stopped)."""
    from .isa import _layout

    return _layout.T_PC, _layout.T_RUN
