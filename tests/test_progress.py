"""The shared progress display: drawn on a terminal only, never on stdout, never in a trace."""

from __future__ import annotations

import argparse
import io
import re
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from helpers import emu, load_module, spin_program

import aiopim
from aiopim._progress import Progress, progress_enabled, virtual_time
from aiopim.cli import main as cli_main
from aiopim.scenario import load_scenario, parse_scenario, replay
from aiopim.sdk import DPU_ASYNCHRONOUS, dpu_alloc_ranks, dpu_launch, dpu_load, dpu_sync
from aiopim.trace import Timeline, chrome_trace

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def last_line(drawn: str) -> str:
    """The display's final state: its last redraw, without colours and cursor codes."""
    return ANSI.sub("", drawn).rstrip("\n").rpartition("\r")[2].strip()


# ================================================================================================
# the display
# ================================================================================================
def test_enabled_on_a_terminal_only_unless_asked() -> None:
    assert progress_enabled(None, FakeTerminal()) is True
    assert progress_enabled(None, io.StringIO()) is False
    assert progress_enabled(True, io.StringIO()) is True
    assert progress_enabled(False, FakeTerminal()) is False


def test_virtual_time_has_units() -> None:
    assert [virtual_time(ps) for ps in (0, 999, 2500, 3_000_000, 12_500_000_000, 2e12)] == [
        "0 s",
        "999 ps",
        "2.5 ns",
        "3 us",
        "12.5 ms",
        "2 s",
    ]


def test_draws_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    term = FakeTerminal()
    with Progress("replay t", total=4, unit="steps", stream=term) as bar:
        for done in range(1, 5):
            bar.update(done, virtual_time=virtual_time(done * 3_125_000_000))
    line = last_line(term.getvalue())
    assert re.fullmatch(r"replay t ━+ 4/4 steps virtual time 12.5 ms 0:00:00 0:00:00", line), line
    assert capsys.readouterr() == ("", "")  # nothing on stdout (nor on the real stderr)


def test_unknown_total_shows_no_count_nor_eta() -> None:
    term = FakeTerminal()
    with Progress("main", stream=term) as bar:
        bar.update(0, virtual_time="1 us", DPUs_running="64")
    line = last_line(term.getvalue())
    assert re.fullmatch(r"main ━+ virtual time 1 us, DPUs running 64 0:00:00", line), line


def test_a_narrow_terminal_cuts_the_description_not_the_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    term = FakeTerminal()
    name = "replay a-scenario-with-a-long-name.toml"
    with Progress(name, total=83, unit="steps", stream=term) as bar:
        bar.update(83, virtual_time="6.7 ms")
    line = last_line(term.getvalue())
    assert re.fullmatch(
        r"replay a-scenario-with-… ━+ 83/83 steps virtual time 6.7 ms 0:00:00 0:00:00", line
    ), line


def test_draws_nothing_off_a_terminal_or_when_disabled() -> None:
    plain, term = io.StringIO(), FakeTerminal()
    for stream, enabled in ((plain, None), (term, False)):
        with Progress("x", total=2, unit="runs", stream=stream, enabled=enabled) as bar:
            bar.update(2, failures="1")
    assert plain.getvalue() == term.getvalue() == ""


def test_output_redirected_to_a_file_stays_there(capsys: pytest.CaptureFixture[str]) -> None:
    term = FakeTerminal()
    with Progress("x", total=1, stream=term) as bar:
        print("row 1")
        bar.update(1)
    assert capsys.readouterr().out == "row 1\n"
    assert "row 1" not in term.getvalue()


def test_output_on_the_same_screen_is_printed_above_the_display(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, err = FakeTerminal(), FakeTerminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with Progress("x", total=2, unit="runs") as bar:
        print("row 1")
        bar.update(1)
        print("to stderr", file=sys.stderr)
        print("partial", end="")
        bar.update(2)
    assert sys.stdout is out and sys.stderr is err
    assert out.getvalue() == ""  # on the screen through the display's stream, in order
    lines = [line.rpartition("\r")[2] for line in ANSI.sub("", err.getvalue()).splitlines()]
    assert [line for line in lines if "━" not in line] == ["row 1", "to stderr", "partial"]
    assert re.fullmatch(r"x ━+ 2/2 runs +0:00:00 0:00:00", lines[-1]), lines


# ================================================================================================
# aiopim.run(progress=...)
# ================================================================================================
async def launch_and_look() -> dict[str, str]:
    """Launch 4 DPUs, read the display's fields while they run, then sync."""
    dpus = await dpu_alloc_ranks(1, "")
    await dpu_load(dpus, spin_program(1000))
    await dpu_launch(dpus, DPU_ASYNCHRONOUS)
    await anyio.sleep(20e-6)  # past the boot (10 us), within the run (27.5 us)
    fields = aiopim.current_emulator()._progress_fields()
    await dpu_sync(dpus)
    return fields


def test_run_progress_changes_nothing_in_the_run(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {}
    for progress in (False, True):
        term = FakeTerminal()
        monkeypatch.setattr(sys, "stderr", term)
        e = emu(ranks=1, dpus=4)
        fields = e.run(launch_and_look, backend=backend, progress=progress)
        runs[progress] = (chrome_trace(Timeline.from_emulator(e)), e.now_ps, fields, term)
    (trace_off, end_off, fields_off, term_off), (trace_on, end_on, fields_on, term_on) = (
        runs[False],
        runs[True],
    )
    assert trace_on == trace_off and end_on == end_off
    assert fields_on == fields_off
    assert fields_on["DPUs_running"] == "4"
    assert term_off.getvalue() == ""
    line = last_line(term_on.getvalue())
    assert re.fullmatch(
        rf"launch_and_look ━+ virtual time {virtual_time(end_on)}, DPUs running 0 0:00:0\d", line
    ), line
    assert capsys.readouterr().out == ""


def test_run_progress_none_follows_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    for stream, drawn in ((io.StringIO(), False), (FakeTerminal(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        e = emu(ranks=1, dpus=1)
        e.run(launch_and_look, progress=None)
        assert ("virtual time" in stream.getvalue()) is drawn
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    aiopim.run(launch_and_look)  # scripts opt in: off by default
    assert term.getvalue() == ""


# ================================================================================================
# the commands
# ================================================================================================
MINIMAL = """\
[scenario]
name = "t"

[machine]
ranks = 1
dpus_per_rank = 2

[programs.spin]
kernel = "cycles"
cycles = 1100
tasklets = 1

[[tasks]]
name = "host"
steps = [
  { op = "alloc", ranks = 1 },
  { op = "load", program = "spin" },
  { op = "launch" },
]
"""


def test_replay_shows_steps_and_virtual_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.toml"
    path.write_text(MINIMAL)
    assert cli_main(["replay", str(path), "--progress"]) == 0
    out, err = capsys.readouterr()
    end = replay(parse_scenario(MINIMAL)).end_ps
    assert out.startswith("t: replayed on asyncio") and "━" not in out
    line = last_line(err)
    assert re.fullmatch(
        rf"replay t.toml ━+ 3/3 steps virtual time {virtual_time(end)} 0:00:0\d 0:00:00", line
    ), line
    for quiet in ("--no-progress", "--quiet"):
        assert cli_main(["replay", str(path), quiet]) == 0
        assert capsys.readouterr() == (out, "")


HOST = """\
import numpy as np
import aiopim
from aiopim.sdk import dpu_alloc_ranks, dpu_load, dpu_launch, DPU_SYNCHRONOUS

prog = aiopim.Program("p", nr_tasklets=2)
prog.host("x", np.uint32, 2)

@prog.main
async def m(t):
    t.compute(500)

async def main():
    dpus = await dpu_alloc_ranks(1, "")
    await dpu_load(dpus, prog)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
"""


def test_record_shows_the_run_and_writes_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "progress_host_mod.py").write_text(textwrap.dedent(HOST))
    monkeypatch.syspath_prepend(str(tmp_path))
    files = {}
    for flag in ("--progress", "--quiet"):
        out_toml = tmp_path / f"rec{flag}.toml"
        argv = ["record", "progress_host_mod:main", str(out_toml), "--ranks", "1", flag]
        assert cli_main([*argv, "--dpus-per-rank", "2"]) == 0
        out, err = capsys.readouterr()
        files[flag] = out_toml.read_text()
        end = replay(load_scenario(out_toml)).end_ps
        assert out.startswith("progress_host_mod:main: recorded to") and "━" not in out
        if flag == "--quiet":
            assert err == ""
        else:
            line = last_line(err)
            assert re.fullmatch(
                rf"main ━+ virtual time {virtual_time(end)}, DPUs running 0 0:00:0\d", line
            ), line
    assert files["--progress"] == files["--quiet"]


def test_conformance_rows_stay_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hello = tmp_path / "hello.dpu"
    assert cli_main(["asm", str(ROOT / "examples" / "isa" / "hello.S"), "-o", str(hello)]) == 0
    (tmp_path / "hello.toml").write_text("[launch]\n")
    capsys.readouterr()
    assert cli_main(["conformance", str(tmp_path), "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split()[:2] == ["hello", "PASS"]
    assert out.splitlines()[-1] == "conformance 1/1"
    line = last_line(err)
    assert re.fullmatch(r"conformance ━+ 1/1 binaries failed 0 0:00:0\d 0:00:00", line), line


# ================================================================================================
# the examples
# ================================================================================================
EXAMPLES = sorted(
    p.stem for p in (ROOT / "examples").glob("*.py") if '"--quiet"' in p.read_text()
)


class Stop(Exception):
    """Raised instead of running the example's host program."""


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_take_quiet(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = __import__(name)  # tests/conftest.py puts examples/ on sys.path
    asked: list[bool | None] = []

    def run(self: object, *args: object, progress: bool | None = False, **kw: object) -> None:
        asked.append(progress)
        raise Stop

    monkeypatch.setattr(aiopim.Emulator, "run", run)
    takes_argv = "argv" in module.main.__code__.co_varnames[: module.main.__code__.co_argcount]
    small = ["--small", "100", "--large", "100"] if name == "kelonia_charcount" else []
    for argv in (small, [*small, "--quiet"]):
        monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
        with pytest.raises(Stop):
            module.main(argv) if takes_argv else module.main()
    assert asked == [None, False]  # shown on a terminal only; never with --quiet


def test_the_long_examples_take_quiet() -> None:
    assert {"wram_fifo_keysum", "vector_add", "isa_hello"} <= set(EXAMPLES)


# ================================================================================================
# the benchmarks
# ================================================================================================
@pytest.mark.parametrize("name", ["full_machine", "isa_corpus", "prim_isa", "report"])
def test_long_benchmarks_take_quiet(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    # loaded under a name of its own: benchmarks/report.py must not shadow benchmarks/prim/report.py
    module = load_module(ROOT / "benchmarks" / f"{name}.py", f"_quiet_{name}")
    parse = argparse.ArgumentParser.parse_args
    seen: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        seen.append(self)
        raise Stop

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(sys, "argv", [f"{name}.py"])
    with pytest.raises(Stop):
        module.main()
    (parser,) = seen
    assert parse(parser, []).progress is None  # shown on a terminal
    assert parse(parser, ["--quiet"]).progress is False
