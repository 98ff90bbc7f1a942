"""``aiopim sweep`` and ``aiopim explore``: campaign files, their errors, the table, the plot,
the exploration report and the replay command it prints."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from aiopim.campaign import Results, load_campaign
from aiopim.campaign._toml import CampaignFileError
from aiopim.cli import main

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

SWEEP = f"""\
[campaign]
name = "squares"
program = "test_campaign:square"
path = ["{TESTS}"]

[grid]
x = [1, 2, 3]
"""


def _write(tmp_path: Path, text: str, name: str = "sweep.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_sweep_prints_the_table_stores_results_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _write(tmp_path, SWEEP)
    out_dir = tmp_path / "out"
    assert main(["sweep", file, "--dir", str(out_dir), "--no-progress"]) == 1  # x == 2 fails
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "run",
        "x",
        "status",
        "virtual",
        "time",
        "CPU->DPU",
        "DPU",
        "kernel",
        "inter-DPU",
        "DPU->CPU",
        "instructions",
        "digest",
    ]
    assert [line.split()[:3] for line in out[1:4]] == [
        ["0", "1", "ok"],
        ["1", "2", "failed"],
        ["2", "3", "ok"],
    ]
    assert out[4:] == [
        "squares: 3 runs, 1 failed",
        "  run 1 (x=2): ValueError: x is 2",
        f"results: {out_dir / 'results.jsonl'}",
    ]
    stored = Results.load(out_dir)
    assert [r["result"] for r in stored] == [1, None, 9]
    # a rerun runs nothing again: the file keeps one line per run
    assert main(["sweep", file, "--dir", str(out_dir), "--no-progress"]) == 1
    assert len((out_dir / "results.jsonl").read_text().splitlines()) == 3
    assert capsys.readouterr().out.splitlines()[4:6] == out[4:6]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            SWEEP + "[gird]\nx = [1]\n",
            "{file}:8: gird: unknown section (allowed: campaign, "
            "machine, params, grid, sample, runs)",
        ),
        (
            SWEEP.replace("x = [1, 2, 3]", "y = [1, 2, 3]"),
            "{file}:7: run 0 (y=1): unknown "
            "parameter 'y' for test_campaign:square (its parameters: x)",
        ),
        (
            SWEEP.replace("x = [1, 2, 3]", "x = []"),
            "{file}:7: grid.x: expected a non-empty list of values, got []",
        ),
        (
            SWEEP.replace(":square", ":not_async"),
            "{file}:3: run 0 (x=1): "
            "test_campaign:not_async is not an async function (write `async def not_async(...)`)",
        ),
        (SWEEP.replace('name = "squares"\n', ""), "{file}:1: [campaign] needs the key 'name'"),
        (
            SWEEP + "[sample]\nn = 2\n",
            "{file}:8: sample: give one of [grid], [sample] and [[runs]], not grid and sample",
        ),
        (
            "[campaign\n",
            "{file}:1: not valid TOML: Expected ']' at the end of a table "
            "declaration (at line 1, column 10)",
        ),
    ],
)
def test_a_bad_campaign_file_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    file = _write(tmp_path, text)
    with pytest.raises(CampaignFileError) as caught:
        load_campaign(file)
    assert str(caught.value) == message.format(file=file)
    assert main(["sweep", file, "--dir", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"aiopim sweep: {message.format(file=file)}\n"
    assert not (tmp_path / "out").exists()


def test_the_example_sweep_file_is_valid() -> None:
    campaign = load_campaign(ROOT / "examples" / "sweep_vector_add.toml")
    specs = campaign.specs()
    assert [s.params["nr_dpus"] for s in specs] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert {s.params["nr_elements"] for s in specs} == {1048576}


def test_sweep_plots_the_swept_parameter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    file = _write(tmp_path, SWEEP.replace(":square", ":fails_never"))
    (tmp_path / "plot.png").unlink(missing_ok=True)
    code = main(
        [
            "sweep",
            file,
            "--dir",
            str(tmp_path / "o"),
            "--plot",
            str(tmp_path / "plot.png"),
            "--y",
            "result",
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code = main(
        ["sweep", file, "--dir", str(tmp_path / "o"), "--plot", str(tmp_path / "p.png"), "--x", "z"]
    )
    assert code == 2
    assert capsys.readouterr().err.endswith(
        "aiopim sweep: --x must name a parameter of the campaign (x)\n"
    )


def test_explore_reports_shrinks_and_prints_a_replay_command_that_replays(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(TESTS)
    argv = ["explore", "test_campaign:fails_on_seed", "--schedules", "50", "--ranks", "1"]
    assert main([*argv, "--no-progress"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "schedules  explored                first failing  shrunk to",
        "50                3  2 (explore_seed=2468915676)          3",  # serial: none after 2
    ]
    assert out[-1] == (
        "replay it with: aiopim explore test_campaign:fails_on_seed --replay 3 --ranks 1"
    )
    command = shlex.split(out[-1].removeprefix("replay it with: "))
    assert main(command[1:]) == 1
    replayed = capsys.readouterr().out.splitlines()
    assert replayed[0].startswith(
        "test_campaign:fails_on_seed (explore_seed=3, asyncio): failed: AssertionError: "
        "explore seed 3 is 3 modulo 7"
    )
    assert len({line.rsplit(" ", 1)[1] for line in replayed}) == 1  # one trace on both backends
    assert main([*command[1:-4], "--replay", "4"]) == 0


def test_explore_refuses_what_it_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "no_such_module:f", "--schedules", "3"]) == 2
    assert capsys.readouterr().err == (
        "aiopim explore: schedule 0 (explore_seed=2893166218): module 'no_such_module' does not "
        "import: ModuleNotFoundError: No module named 'no_such_module'\n"
    )
    with pytest.raises(SystemExit):
        main(["explore", "m:f", "--replay", "-1"])
    assert "give an explore seed 0..4294967295 or 'stable'" in capsys.readouterr().err


def test_stored_records_are_json_lines_with_the_run_key(tmp_path: Path) -> None:
    file = _write(tmp_path, SWEEP)
    main(["sweep", file, "--dir", str(tmp_path / "o"), "--no-progress"])
    lines = (tmp_path / "o" / "results.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    assert sorted(record) == sorted(
        [
            "run",
            "label",
            "key",
            "params",
            "seed",
            "status",
            "result",
            "error",
            "traceback",
            "virtual_time_ps",
            "cpu_dpu_ps",
            "dpu_kernel_ps",
            "inter_dpu_ps",
            "dpu_cpu_ps",
            "instructions",
            "digest",
            "wall_s",
        ]
    )
    assert json.loads((tmp_path / "o" / "campaign.json").read_text()) == {
        "name": "squares",
        "program": "test_campaign:square",
    }


@pytest.mark.long  # a pytest in a subprocess: about 7 s of CPU
def test_the_docs_pytest_module_runs_with_the_fan_out_option(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "campaigns.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- pytest -->\n```python\n(.*?)^```", text, re.S | re.M)
    assert block is not None
    (tmp_path / "test_doc.py").write_text(block.group(1), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "examples")]))
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--aiopim-jobs", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
