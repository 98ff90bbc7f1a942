"""Scenario files: validation errors (line and key), replays, golden traces, record, CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from helpers import spin_program

import aiopim
from aiopim import timing
from aiopim._progress import virtual_time
from aiopim.cli import main as cli_main
from aiopim.scenario import (
    ScenarioError,
    load_scenario,
    parse_duration,
    parse_scenario,
    record,
    replay,
)
from aiopim.scenario._record import RecordingError
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_DEFAULT,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_FROM_DPU,
    DPU_XFER_NO_RESET,
    DPU_XFER_PARALLEL,
    DPU_XFER_TO_DPU,
    dpu_alloc,
    dpu_alloc_ranks,
    dpu_broadcast_to,
    dpu_callback,
    dpu_copy_from,
    dpu_foreach,
    dpu_free,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_rank_foreach,
    dpu_status,
)
from aiopim.trace import host_task

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("AIOPIM_UPDATE_GOLDEN") == "1"

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
symbols = { box = "wram:16" }

[[tasks]]
name = "host"
steps = [
  { op = "alloc", ranks = 1 },
  { op = "load", program = "spin" },
  { op = "launch" },
]
"""


# ================================================================================================
# validation
# ================================================================================================
def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(textwrap.dedent(text), "s.toml")
    return info.value


def test_minimal_scenario_parses() -> None:
    sc = parse_scenario(MINIMAL)
    assert sc.machine == aiopim.MachineConfig(1, 2, "v1B")
    assert [s.op for s in sc.tasks[0].steps] == ["alloc", "load", "launch"]
    assert sc.tasks[0].steps[2].line == 19
    assert sc.programs["spin"].symbols == {"box": ("wram", 16)}
    assert sc.total_steps() == 3


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "message"),
    [
        ('{ op = "launch" }', '{ op = "launhc" }', 19, "tasks[0].steps[2].op", "unknown action"),
        (
            '{ op = "launch" }',
            '{ op = "launch", asynch = true }',
            19,
            "tasks[0].steps[2].asynch",
            "unknown key for action 'launch'",
        ),
        (
            '{ op = "launch" }',
            '{ op = "launch", async = 1 }',
            19,
            "tasks[0].steps[2].async",
            "expected true or false",
        ),
        (
            '{ op = "launch" }',
            '{ op = "launch", at = "3 parsecs" }',
            19,
            "tasks[0].steps[2].at",
            "expected a duration",
        ),
        (
            '{ op = "launch" }',
            '{ op = "launch", rank = 0, dpu = 1 }',
            19,
            "tasks[0].steps[2].dpu",
            "give rank or dpu, not both",
        ),
        (
            '{ op = "launch" }',
            '{ op = "launch", set = "other" }',
            19,
            "tasks[0].steps[2].set",
            "no alloc step creates the DPU set 'other'",
        ),
        (
            '{ op = "launch" }',
            '{ op = "launch", error = "DPU_ERR_NOPE" }',
            19,
            "tasks[0].steps[2].error",
            "unknown DpuErrorCode name",
        ),
        (
            '{ op = "load", program = "spin" }',
            '{ op = "load", program = "spun" }',
            18,
            "tasks[0].steps[1].program",
            "no [programs.spun] table",
        ),
        (
            '{ op = "alloc", ranks = 1 }',
            '{ op = "alloc" }',
            17,
            "tasks[0].steps[0]",
            "exactly one of ranks, dpus",
        ),
        (
            '{ op = "alloc", ranks = 1 }',
            '{ op = "alloc", ranks = 0 }',
            17,
            "tasks[0].steps[0].ranks",
            "must be at least 1",
        ),
        (
            '{ op = "alloc", ranks = 1 }',
            "{ ranks = 1 }",
            17,
            "tasks[0].steps[0]",
            "a step needs the key 'op'",
        ),
        ('kernel = "cycles"', 'kernel = "cycels"', 9, "programs.spin.kernel", "unknown kernel"),
        (
            "cycles = 1100",
            'cycles = "many"',
            10,
            "programs.spin.cycles",
            "expected an integer >= 0",
        ),
        (
            "cycles = 1100",
            "cycles = 1100\ncolour = 3",
            11,
            "programs.spin.colour",
            "unknown key for kernel 'cycles'",
        ),
        (
            'symbols = { box = "wram:16" }',
            'symbols = { box = "dram:16" }',
            12,
            "programs.spin.symbols.box",
            'expected "wram:BYTES" or "mram:BYTES"',
        ),
        ("tasklets = 1", "tasklets = 40", 11, "programs.spin.tasklets", "between 1 and 24"),
        ("dpus_per_rank = 2", "dpus_per_rank = 65", 4, "machine", "nr_dpus_per_rank"),
        ("ranks = 1\ndpus", "ranks = true\ndpus", 5, "machine.ranks", "expected an integer"),
        ('name = "t"', "title = 't'", 2, "scenario.title", "unknown key for [scenario]"),
        ('name = "t"', "description = 'd'", 1, "scenario", "[scenario] needs the key 'name'"),
        ('name = "host"', 'name = "host"\nname2 = 1', 16, "tasks[0].name2", "unknown key"),
    ],
)
def test_validation_errors_name_line_and_key(
    old: str, new: str, line: int, key: str, message: str
) -> None:
    assert old in MINIMAL
    err = error_of(MINIMAL.replace(old, new, 1))
    assert (err.source, err.line, err.key) == ("s.toml", line, key)
    assert message in err.message
    assert str(err).startswith(f"s.toml:{line}: {key}: ")


def test_errors_inside_repeat_and_expect_sections() -> None:
    text = MINIMAL.replace(
        '  { op = "launch" },\n',
        '  { op = "repeat", times = 2, steps = [\n'
        '      { op = "launch" },\n'
        '      { op = "copy_to", symbol = "box" },\n'
        "  ] },\n",
    )
    err = error_of(text)
    assert (err.line, err.key) == (21, "tasks[0].steps[2].steps[1]")
    assert "needs the key 'bytes'" in err.message
    text = MINIMAL + '\n[expect]\ndata = [\n  { buffer = "nope", all = 1 },\n]\n'
    err = error_of(text)
    assert (err.line, err.key) == (24, "expect.data[0].buffer")
    err = error_of(MINIMAL + "\n[expect]\ntime = -3\n")
    assert (err.line, err.key) == (23, "expect.time")
    err = error_of(MINIMAL + "\n[extras]\nx = 1\n")
    assert (err.line, err.key) == (22, "extras")


def test_task_level_errors() -> None:
    text = MINIMAL + '\n[[tasks]]\nname = "host"\nsteps = []\n'
    err = error_of(text)
    assert (err.line, err.key) == (23, "tasks[1].name")
    assert "used twice" in err.message
    err = error_of(MINIMAL.replace('  { op = "launch" },\n', '  { op = "wait", event = "go" },\n'))
    assert (err.line, err.key, err.message) == (
        19,
        "tasks[0].steps[2].event",
        "no signal step sets the event 'go'",
    )


def test_toml_syntax_error_has_a_line() -> None:
    err = error_of(MINIMAL.replace("ranks = 1\n", "ranks = = 1\n", 1))
    assert err.line == 5
    assert "not valid TOML" in err.message


def test_kernel_parameter_checks_point_at_the_program() -> None:
    text = MINIMAL.replace(
        'kernel = "cycles"\ncycles = 1100',
        'kernel = "sum"\ninput_bytes = 100',
    )
    err = error_of(text)
    assert (err.line, err.key) == (8, "programs.spin")
    assert "multiple of 8" in err.message


def test_durations() -> None:
    assert parse_duration(12) == 12
    assert parse_duration("12.5us") == 12_500_000
    assert parse_duration("3 ms") == 3_000_000_000
    assert parse_duration("1s") == timing.PS_PER_S
    with pytest.raises(ValueError, match="whole number of picoseconds"):
        parse_duration("0.5ps")
    with pytest.raises(ValueError, match="negative"):
        parse_duration(-1)


# ================================================================================================
# replays
# ================================================================================================
def test_replay_minimal_time_is_exact(backend: str) -> None:
    r = replay(parse_scenario(MINIMAL), backend=backend)
    # load of the 4-byte `cycles` image, launch, 1100 cycles (100 instructions x 11), poll
    expected = (
        timing.load_time_ps(4)
        + timing.LAUNCH_BOOT_LATENCY_PS
        + 1100 * 2500
        + timing.COMPLETION_POLL_LATENCY_PS
    )
    assert r.end_ps == expected


def test_expectations_are_checked() -> None:
    ok = replay(parse_scenario(MINIMAL))
    text = MINIMAL + f"\n[expect]\ntime = {ok.end_ps + 1}\n"
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(text, "e.toml"))
    assert (info.value.line, info.value.key) == (23, "expect.time")
    assert info.value.message == (
        f"final virtual time is {timing.format_ps(ok.end_ps)} ({ok.end_ps} ps), expected "
        f"{timing.format_ps(ok.end_ps + 1)} ({ok.end_ps + 1} ps)"
    )
    assert replay(parse_scenario(text), check=False).end_ps == ok.end_ps


def test_data_checks_see_real_dpu_results() -> None:
    text = """\
    [scenario]
    name = "sum"
    [machine]
    ranks = 1
    dpus_per_rank = 2
    [programs.sum]
    kernel = "sum"
    input_bytes = 4096
    tasklets = 4
    [[tasks]]
    name = "host"
    steps = [
      { op = "alloc", ranks = 1 },
      { op = "load", program = "sum" },
      { op = "copy_to", symbol = "input", bytes = 4096, fill = "iota" },
      { op = "launch" },
      { op = "copy_from", symbol = "result", bytes = 8, into = "res" },
      { op = "copy_from", symbol = "input", bytes = 16, into = "head", dpus = [1] },
    ]
    [expect]
    data = [
      { buffer = "res", dtype = "uint64", all = 523776 },
      { buffer = "head", dtype = "uint32", equals = [0, 0, 0, 0, 0, 1, 2, 3] },
      { buffer = "res", dtype = "uint64", sum = WRONG },
    ]
    """
    sc = parse_scenario(textwrap.dedent(text).replace("WRONG", "1047552"))
    r = replay(sc)
    assert r.buffers["res"].view(np.uint64).tolist() == [[523776], [523776]]
    err_sc = parse_scenario(textwrap.dedent(text).replace("WRONG", "5"), "d.toml")
    with pytest.raises(ScenarioError) as info:
        replay(err_sc)
    assert (info.value.line, info.value.key) == (24, "expect.data[2]")
    assert "expected sum 5, got 1047552" in info.value.message


def test_expected_errors() -> None:
    bad_parallel = MINIMAL.replace(
        '  { op = "launch" },\n',
        '  { op = "copy_to", symbol = "box", bytes = 16, parallel = true, '
        'error = "DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER", at = "1ms" },\n'
        '  { op = "launch" },\n',
    )
    sc = parse_scenario(bad_parallel)
    # `box` is in WRAM: the parallel transfer is fine, so the expected error is missing
    with pytest.raises(ScenarioError, match="expected the step to fail"):
        replay(sc)
    mram = bad_parallel.replace('box = "wram:16"', 'box = "mram:16"')
    r = replay(parse_scenario(mram))
    assert r.error is None
    assert r.end_ps > timing.PS_PER_S // 1000  # the step waited for at = 1 ms
    failing = mram.replace(', error = "DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER"', "")
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(failing, "f.toml"))
    assert (info.value.line, info.value.key) == (19, "tasks[0].steps[2] (copy_to)")
    assert "DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER" in info.value.message
    expected = failing + '\n[expect]\nerror = "DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER"\n'
    r = replay(parse_scenario(expected))
    assert r.error is not None
    assert r.error.code == aiopim.DpuErrorCode.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER


def test_dpus_out_of_range_names_the_step() -> None:
    text = MINIMAL.replace(
        '{ op = "launch" }', '{ op = "copy_to", symbol = "box", bytes = 16, dpus = [0, 5] }'
    )
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(text, "r.toml"))
    assert (info.value.line, info.value.key) == (19, "tasks[0].steps[2] (copy_to)")
    assert info.value.message == "dpus [5] out of range: the target has 2 DPUs"


def test_concurrent_tasks_signal_and_wait(backend: str) -> None:
    text = """\
    [scenario]
    name = "two tasks"
    [machine]
    ranks = 2
    dpus_per_rank = 1
    [programs.spin]
    kernel = "cycles"
    cycles = 11000
    tasklets = 1
    [[tasks]]
    name = "a"
    steps = [
      { op = "alloc", ranks = 2 },
      { op = "load", program = "spin" },
      { op = "signal", event = "loaded" },
      { op = "launch", rank = 0 },
    ]
    [[tasks]]
    name = "b"
    label = "worker"
    steps = [
      { op = "wait", event = "loaded" },
      { op = "work", name = "think", time = "3us" },
      { op = "launch", rank = 1 },
    ]
    """
    r = replay(parse_scenario(textwrap.dedent(text)), backend=backend)
    tl = r.timeline
    loaded = timing.load_time_ps(4)
    launches = [(j.rank, j.start) for j in tl.jobs if j.type.name == "LAUNCH_RANK"]
    assert launches == [(0, loaded), (1, loaded + 3_000_000)]
    work = [(s.track, s.name, s.start, s.end) for s in tl.slices if s.cat == "host_work"]
    assert work == [("worker", "think", loaded, loaded + 3_000_000)]


def test_progress_reports_every_step() -> None:
    seen: list[tuple[int, int]] = []
    replay(parse_scenario(MINIMAL), progress=lambda d, t, ps: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


# ================================================================================================
# shipped scenarios and golden traces
# ================================================================================================
def test_shipped_scenarios_exist() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {
        "async_vs_parallel_sync",
        "async_vs_parallel_async",
        "async_vs_parallel_parallel",
        "double_buffered_pipeline",
        "keysum_fifo",
        "fifo_backpressure",
    } <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_golden_traces_byte_identical_on_both_backends(path: Path) -> None:
    sc = load_scenario(path)
    traces = {b: replay(sc, backend=b).chrome_trace() for b in ("asyncio", "trio")}
    assert traces["asyncio"] == traces["trio"]
    golden = GOLDEN / f"{path.stem}.json"
    if UPDATE:
        golden.write_text(traces["asyncio"], encoding="utf-8")
    assert golden.read_text(encoding="utf-8") == traces["asyncio"]  # and across runs


def test_async_vs_parallel_tell_the_seed_story() -> None:
    """Parallel transfers run during the launch; asynchronous ones wait for the DPUs."""
    results = {
        mode: replay(load_scenario(ROOT / "scenarios" / f"async_vs_parallel_{mode}.toml"))
        for mode in ("sync", "async", "parallel")
    }
    summaries = {mode: r.summary() for mode, r in results.items()}
    assert summaries["sync"].overlap == 0
    assert summaries["async"].overlap > 0  # rank 0 transfers while rank 1 still runs
    # in parallel mode every transfer but the setup of rank 1's `cycles` overlaps a DPU run
    tl = results["parallel"].timeline
    setup = [j for j in tl.jobs if j.type.name == "COPY_WRAM_TO_MATRIX"]
    assert [j.rank for j in setup] == [1]
    parallel = summaries["parallel"]
    assert parallel.overlap == parallel.transfer - (setup[0].end - setup[0].start)
    assert results["parallel"].end_ps < results["async"].end_ps == results["sync"].end_ps
    for r in results.values():
        assert r.buffers["mailbox"].view(np.uint32).tolist() == [[7] * 16] * 8
    for j in tl.jobs:
        if j.category == "parallel_xfer":
            run = tl.rank_dpu_spans(j.rank)[0]
            assert run[0] <= j.start and j.end <= run[1]


def test_pipeline_overlaps_transfers_with_launches() -> None:
    r = replay(load_scenario(ROOT / "scenarios" / "double_buffered_pipeline.toml"))
    tl = r.timeline
    a_runs = tl.rank_dpu_spans(0)
    b_copies = [
        (j.start, j.end) for j in tl.jobs if j.rank == 2 and j.type.name == "COPY_MRAM_TO_MATRIX"
    ]
    overlapping = [c for c in b_copies if any(s < c[1] and c[0] < e for s, e in a_runs)]
    assert len(overlapping) >= 2
    s = r.summary()
    assert s.overlap > s.transfer // 3
    path = [p.what for p in s.critical_path]
    assert path[:5] == ["LOAD", "SYNC", "LOAD", "SYNC", "prepare chunk"]
    assert path[-1] == "SYNC"


# ================================================================================================
# record -> replay
# ================================================================================================
async def recorded_program() -> None:
    dpus = await dpu_alloc_ranks(2, "")
    await dpu_load(dpus, spin_program(3000, 4))
    await dpu_launch(dpus, DPU_ASYNCHRONOUS)
    buf = np.arange(4, dtype=np.uint32)
    dpu_prepare_xfer(dpus, buf)
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 16, DPU_XFER_ASYNC | DPU_XFER_PARALLEL)
    for d, i in dpu_foreach(dpus):
        if i % 3 == 0:
            dpu_prepare_xfer(d, buf)
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 16, DPU_XFER_ASYNC | DPU_XFER_NO_RESET)

    async def consume(s: Any, rank_id: int, a: Any) -> None:
        await anyio.sleep(2e-6 * (rank_id + 1))

    await dpu_callback(dpus, consume, None, DPU_CALLBACK_ASYNC)
    await anyio.sleep(0.0005)
    for r, _ in dpu_rank_foreach(dpus):
        await dpu_launch(r, DPU_SYNCHRONOUS)
    await dpu_broadcast_to(dpus, "m", 0, bytes(64), 64, DPU_XFER_ASYNC)
    out = np.zeros((len(dpus), 4), np.uint32)
    for d, i in dpu_foreach(dpus):
        dpu_prepare_xfer(d, out[i])
    await dpu_push_xfer(dpus, DPU_XFER_FROM_DPU, "x", 0, 16, 0)
    await dpu_status(dpus)
    await dpu_copy_from(dpus.dpus[2], "x", 0, out[0], 16)
    await dpu_callback(dpus, lambda s, r, a: None, None, DPU_CALLBACK_DEFAULT)
    await dpu_free(dpus)
    await anyio.sleep(1e-6)


async def two_task_program() -> None:
    a = await dpu_alloc(2, "")
    b = await dpu_alloc(2, "")
    prog = spin_program(2000, 2)

    async def worker(dset: aiopim.DpuSet, label: str, delay: float) -> None:
        with host_task(label):
            await anyio.sleep(delay)
            await dpu_load(dset, prog)
            for _ in range(2):
                await dpu_launch(dset, DPU_SYNCHRONOUS)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, a, "left", 0)
        tg.start_soon(worker, b, "right", 3e-5)


@pytest.mark.parametrize("program", [recorded_program, two_task_program])
def test_record_then_replay_gives_the_same_trace(program: Any, backend: str) -> None:
    machine = aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=4)
    rec = record(program, machine=machine, backend=backend, name="rt")
    sc = parse_scenario(rec.scenario_text, "rt.toml")
    assert sc.expect.time_ps == rec.emulator.now_ps
    for b in ("asyncio", "trio"):
        assert replay(sc, backend=b).chrome_trace() == rec.chrome_trace()


def test_recorded_scenario_text() -> None:
    machine = aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=4)
    text = record(recorded_program, machine=machine, name="rt").scenario_text
    assert (
        '{ op = "copy_to", symbol = "x", bytes = 16, async = true, no_reset = true, '
        "dpus = [0, 3, 6] }," in text
    )
    assert '{ op = "callback", async = true, host_time = [2000000, 4000000] },' in text
    assert '{ op = "copy_to", broadcast = true, symbol = "m", bytes = 64, async = true },' in text
    assert '{ op = "dpu_copy_from", dpu = 2, symbol = "x", bytes = 16 },' in text
    assert 'kernel = "recorded"' in text
    # 4 tasklets x 3000 instructions share the pipeline: 3000 x 11 cycles of 2.5 ns
    assert f"all = [{3000 * 11 * 2500}, {3000 * 11 * 2500}]" in text


def test_record_refuses_what_it_cannot_replay() -> None:
    async def nested() -> None:
        dpus = await dpu_alloc_ranks(1, "")
        await dpu_load(dpus, spin_program(10))

        async def cb(s: Any, r: int, a: Any) -> None:
            await dpu_launch(s, DPU_SYNCHRONOUS)

        await dpu_callback(dpus, cb, None, DPU_CALLBACK_DEFAULT)

    with pytest.raises(RecordingError, match="callbacks must not use the DPUs"):
        record(nested, machine=aiopim.MachineConfig(1, 1))


# ================================================================================================
# command line
# ================================================================================================
# each scenario once, on the backends in turn (the traces of both are the golden ones, above)
@pytest.mark.parametrize(
    ("path", "backend_name"),
    [(p, ("asyncio", "trio")[i % 2]) for i, p in enumerate(SCENARIOS)],
    ids=lambda v: v.stem if isinstance(v, Path) else v,
)
def test_cli_replays_every_shipped_scenario(
    path: Path, backend_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
    trace, png = tmp_path / "out.json", tmp_path / "out.png"
    argv = ["replay", str(path), "--backend", backend_name, "--trace", str(trace)]
    rc = cli_main([*argv, "--gantt", str(png), "--summary", "--no-progress"])
    assert rc == 0
    assert trace.read_bytes() == (GOLDEN / f"{path.stem}.json").read_bytes()
    assert png.read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert f"{load_scenario(path).name}: replayed on {backend_name}, virtual time" in out
    assert "critical path:" in out and "overlap: transfers ran" in out
    assert ("WRAM FIFOs:" in out) == ("fifo" in path.stem)


def test_cli_replay_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL.replace('{ op = "launch" }', '{ op = "lunch" }'))
    assert cli_main(["replay", str(bad), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"aiopim replay: {bad}:19: tasks[0].steps[2].op: unknown action 'lunch'" in err


def test_cli_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "ok.toml"
    good.write_text(MINIMAL)
    assert cli_main(["replay", str(good), "--progress"]) == 0
    err = capsys.readouterr().err  # the shared display (tests/test_progress.py)
    end = virtual_time(replay(parse_scenario(MINIMAL)).end_ps)
    assert f"3/3 steps virtual time {end}" in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)


def test_cli_record(tmp_path: Path) -> None:
    mod = tmp_path / "myhost.py"
    mod.write_text(
        textwrap.dedent(
            """\
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
        )
    )
    out, trace = tmp_path / "rec.toml", tmp_path / "rec.json"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "aiopim.cli",
            "record",
            "myhost:main",
            str(out),
            "--ranks",
            "1",
            "--dpus-per-rank",
            "2",
            "--trace",
            str(trace),
        ],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    sc = load_scenario(out)
    assert sc.name == "myhost:main"
    assert replay(sc).chrome_trace() == trace.read_text()
    doc = json.loads(trace.read_text())
    assert doc["otherData"]["scenario"] == "myhost:main"


def test_docs_list_every_action_and_kernel() -> None:
    from aiopim.scenario import ACTIONS, KERNELS

    doc = (ROOT / "docs" / "timelines.md").read_text(encoding="utf-8")
    first_cells = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `")]
    for name in [*ACTIONS, *KERNELS]:
        assert any(f"`{name}`" in cell for cell in first_cells), name
