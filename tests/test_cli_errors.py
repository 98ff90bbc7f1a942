"""The ``aiopim`` command on bad input: one message on stderr and an exit status, no traceback
(unless ``--debug``, or for aiopim's own bugs), no hang on files that are not files."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import aiopim
from aiopim import elf
from aiopim.cli import EXIT_BUG, EXIT_FAILED, EXIT_INPUT
from aiopim.cli import main as cli_main
from aiopim.scenario import KERNELS, _record
from aiopim.sdk import dpu_alloc_ranks, dpu_free, dpu_load

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """\
import anyio
from aiopim.sdk import dpu_alloc_ranks, dpu_free


async def ok():
    dpus = await dpu_alloc_ranks(1)
    await dpu_free(dpus)


async def buggy():
    await dpu_alloc_ranks(1)
    {}["missing"]


async def deadlock():
    await anyio.Event().wait()


def not_async():
    pass
"""

DEADLOCK = """\
[scenario]
name = "dead"

[[tasks]]
name = "a"
steps = [{ op = "wait", event = "x" }, { op = "signal", event = "y" }]

[[tasks]]
name = "b"
steps = [{ op = "wait", event = "y" }, { op = "signal", event = "x" }]
"""

KERNEL_MODULE = """\
from aiopim.scenario import KernelKind, Param, register_kernel


def build(spec):
    raise ZeroDivisionError("the user's kernel builder is broken")


register_kernel(KernelKind("broken_kernel", {}, build), replace=True)
"""


@pytest.fixture
def user_modules(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path with the test's host programs."""
    (tmp_path / "hio_prog.py").write_text(PROGRAM)
    (tmp_path / "hio_kernel.py").write_text(KERNEL_MODULE)
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("hio_prog", "hio_kernel"):
            sys.modules.pop(name, None)
        KERNELS.pop("broken_kernel", None)  # registered by hio_kernel


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli_main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def one_message(err: str, prog: str) -> str:
    """The stderr of a failed command: no traceback, starts with the command name."""
    assert "Traceback" not in err, err
    assert err.startswith(f"{prog}: "), err
    return err


# ================================================================================================
# aiopim record
# ================================================================================================
def test_record_works(user_modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_toml = user_modules / "ok.toml"
    rc, out, err = run(capsys, "record", "hio_prog:ok", str(out_toml), "--ranks", "1")
    assert (rc, err) == (0, "")
    assert "hio_prog:ok: recorded to" in out and out_toml.read_text().startswith("# Recorded")


@pytest.mark.parametrize(
    ("program", "status", "message"),
    [
        (
            "hio_prog:buggy",
            EXIT_FAILED,
            "aiopim record: the program raised KeyError: 'missing'\n  at ",
        ),
        ("hio_prog:deadlock", EXIT_FAILED, "aiopim record: deadlock at t=0.000000000s"),
        ("hio_prog:nothere", EXIT_INPUT, "module 'hio_prog' has no function 'nothere'"),
        ("hio_prog:not_async", EXIT_INPUT, "hio_prog:not_async is not an async function"),
        ("no_such_module_x:main", EXIT_INPUT, "no module named 'no_such_module_x'"),
        ("hio_prog", EXIT_INPUT, "give the program as MODULE:FUNCTION"),
    ],
)
def test_record_errors_are_one_message(
    user_modules: Path, capsys: pytest.CaptureFixture[str], program: str, status: int, message: str
) -> None:
    rc, _, err = run(capsys, "record", program, str(user_modules / "o.toml"), "--ranks", "1")
    assert rc == status
    assert message in one_message(err, "aiopim record")
    assert not (user_modules / "o.toml").exists()


def test_record_user_bug_names_the_line(
    user_modules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, "record", "hio_prog:buggy", str(user_modules / "o.toml"))
    assert rc == EXIT_FAILED
    assert f"at {user_modules / 'hio_prog.py'}:12, in buggy" in err
    assert "(run with --debug for the traceback)" in err


def test_record_debug_prints_the_traceback(
    user_modules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, "record", "hio_prog:buggy", str(user_modules / "o.toml"), "--debug")
    assert rc == EXIT_FAILED
    assert err.startswith("Traceback") and '{}["missing"]' in err
    assert err.rstrip().endswith("in buggy")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "0"], "--ranks must be between 1 and 40"),
        (["--ranks", "1000000000"], "--ranks must be between 1 and 40"),
        (["--dpus-per-rank", "65"], "nr_dpus_per_rank must be between 1 and 64"),
        (["--chip", "v9"], "chip must be one of"),
    ],
)
def test_record_machine_options_are_checked(
    user_modules: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc, _, err = run(capsys, "record", "hio_prog:ok", str(user_modules / "o.toml"), *args)
    assert rc == EXIT_INPUT and message in one_message(err, "aiopim record")


def test_record_unwritable_output(user_modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "record", "hio_prog:ok", str(user_modules), "--ranks", "1")
    assert rc == EXIT_INPUT and "Is a directory" in one_message(err, "aiopim record")


def test_internal_errors_ask_for_a_report(
    user_modules: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_record, "write_toml", None)  # a bug inside aiopim itself
    rc, _, err = run(capsys, "record", "hio_prog:ok", str(user_modules / "o.toml"), "--ranks", "1")
    assert rc == EXIT_BUG
    assert err.startswith("Traceback")
    assert "TypeError: 'NoneType' object is not callable" in err
    assert f"This is a bug in aiopim {aiopim.__version__}: please report it" in err


# ================================================================================================
# aiopim replay
# ================================================================================================
def special_paths(tmp_path: Path) -> list[tuple[Path, str]]:
    """Paths that are not regular files, with what the message says about them."""
    out = [(tmp_path, "is a directory"), (tmp_path / "missing", "No such file or directory")]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe")
        out.append((tmp_path / "pipe", "is a named pipe"))
    if Path("/dev/zero").exists():
        out.append((Path("/dev/zero"), "is a character device"))
    if Path("/proc/self/mem").exists():
        out.append((Path("/proc/self/mem"), "cannot be read"))
    return out


def test_replay_of_paths_that_are_not_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, message in special_paths(tmp_path):
        t0 = time.monotonic()
        rc, _, err = run(capsys, "replay", str(path), "--no-progress")
        assert time.monotonic() - t0 < 5
        assert rc == EXIT_INPUT, (path, err)
        assert f"{path}: {message}" in one_message(err, "aiopim replay")


def test_replay_errors_are_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "dead.toml"
    bad.write_text(DEADLOCK)
    rc, _, err = run(capsys, "replay", str(bad), "--no-progress")
    assert rc == EXIT_FAILED
    assert f"aiopim replay: {bad}:6: tasks[0].steps[0]: the replay deadlocked" in err
    one_message(err, "aiopim replay")
    bad.write_bytes(b'[scenario]\nname = "\xc3("\n')
    rc, _, err = run(capsys, "replay", str(bad), "--no-progress")
    assert rc == EXIT_FAILED and f"{bad}:2: not valid UTF-8" in one_message(err, "aiopim replay")


def test_replay_import_and_output_errors(
    user_modules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = ROOT / "scenarios" / "async_vs_parallel_sync.toml"
    rc, _, err = run(capsys, "replay", str(scenario), "--import", "no_such_module_y")
    assert rc == EXIT_INPUT
    assert "cannot import module 'no_such_module_y'" in one_message(err, "aiopim replay")
    rc, _, err = run(capsys, "replay", str(scenario), "--no-progress", "--trace", str(user_modules))
    assert rc == EXIT_INPUT and "Is a directory" in one_message(err, "aiopim replay")


def test_replay_user_kernel_bug(user_modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = user_modules / "k.toml"
    sc.write_text(
        textwrap.dedent(
            """\
            [scenario]
            name = "k"
            [programs.p]
            kernel = "broken_kernel"
            [[tasks]]
            name = "t"
            steps = [{ op = "sleep" }]
            """
        )
    )
    rc, _, err = run(capsys, "replay", str(sc), "--import", "hio_kernel", "--no-progress")
    assert rc == EXIT_FAILED
    assert "the program raised ZeroDivisionError: the user's kernel builder is broken" in err
    assert f"at {user_modules / 'hio_kernel.py'}:5, in build" in one_message(err, "aiopim replay")


# ================================================================================================
# aiopim symbols and dpu_load
# ================================================================================================
def test_symbols_of_paths_that_are_not_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, message in special_paths(tmp_path):
        t0 = time.monotonic()
        rc, _, err = run(capsys, "symbols", str(path))
        assert time.monotonic() - t0 < 5
        code = "NO_SUCH_FILE" if "No such file" in message else "INVALID_FILE"
        assert rc == 2 and err.startswith(f"DPU_ERR_ELF_{code}: {path}: {message}"), err
        assert "Traceback" not in err


def test_elf_larger_than_the_limit_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.dpu"
    with open(big, "wb") as f:
        f.truncate(elf.MAX_ELF_SIZE + 1)  # sparse: refused from its size alone
    with pytest.raises(aiopim.DpuError) as info:
        aiopim.load_elf(big)
    assert info.value.code == aiopim.DpuErrorCode.DPU_ERR_ELF_INVALID_FILE
    assert "larger than 256 MiB, the limit for a DPU binary" in info.value.detail


def test_dpu_load_of_paths_that_are_not_files(tmp_path: Path, backend: str) -> None:
    paths = special_paths(tmp_path)

    async def main() -> list[tuple[str, str]]:
        dpus = await dpu_alloc_ranks(1)
        got = []
        for path, _ in paths:
            try:
                await dpu_load(dpus, str(path))
            except aiopim.DpuError as exc:
                got.append((exc.code.name, exc.detail))
        await dpu_free(dpus)
        return got

    got = aiopim.run(main, backend=backend, machine=aiopim.MachineConfig(1, 1))
    assert len(got) == len(paths)
    for (code, detail), (path, message) in zip(got, paths, strict=True):
        want = "NO_SUCH_FILE" if "No such file" in message else "INVALID_FILE"
        assert code == f"DPU_ERR_ELF_{want}" and detail.startswith(f"{path}: {message}")


# ================================================================================================
# every file error names the file (issue 35, item 5)
# ================================================================================================
def missing_dir(tmp_path: Path) -> Path:
    """A directory that does not exist."""
    return tmp_path / "no" / "such" / "dir"


def test_replay_output_paths_in_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = str(ROOT / "scenarios" / "async_vs_parallel_sync.toml")
    for option, name in (("--gantt", "x.png"), ("--trace", "x.json")):
        out = missing_dir(tmp_path) / name
        rc, stdout, err = run(capsys, "replay", scenario, "--no-progress", option, str(out))
        assert rc == EXIT_INPUT
        assert err == f"aiopim replay: {out}: No such file or directory\n"
        assert stdout == ""  # refused before the replay, not after it
    rc, _, err = run(capsys, "replay", str(missing_dir(tmp_path) / "s.toml"), "--no-progress")
    assert rc == EXIT_INPUT
    assert err == f"aiopim replay: {missing_dir(tmp_path) / 's.toml'}: No such file or directory\n"


def test_record_output_paths_in_a_missing_directory(
    user_modules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = missing_dir(user_modules) / "o.toml"
    rc, _, err = run(capsys, "record", "hio_prog:ok", str(out), "--ranks", "1")
    assert (rc, err) == (EXIT_INPUT, f"aiopim record: {out}: No such file or directory\n")
    trace = missing_dir(user_modules) / "o.json"
    ok = user_modules / "o.toml"
    rc, _, err = run(
        capsys, "record", "hio_prog:ok", str(ok), "--ranks", "1", "--trace", str(trace)
    )
    assert (rc, err) == (EXIT_INPUT, f"aiopim record: {trace}: No such file or directory\n")
    assert not ok.exists()  # refused before the program ran


def test_asm_disasm_didl_paths_in_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = missing_dir(tmp_path)
    hello = str(ROOT / "examples" / "isa" / "hello.S")
    didl = str(ROOT / "examples" / "charcount.didl")
    cases = [
        (["asm", hello, "-o", str(gone / "h.dpu")], "aiopim asm", gone / "h.dpu"),
        (["asm", str(gone / "h.S"), "-o", str(tmp_path / "h.dpu")], "aiopim asm", gone / "h.S"),
        (["disasm", str(gone / "h.dpu")], "aiopim disasm", gone / "h.dpu"),
        (["disasm", "--source", str(gone / "h.dpu")], "aiopim disasm", gone / "h.dpu"),
        (["didl", str(gone / "c.didl")], "aiopim didl", gone / "c.didl"),
        (["didl", didl, "-o", str(tmp_path)], "aiopim didl", tmp_path),  # -o makes missing dirs
    ]
    for argv, prog, path in cases:
        rc, _, err = run(capsys, *argv)
        reason = "Is a directory" if path == tmp_path else "No such file or directory"
        assert (rc, err) == (EXIT_INPUT, f"{prog}: {path}: {reason}\n"), argv
    rc, _, err = run(capsys, "symbols", str(gone / "h.dpu"))
    assert (rc, err) == (
        2,
        f"DPU_ERR_ELF_NO_SUCH_FILE: {gone / 'h.dpu'}: No such file or directory\n",
    )
