"""WRAM FIFOs in timelines and scenarios: trace events, summary, Gantt, actions, kernels, record."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import wram_fifo_keysum as keysum
from helpers import V1B_CYCLE_PS

import aiopim
from aiopim import timing
from aiopim._machine._program import DpuProgram
from aiopim.host import DpuSet
from aiopim.scenario import (
    KERNELS,
    ProgramSpec,
    ScenarioError,
    load_scenario,
    parse_scenario,
    record,
    replay,
)
from aiopim.scenario._record import RecordingError
from aiopim.trace import Timeline, chrome_trace, fill_counter, summarize
from aiopim.trace._gantt import _lanes

ROOT = Path(__file__).resolve().parent.parent
US = timing.PS_PER_US

STREAM = """\
[scenario]
name = "stream"

[machine]
ranks = 1
dpus_per_rank = 2

[programs.echo]
kernel = "stream"
cycles = 1100
ptr_size = 3
output_ptr_size = 3
add = 100
tasklets = 1

[[tasks]]
name = "host"
steps = [
  { op = "alloc", ranks = 1 },
  { op = "load", program = "echo" },
  { op = "fifo_link", fifo = "input_fifo", direction = "input", name = "in" },
  { op = "fifo_link", fifo = "output_fifo", direction = "output", name = "out" },
  { op = "launch", async = true },
  { op = "repeat", times = 6, steps = [
      { op = "fifo_push", fifo = "in", values = [10, 10], increment = 1 },
  ] },
  { op = "copy_to", symbol = "active", bytes = 8, fill = 0, parallel = true },
  { op = "sync" },
  { op = "fifo_drain", fifo = "out", into = "results" },
]

[expect]
data = [
  { buffer = "results", dtype = "uint64", count = 6, first = [110], step = [1] },
]
"""


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(textwrap.dedent(text), "f.toml")
    return info.value


# ================================================================================================
# the shipped FIFO scenarios
# ================================================================================================
def test_backpressure_fails_after_the_retry_budget(backend: str) -> None:
    r = replay(load_scenario(ROOT / "scenarios" / "fifo_backpressure.toml"), backend=backend)
    assert r.error is not None
    assert r.error.code == aiopim.DpuErrorCode.DPU_ERR_WRAM_FIFO_FULL
    tl = r.timeline
    fifo = [s for s in tl.slices if s.track == "FIFO input_fifo"]
    assert [s.cat for s in fifo] == ["fifo_push"] * 8 + ["fifo_full"]
    failed = fifo[-1]
    read = timing.parallel_wram_access_ps(16 * 4)  # the pointer pairs of the rank's 4 DPUs
    # 3 retries allowed: the SDK sleeps 4 times (5 us each) and reads the pointers 4 times
    assert failed.end - failed.start == 4 * (read + 5 * US)
    assert failed.end == r.end_ps
    assert dict(failed.args) == {"full_dpus": (0, 1, 2, 3), "retries": 4}
    retries = [i.time for i in tl.instants if i.cat == "fifo_retry"]
    assert retries == [failed.start + k * read + (k - 1) * 5 * US for k in range(1, 5)]
    # 4 results fill each output FIFO, 4 elements wait in each input FIFO
    for dpu in range(4):
        samples = tl.counters[(1, fill_counter("input_fifo", 0, dpu))]
        assert samples[-1][1] == 4
        assert max(v for _, v in samples) == 4
    # the stalled DPUs are drawn running until the end
    assert [(run.start, run.end, run.running) for run in tl.dpu_runs] == [
        (tl.dpu_runs[0].start, r.end_ps, True)
    ] * 4
    (stats,) = summarize(tl).fifo
    assert (stats.pushes, stats.pushed, stats.retries, stats.full) == (8, 32, 4, 1)
    assert (stats.flushes, stats.drained) == (0, 0)


def test_keysum_scenario_checks_every_pair() -> None:
    r = replay(load_scenario(ROOT / "scenarios" / "keysum_fifo.toml"))
    stream = r.streams["sums"]
    assert sorted(stream) == [(rank, dpu) for rank in range(2) for dpu in range(4)]
    for elements in stream.values():
        pairs = [tuple(e.view(np.uint64).tolist()) for e in elements]
        assert pairs == [(k, 64 * k + 129024) for k in range(64)]
    assert r.buffers["sums"].size == 8 * 64 * 16
    s = summarize(r.timeline)
    assert [(f.rank, f.pushes, f.pushed, f.flushes, f.drained) for f in s.fifo] == [
        (0, 64, 256, 3, 256),
        (1, 64, 256, 3, 256),
    ]
    text = s.text()
    assert "WRAM FIFOs:" in text
    assert "rank   pushes  elements  retries  FULL  flushes  drained" in text
    # the pushes happen while the DPUs run, and each is inside its PARALLEL_FIFO_PUSH job
    tl = r.timeline
    jobs = [j for j in tl.jobs if j.type.name == "PARALLEL_FIFO_PUSH" and j.rank == 0]
    pushes = [s for s in tl.slices if s.cat == "fifo_push" and s.pid == 1]
    assert len(jobs) == len(pushes) == 64
    for j, p in zip(jobs, pushes, strict=True):
        assert j.start == p.start and p.end == j.end
    run = tl.rank_dpu_spans(0)[0]
    assert all(run[0] <= p.start and p.end <= run[1] for p in pushes)


@pytest.mark.parametrize("mode", ["all", "each"])
def test_keysum_kernel_is_the_example_program(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario kernel repeats the example's DPU program: the same host gives the same trace."""
    kind = KERNELS["keysum"]

    def scenario_program(nr_tasklets: int, mode: str) -> DpuProgram:
        params = {key: p.default for key, p in kind.params.items()} | {"mode": mode}
        spec = ProgramSpec("wram_fifo_example", "keysum", nr_tasklets, {}, params, None, "")
        return kind.build(spec)

    traces = []
    for build in (keysum.build_program, scenario_program):
        monkeypatch.setattr(keysum, "build_program", build)
        emu = aiopim.Emulator(aiopim.MachineConfig(1, 2))
        result = emu.run(keysum.host, 1, 0, 4, mode, 0)
        assert result["complete"] and not result["wrong"]
        traces.append(chrome_trace(Timeline.from_emulator(emu)))
    assert traces[0] == traces[1]


def test_keysum_breaking_the_expectation_names_the_check(tmp_path: Path) -> None:
    text = (ROOT / "scenarios" / "keysum_fifo.toml").read_text()
    bad = tmp_path / "k.toml"
    bad.write_text(text.replace("step = [1, 64]", "step = [1, 63]"))
    with pytest.raises(ScenarioError) as info:
        replay(load_scenario(bad))
    err = info.value
    assert err.key == "expect.data[0]"
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "step = [1, 64]" in t)
    assert err.line == line
    assert "DPU 0.0.0 element 1 is [1, 129088], expected [1, 129087]" in err.message


def test_chrome_trace_has_fifo_tracks_and_fill_counters() -> None:
    r = replay(parse_scenario(STREAM))
    doc = json.loads(r.chrome_trace())
    events = doc["traceEvents"]
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    # jobs, DPUs, then the FIFO tracks, then one track per DPU
    assert [threads[1, tid] for tid in range(1, 7)] == [
        "jobs",
        "DPUs",
        "FIFO input_fifo",
        "FIFO output_fifo",
        "DPU 0.0.0",
        "DPU 0.0.1",
    ]
    pushes = [e for e in events if e.get("cat") == "fifo_push"]
    assert len(pushes) == 6 and {e["tid"] for e in pushes} == {3}
    assert all(e["args"] == {"dpus": 2, "retries": 0} for e in pushes)
    (flush,) = [e for e in events if e.get("cat") == "fifo_flush"]
    assert flush["name"] == "flush (12 elements)" and flush["args"] == {"dpus": 2, "elements": 12}
    fills = [e for e in events if e["ph"] == "C" and e["name"] == "output_fifo fill 0.0.1"]
    # the flush saw 6 results, then emptied the FIFO
    assert [e["args"] for e in fills] == [{"elements": 6}, {"elements": 0}]
    assert fills[1]["ts"] == flush["ts"] + flush["dur"]


def test_gantt_draws_fifo_lanes_and_retry_markers(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
    from aiopim.trace import save_gantt

    r = replay(load_scenario(ROOT / "scenarios" / "fifo_backpressure.toml"))
    lanes = {label: (items, points) for label, items, points in _lanes(r.timeline, "rank")}
    items, points = lanes["rank 0: FIFO input_fifo"]
    assert [s.cat for s in items][-1] == "fifo_full"
    assert [i.cat for i in points] == ["fifo_retry"] * 4
    out = tmp_path / "b.png"
    save_gantt(r.timeline, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


# ================================================================================================
# actions and kernels
# ================================================================================================
def test_stream_kernel_consumes_and_echoes(backend: str) -> None:
    r = replay(parse_scenario(STREAM), backend=backend)
    stream = r.streams["results"]
    got = {k: [int(e.view(np.uint64)[0]) for e in v] for k, v in stream.items()}
    assert got == {(0, 0): [110 + i for i in range(6)], (0, 1): [110 + i for i in range(6)]}
    # tasklet 0 works 1100 cycles (100 instructions of 11) per element
    (run, _) = r.timeline.dpu_runs
    assert run.end - run.start > 6 * 1100 * V1B_CYCLE_PS


def test_stream_without_output_only_consumes() -> None:
    text = STREAM.replace("add = 100", "output = false")
    text = text.replace(
        '  { op = "fifo_link", fifo = "output_fifo", direction = "output", name = "out" },\n', ""
    )
    text = text.replace('  { op = "fifo_drain", fifo = "out", into = "results" },\n', "")
    r = replay(parse_scenario(text[: text.index("[expect]")]))
    for d in r.emulator.rank(0).dpus:
        assert d.program is not None
        at = d.program.symbols()["input_fifo"].offset
        read_ptr, write_ptr = d.wram[at : at + 16].view(np.uint64).tolist()
        assert read_ptr == write_ptr == 6  # every pushed element was consumed
        assert not d.running
    assert summarize(r.timeline).fifo[0].pushed == 12


def test_push_without_value_repushes_the_prepared_buffers() -> None:
    text = STREAM.replace(
        '  { op = "repeat", times = 6, steps = [\n'
        '      { op = "fifo_push", fifo = "in", values = [10, 10], increment = 1 },\n'
        "  ] },\n",
        '  { op = "fifo_push", fifo = "in", value = 5, no_reset = true },\n'
        '  { op = "fifo_push", fifo = "in" },\n'
        '  { op = "fifo_push", fifo = "in", values = [1, 2] },\n',
    )
    r = replay(parse_scenario(text[: text.index("[expect]")]))
    got = {k: [int(e.view(np.uint64)[0]) for e in v] for k, v in r.streams["results"].items()}
    assert got == {(0, 0): [105, 105, 101], (0, 1): [105, 105, 102]}


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        (
            'fifo = "in", values',
            'fifo = "nope", values',
            "tasks[0].steps[5].steps[0].fifo",
            "no fifo_link step links a FIFO named 'nope'",
        ),
        (
            'fifo = "in", values',
            'fifo = "out", values',
            "tasks[0].steps[5].steps[0].fifo",
            "'out' is linked as an output FIFO; fifo_push needs an input FIFO",
        ),
        (
            'direction = "input"',
            'direction = "sideways"',
            "tasks[0].steps[2].direction",
            'expected "input" or "output"',
        ),
        (
            "values = [10, 10]",
            "values = [10, 10], value = 3",
            "tasks[0].steps[5].steps[0].values",
            "not both",
        ),
        (
            "values = [10, 10]",
            'value = "ten"',
            "tasks[0].steps[5].steps[0].value",
            "expected an integer or a list of integers",
        ),
        (
            'into = "results" }',
            'into = "results", async = true }',
            "tasks[0].steps[8].into",
            "an asynchronous drain returns before the elements arrive",
        ),
        (
            "count = 6, first = [110], step = [1]",
            "count = 6, sum = 3",
            "expect.data[0]",
            "exactly one of equals, all, sum, or (for FIFO streams)",
        ),
        (
            "count = 6, first = [110], step = [1]",
            "first = [110]",
            "expect.data[0]",
            "give first and step together",
        ),
        (
            "count = 6, first = [110], step = [1]",
            "first = [110], step = [1, 2]",
            "expect.data[0].step",
            "the same length",
        ),
        ("ptr_size = 3\n", "ptr_size = 11\n", "programs.echo", "ptr_size must be between 1 and 10"),
        ("add = 100", "add = 1.5", "programs.echo.add", "expected an integer"),
        (
            '{ op = "sync" },',
            '{ op = "copy_to", symbol = "active", bytes = 8, fill = "iota%0" },',
            "tasks[0].steps[7].fill",
            '"iota%N" (N > 0)',
        ),
    ],
)
def test_fifo_validation_errors(old: str, new: str, key: str, message: str) -> None:
    assert old in STREAM
    err = error_of(STREAM.replace(old, new, 1))
    assert err.key == key
    assert message in err.message
    assert err.line is not None and str(err).startswith(f"f.toml:{err.line}: {key}: ")


def test_count_checks_need_a_fifo_stream() -> None:
    text = STREAM.replace(
        '  { op = "sync" },\n',
        '  { op = "sync" },\n'
        '  { op = "copy_from", symbol = "active", bytes = 8, into = "flag" },\n',
    ).replace('buffer = "results"', 'buffer = "flag"')
    err = error_of(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if 'buffer = "flag"' in t)
    assert (err.key, err.line) == ("expect.data[0].buffer", line)
    assert "is not filled by a fifo_drain step" in err.message


def test_keysum_kernel_parameters_are_checked() -> None:
    text = (ROOT / "scenarios" / "keysum_fifo.toml").read_text()
    err = error_of(text.replace("elements = 4096", "elements = 4000"))
    assert err.key == "programs.keysum"
    assert "multiple of 4096" in err.message
    err = error_of(text.replace("elements = 4096", 'elements = 4096\nmode = "some"'))
    assert 'mode must be "all" or "each"' in err.message


def test_fifo_run_time_errors_name_the_step() -> None:
    text = STREAM.replace('fifo = "input_fifo"', 'fifo = "input_fif"')
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(text, "r.toml"))
    assert (info.value.line, info.value.key) == (21, "tasks[0].steps[2] (fifo_link)")
    assert "DPU_ERR_UNKNOWN_SYMBOL" in info.value.message
    text = STREAM.replace("values = [10, 10]", "values = [10, 20, 30]")
    with pytest.raises(ScenarioError, match="3 values for a target of 2 DPUs"):
        replay(parse_scenario(text))
    text = STREAM.replace("values = [10, 10]", "values = [10, [1, 2]]")
    with pytest.raises(ScenarioError, match="elements hold 1 64-bit word"):
        replay(parse_scenario(text))
    text = STREAM.replace("count = 6", "count = 7")
    with pytest.raises(ScenarioError, match=r"DPU 0\.0\.0 drained 6 element"):
        replay(parse_scenario(text))


def test_expected_step_error_lets_the_task_go_on() -> None:
    text = (ROOT / "scenarios" / "fifo_backpressure.toml").read_text()
    text = text.replace(
        '{ op = "repeat", times = 9, steps = [\n'
        '      { op = "fifo_push", fifo = "input_fifo", value = 1, increment = 1 },\n'
        "  ] },",
        '{ op = "repeat", times = 8, steps = [\n'
        '      { op = "fifo_push", fifo = "input_fifo", value = 1, increment = 1 },\n'
        "  ] },\n"
        '  { op = "fifo_push", fifo = "input_fifo", value = 9,'
        ' error = "DPU_ERR_WRAM_FIFO_FULL" },\n'
        '  { op = "fifo_link", fifo = "output_fifo", direction = "output", name = "o2" },\n'
        '  { op = "fifo_drain", fifo = "o2", into = "out" },\n'
        '  { op = "copy_to", symbol = "active", bytes = 8, fill = 0, parallel = true },\n'
        '  { op = "repeat", times = 4, steps = [\n'
        '      { op = "sleep", time = "20us" },\n'
        '      { op = "fifo_drain", fifo = "o2", into = "out" },\n'
        "  ] },\n"
        '  { op = "sync" },',
    )
    text = text[: text.index("[expect]")]
    text += (
        '[expect]\ndata = [ { buffer = "out", dtype = "uint64", count = 8, first = [1001], '
        "step = [1] } ]\n"
    )
    r = replay(parse_scenario(text))
    assert r.error is None
    # the element of the failed push never entered: each DPU returned elements 1..8 (+1000)
    assert all(len(v) == 8 for v in r.streams["out"].values())


# ================================================================================================
# record -> replay
# ================================================================================================
def echo_program(ptr_size: int = 2) -> aiopim.Program:
    prog = aiopim.Program("echo", nr_tasklets=2)
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("fin", ptr_size, 8)
    fout = prog.output_fifo("fout", ptr_size, 8)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if t.me():
            return
        flag = t.view(active)
        while True:
            await t.poll_until(lambda: not t.is_input_fifo_empty(fin) or not flag[0], fin, active)
            if t.is_input_fifo_empty(fin):
                return
            t.compute(300)
            await t.poll_until(lambda: not t.is_output_fifo_full(fout), fout)
            t.output_fifo_push(fout, t.input_fifo_peek(fin).view(np.uint64) * 2)
            t.input_fifo_pop(fin)

    return prog


async def pythonic_fifo_host() -> list[int]:
    dpus = await DpuSet.alloc(nr_ranks=2)
    await dpus.load(echo_program())
    fin = dpus.link_input_fifo("fin", np.uint64)
    fout = dpus.link_output_fifo("fout", np.uint64)
    fin.max_retries, fin.time_for_retry_us = 2, 3
    await dpus.launch(wait=False)
    got: list[int] = []
    for k in range(12):  # more than both FIFOs hold: a push fails after its retries
        elements = np.arange(len(dpus), dtype=np.uint64) + 10 * k
        try:
            await fin.push(elements, wait=k >= 2)
        except aiopim.DpuError as exc:
            assert exc.code == aiopim.DpuErrorCode.DPU_ERR_WRAM_FIFO_FULL
            break
    for batch in await fout.drain():
        got.extend(int(x) for x in batch.reshape(-1))
    await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
    async for _, element in fout.stream(poll_us=5):
        got.append(int(element[0]))
    await dpus.sync()
    await dpus.free()
    return got


@pytest.mark.parametrize("backend_record", ["asyncio", "trio"])
def test_record_pythonic_fifo_program_replays_the_same_trace(backend_record: str) -> None:
    machine = aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=3)
    rec = record(pythonic_fifo_host, machine=machine, backend=backend_record, name="fifo")
    text = rec.scenario_text
    assert '{ op = "fifo_link", fifo = "fin", direction = "input" },' in text
    assert '{ op = "fifo_link", fifo = "fout", direction = "output" },' in text
    assert "max_retries = 2, time_for_retry_us = 3" in text
    assert 'error = "DPU_ERR_WRAM_FIFO_FULL"' in text
    assert "values = [80, 81, 82, 83, 84, 85]" in text
    assert "async = true" in text
    assert 'fifos = { fin = { direction = "input", ptr_size = 2, data_size = 8 }' in text
    sc = parse_scenario(text, "fifo.toml")
    for b in ("asyncio", "trio"):
        assert replay(sc, backend=b).chrome_trace() == rec.chrome_trace()


def test_record_keysum_example_round_trip(backend: str) -> None:
    machine = aiopim.MachineConfig(nr_ranks=2, nr_dpus_per_rank=2)
    rec = record(keysum.host, 2, 0, 4, "all", 0, machine=machine, backend=backend, name="ks")
    assert rec.result["complete"] and not rec.result["wrong"]
    sc = parse_scenario(rec.scenario_text, "ks.toml")
    r = replay(sc, backend="trio" if backend == "asyncio" else "asyncio")
    assert r.chrome_trace() == rec.chrome_trace()
    assert r.end_ps == rec.emulator.now_ps
    retries = [s for s in r.timeline.slices if s.cat == "fifo_push" and dict(s.args)["retries"]]
    assert retries  # the recording reproduced the back-pressure the DPUs put on the host


async def leave_dpus_running() -> None:
    dpus = await DpuSet.alloc(nr_ranks=1)
    await dpus.load(echo_program())
    await dpus.launch(wait=False)
    await dpus.copy_to("active", np.ones(1, np.uint64), parallel=True)  # after the boot


def test_record_refuses_dpus_left_running() -> None:
    with pytest.raises(RecordingError, match="still running at the end"):
        record(leave_dpus_running, machine=aiopim.MachineConfig(1, 2))


def test_timeline_of_dpus_left_running() -> None:
    emu = aiopim.Emulator(aiopim.MachineConfig(1, 2))
    emu.run(leave_dpus_running)
    tl = Timeline.from_emulator(emu)
    assert [(r.dpu, r.end, r.running) for r in tl.dpu_runs] == [
        (0, emu.now_ps, True),
        (1, emu.now_ps, True),
    ]
    doc = json.loads(aiopim.trace.chrome_trace(tl))
    runs = [e for e in doc["traceEvents"] if e.get("cat") == "dpu_run" and e["tid"] >= 3]
    assert all(e["args"]["still_running"] is True for e in runs)
