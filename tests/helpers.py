"""Small DPU programs and helpers shared by the tests."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import runpy
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import aiopim
from aiopim import timing

V1B_CYCLE_PS = timing.V1B.cycles_to_ps(1)  # 2500 ps at 400 MHz


def spin_program(
    cycles_per_tasklet: int = 0, nr_tasklets: int = 1, name: str = "spin"
) -> aiopim.Program:
    """Each tasklet issues ``instructions`` (WRAM buffer ``x`` of 16 bytes is host-visible)."""
    prog = aiopim.Program(name, nr_tasklets=nr_tasklets)
    prog.host("x", np.uint32, 4)
    prog.host("instructions", np.uint32, 1, init=[cycles_per_tasklet])
    prog.mram("m", np.uint8, 4096)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        n = int(t.view(prog.address_of("instructions"), np.uint32, 1)[0])
        t.compute(n)

    return prog


def fault_program() -> aiopim.Program:
    """Two tasklets compute 100 instructions; tasklet 1 then faults with code 3."""
    prog = aiopim.Program("faulty", nr_tasklets=2)
    prog.host("x", np.uint32, 2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(100)
        await t.flush()
        if t.me() == 1:
            t.fault(3, "assert failed")

    return prog


def run_time_ps(instructions: int) -> int:
    """Virtual run time of one tasklet issuing ``instructions`` alone on a v1B DPU."""
    return instructions * timing.REVOLVER_CYCLES * V1B_CYCLE_PS


def emu(**kw: Any) -> aiopim.Emulator:
    cfg = aiopim.MachineConfig(
        nr_ranks=kw.pop("ranks", 4), nr_dpus_per_rank=kw.pop("dpus", 4), chip=kw.pop("chip", "v1B")
    )
    return aiopim.Emulator(cfg, **kw)


class WallClockExpired(KeyboardInterrupt):
    """A test's host program ran past its wall-clock budget (a hang, not a slow run).

    A ``KeyboardInterrupt`` so that neither event loop swallows it inside a callback."""


@contextlib.contextmanager
def wall_clock_limit(seconds: float) -> Iterator[None]:
    """Fail with an AssertionError instead of hanging when the body runs longer than
    ``seconds`` of real time (the alarm repeats until the body gives up)."""

    body = sys._getframe(2)  # the frame running the ``with`` block (past contextlib's)

    def expire(signum: int, frame: Any) -> None:
        while frame is not None:  # only inside the body: never in pytest's own code
            if frame is body:
                raise WallClockExpired(f"still running after {seconds} s of wall time: a hang")
            frame = frame.f_back

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, seconds)
    try:
        yield
    except WallClockExpired as exc:
        raise AssertionError(str(exc)) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


ROOT = Path(__file__).resolve().parent.parent


def script_outputs(script: Path, *args: str) -> tuple[str, str]:
    """What ``python script --backend asyncio args`` prints, run as a process of its own as a
    user runs it, and what it prints with ``--backend trio``, run in this process
    (:func:`run_script`). Either failing fails."""
    proc = subprocess.run(
        [sys.executable, str(script), "--backend", "asyncio", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, run_script(script, "--backend", "trio", *args)


def run_script(script: Path, *args: str) -> str:
    """``python script args`` run in this process (as ``__main__``, as Python runs a script):
    what it prints. A non-zero exit fails. It spares the second of a pair of runs the start of
    a Python process and the import of aiopim, about a second of CPU each."""
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [str(script), *args]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        assert exc.code in (0, None), f"{script.name} {' '.join(args)} exited with {exc.code}"
    finally:
        sys.argv = argv
    return out.getvalue()


def load_module(path: Path, name: str) -> ModuleType:
    """The module in file ``path``, imported as ``name`` (a name of its own: two files called
    ``report.py`` do not shadow each other) and registered, so that its dataclasses find it."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
