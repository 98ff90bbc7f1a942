"""The README's install serves programs outside the repository, type checkers included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

USER_PROGRAM = """\
import aiopim
from aiopim.sdk import DPU_SYNCHRONOUS, dpu_alloc, dpu_launch, dpu_load

prog = aiopim.Program("noop", nr_tasklets=1)


@prog.main
async def main(t: aiopim.Tasklet) -> None:
    t.compute(1)


async def host() -> None:
    dpus = await dpu_alloc(1, "")
    await dpu_load(dpus, prog)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    print("virtual time", aiopim.now())


aiopim.run(host, backend="trio")
"""


def _outside(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A user's program in a directory outside the repository, run without PYTHONPATH."""
    prog = tmp_path / "user_program.py"
    prog.write_text(USER_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return prog, env


def test_a_program_outside_the_repository_imports_and_runs_aiopim(tmp_path: Path) -> None:
    prog, env = _outside(tmp_path)
    out = subprocess.run(
        [sys.executable, str(prog)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("virtual time ")


def _mypy(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy", reason="mypy (extra 'test') is not installed")
    prog, env = _outside(tmp_path)
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *options, str(prog)]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)


def test_mypy_finds_aiopim_from_outside_the_repository(tmp_path: Path) -> None:
    """An editable install through an import hook hides the package from mypy; a path entry
    (``editable_mode=compat``, as the README installs) does not."""
    # not following imports into aiopim (~10 s): finding the package is what this checks
    out = _mypy(tmp_path, "--follow-imports=skip")
    assert "user_program.py:1:" not in out.stdout, out.stdout
    assert "import-not-found" not in out.stdout, out.stdout


@pytest.mark.long
def test_mypy_strict_accepts_a_typed_user_program(tmp_path: Path) -> None:
    out = _mypy(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("Success: no issues found"), out.stdout
