"""Campaigns: the same table serially, on local processes and on Dask; resume; dead workers;
bad input named by run; schedule exploration that finds the same first failure anywhere."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import pytest
import vector_add

import aiopim
from aiopim.campaign import (
    Campaign,
    CampaignError,
    Explorer,
    Results,
    derive_seed,
    explore,
    grid,
    sample,
)
from aiopim.campaign._store import RESULTS_FILE
from aiopim.scenario import load_scenario, replay

ROOT = Path(__file__).resolve().parent.parent
TESTS = str(ROOT / "tests")
EXAMPLES = str(ROOT / "examples")
HERE = "test_campaign"  # workers import the programs below from this module

needs_sigkill = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL here")


# ------------------------------------------------------------------------------------------------
# programs the campaigns run (module level: workers import them by name)
# ------------------------------------------------------------------------------------------------
async def square(x: int) -> int:
    """Fails for x == 2 (a run that fails must not stop the campaign)."""
    if x == 2:
        raise ValueError(f"x is {x}")
    return x * x


async def fails_never(x: int) -> int:
    return x * x


async def not_json(x: int) -> object:
    return {x} if x == 1 else x


def not_async(x: int) -> int:
    return x


def _first_time(marker: str) -> bool:
    """True the first time it is called with ``marker`` (a file), in any process."""
    if os.path.exists(marker):
        return False
    Path(marker).touch()
    return True


async def dies_once(run: int, marker: str) -> int:
    """Run 1 kills its worker process the first time (os.kill), as an OOM killer would."""
    if run == 1 and _first_time(marker):
        os.kill(os.getpid(), signal.SIGKILL)
    return run


async def dies_always(run: int) -> int:
    if run == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return run


async def fails_on_seed() -> int:
    """A property that fails under the schedules whose explore seed is 3 modulo 7."""
    seed = aiopim.current_emulator().seed
    assert seed % 7 != 3, f"explore seed {seed} is 3 modulo 7"
    return seed


def first_failing_index(schedules: int) -> int:
    return next(i for i in range(schedules) if derive_seed(0, i) % 7 == 3)


def va_campaign(**kwargs: Any) -> Campaign:
    runs = [*grid(nr_dpus=[1, 2, 4]), {"nr_dpus": 0}]  # 0 DPUs: dpu_alloc refuses it
    return Campaign("va", "vector_add:host", runs, {"nr_elements": 64}, path=[EXAMPLES], **kwargs)


@pytest.fixture(scope="module")
def serial_va() -> Results:
    return va_campaign().run()


# ------------------------------------------------------------------------------------------------
# runs, seeds, figures
# ------------------------------------------------------------------------------------------------
def test_runs_and_seeds_come_from_the_definition_only() -> None:
    assert grid(a=[1, 2], b=["x", "y"]) == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
    ]
    assert sample(3, 7, a=[1, 2, 3]) == sample(3, 7, a=[1, 2, 3])
    # the first 4 bytes of SHA-256("<campaign seed>:<index>")
    assert derive_seed(0, 0) == int.from_bytes(hashlib.sha256(b"0:0").digest()[:4], "big")
    assert derive_seed(0, 0) == 2893166218
    specs = Campaign("c", f"{HERE}:square", grid(x=[1, 2, 3]), seed=5).specs()
    assert [s.seed for s in specs] == [derive_seed(5, i) for i in range(3)]
    assert [s.label for s in specs] == ["run 0 (x=1)", "run 1 (x=2)", "run 2 (x=3)"]


def test_a_run_records_aiopims_figures_of_the_same_program_run_directly(
    serial_va: Results,
) -> None:
    emu = aiopim.Emulator(seed=derive_seed(0, 1))
    direct = emu.run(vector_add.host, 2, 64, derive_seed(0, 1))
    record = serial_va[1]
    assert record["status"] == "ok"
    assert record["result"] == direct
    assert record["virtual_time_ps"] == emu.now_ps
    assert emu.recorder is not None
    assert record["digest"] == hashlib.sha256(emu.recorder.to_jsonl().encode()).hexdigest()
    parts = [record[k] for k in ("cpu_dpu_ps", "dpu_kernel_ps", "inter_dpu_ps", "dpu_cpu_ps")]
    assert parts[2] == 0 and all(p > 0 for p in parts[:2] + parts[3:])  # one launch
    assert sum(parts) < record["virtual_time_ps"]  # the load and the host's own work are not in
    # 64 elements on 2 DPUs: 32 per DPU, 6 instructions each, plus the kernel's own
    assert record["instructions"] > 2 * 32 * vector_add.INSTRUCTIONS_PER_ELEMENT
    failed = serial_va[3]
    assert failed["status"] == "failed" and failed["error"].startswith("DpuError")
    assert "Traceback" in failed["traceback"]


# ------------------------------------------------------------------------------------------------
# the same table anywhere
# ------------------------------------------------------------------------------------------------
def test_two_processes_give_the_serial_table(serial_va: Results) -> None:
    parallel = va_campaign().run(jobs=2)
    assert parallel.table() == serial_va.table()
    assert [r["run"] for r in parallel] == [0, 1, 2, 3]


@pytest.mark.long  # a Dask LocalCluster takes 5-15 s of wall time to start on the shared VM
def test_a_dask_local_cluster_gives_the_serial_table(serial_va: Results, tmp_path: Path) -> None:
    on_dask = va_campaign().run(dask="local:2")
    assert on_dask.table() == serial_va.table()
    # a Dask worker killed mid-campaign: its nanny restarts it, the run is retried once
    marker = str(tmp_path / "killed")
    dying = Campaign(
        "dying", f"{HERE}:dies_once", grid(run=list(range(4))), {"marker": marker}, path=[TESTS]
    )
    results = dying.run(tmp_path / "c", dask="local:2")
    assert Path(marker).exists()
    assert [(r["run"], r["status"], r["result"]) for r in results] == [
        (i, "ok", i) for i in range(4)
    ]


# ------------------------------------------------------------------------------------------------
# results that last
# ------------------------------------------------------------------------------------------------
def _lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (directory / RESULTS_FILE).read_text().splitlines()]


def test_a_rerun_skips_finished_runs_and_reruns_a_torn_one(tmp_path: Path) -> None:
    campaign = Campaign("sq", f"{HERE}:square", grid(x=list(range(6))), path=[TESTS])
    first = campaign.run(tmp_path)
    text = (tmp_path / RESULTS_FILE).read_text()
    kept = text.splitlines(keepends=True)[:3]
    torn = text.splitlines(keepends=True)[3][:25]  # a crash in the middle of a line
    (tmp_path / RESULTS_FILE).write_text("".join(kept) + torn)
    again = campaign.run(tmp_path)
    lines = _lines(tmp_path)
    assert sorted(r["run"] for r in lines) == list(range(6))  # every run exactly once
    assert [json.dumps(r, sort_keys=True) + "\n" for r in lines[:3]] == kept  # not rerun
    assert again.table() == first.table()
    assert [r["status"] for r in again] == ["ok", "ok", "failed", "ok", "ok", "ok"]
    assert again[2]["error"] == "ValueError: x is 2"


def test_a_directory_of_another_campaign_is_refused(tmp_path: Path) -> None:
    Campaign("one", f"{HERE}:square", [{"x": 1}], path=[TESTS]).run(tmp_path)
    with pytest.raises(CampaignError) as caught:
        Campaign("two", f"{HERE}:square", [{"x": 1}], path=[TESTS]).run(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path} holds the results of another campaign ('one', program "
        "'test_campaign:square'); give another directory or remove it"
    )


@needs_sigkill
def test_a_worker_killed_mid_campaign_loses_nothing(tmp_path: Path) -> None:
    marker = str(tmp_path / "killed")
    campaign = Campaign(
        "dying", f"{HERE}:dies_once", grid(run=list(range(6))), {"marker": marker}, path=[TESTS]
    )
    results = campaign.run(tmp_path / "c", jobs=2)
    assert Path(marker).exists()  # the worker did die
    assert [(r["run"], r["status"], r["result"]) for r in results] == [
        (i, "ok", i) for i in range(6)
    ]
    assert sorted(r["run"] for r in _lines(tmp_path / "c")) == list(range(6))


@needs_sigkill
def test_a_run_that_always_kills_its_worker_is_named_and_the_others_complete(
    tmp_path: Path,
) -> None:
    campaign = Campaign("dying", f"{HERE}:dies_always", grid(run=list(range(4))), path=[TESTS])
    results = campaign.run(jobs=2)
    assert [r["status"] for r in results] == ["ok", "failed", "ok", "ok"]
    assert results.text().splitlines()[-1] == (
        "  run 1 (run=1): the worker process died while running it, alone, after a retry"
    )


class LosesRunTwo(Executor):
    """An executor (a cluster, say) that loses the connection while it holds run 2."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if args[0].index == 2:
            future.set_exception(ConnectionResetError("the scheduler went away"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_run_the_executor_loses_is_named_and_the_rest_is_kept(tmp_path: Path) -> None:
    campaign = Campaign("sq", f"{HERE}:fails_never", grid(x=list(range(4))), path=[TESTS])
    with pytest.raises(CampaignError) as caught:
        campaign.run(tmp_path, executor=LosesRunTwo())
    assert str(caught.value) == (
        "the executor could not run 1 run(s), first run 2 (x=2): ConnectionResetError: the "
        "scheduler went away; the finished results are kept: run the campaign again to resume"
    )
    assert sorted(r["run"] for r in _lines(tmp_path)) == [0, 1, 3]
    results = campaign.run(tmp_path)  # resumes: runs 2 only
    assert [r["result"] for r in results] == [0, 1, 4, 9]
    assert [r["run"] for r in _lines(tmp_path)] == [0, 1, 3, 2]


# ------------------------------------------------------------------------------------------------
# bad input: clear errors naming the run
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("program", "runs", "message"),
    [
        (
            "vector_add:host",
            [{"nr_dpus": 1, "nr_elements": 64}, {"nr_dpu": 1, "nr_elements": 64}],
            "run 1 (nr_dpu=1, nr_elements=64): unknown parameter 'nr_dpu' for vector_add:host "
            "(its parameters: nr_dpus, nr_elements, seed)",
        ),
        (
            "vector_add:host",
            [{"nr_dpus": 1}],
            "run 0 (nr_dpus=1): vector_add:host: missing a required argument: 'nr_elements'",
        ),
        (
            "no_such_module:host",
            [{}],
            "run 0: module 'no_such_module' does not import: ModuleNotFoundError: No module "
            "named 'no_such_module'",
        ),
        (
            f"{HERE}:not_async",
            [{"x": 1}],
            "run 0 (x=1): test_campaign:not_async is not an async function (write `async def "
            "not_async(...)`)",
        ),
        (f"{HERE}:nothing", [{}], "run 0: module 'test_campaign' has no function 'nothing'"),
        (f"{HERE}:square", [{"x": {2}}], "run 0: parameter 'x' is not a JSON value ({2})"),
        (
            "host",
            [{}],
            "program 'host': give MODULE:FUNCTION, FILE.py:FUNCTION or a scenario FILE.toml",
        ),
    ],
)
def test_a_campaign_that_cannot_run_says_which_run_and_why(
    program: str, runs: list[dict[str, Any]], message: str, tmp_path: Path
) -> None:
    with pytest.raises(CampaignError) as caught:
        Campaign("bad", program, runs, path=[EXAMPLES, TESTS]).run(tmp_path)
    assert str(caught.value) == message
    assert not (tmp_path / RESULTS_FILE).exists()


def test_a_result_that_is_not_json_fails_its_run_only() -> None:
    results = Campaign("nj", f"{HERE}:not_json", grid(x=[0, 1, 2]), path=[TESTS]).run()
    assert [r["result"] for r in results] == [0, None, 2]
    assert results[1]["error"] == (
        "the program returned a value that is not JSON-serialisable (a value of type set is "
        "not JSON-serialisable); return numbers, strings, booleans, lists and dicts"
    )
    assert "run 1 (x=1): the program returned a value that is not JSON" in results.text()


def test_pandas_is_optional() -> None:
    results = Campaign("sq", f"{HERE}:square", [{"x": 3}], path=[TESTS]).run()
    assert results.rows()[0]["result"] == 9
    if "pandas" in sys.modules or _importable("pandas"):
        assert list(results.to_pandas()["result"]) == [9]
        return
    with pytest.raises(ImportError, match=re.escape("Results.to_pandas() needs pandas")):
        results.to_pandas()


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# ------------------------------------------------------------------------------------------------
# scenario files as programs
# ------------------------------------------------------------------------------------------------
def test_a_scenario_run_is_its_replay_with_the_parameters_applied() -> None:
    path = str(ROOT / "scenarios" / "async_vs_parallel_async.toml")
    runs = grid(**{"programs.spin.cycles": [40000, 160000]})
    results = Campaign("sc", path, runs).run()
    direct = replay(load_scenario(path))
    assert direct.emulator.recorder is not None
    assert results[0]["virtual_time_ps"] == direct.end_ps
    assert (
        results[0]["digest"]
        == hashlib.sha256(direct.emulator.recorder.to_jsonl().encode()).hexdigest()
    )
    assert results[1]["virtual_time_ps"] > results[0]["virtual_time_ps"]  # rank 0: 400 us
    with pytest.raises(CampaignError) as caught:
        Campaign("sc", path, [{"nosuch.key": 1}]).run()
    assert str(caught.value) == (
        "run 0 (nosuch.key=1): unknown parameter 'nosuch.key': the scenario has no table "
        "[nosuch] (parameters of a scenario run are dotted keys of its file, e.g. machine.ranks)"
    )


# ------------------------------------------------------------------------------------------------
# schedule exploration
# ------------------------------------------------------------------------------------------------
def test_exploration_finds_the_same_first_failure_serially_and_on_two_processes() -> None:
    expected = first_failing_index(100)  # 2
    reports = [
        explore(f"{HERE}:fails_on_seed", schedules=100, path=[TESTS], jobs=jobs)
        for jobs in (None, 2)
    ]
    for report in reports:
        assert report.first_failure is not None
        assert report.first_failure["run"] == expected
        assert report.first_failure["seed"] == derive_seed(0, expected)
        assert report.shrunk_seed == 3  # the stable order (seed 0) and 0, 1, 2 pass
        assert report.replay_is_exact
        assert report.command == ("aiopim explore test_campaign:fails_on_seed --replay 3")
    assert reports[0].text() == reports[1].text()


def test_ten_thousand_racy_callback_schedules_fail_first_at_the_same_seed() -> None:
    program = f"{EXAMPLES}/explore_racy_callback.py:total_is_right"
    machine = {"ranks": 4, "dpus_per_rank": 8}
    found = [
        explore(program, machine=machine, schedules=10_000, jobs=jobs).first_failure
        for jobs in (None, 2)
    ]
    assert found[0] is not None and found[1] is not None
    assert found[0]["run"] == found[1]["run"] == 1
    assert found[0]["digest"] == found[1]["digest"]
    assert found[0]["error"].splitlines()[0] == (
        "AssertionError: the callback summed 783456, expected 1043680"
    )


def test_the_fixed_program_passes_every_schedule_explored() -> None:
    report = explore(
        f"{EXAMPLES}/explore_racy_callback.py:total_is_right",
        params={"racy": False},
        machine={"ranks": 4, "dpus_per_rank": 8},
        schedules=8,
    )
    assert not report.failed and report.explored == 8
    report.assert_passes()


def test_the_pytest_fixture_explores(pim_explore: Explorer) -> None:
    report = pim_explore(fails_on_seed, schedules=10, shrink_budget=0)
    assert report.first_failure is not None
    assert report.first_failure["run"] == first_failing_index(10)
    assert report.shrunk_seed == report.first_failure["seed"]  # no shrinking asked
    with pytest.raises(AssertionError, match="schedule 2 of 10 fails"):
        report.assert_passes()


def test_campaigns_need_dask_only_for_the_dask_executor() -> None:
    code = (
        "import sys\n"
        "sys.modules['distributed'] = sys.modules['dask'] = None  # not installed\n"
        "from aiopim.campaign import CampaignError, DaskExecutor\n"
        "try:\n"
        "    DaskExecutor('local:2')\n"
        "except CampaignError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout == (
        "the Dask executor needs dask.distributed: pip install -e '.[cluster]'\n"
    ), done.stderr
