"""Recorder events and the timeline exports: Chrome trace JSON, summary, Gantt."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from helpers import emu, run_time_ps, spin_program

import aiopim
from aiopim import timing
from aiopim._machine._recorder import Recorder
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_ASYNC,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_PARALLEL,
    DPU_XFER_TO_DPU,
    dpu_alloc_ranks,
    dpu_callback,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_rank_foreach,
    dpu_sync,
)
from aiopim.trace import (
    Timeline,
    chrome_trace,
    host_task,
    register_event_kind,
    summarize,
)

INSTR = 1000
RUN = run_time_ps(INSTR)  # one tasklet alone on a v1B DPU


async def launch_with_parallel_update() -> None:
    dpus = await dpu_alloc_ranks(1, "")
    await dpu_load(dpus, spin_program(INSTR))
    await dpu_launch(dpus, DPU_ASYNCHRONOUS)
    dpu_prepare_xfer(dpus, np.arange(4, dtype=np.uint32))
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 16, DPU_XFER_ASYNC | DPU_XFER_PARALLEL)
    await dpu_sync(dpus)


def trace_of(e: aiopim.Emulator, **kw: Any) -> dict[str, Any]:
    return json.loads(chrome_trace(Timeline.from_emulator(e), **kw))  # type: ignore[no-any-return]


def us(ps: int) -> float:
    return ps / 1e6


def test_chrome_trace_events_are_exact() -> None:
    e = emu(ranks=1, dpus=2)
    e.run(launch_with_parallel_update)
    doc = trace_of(e)
    assert doc["displayTimeUnit"] == "ns"
    events = doc["traceEvents"]
    names = {
        (ev["pid"], ev["tid"]): ev["args"]["name"]
        for ev in events
        if ev["ph"] == "M" and ev["name"] in ("process_name", "thread_name")
    }
    assert names == {
        (0, 0): "host",
        (0, 1): "main",
        (1, 0): "rank 0",
        (1, 1): "jobs",
        (1, 2): "DPUs",
        (1, 3): "DPU 0.0.0",
        (1, 4): "DPU 0.0.1",
    }
    load = timing.load_time_ps(4)  # the 4-byte initial value of "instructions"
    boot = load + timing.LAUNCH_BOOT_LATENCY_PS
    xfer = timing.transfer_time_ps("parallel", [16, 16])
    stop = boot + RUN
    jobs = [
        (ev["name"], ev["ts"], ev["dur"])
        for ev in events
        if ev["ph"] == "X" and (ev["pid"], ev["tid"]) == (1, 1)
    ]
    assert jobs == [
        ("LOAD", 0, us(load)),
        ("SYNC", us(load), 0),
        ("LAUNCH_RANK", us(load), us(timing.LAUNCH_BOOT_LATENCY_PS)),
        ("PARALLEL_COPY_WRAM_TO_MATRIX", us(boot), us(xfer)),
        ("SYNC", us(stop + timing.COMPLETION_POLL_LATENCY_PS), 0),
    ]
    runs = [
        (ev["tid"], ev["name"], ev["ts"], ev["dur"], ev["args"])
        for ev in events
        if ev["ph"] == "X" and ev["pid"] == 1 and ev["tid"] >= 2
    ]
    assert runs == [
        (2, "DPUs running", us(boot), us(RUN), {"dpu_runs": 2}),
        (3, "spin", us(boot), us(RUN), {"program": "spin"}),
        (4, "spin", us(boot), us(RUN), {"program": "spin"}),
    ]
    parallel = next(ev for ev in events if ev.get("name") == "PARALLEL_COPY_WRAM_TO_MATRIX")
    assert parallel["cat"] == "parallel_xfer"
    assert parallel["args"] == {
        "bytes": 32,
        "dpus": 2,
        "flags": DPU_XFER_ASYNC | DPU_XFER_PARALLEL,
        "seq": 4,
        "submit_ps": load,
    }
    waits = [(ev["name"], ev["ts"], ev["dur"]) for ev in events if ev.get("cat") == "host_wait"]
    assert waits == [
        ("wait: load", 0, us(load)),
        ("wait: sync", us(load), us(stop + timing.COMPLETION_POLL_LATENCY_PS - load)),
    ]
    depth = [(ev["ts"], ev["args"]["jobs"]) for ev in events if ev["ph"] == "C"]
    assert depth == [
        (0, 2),  # LOAD + SYNC queued
        (us(load), 3),  # SYNC done; LAUNCH, copy, SYNC queued
        (us(boot), 2),
        (us(boot + xfer), 1),
        (us(stop + timing.COMPLETION_POLL_LATENCY_PS), 0),
    ]
    assert doc["otherData"]["end_us"] == us(stop + timing.COMPLETION_POLL_LATENCY_PS)


def test_trace_text_is_canonical_and_per_dpu_tracks_optional() -> None:
    e = emu(ranks=1, dpus=2)
    e.run(launch_with_parallel_update)
    text = chrome_trace(Timeline.from_emulator(e))
    lines = text.splitlines()
    assert lines[0] == '{"displayTimeUnit":"ns",'
    for line in lines[3:-1]:  # one event per line, keys sorted, no spaces
        obj = json.loads(line.rstrip(","))
        assert line.rstrip(",") == json.dumps(obj, sort_keys=True, separators=(",", ":"))
    short = json.loads(chrome_trace(Timeline.from_emulator(e), per_dpu=False))
    tracks = {ev["args"]["name"] for ev in short["traceEvents"] if ev["name"] == "thread_name"}
    assert tracks == {"main", "jobs", "DPUs"}


def test_timestamps_keep_picoseconds_exactly() -> None:
    tl = Timeline()
    tl.add_slice(0, "main", "a", "host_work", 1, 1_000_002_500)
    ev = json.loads(chrome_trace(tl))["traceEvents"][-1]
    text = chrome_trace(tl).splitlines()[-2]
    assert '"ts":0.000001' in text and '"dur":1000.002499' in text
    assert ev["ts"] == 0.000001


def test_overlapping_slices_go_to_extra_tracks() -> None:
    """Two host tasks with one label wait at the same time: the waits get separate threads."""

    async def main() -> None:
        dpus = await dpu_alloc_ranks(2, "")
        await dpu_load(dpus, spin_program(INSTR))
        ranks = [r for r, _ in dpu_rank_foreach(dpus)]
        async with anyio.create_task_group() as tg:
            for r in ranks:
                tg.start_soon(dpu_launch, r, DPU_SYNCHRONOUS)

    e = emu(ranks=2, dpus=1)
    e.run(main)
    doc = trace_of(e)
    threads = {
        ev["tid"]: ev["args"]["name"]
        for ev in doc["traceEvents"]
        if ev["name"] == "thread_name" and ev["pid"] == 0
    }
    assert threads == {1: "main", 2: "main #2"}
    by_tid: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X":
            by_tid.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in by_tid.values():  # every thread's slices are disjoint (so they nest)
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start + 1e-9
    launches = [ev for ev in doc["traceEvents"] if ev.get("name") == "wait: launch"]
    assert {ev["tid"] for ev in launches} == {1, 2}


def test_host_task_labels_name_host_lanes() -> None:
    async def main() -> None:
        dpus = await dpu_alloc_ranks(1, "")
        with host_task("loader"):
            await dpu_load(dpus, spin_program(INSTR))
        await dpu_launch(dpus, DPU_SYNCHRONOUS)

    e = emu(ranks=1, dpus=1)
    e.run(main)
    tl = Timeline.from_emulator(e)
    assert [(w.task, w.what) for w in tl.host_waits] == [("loader", "load"), ("main", "launch")]


def test_callbacks_are_host_slices() -> None:
    async def main() -> None:
        dpus = await dpu_alloc_ranks(2, "")
        await dpu_load(dpus, spin_program(INSTR))

        async def cb(s: Any, rank_id: int, a: Any) -> None:
            await anyio.sleep(5e-6)

        await dpu_callback(dpus, cb, None, DPU_CALLBACK_ASYNC)
        await dpu_sync(dpus)

    e = emu(ranks=2, dpus=1)
    e.run(main)
    tl = Timeline.from_emulator(e)
    cbs = [s for s in tl.slices if s.cat == "host_callback"]
    assert [(s.name, s.duration) for s in cbs] == [
        ("callback (rank 0)", 5_000_000),
        ("callback (rank 1)", 5_000_000),
    ]
    assert {s.track for s in cbs} == {"callbacks"}


def test_summary_figures() -> None:
    e = emu(ranks=1, dpus=2)
    e.run(launch_with_parallel_update)
    tl = Timeline.from_emulator(e)
    s = summarize(tl)
    load = timing.load_time_ps(4)
    boot = load + timing.LAUNCH_BOOT_LATENCY_PS
    xfer = timing.transfer_time_ps("parallel", [16, 16])
    end = boot + RUN + timing.COMPLETION_POLL_LATENCY_PS
    assert s.end == end
    (r,) = s.ranks
    assert (r.rank, r.busy, r.idle, r.dpu, r.transfer, r.jobs) == (
        0,
        boot + RUN,  # load, launch, run; the poll latency is idle
        timing.COMPLETION_POLL_LATENCY_PS,
        RUN,
        xfer,
        5,
    )
    assert (s.transfer, s.overlap, s.dpu, s.host_wait) == (xfer, xfer, RUN, end)
    assert [(p.what, p.start, p.end) for p in s.critical_path] == [
        ("LOAD", 0, load),
        ("SYNC", load, load),
        ("LAUNCH_RANK", load, boot),
        ("DPUs running", boot, boot + RUN),
        ("SYNC", end, end),
    ]
    text = s.text()
    assert "overlap: transfers ran 2.160 us, 2.160 us of it (100.0%) while DPUs ran" in text
    assert f"critical path: 5 steps, {(boot + RUN) / 1e6:.3f} us busy" in text


def test_extension_event_kinds() -> None:
    """Unknown kinds show as instants; a registered renderer draws them its own way."""
    rec = Recorder()
    rec.add("dma_stall", rank=1, dpu=3, retries=2)
    rec.add("fifo_note", text="hello")
    tl = Timeline.from_recorder(rec)
    assert [(i.pid, i.name, dict(i.args)) for i in tl.instants] == [
        (2, "dma_stall", {"rank": 1, "dpu": 3, "retries": 2}),
        (0, "fifo_note", {"text": "hello"}),
    ]

    def draw(t: Timeline, time: int, f: dict[str, Any]) -> None:
        t.add_slice(f["rank"] + 1, f"FIFO {f['dpu']}", "push", "fifo", time, time + 10)
        t.add_counter(f["rank"] + 1, "fifo fill", time, f["retries"])

    register_event_kind("test_fifo_push", draw)
    rec2 = Recorder()
    rec2.add("test_fifo_push", rank=0, dpu=5, retries=3)
    doc = json.loads(chrome_trace(Timeline.from_recorder(rec2)))
    body = [ev for ev in doc["traceEvents"] if ev["ph"] != "M"]
    assert body == [
        {
            "args": {},
            "cat": "fifo",
            "dur": 0.00001,
            "name": "push",
            "ph": "X",
            "pid": 1,
            "tid": 1,
            "ts": 0,
        },
        {"args": {"value": 3}, "name": "fifo fill", "ph": "C", "pid": 1, "tid": 0, "ts": 0},
    ]
    with pytest.raises(ValueError, match="built-in"):
        register_event_kind("job_end", draw)


def test_recorder_counter_events() -> None:
    rec = Recorder()
    rec.counter("fifo fill", 2, 7)
    rec.counter("host buffers", -1, 1)
    tl = Timeline.from_recorder(rec)
    assert tl.counters == {(3, "fifo fill"): [(0, 7)], (0, "host buffers"): [(0, 1)]}


def test_no_recorder_calls_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("recorder called with record=False")

    for name in (
        "add",
        "job_submitted",
        "job_started",
        "job_finished",
        "job_flushed",
        "dpu_stopped",
        "host_wait",
        "callback_ran",
        "host_work",
        "counter",
    ):
        monkeypatch.setattr(Recorder, name, boom)
    e = emu(ranks=1, dpus=2, record=False)
    e.run(launch_with_parallel_update)
    assert e.recorder is None
    with pytest.raises(ValueError, match="record=False"):
        Timeline.from_emulator(e)


def test_gantt_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
    import matplotlib.pyplot as plt

    from aiopim.trace import gantt, plot_timelines, save_gantt

    e = emu(ranks=1, dpus=2)
    e.run(launch_with_parallel_update)
    tl = Timeline.from_emulator(e)
    out = tmp_path / "g.png"
    save_gantt(tl, out, title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = gantt(tl, lanes="dpu")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["host: main", "rank 0: jobs", "DPU 0.0.0", "DPU 0.0.1"]
    ax = gantt(tl)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "host: main",
        "rank 0: jobs",
        "rank 0: DPUs",
    ]
    fig = plot_timelines([("a", tl), ("b", tl)])
    assert [a.get_title() for a in fig.axes] == ["a", "b"]
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "load",
        "launch job",
        "sync job",
        "parallel transfer",
        "DPUs running",
        "host waits: load",
        "host waits: sync",
    ]
    assert fig.axes[1].get_legend() is None
    plt.close("all")
