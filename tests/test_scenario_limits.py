"""Issue 35, item 4: the limits a larger scenario hits can be raised from the command line and
from Python, and each refusal names the flag and keyword that raise it, with the value needed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aiopim.cli import EXIT_FAILED
from aiopim.cli import main as cli_main
from aiopim.scenario import Limits, ScenarioError, load_scenario, parse_scenario, replay
from aiopim.scenario import _limits as L

ROOT = Path(__file__).resolve().parent.parent

#: the back-pressure scenario with six pushes (the FIFOs never fill: no retry happens) but
#: 100,000 possible retries per push: the work estimate, an upper bound, is over the limit
#: while the replay itself is quick
WIDE = (
    (ROOT / "scenarios" / "fifo_backpressure.toml")
    .read_text(encoding="utf-8")
    .split("[expect]")[0]
    .replace("max_retries = 3", "max_retries = 100000")
    .replace("times = 9", "times = 6")
)
#: the estimate of WIDE, and of its heaviest step (the repeat of pushes, line 33)
WORK, STEP_WORK = 6_000_286, 6_000_229


def refusal(name: str, needed: int) -> str:
    return (
        f"Raise the limit to replay it: `aiopim replay --{name.replace('_', '-')} {needed}`, or "
        f"load_scenario(..., {name}={needed}) in Python"
    )


def test_the_work_refusal_names_the_flag_and_the_keyword(tmp_path: Path) -> None:
    path = tmp_path / "wide.toml"
    path.write_text(WIDE, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value) == (
        f"{path}:33: tasks[0].steps[5]: the replay would do about {WORK} emulated operations "
        "(steps times the DPUs they address, kernel work, FIFO retries), more than the limit "
        f"of {L.MAX_WORK}; {STEP_WORK} of them in this step (repeat). " + refusal("max_work", WORK)
    )


def test_a_refused_scenario_replays_with_the_raised_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wide.toml"
    path.write_text(WIDE, encoding="utf-8")
    sc = load_scenario(path, max_work=WORK)
    r = replay(sc)
    assert r.error is None
    assert r.end_ps == 110_004_740 + 6 * 6_640_000  # the launch's end, then six 6.64 us pushes
    assert cli_main(["replay", str(path), "--no-progress"]) == EXIT_FAILED
    assert f"`aiopim replay --max-work {WORK}`" in capsys.readouterr().err
    assert cli_main(["replay", str(path), "--no-progress", "--max-work", str(WORK)]) == 0
    out = capsys.readouterr().out
    assert out == "FIFO back-pressure: replayed on asyncio, virtual time 149.845 us\n"


def test_one_less_than_needed_is_still_refused() -> None:
    with pytest.raises(ScenarioError, match=f"more than the limit of {WORK - 1};"):
        parse_scenario(WIDE, max_work=WORK - 1)


STEPS = """\
[scenario]
name = "long"

[[tasks]]
name = "host"
steps = [{ op = "repeat", times = 2000000, steps = [{ op = "sleep", time = 1 }] }]
"""


def test_the_steps_limit_bounds_repeats_and_is_raised_by_max_steps() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(STEPS, "long.toml")
    assert info.value.key == "tasks[0].steps[0]"
    assert info.value.message == (
        "the replay would run 4000001 steps (repeats unrolled), more than the limit of "
        f"{L.MAX_STEPS}; 4000001 of them in this step (repeat). " + refusal("max_steps", 4000001)
    )
    sc = parse_scenario(STEPS, max_steps=4_000_001, max_work=10_000_000)
    assert sc.tasks[0].steps[0].params["times"] == 2_000_000


def test_memory_limits_name_their_flags() -> None:
    head = """\
[scenario]
name = "m"
[machine]
ranks = 40
[programs.p]
kernel = "cycles"
cycles = 10
symbols = { big = "mram:67108864" }
[[tasks]]
name = "host"
steps = [{ op = "alloc", ranks = 40 }, { op = "load", program = "p" }, STEP]
"""
    host = head.replace("STEP", '{ op = "copy_from", symbol = "big", bytes = 67108864, rank = 0 }')
    with pytest.raises(ScenarioError) as info:
        parse_scenario(host)
    assert info.value.message.endswith(
        "more than the limit of 256 MiB. " + refusal("max_host_bytes", 64 << 26)
    )
    assert parse_scenario(host, max_host_bytes=64 << 26).name == "m"
    dpu = head.replace(
        "STEP", '{ op = "copy_to", symbol = "big", bytes = 67108864, broadcast = true }'
    )
    with pytest.raises(ScenarioError) as info:
        parse_scenario(dpu)
    needed = 40 * 64 * (64 << 20)  # the broadcast fills the whole MRAM of every DPU
    assert info.value.message.endswith(
        "more than the limit of 1 GiB. " + refusal("max_dpu_bytes", needed)
    )
    assert parse_scenario(dpu, max_dpu_bytes=needed).name == "m"


def test_the_file_size_limit_names_its_flag(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    text = WIDE + "#" * (L.MAX_FILE_BYTES - len(WIDE.encode())) + "\n"
    path.write_text(text, encoding="utf-8")
    size = path.stat().st_size
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, max_work=WORK)
    assert info.value.message == (
        f"larger than 4 MiB, the limit for a scenario file ({size} bytes). "
        + refusal("max_file_bytes", size)
    )
    assert load_scenario(path, max_work=WORK, max_file_bytes=size).name == "FIFO back-pressure"
    with pytest.raises(ScenarioError, match=rf"\({size} bytes\)\. Raise the limit"):
        parse_scenario(text, max_work=WORK)


def test_limits_must_be_positive_integers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="max_work must be a positive integer, not 0"):
        parse_scenario(WIDE, max_work=0)
    with pytest.raises(ValueError, match="max_steps must be a positive integer, not True"):
        Limits(max_steps=True)
    with pytest.raises(SystemExit):
        cli_main(["replay", "x.toml", "--max-work", "-5"])
    assert "--max-work: give a positive integer, not '-5'" in capsys.readouterr().err


def test_every_limit_has_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["replay", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    for name in L.LIMIT_NAMES:
        assert f"{Limits.flag(name)} N" in helptext
        assert f"(default: {getattr(Limits(), name)})" in helptext


WIDE_PROGRAM = """\
import numpy as np
import aiopim
from aiopim.sdk import *

prog = aiopim.Program("hold", nr_tasklets=1)
active = prog.host("active", np.uint64, 1, init=[1])
prog.input_fifo("fin", 3, 8)
view = {}


@prog.main
async def kernel(t):
    view["a"] = t.view(active)
    await t.poll_until(lambda: not view["a"][0], active, label="active")


async def main():
    dpus = await dpu_alloc(1, "")
    await dpu_load(dpus, prog)
    link = dpu_link_input_fifo(dpus, "fin")
    dpu_fifo_set_push_max_retries(link, dpus, 100000)
    await dpu_launch(dpus, DPU_ASYNCHRONOUS)
    dpu_fifo_prepare_xfer(dpus, link, np.zeros(1, np.uint64))
    for _ in range(6):  # 6 pushes into 8 places: no retry, but 100,000 possible each
        await dpu_fifo_push_xfer(dpus, link, DPU_XFER_NO_RESET)
    dpu_prepare_xfer(dpus, np.zeros(1, np.uint64))
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)
    await dpu_sync(dpus)
"""


def test_record_says_which_limit_its_scenario_needs_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lim_wide_prog.py").write_text(WIDE_PROGRAM)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "w.toml"
    argv = ["record", "lim_wide_prog:main", str(out), "--ranks", "1", "--dpus-per-rank", "1"]
    try:
        assert cli_main([*argv, "--no-progress"]) == 0
    finally:
        sys.modules.pop("lim_wide_prog", None)
    err = capsys.readouterr().err
    assert err == (
        f"aiopim record: note: {out}:26: tasks[0].steps[4]: the replay would do about 6000026 "
        "emulated operations (steps times the DPUs they address, kernel work, FIFO retries), "
        f"more than the limit of {L.MAX_WORK}; 1000002 of them in this step (fifo_push). "
        + refusal("max_work", 6000026)
        + "\n"
    )
    assert cli_main(["replay", str(out), "--no-progress", "--max-work", "6000026"]) == 0
