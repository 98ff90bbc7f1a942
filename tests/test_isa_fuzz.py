"""Bad binaries never crash the process (goal 7 of issue 33).

Random instruction words and mutated example binaries (``tests/isa_fuzz_worker.py`` builds
them) run on the compiled interpreter in child processes, many cases per child. Each child
prints one JSON record per case; the parent requires that no child died (a signal, an abort, a
hang) and that every case ended in a legal way: the program ended, a DPU stopped in fault
(``DPU_ERR_DPU_FAULT`` with a fault reason), a run stopped by the cycle guard, DPUs still
running when the host stopped watching, or, for a damaged ELF file only, a ``DpuError`` at load.
A subset of the cases also runs on the pure-Python path, which must leave the same records
(fault reasons, cycles, instructions, registers, WRAM, MRAM and atomic-bit digests).

A crash names the case: the child's last ``start`` line without a record is rerun alone, then
(if it does not crash alone) every case of that child one per process. Reproduce a case with
``python tests/isa_fuzz_worker.py --engine compiled words:0:17``. ``AIOPIM_FUZZ_SEED`` changes
the seed of the default run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import isa_fuzz_worker as worker
import pytest

WORKER = Path(__file__).with_name("isa_fuzz_worker.py")
SEED = int(os.environ.get("AIOPIM_FUZZ_SEED", "0"))
#: seconds one child may take
TIMEOUT = float(os.environ.get("AIOPIM_FUZZ_TIMEOUT", "600"))
#: fields of a record that may differ between the compiled and the pure-Python path
UNCOMPARED = ("cpu_ms",)
Record = dict[str, Any]


# ================================================================================================
# child processes
# ================================================================================================
def command(specs: list[str], engine: str) -> list[str]:
    """The worker's command line for ``specs`` (``GEN:SEED:A-B``) on ``engine``."""
    return [sys.executable, str(WORKER), "--engine", engine, *specs]


def reproduce(key: str, engine: str = "compiled") -> str:
    """The shell command that runs case ``key`` alone."""
    return f"python tests/isa_fuzz_worker.py --engine {engine} {key}"


@dataclass
class ChildRun:
    """What one child printed and how it ended."""

    records: dict[str, Record]
    started: list[str]
    returncode: int | None  # None: killed after TIMEOUT
    done: bool
    stderr: str
    #: the path the child's runs used, as it reported it (None: not reported)
    engine: str | None = None

    @property
    def died(self) -> bool:
        return self.returncode != 0 or not self.done

    def how(self) -> str:
        """How the child died, in words."""
        rc = self.returncode
        if rc is None:
            return f"hung (killed after {TIMEOUT:.0f} s)"
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exited with status {rc}" if rc else "exited without finishing its cases"


def run_child(specs: list[str], engine: str) -> ChildRun:
    """Run the worker on ``specs``; its records by key, whatever happens to it."""
    try:
        proc = subprocess.run(
            command(specs, engine),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            cwd=WORKER.parent.parent,
        )
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = _text(exc.stdout)
        err = _text(exc.stderr)
        rc = None
    records: dict[str, Record] = {}
    started: list[str] = []
    done = False
    used = None
    for line in out.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the crash
        if "start" in item:
            started.append(item["start"])
        elif "key" in item:
            records[item["key"]] = item
        elif "done" in item:
            done = True
        elif "engine" in item:
            used = item["engine"]
    return ChildRun(records, started, rc, done, err, used)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


def _fail_on_death(run: ChildRun, specs: list[str], engine: str) -> None:
    """Fail with the case that killed the child (found by rerunning cases one per process)."""
    suspects = [k for k in run.started if k not in run.records]
    tail = run.stderr[-3000:]
    if not suspects:
        pytest.fail(f"worker {' '.join(specs)} {run.how()} after its cases:\n{tail}")
    suspect = suspects[-1]
    alone = run_child([suspect], engine)
    if alone.died:
        culprits = [(suspect, alone)]
    else:  # the crash needed what earlier cases left in the process
        culprits = []
        for key in run.started:
            one = run_child([key], engine)
            if one.died:
                culprits.append((key, one))
    lines = [f"worker {' '.join(specs)} ({engine}) {run.how()} during case {suspect}"]
    for key, one in culprits:
        lines.append(f"case {key} alone {one.how()}: {reproduce(key, engine)}")
        lines.append(one.stderr[-2000:])
    if not culprits:
        batch = " ".join(specs)
        lines.append(
            f"no case crashes alone; rerun the batch: python tests/isa_fuzz_worker.py "
            f"--engine {engine} {batch}"
        )
    lines.append(f"the child's stderr:\n{tail}")
    pytest.fail("\n".join(lines))


# ================================================================================================
# legal outcomes
# ================================================================================================
_REASON = re.compile(r"^DPU \d+\.\d+\.\d+ thread \d+ at PC -?\d+")


def problems(rec: Record) -> list[str]:
    """What is wrong with a case's record (empty: a legal outcome)."""
    outcome = rec["outcome"]
    if outcome == "exception":
        return [f"{rec['phase']} raised {rec['error']}\n{rec['traceback']}"]
    if outcome == "load_error":
        return [] if not rec["must_load"] else [f"{rec['phase']} failed: {rec['error']}"]
    out: list[str] = []
    guard = rec["guard"]
    states = [d["state"] for d in rec["dpus"]]
    for i, d in enumerate(rec["dpus"]):
        state = d["state"]
        if state == "fault" and not _REASON.match(d.get("reason", "")):
            out.append(f"DPU {i}: fault without a reason naming thread and PC: {d}")
        at = re.search(r" at PC (\d+)", d.get("reason", ""))
        if state == "fault" and at and int(at.group(1)) in rec.get("fits", ()):
            out.append(f"DPU {i}: an access ending exactly at a memory's end faulted: {d}")
        if state == "guard" and (guard != "cycles" or "max_run_cycles" not in d["reason"]):
            out.append(f"DPU {i}: stopped by the cycle guard in a {guard} run: {d}")
        if state == "running" and guard != "horizon":
            out.append(f"DPU {i}: still running after a synchronous launch returned")
        if state not in ("end", "fault", "guard", "running"):
            out.append(f"DPU {i}: unknown state {state}")
    # the host waited for the DPUs unless some still run; it then sees any fault
    stopped = "running" not in states and {"fault", "guard"} & set(states)
    expected = "DPU_ERR_DPU_FAULT" if stopped else None
    if rec["launch"] != expected:
        out.append(f"launch/sync raised {rec['launch']}, expected {expected} for DPUs {states}")
    return out


def fault_kind(reason: str) -> str:
    """A fault reason's kind, for the coverage counts."""
    what = reason.split(": ", 1)[-1]
    for kind, pattern in (
        ("guard", "max_run_cycles"),
        ("memory", "memory fault: WRAM"),
        ("safe", "safe register"),
        ("dma", "DMA fault"),
        ("pc", "outside the loaded program"),
        ("thread", "does not exist"),
        ("illegal", "illegal instruction"),
        ("unimplemented", "unimplemented"),
        ("software", "fault "),
    ):
        if pattern in what:
            return kind
    return "other"


# ================================================================================================
# a fuzz run
# ================================================================================================
@dataclass
class Summary:
    """What a fuzz run saw."""

    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    file_mutants_run: int = 0
    compared: int = 0
    children: int = 0

    def __str__(self) -> str:
        return (
            f"{self.cases} cases in {self.children} children: outcomes {dict(self.outcomes)}, "
            f"DPU states {dict(self.states)}, faults {dict(self.faults)}, "
            f"{self.file_mutants_run} damaged ELF files ran, {self.compared} compared with "
            "the pure-Python path"
        )


def batches(counts: dict[str, int], seed: int, size: int) -> list[list[str]]:
    """The children's case specs: ``size`` cases each (the last fewer), in generator order."""
    out: list[list[str]] = [[]]
    room = size
    for gen, n in counts.items():
        first = 0
        while first < n:
            if room == 0:
                out.append([])
                room = size
            last = min(first + room, n)
            out[-1].append(f"{gen}:{seed}:{first}-{last - 1}")
            room -= last - first
            first = last
    return out


def fuzz(counts: dict[str, int], seed: int, size: int, compare_every: int) -> Summary:
    """Run ``counts`` cases of each generator on the compiled path (``size`` per child) and
    every ``compare_every``-th also on the pure-Python path; fail on any crash, illegal outcome
    or difference."""
    summary = Summary()
    bad: list[str] = []
    compare: list[str] = []
    records: dict[str, Record] = {}
    for specs in batches(counts, seed, size):
        run = run_child(specs, "compiled")
        summary.children += 1
        if run.died:
            _fail_on_death(run, specs, "compiled")
        assert run.engine in ("compiled", None), f"the child ran on {run.engine}:\n{run.stderr}"
        records |= run.records
    for key, rec in records.items():
        summary.cases += 1
        summary.outcomes[rec["outcome"]] += 1
        bad += [f"{key} ({rec['note']}): {p}\n  {reproduce(key)}" for p in problems(rec)]
        for d in rec.get("dpus", ()):
            summary.states[d["state"]] += 1
            if "reason" in d:
                summary.faults[fault_kind(d["reason"])] += 1
        if rec["outcome"] == "run" and not rec["must_load"]:
            summary.file_mutants_run += 1
        if int(key.rsplit(":", 1)[1]) % compare_every == 0:
            compare.append(key)
    assert not bad, f"{len(bad)} illegal outcomes:\n" + "\n".join(bad[:20])
    diffs: list[str] = []
    for first in range(0, len(compare), size):
        keys = compare[first : first + size]
        run = run_child(keys, "python")
        summary.children += 1
        if run.died:
            _fail_on_death(run, keys, "python")
        assert run.engine in ("python", None), f"the child ran on {run.engine}"
        for key in keys:
            a = {k: v for k, v in records[key].items() if k not in UNCOMPARED}
            b = {k: v for k, v in run.records.get(key, {}).items() if k not in UNCOMPARED}
            summary.compared += 1
            if a != b:
                diffs.append(_difference(key, a, b))
    assert not diffs, f"{len(diffs)} cases differ between the paths:\n" + "\n".join(diffs[:10])
    return summary


def _difference(key: str, compiled: Record, python: Record) -> str:
    lines = [f"{key} ({compiled['note']}): compiled vs python"]
    for name in sorted(set(compiled) | set(python)):
        a, b = compiled.get(name), python.get(name)
        if name == "dpus" and isinstance(a, list) and isinstance(b, list):
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                lines += [f"  DPU {i} {f}: {x.get(f)} | {y.get(f)}" for f in x if x[f] != y.get(f)]
        elif a != b:
            lines.append(f"  {name}: {a} | {b}")
    lines.append(f"  {reproduce(key)}; {reproduce(key, 'python')}")
    return "\n".join(lines)


def _check_coverage(summary: Summary) -> None:
    """The run reached what it is meant to reach (so that "no crash" means something)."""
    assert {"end", "fault", "guard", "running"} <= set(summary.states), summary
    assert len(set(summary.faults) - {"guard", "other"}) >= 4, summary
    assert summary.outcomes["load_error"] >= 1, summary
    assert summary.file_mutants_run >= 1, summary


# ================================================================================================
# tests
# ================================================================================================
def test_the_worker_names_cases_and_rebuilds_them_identically() -> None:
    assert worker.parse_keys("words:3:7-9") == ["words:3:7", "words:3:8", "words:3:9"]
    assert worker.parse_keys("mutate:0:5") == ["mutate:0:5"]
    for key in ("words:0:1", "mutate:0:1", "mutate:0:2"):
        assert worker.make_case(key) == worker.make_case(key)
    assert worker.make_case("words:0:1").elf != worker.make_case("words:1:1").elf
    assert batches({"words": 5, "mutate": 3}, 2, 3) == [
        ["words:2:0-2"],
        ["words:2:3-4", "mutate:2:0-0"],
        ["mutate:2:1-2"],
    ]


def test_illegal_outcomes_are_recognised() -> None:
    """The checker is not vacuous: each way a case may go wrong is named."""
    fault = {"state": "fault", "reason": "DPU 0.0.0 thread 1 at PC 30 (main+4): memory fault"}
    ok: Record = {"outcome": "run", "guard": "cycles", "launch": "DPU_ERR_DPU_FAULT"}
    ok |= {"must_load": True, "fits": [31], "dpus": [fault, {"state": "end"}]}
    assert problems(ok) == []
    assert problems(ok | {"launch": None}) != []  # a fault the host was not told about
    assert problems(ok | {"dpus": [{"state": "end"}], "launch": None}) == []
    assert problems(ok | {"fits": [30]}) != []  # an access that fits faulted
    assert problems(ok | {"dpus": [fault | {"reason": "boom"}]}) != []
    assert problems(ok | {"dpus": [{"state": "running"}], "launch": None}) != []  # not awaited
    assert problems(ok | {"guard": "horizon", "dpus": [{"state": "running"}], "launch": None}) == []
    crash = {"outcome": "exception", "phase": "launch", "error": "IndexError", "traceback": ""}
    assert problems(ok | crash) != []
    damaged = {"outcome": "load_error", "phase": "load_elf", "error": "DPU_ERR_ELF_INVALID_FILE"}
    assert problems(ok | damaged) != []  # generated programs must load
    assert problems(ok | damaged | {"must_load": False}) == []


def test_a_crashing_child_is_reported_with_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child killed by a signal fails the test with the case and the command to rerun it."""
    fake = ChildRun({}, ["words:0:4"], -signal.SIGSEGV, False, "Fatal Python error")
    calls: list[list[str]] = []

    def child(specs: list[str], engine: str) -> ChildRun:
        calls.append(specs)
        return ChildRun({}, specs, -signal.SIGSEGV, False, "Segmentation fault")

    monkeypatch.setattr(sys.modules[__name__], "run_child", child)
    with pytest.raises(pytest.fail.Exception) as info:
        _fail_on_death(fake, ["words:0:0-9"], "compiled")
    assert calls == [["words:0:4"]]
    text = str(info.value)
    assert "killed by SIGSEGV during case words:0:4" in text
    assert "python tests/isa_fuzz_worker.py --engine compiled words:0:4" in text


def test_bad_binaries_never_crash_the_compiled_engine() -> None:
    """40 cases, every fourth compared with the pure-Python path (long form: 1,000)."""
    summary = fuzz({"words": 24, "mutate": 16}, SEED, 40, compare_every=4)
    print(summary)
    assert summary.cases == 40
    assert summary.compared == 10
    _check_coverage(summary)


@pytest.mark.long
def test_bad_binaries_never_crash_the_compiled_engine_long() -> None:
    """1,000 cases (500 of each generator), every tenth compared with the pure-Python path."""
    summary = fuzz({"words": 500, "mutate": 500}, SEED + 1, 200, compare_every=10)
    print(summary)
    assert summary.cases == 1000
    assert summary.compared == 100
    _check_coverage(summary)
    assert summary.faults["pc"] >= 10 and summary.faults["dma"] >= 10, summary
