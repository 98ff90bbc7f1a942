"""The charcount example (issue 35, items 13 and 19): its actor variant, and the README's
commands — the generated interface module is what the example uses, and nothing is left in the
directories it runs from."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

import kelonia_charcount as kc
import pytest

import aiopim
from aiopim.cli import main as aiopim_main
from aiopim.kelonia import DpuDeviceDescription


def test_the_actors_count_every_vowel_at_an_exact_virtual_time(backend: str) -> None:
    interface = kc.generated_interface(None).Charcount.instance()
    device = DpuDeviceDescription(interface, kc.charcount_program())
    actors = DpuDeviceDescription(interface, kc.charcount_actor_program())
    small, large = kc.sample_text(3000, 1), kc.sample_text(20_000, 2)
    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=1))
    lines = emu.run(kc.run_counts, device, small, large, 2, 4096, actors, backend=backend)
    python = ", ".join(f"{chr(c)} {large.count(bytes([c]))}" for c in kc.VOWELS)
    assert lines[2] == f"2 actors: {python} in 20000 bytes (Python: {python})"
    assert lines[3] == ("virtual time: one DPU 0.000256 s, 2 DPUs 0.000588 s, 2 actors 0.000538 s")


def _quiet_run(*extra: str) -> list[str]:
    return ["--dpus", "2", "--small", "3000", "--large", "20000", "--block", "4096", "--quiet",
            *extra]  # fmt: skip


def test_run_from_a_copy_the_example_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(kc.DIDL, tmp_path / "charcount.didl")
    monkeypatch.setattr(kc, "DIDL", tmp_path / "charcount.didl")
    monkeypatch.chdir(tmp_path)
    assert kc.main(_quiet_run()) == 0
    assert sorted(os.listdir(tmp_path)) == ["charcount.didl"]
    assert capsys.readouterr().out.splitlines()[2].startswith("2 actors: a ")


def test_the_readme_commands_write_under_build_and_the_example_uses_that_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    out = Path("build") / "charcount_interface.py"
    assert aiopim_main(["didl", str(kc.DIDL), "-o", str(out)]) == 0  # makes build/
    assert sorted(os.listdir(tmp_path)) == ["build"]
    loaded: list[ModuleType] = []
    generated_interface = kc.generated_interface

    def spy(path: Path | None) -> ModuleType:
        loaded.append(generated_interface(path))
        return loaded[-1]

    monkeypatch.setattr(kc, "generated_interface", spy)
    assert kc.main(_quiet_run("--interface", str(out))) == 0
    assert [m.__file__ for m in loaded] == [str(tmp_path / out)]
    assert sorted(os.listdir(tmp_path)) == ["build"]
    assert sorted(os.listdir(tmp_path / "build")) == ["charcount_interface.py"]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "wrote build/charcount_interface.py"
    assert lines[1].startswith("one DPU: ")
