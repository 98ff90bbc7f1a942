"""Scenario files as untrusted input: limits, clear errors, no hang, fuzzing, TOML round trip."""

from __future__ import annotations

import os
import stat
import textwrap
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenario_fuzz import SHIPPED, Case, cases

import aiopim
from aiopim import timing
from aiopim.scenario import ScenarioError, load_scenario, parse_scenario, record, replay
from aiopim.scenario import _limits as L
from aiopim.scenario._record import write_toml
from aiopim.scenario._spec import kernel_cost
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    dpu_alloc_ranks,
    dpu_broadcast_to,
    dpu_free,
    dpu_launch,
    dpu_load,
)
from aiopim.trace import host_task

HEAD = """\
[scenario]
name = "t"

[machine]
ranks = {ranks}
dpus_per_rank = {dpus}

[programs.spin]
kernel = "cycles"
cycles = 1100
tasklets = 1
symbols = {{ box = "wram:16", big = "mram:1048576" }}

[[tasks]]
name = "host"
steps = [
  {{ op = "alloc", ranks = {ranks} }},
  {{ op = "load", program = "spin" }},
  {step},
]
"""


def scenario(step: str, *, ranks: int = 1, dpus: int = 2) -> str:
    """A one-task scenario whose third step is ``step`` (on line :data:`LINE`)."""
    return HEAD.format(ranks=ranks, dpus=dpus, step=step)


#: line of the step given to :func:`scenario`
LINE = 19


def error_of(text: str, source: str = "h.toml") -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, source)
    return info.value


def test_the_template_is_valid() -> None:
    sc = parse_scenario(scenario('{ op = "launch" }'))
    assert [s.op for s in sc.tasks[0].steps] == ["alloc", "load", "launch"]
    assert sc.tasks[0].steps[2].line == LINE


# ================================================================================================
# the reviewer's cases: each one clear message with file, line and key, before anything runs
# ================================================================================================
@pytest.mark.parametrize(
    ("step", "key", "message"),
    [
        # a huge transfer is refused before any buffer is allocated
        (
            '{ op = "copy_to", symbol = "big", bytes = 1000000000000 }',
            "tasks[0].steps[2].bytes",
            f"more than the limit of {L.MAX_XFER_BYTES}",
        ),
        (
            '{ op = "copy_to", symbol = "big", bytes = 4, offset = 1000000000000 }',
            "tasks[0].steps[2].offset",
            f"more than the limit of {L.MAX_XFER_BYTES}",
        ),
        (
            '{ op = "copy_to", symbol = "box", bytes = 16, fill = "iota%4294967296" }',
            "tasks[0].steps[2].fill",
            "N < 2**32",
        ),
        (  # each iteration is a step: the steps limit bounds `times` (--max-steps raises it)
            '{ op = "repeat", times = 4000000, steps = [{ op = "launch" }] }',
            "tasks[0].steps[2]",
            f"run 8000003 steps (repeats unrolled), more than the limit of {L.MAX_STEPS}",
        ),
        (
            '{ op = "fifo_link", fifo = "f", direction = "input", max_retries = 1000000000000 }',
            "tasks[0].steps[2].max_retries",
            f"more than the limit of {L.MAX_RETRIES}",
        ),
        (
            '{ op = "sleep", time = "1000000000s" }',
            "tasks[0].steps[2].time",
            f"longer than the limit of {L.MAX_TIME_PS} ps",
        ),
        (
            '{ op = "sleep", time = ' + "9" * 5000 + " }",
            "",
            "not valid TOML",
        ),
    ],
)
def test_absurd_values_are_refused_with_their_key(step: str, key: str, message: str) -> None:
    err = error_of(scenario(step))
    assert (err.source, err.key) == ("h.toml", key)
    assert message in err.message
    assert err.line == LINE if key else err.line is None or err.line > 0


def test_machine_size_is_limited() -> None:
    err = error_of(scenario('{ op = "launch" }', ranks=10**9))
    assert (err.line, err.key) == (5, "machine.ranks")
    assert f"more than the limit of {L.MAX_RANKS}" in err.message
    err = error_of(scenario('{ op = "launch" }', dpus=65))
    assert (err.line, err.key) == (4, "machine")
    assert "nr_dpus_per_rank must be between 1 and 64" in err.message


def test_nested_repeats_are_counted_unrolled() -> None:
    inner = '{ op = "repeat", times = 1000, steps = [{ op = "sleep", time = 1 }] }'
    err = error_of(scenario(f'{{ op = "repeat", times = 1000, steps = [{inner}] }}'))
    assert (err.line, err.key) == (LINE, "tasks[0].steps[2]")
    assert f"more than the limit of {L.MAX_STEPS}" in err.message
    # an empty repeat still loops: each iteration counts
    err = error_of(
        scenario('{ op = "repeat", times = 1000000, steps = [] }').replace(
            '{ op = "alloc"', '{ op = "repeat", times = 1000000, steps = [] },\n  { op = "alloc"'
        )
    )
    assert f"run {2 * (1 + 1_000_000) + 2} steps" in err.message


def test_total_work_is_limited_and_names_the_heaviest_step() -> None:
    step = (
        '{ op = "repeat", times = 3000, steps = [{ op = "copy_to", symbol = "box", bytes = 4 }] }'
    )
    err = error_of(scenario(step, ranks=40, dpus=64))
    assert (err.line, err.key) == (LINE, "tasks[0].steps[2]")
    assert f"more than the limit of {L.MAX_WORK}" in err.message
    assert "of them in this step (repeat)" in err.message
    # the same work on one DPU is fine: the estimate follows the DPUs a step addresses
    sc = parse_scenario(scenario(step.replace("bytes = 4 }", "bytes = 4, dpu = 0 }"), ranks=40))
    assert sum(L.estimate_work(sc, kernel_cost)) < L.MAX_WORK


def test_fifo_retries_count_in_the_work_estimate() -> None:
    text = (Path(SHIPPED[0]).parent / "fifo_backpressure.toml").read_text()
    assert parse_scenario(text).expect.error == "DPU_ERR_WRAM_FIFO_FULL"
    err = error_of(text.replace("max_retries = 3", f"max_retries = {L.MAX_RETRIES}"))
    assert err.key == "tasks[0].steps[5]" and "FIFO retries" in err.message


def test_kernel_cost_counts_dma_blocks() -> None:
    text = (Path(SHIPPED[0]).parent / "double_buffered_pipeline.toml").read_text()
    huge = text.replace("input_bytes = 32768", "input_bytes = 67108864").replace(
        "block = 1024", "block = 8"
    )
    err = error_of(huge)
    assert err.key.startswith("tasks[0].steps[") and "emulated operations" in err.message


def test_host_and_dpu_memory_are_limited() -> None:
    step = '{ op = "copy_from", symbol = "big", bytes = 67108864 }'
    err = error_of(scenario(step, dpus=8))
    assert (err.line, err.key) == (LINE, "tasks[0].steps[2]")
    assert f"more than the limit of {L.MAX_HOST_BYTES >> 20} MiB" in err.message
    step = '{ op = "copy_to", symbol = "big", bytes = 67108864, broadcast = true }'
    err = error_of(scenario(step, ranks=40, dpus=64))
    assert (err.line, err.key) == (LINE, "tasks[0].steps[2]")
    assert f"the limit of {L.MAX_DPU_BYTES >> 30} GiB" in err.message
    assert parse_scenario(scenario(step, ranks=1, dpus=8)).name == "t"


def test_symbol_sizes_must_fit_the_chip() -> None:
    err = error_of(scenario('{ op = "launch" }').replace("wram:16", "wram:99999"))
    assert err.key == "programs.spin.symbols.box"
    assert f"do not fit the WRAM ({timing.V1B.wram_size} bytes)" in err.message


def test_deep_nesting_is_refused_before_parsing() -> None:
    deep = "[" * 1000 + "1" + "]" * 1000
    err = error_of(scenario('{ op = "launch" }') + f"\nzz = {deep}\n")
    assert err.line == 22 and f"deeper than {L.MAX_NESTING} levels" in err.message
    # nesting through headers and dotted keys is caught after parsing, with its key
    dotted = "[zz." + ".".join(["a"] * 40) + "]\n"
    err = error_of(scenario('{ op = "launch" }') + dotted)
    assert err.line == 21 and err.key.startswith("zz.a.a.a")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.integers(1, 40),
    noise=st.text(alphabet="[]{}\"'\\#x\n", max_size=12),
)
def test_nesting_scan_skips_strings_and_comments(depth: int, noise: str) -> None:
    # brackets inside strings and comments do not count; real ones do, exactly
    junk = tomllib.loads(f"s = {_toml_str(noise)}")["s"]
    assert junk == noise
    text = f"s = {_toml_str(noise)}  # [[[{{{{\nv = " + "[" * depth + "1" + "]" * depth + "\n"
    tomllib.loads(text)
    problem = L.nesting_problem(text)
    assert (problem is None) == (depth <= L.MAX_NESTING)
    if problem is not None:
        assert problem[0] == 2


def _toml_str(s: str) -> str:
    import tomli_w

    return tomli_w.dumps({"s": s})[len("s = ") : -1]


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "u.toml"
    path.write_bytes(b'[scenario]\nname = "ok"\ndescription = "\xff"\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.line, info.value.source) == (3, str(path))
    assert "not valid UTF-8 (byte 0xff at offset 38)" in info.value.message


def test_deadlock_is_a_scenario_error_naming_the_blocked_steps(backend: str) -> None:
    text = textwrap.dedent(
        """\
        [scenario]
        name = "dead"

        [[tasks]]
        name = "a"
        steps = [{ op = "wait", event = "x" }, { op = "signal", event = "y" }]

        [[tasks]]
        name = "b"
        steps = [
          { op = "sleep", time = "1us" },
          { op = "wait", event = "y" },
          { op = "signal", event = "x" },
        ]
        """
    )
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(text, "d.toml"), backend=backend)
    err = info.value
    assert (err.line, err.key) == (6, "tasks[0].steps[0]")
    assert "the replay deadlocked at 1.000 us" in err.message
    assert "task 'a' is in tasks[0].steps[0] (wait for event 'x')" in err.message
    assert "task 'b' is in tasks[1].steps[1] (wait for event 'y')" in err.message
    assert isinstance(err.__cause__, aiopim.DeadlockError)


def test_deadlocked_dpus_are_named(backend: str) -> None:
    # the stream kernel waits for input that never comes and the host syncs
    text = (Path(SHIPPED[0]).parent / "fifo_backpressure.toml").read_text()
    text = text.replace(
        '  { op = "repeat", times = 9, steps = [\n'
        '      { op = "fifo_push", fifo = "input_fifo", value = 1, increment = 1 },\n'
        "  ] },\n",
        '  { op = "sync" },\n',
    )
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(text, "s.toml"), backend=backend)
    assert info.value.key == "tasks[0].steps[5]"
    # identical tasklet states grouped (DeadlockError.summary), every DPU named in its range
    assert "tasklet 0 of 4 DPUs (0.0.0-0.0.3) waiting on input FIFO 'input_fifo'" in (
        info.value.message
    )


def test_data_checks_of_the_wrong_size_are_scenario_errors() -> None:
    text = scenario(
        '{ op = "copy_from", symbol = "box", bytes = 12, into = "b" }'
    ) + textwrap.dedent(
        """
        [expect]
        data = [{ buffer = "b", dtype = "uint64", all = 0 }]
        """
    )
    with pytest.raises(ScenarioError) as info:
        replay(parse_scenario(text, "w.toml"))
    assert info.value.key == "expect.data[0]"
    assert "its 12 bytes per DPU are not a whole number of uint64 values" in info.value.message
    # a buffer no step filled (the step is in a loop that never runs)
    text = text.replace(
        '{ op = "copy_from", symbol = "box", bytes = 12, into = "b" }',
        '{ op = "repeat", times = 0, steps = [{ op = "copy_from", symbol = "box", bytes = 4, '
        'into = "b" }] }',
    )
    with pytest.raises(ScenarioError, match="no step filled it during the replay"):
        replay(parse_scenario(text, "w.toml"))


# ================================================================================================
# files that are not files
# ================================================================================================
def test_scenario_paths_that_are_not_regular_files(tmp_path: Path) -> None:
    cases_: list[tuple[Path, str]] = [
        (tmp_path, "is a directory"),
        (tmp_path / "missing.toml", "No such file or directory"),
    ]
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.toml"
        os.mkfifo(fifo)
        cases_.append((fifo, "is a named pipe, not a scenario file"))
    if Path("/dev/zero").exists():
        cases_.append((Path("/dev/zero"), "is a character device"))
    for path, message in cases_:
        t0 = time.monotonic()
        with pytest.raises(ScenarioError) as info:
            load_scenario(path)
        assert time.monotonic() - t0 < 5  # no hang on the pipe, no endless read
        assert info.value.source == str(path) and message in info.value.message


def test_scenario_files_larger_than_the_limit_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    with open(path, "wb") as f:  # sparse: the size is checked before reading
        f.truncate(L.MAX_FILE_BYTES + 1)
    assert stat.S_ISREG(path.stat().st_mode)
    with pytest.raises(ScenarioError, match="larger than 4 MiB, the limit for a scenario file"):
        load_scenario(path)


# ================================================================================================
# fuzzing: mutations of the shipped scenarios
# ================================================================================================
#: replays of accepted mutations heavier than this are left to the long sweep
FAST_WORK = 1_500_000


def _outcome(case: Case, tmp_path: Path, *, max_work: int, backend: str = "asyncio") -> str:
    """``"replayed"``, ``"rejected"`` or ``"heavy"``; fails on anything but ScenarioError."""
    path = tmp_path / f"fuzz-{case.origin}"
    path.write_bytes(case.data)
    try:
        sc = load_scenario(path)
        if sum(L.estimate_work(sc, kernel_cost)) > max_work:
            return "heavy"
        with warnings.catch_warnings():  # mutated schedules may well hit documented quirks
            warnings.simplefilter("ignore", aiopim.DpuQuirkWarning)
            replay(sc, backend=backend)
    except ScenarioError as err:
        assert str(err).startswith(f"{path}"), (case, err)
        assert err.key or err.line is not None, (case, err)
        return "rejected"
    except BaseException as exc:  # pragma: no cover - the point of the test
        raise AssertionError(f"{case.origin}: {case.mutation}: {exc!r}") from exc
    return "replayed"


def test_fuzzed_scenarios_end_in_a_replay_or_a_scenario_error(tmp_path: Path) -> None:
    seen = {"replayed": 0, "rejected": 0, "heavy": 0}
    for case in cases(seed=20261124, count=200):
        seen[_outcome(case, tmp_path, max_work=FAST_WORK)] += 1
    assert seen["rejected"] > 150 and seen["replayed"] > 5, seen


@pytest.mark.long
def test_fuzzed_scenarios_long_sweep(tmp_path: Path) -> None:
    seen = {"replayed": 0, "rejected": 0, "heavy": 0}
    for i, case in enumerate(cases(seed=7, count=3000)):
        seen[_outcome(case, tmp_path, max_work=L.MAX_WORK, backend=("asyncio", "trio")[i % 2])] += 1
    assert seen["heavy"] == 0 and seen["replayed"] > 100, seen


# ================================================================================================
# recorded scenarios: tomli_w round trip with non-ASCII names
# ================================================================================================
NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)
SCALARS = st.one_of(st.booleans(), st.integers(-(2**63), 2**64 - 1), NAMES)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(
    name=NAMES.filter(bool),
    label=NAMES.filter(bool),
    program=NAMES.filter(bool),
    dpu=NAMES.filter(bool),
    extra=st.dictionaries(NAMES, VALUES, max_size=4),
)
def test_write_toml_round_trips_every_value(
    name: str, label: str, program: str, dpu: str, extra: dict[str, Any]
) -> None:
    doc = {
        "scenario": {"name": name, "description": label},
        "machine": {"ranks": 1, "dpus_per_rank": 64, "chip": "v1B"},
        "programs": {
            program: {
                "kernel": "recorded",
                "symbols": {label: "wram:8"},
                "fifos": {name: {"direction": "input", "ptr_size": 2, "data_size": 8}},
                "runs": {"all": [1, 2], dpu: [3]},
                "pointers": {"all": [[[0, name, 2**64 - 1]]], dpu: [[]]},
            }
        },
        "tasks": [
            {"name": "main", "label": label, "steps": [{"op": "sleep", "at": 5, **extra}]},
            {"name": "task1", "steps": []},
        ],
        "expect": {"time": 2**62},
    }
    text = write_toml(doc, "# comment")
    assert tomllib.loads(text) == doc
    assert text.startswith("# comment\n[scenario]\n")


PROGRAM = 'ключ \U0001f511 "q" \\ \x7f'


async def _non_ascii_program() -> None:
    with host_task("hôte \u00e9 \U0001f600"):
        dpus = await dpu_alloc_ranks(1, "")
    prog = aiopim.Program(PROGRAM, nr_tasklets=1)
    prog.host("bøx", np.uint32, 4)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(100)

    with host_task("hôte \u00e9 \U0001f600"):
        await dpu_load(dpus, prog)
        await dpu_broadcast_to(dpus, "bøx", 0, np.arange(4, dtype=np.uint32), 16, 0)
        await dpu_launch(dpus, DPU_SYNCHRONOUS)
        await anyio.sleep(1e-6)
    await dpu_free(dpus)


def test_recorded_non_ascii_names_replay(tmp_path: Path) -> None:
    machine = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=2)
    name = 'sc\u00e9nario \U0001f600 "quoted" \\ tab\t del\x7f'
    rec = record(_non_ascii_program, machine=machine, name=name)
    path = tmp_path / "rec.toml"
    rec.write(path)
    sc = load_scenario(path)
    assert sc.name == name
    assert list(sc.programs) == [PROGRAM]
    assert sc.programs[PROGRAM].symbols["bøx"] == ("wram", 16)
    assert sc.tasks[0].label == "hôte \u00e9 \U0001f600"
    assert [s.params.get("symbol") for s in sc.tasks[0].steps if s.op == "copy_to"] == ["bøx"]
    for b in ("asyncio", "trio"):
        assert replay(sc, backend=b).chrome_trace() == rec.chrome_trace()


def test_registered_kernels_declare_their_cost() -> None:
    from aiopim.scenario import KERNELS, KernelCost, KernelKind, register_kernel
    from aiopim.scenario._kernels import base_program

    def build(spec: Any) -> aiopim.Program:
        prog = base_program(spec)

        @prog.main
        async def main(t: aiopim.Tasklet) -> None:
            t.compute(10)

        return prog

    text = scenario('{ op = "launch" }', ranks=40, dpus=64).replace('"cycles"', '"heavy"')
    text = text.replace("cycles = 1100\n", "")
    register_kernel(KernelKind("heavy", {}, build, cost=lambda spec: KernelCost(10_000)))
    try:
        err = error_of(text)
        assert err.key == "tasks[0].steps[2]" and "emulated operations" in err.message
        cheap = KernelKind("heavy", {}, build, cost=lambda spec: KernelCost(1))
        register_kernel(cheap, replace=True)
        assert parse_scenario(text).programs["spin"].kernel == "heavy"
    finally:
        KERNELS.pop("heavy", None)
