"""When a run ends: the host returns, Ctrl-C, or the time limit — never a hang.

A run ends at the instant the host program returns, whatever its DPUs are doing (on hardware
the host process exits and frees its ranks). Ctrl-C stops a host that waits for DPUs that
never stop, with ``KeyboardInterrupt`` noting where each DPU was; ``time_limit`` stops a run
that would take more virtual time with :class:`aiopim.TimeLimitError` naming the DPUs still
running. Each test is bounded in wall time, so a regression fails instead of hanging.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import wall_clock_limit

import aiopim
from aiopim import timing
from aiopim.cli import EXIT_FAILED, EXIT_INTERRUPTED
from aiopim.cli import main as cli_main
from aiopim.elf import load_elf
from aiopim.isa import assemble

#: a DPU binary whose thread 0 jumps to itself forever
FOREVER_S = """\
        .set NR_TASKLETS, 1
        .text
        .globl __bootstrap
__bootstrap:
        jump __bootstrap
"""

#: a DPU binary counting down from 2,000,000: 2,000,002 instructions, one every 11 cycles
#: (55 ms at 400 MHz)
COUNTDOWN_S = """\
        .set NR_TASKLETS, 1
        .text
        .globl __bootstrap
__bootstrap:
        move r0, 2000000
__loop:
        add r0, r0, -1, nz, __loop
__end:
        stop true, __end
"""
COUNTDOWN_PS = 2_000_002 * timing.REVOLVER_CYCLES * timing.V1B.cycles_to_ps(1)

MS = 10**9  # picoseconds
MACHINE = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=4)


def python_forever() -> aiopim.Program:
    """A Python kernel whose two tasklets compute forever."""
    prog = aiopim.Program("forever", nr_tasklets=2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        while True:
            t.compute(100)
            await t.flush()  # the line the reports name

    return prog


_lines, _first = inspect.getsourcelines(python_forever)
FOREVER_LINE = _first + next(i for i, line in enumerate(_lines) if "await t.flush()" in line)


def forever(engine: str) -> aiopim.DpuProgram:
    """A DPU program that never stops, on ``engine`` ("binary" or "python")."""
    return load_elf(assemble(FOREVER_S), name="forever") if engine == "binary" else python_forever()


#: where a DPU running ``forever(engine)`` is, as the reports say it
FOREVER_AT = {
    "binary": "thread 0 at PC 0 (__bootstrap): jump __bootstrap",
    "python": f"tasklets 0-1 at test_run_end.py:{FOREVER_LINE} in main, waiting in flush",
}


@pytest.fixture(params=["binary", "python"])
def engine(request: pytest.FixtureRequest) -> str:
    """The DPU engine running the program."""
    return str(request.param)


@pytest.fixture
def sigint_default() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt during the test, as in a plain ``python prog.py``."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


async def _launch(program: aiopim.DpuProgram, wait: bool) -> aiopim.DpuSet:
    dpus = await aiopim.DpuSet.alloc(4)
    await dpus.load(program)
    await dpus.launch(wait=wait)
    return dpus


def _ctrl_c_at(ps: int) -> None:
    """Press Ctrl-C while the kernel runs its event at ``ps``."""
    kernel = aiopim.current_emulator().kernel
    kernel.call_at(ps, lambda _: os.kill(os.getpid(), signal.SIGINT))


# --- the host returns ----------------------------------------------------------------------------
def test_the_run_ends_when_the_host_returns_with_dpus_running_forever(
    backend: str, engine: str
) -> None:
    async def main() -> int:
        await _launch(forever(engine), wait=False)
        await anyio.sleep(1e-3)
        return aiopim.current_emulator().now_ps

    emu = aiopim.Emulator(MACHINE)
    with wall_clock_limit(30):
        returned_at = emu.run(main, backend=backend)
    assert emu.now_ps == returned_at
    assert all(d.running for d in emu.rank(0).dpus)  # stopped where they were


def test_a_finite_binary_is_not_run_to_its_end_after_the_host_returns(backend: str) -> None:
    async def main() -> int:
        await _launch(load_elf(assemble(COUNTDOWN_S)), wait=False)
        await anyio.sleep(1e-3)
        return aiopim.current_emulator().now_ps

    emu = aiopim.Emulator(MACHINE)
    with wall_clock_limit(60):
        returned_at = emu.run(main, backend=backend)
    assert emu.now_ps == returned_at < COUNTDOWN_PS  # 1 ms, not 55 ms
    assert all(d.running for d in emu.rank(0).dpus)


def test_the_same_emulator_runs_its_dpus_on_in_its_next_run(backend: str) -> None:
    async def first() -> None:
        await _launch(load_elf(assemble(COUNTDOWN_S)), wait=False)

    emu = aiopim.Emulator(MACHINE)
    with wall_clock_limit(60):
        emu.run(first, backend=backend)
        emu.run(anyio.sleep, 0.1, backend=backend)
    assert [d.last_run_ps for d in emu.rank(0).dpus if not d.running] == [COUNTDOWN_PS] * 4


# --- Ctrl-C --------------------------------------------------------------------------------------
@pytest.mark.usefixtures("sigint_default")
def test_ctrl_c_stops_a_host_waiting_for_dpus_that_never_stop(backend: str, engine: str) -> None:
    async def main() -> None:
        dpus = await _launch(forever(engine), wait=False)
        _ctrl_c_at(aiopim.current_emulator().now_ps + 2 * MS)
        await dpus.sync()

    with wall_clock_limit(30), pytest.raises(KeyboardInterrupt) as caught:
        aiopim.run(main, backend=backend, machine=MACHINE)
    (note,) = caught.value.__notes__
    head, *places = note.split("\n  ")
    assert head.startswith("aiopim: interrupted at t=0.002") and "DPUs still running" in head
    assert places == [f"DPUs 0.0.0, 0.0.1, 0.0.2, 0.0.3: {FOREVER_AT[engine]}"]


@pytest.mark.usefixtures("sigint_default")
def test_ctrl_c_ends_the_run_even_if_clean_up_waits_for_the_dpus(backend: str) -> None:
    """``DpuSet``'s ``async with`` frees the set on the way out, and freeing waits for the
    DPUs to stop: after Ctrl-C it gets KeyboardInterrupt instead of waiting forever."""

    async def main() -> None:
        async with await aiopim.DpuSet.alloc(4) as dpus:
            await dpus.load(forever("binary"))
            _ctrl_c_at(aiopim.current_emulator().now_ps + MS)
            await dpus.launch()

    with wall_clock_limit(30), pytest.raises(KeyboardInterrupt) as caught:
        aiopim.run(main, backend=backend, machine=MACHINE)
    assert "DPUs still running" in caught.value.__notes__[-1]


@pytest.mark.usefixtures("sigint_default")
def test_the_run_restores_the_ctrl_c_handler(backend: str) -> None:
    async def main() -> None:
        await anyio.sleep(1e-3)

    aiopim.run(main, backend=backend)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# --- the time limit ------------------------------------------------------------------------------
def test_the_time_limit_stops_a_run_and_names_the_dpus_still_running(
    backend: str, engine: str
) -> None:
    async def main() -> None:
        dpus = await _launch(forever(engine), wait=False)
        await dpus.sync()

    emu = aiopim.Emulator(MACHINE)
    with wall_clock_limit(30), pytest.raises(aiopim.TimeLimitError) as caught:
        emu.run(main, backend=backend, time_limit=3e-3)
    err = caught.value
    assert err.limit_ps == err.now_ps == emu.now_ps == 3 * MS
    assert err.running == [f"DPUs 0.0.0, 0.0.1, 0.0.2, 0.0.3: {FOREVER_AT[engine]}"]
    assert err.blocked == ["host task waiting for SYNC job(s) on rank(s) [0]"]
    assert "time limit of 0.003000000s of virtual time reached" in str(err)
    assert "give the run more virtual time (time_limit=)" in str(err)


def test_the_time_limit_stops_host_sleeps_and_clean_ups(backend: str) -> None:
    cleaned: list[BaseException] = []

    async def main() -> None:
        try:
            async with await aiopim.DpuSet.alloc(4) as dpus:
                await dpus.load(forever("binary"))
                await dpus.launch(wait=False)
                await anyio.sleep(1)
        except BaseException as exc:
            cleaned.append(exc)  # the set's free got the error, not a machine that never stops
            raise

    emu = aiopim.Emulator(MACHINE)
    with wall_clock_limit(30), pytest.raises(aiopim.TimeLimitError):
        emu.run(main, backend=backend, time_limit=0.05)
    assert emu.now_ps == 50 * MS
    assert len(cleaned) == 1  # cancelled with the host program


def test_a_run_within_its_time_limit_ends_normally(backend: str) -> None:
    async def main() -> int:
        dpus = await _launch(load_elf(assemble(COUNTDOWN_S)), wait=True)
        return dpus.dpu_list[0].last_run_ps

    emu = aiopim.Emulator(MACHINE)
    assert emu.run(main, backend=backend, time_limit=0.1) == COUNTDOWN_PS
    # the budget counts from the start of each run
    start = emu.now_ps
    with pytest.raises(aiopim.TimeLimitError) as caught:
        emu.run(anyio.sleep, 1, backend=backend, time_limit=0.1)
    assert caught.value.now_ps == start + 100 * MS


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_a_time_limit_must_be_a_positive_number_of_seconds(bad: float) -> None:
    with pytest.raises(ValueError, match="time_limit must be a positive number of seconds"):
        aiopim.run(anyio.sleep, 0, time_limit=bad)


@pytest.mark.parametrize("bad", ["1", True])
def test_a_time_limit_must_be_a_number(bad: Any) -> None:
    with pytest.raises(TypeError, match="time_limit must be a number of seconds"):
        aiopim.run(anyio.sleep, 0, time_limit=bad)


# --- the command line ----------------------------------------------------------------------------
HOST_MODULE = """\
import inspect
import os
import signal

import aiopim
from aiopim.elf import load_elf
from aiopim.isa import assemble

FOREVER = load_elf(assemble('''{forever}'''), name="forever")


async def runaway():
    dpus = await aiopim.DpuSet.alloc(2)
    await dpus.load(FOREVER)
    await dpus.launch()


async def interrupted():
    kernel = aiopim.current_emulator().kernel
    kernel.call_at(kernel.now + 10**9, lambda _: os.kill(os.getpid(), signal.SIGINT))
    await runaway()
"""


@pytest.fixture
def host_module(tmp_path: Path) -> Iterator[str]:
    """A module on sys.path whose host programs never end on their own."""
    name = f"runend_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(HOST_MODULE.format(forever=FOREVER_S))
    sys.path.insert(0, str(tmp_path))
    try:
        yield name
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_record_time_limit_stops_a_runaway_program(
    host_module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out.toml")
    argv = ["record", f"{host_module}:runaway", out, "--ranks", "1", "--time-limit", "0.002"]
    with wall_clock_limit(30):
        assert cli_main(argv) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "aiopim record: time limit of 0.002000000s of virtual time reached" in err
    assert "thread 0 at PC 0 (__bootstrap): jump __bootstrap" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", ["0", "-2", "soon", "nan"])
def test_a_bad_time_limit_option_is_an_input_error(
    host_module: str, tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out.toml")
    with pytest.raises(SystemExit) as exited:
        cli_main(["record", f"{host_module}:runaway", out, "--time-limit", value])
    assert exited.value.code == 2
    assert "give a positive number of seconds of virtual time" in capsys.readouterr().err


@pytest.mark.usefixtures("sigint_default")
def test_ctrl_c_in_a_command_says_where_the_dpus_were(
    host_module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out.toml")
    with wall_clock_limit(30):
        status = cli_main(["record", f"{host_module}:interrupted", out, "--ranks", "1"])
    assert status == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.startswith("aiopim record: interrupted\naiopim: interrupted at t=0.001")
    assert "thread 0 at PC 0 (__bootstrap): jump __bootstrap" in err
