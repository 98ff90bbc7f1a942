"""Issue 35, item 17: a replay says that the errors its scenario declares happened (where and
when), a declared error that does not happen fails the check, and the times people read are in
the unit their size calls for (``aiopim.timing.format_ps``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiopim import timing
from aiopim.cli import EXIT_FAILED
from aiopim.cli import main as cli_main
from aiopim.scenario import load_scenario, replay
from aiopim.timing import format_ps

ROOT = Path(__file__).resolve().parent.parent
BACKPRESSURE = ROOT / "scenarios" / "fifo_backpressure.toml"
FULL = (
    "rank 0: input FIFO 'input_fifo' still full on DPU(s) 0.0.0, 0.0.1, 0.0.2, 0.0.3 after 3 "
    "retries of 5 µs; drain the DPUs' output FIFOs faster or raise the retry limits"
)


@pytest.mark.parametrize(
    ("ps", "text"),
    [
        (0, "0 s"),
        (740, "740 ps"),
        (1_000, "1.000 ns"),
        (192_404_740, "192.405 us"),
        (999_999_400, "999.999 us"),
        (999_999_600, "1.000 ms"),  # rounds up into the next unit, not to "1000.000 us"
        (10_201_248_129_769, "10.201 s"),
        (3 * timing.PS_PER_S * 3600, "10800.000 s"),
    ],
)
def test_format_ps(ps: int, text: str) -> None:
    assert format_ps(ps) == text


def test_the_replay_says_the_expected_error_happened(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    r = replay(load_scenario(BACKPRESSURE), backend=backend)
    assert r.raised is not None
    assert (r.raised.step.key, r.raised.step.op, r.raised.step.line) == (
        "tasks[0].steps[5].steps[0]",
        "fifo_push",
        34,
    )
    assert r.raised.time_ps == r.end_ps == 192_404_740  # the ninth push failed last
    assert cli_main(["replay", str(BACKPRESSURE), "--no-progress", "--backend", backend]) == 0
    assert capsys.readouterr().out == (
        f"FIFO back-pressure: replayed on {backend}, virtual time 192.405 us\n"
        "expected DPU_ERR_WRAM_FIFO_FULL: raised at 192.405 us by tasks[0].steps[5].steps[0] "
        f"(fifo_push, line 34)\n  {FULL}\n"
    )


def test_a_declared_error_that_does_not_happen_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calm = tmp_path / "calm.toml"  # eight pushes fit: the FIFOs fill but nothing fails
    calm.write_text(BACKPRESSURE.read_text().replace("times = 9", "times = 8"))
    assert cli_main(["replay", str(calm), "--no-progress"]) == EXIT_FAILED
    assert capsys.readouterr().err == (
        f"aiopim replay: {calm}:39: expect.error: expected the replay to fail with "
        "DPU_ERR_WRAM_FIFO_FULL, but it succeeded\n"
    )
    assert cli_main(["replay", str(calm), "--no-progress", "--no-check"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\nexpected DPU_ERR_WRAM_FIFO_FULL: not raised\n")


STEP_ERRORS = """\
[scenario]
name = "steps"

[machine]
ranks = 1
dpus_per_rank = 2

[programs.spin]
kernel = "cycles"
cycles = 1100
tasklets = 1
symbols = { box = "mram:16" }

[[tasks]]
name = "host"
steps = [
  { op = "alloc", ranks = 1 },
  { op = "load", program = "spin" },
  { op = "copy_to", symbol = "box", bytes = 16, parallel = true, at = "1ms", error = "BAD" },
  { op = "repeat", times = 3, steps = [
    { op = "copy_to", symbol = "box", bytes = 16, parallel = true, error = "BAD" },
  ] },
]
"""


def test_errors_declared_by_steps_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "steps.toml"
    path.write_text(STEP_ERRORS.replace("BAD", "DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER"))
    r = replay(load_scenario(path))
    assert [(e.step.key, e.time_ps) for e in r.expected_step_errors] == [
        ("tasks[0].steps[2]", 1_000_000_000),
        *[("tasks[0].steps[3].steps[0]", 1_000_000_000)] * 3,
    ]
    assert cli_main(["replay", str(path), "--no-progress"]) == 0
    detail = r.expected_step_errors[0].error.detail
    assert capsys.readouterr().out == (
        "steps: replayed on asyncio, virtual time 1.000 ms\n"
        "expected DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER: raised at 1.000 ms by "
        f"tasks[0].steps[2] (copy_to, line 19)\n  {detail}\n"
        "expected DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER: raised 3 times by "
        f"tasks[0].steps[3].steps[0] (copy_to, line 21), first at 1.000 ms\n  {detail}\n"
    )


def test_the_summary_reads_in_units() -> None:
    text = replay(load_scenario(ROOT / "scenarios" / "async_vs_parallel_parallel.toml")).summary()
    assert text.text() == (
        "virtual time 341.012 us\n"
        "rank          busy          idle   busy           DPU          xfer  jobs\n"
        "   0    210.000 us    131.012 us  61.6%    100.000 us     16.400 us     9\n"
        "   1    340.012 us      1.000 us  99.7%    200.000 us     46.412 us    11\n"
        "overlap: transfers ran 46.412 us, 16.400 us of it (35.3%) while DPUs ran\n"
        "DPUs ran 200.000 us; 1.62 ranks busy on average while any was; host waited 341.012 us\n"
        "critical path: 7 steps, 340.012 us busy\n"
        "            0 s +100.000 us  rank 1   LOAD\n"
        "     100.000 us +0 s         rank 1   SYNC\n"
        "     100.000 us +30.012 us   rank 1   COPY_WRAM_TO_MATRIX\n"
        "     130.012 us +0 s         rank 1   SYNC\n"
        "     130.012 us +10.000 us   rank 1   LAUNCH_RANK\n"
        "     140.012 us +200.000 us  rank 1   DPUs running\n"
        "     341.012 us +0 s         rank 1   SYNC\n"
    )


def test_a_late_critical_path_says_when_it_starts_and_what_the_host_waited_for() -> None:
    """A host that waited 10 s outside the rank queues (a Memclave key exchange), then
    copied 19 us of data: the path is that copy, and the summary says what came before."""
    from aiopim._errors import JobType
    from aiopim._machine._recorder import Recorder
    from aiopim.trace import Timeline, summarize

    s10 = 10 * timing.PS_PER_S
    copy = int(JobType.COPY_MRAM_FROM_MATRIX)
    rec = Recorder()
    rec.events += [
        (s10, "host_wait", "main", "vud_ime_wait", 100_000_000_000, 0),
        (s10, "job_submit", 0, 1, copy, None),
        (s10, "job_start", 0, 1, copy),
        (s10 + 19_384_000, "job_end", 0, 1, copy, 0),
    ]
    text = summarize(Timeline.from_recorder(rec)).text()
    assert text.startswith("virtual time 10.000 s\n")
    assert text.endswith(
        "critical path: 1 steps, 19.384 us busy, from 10.000 s (before it, the host waited in "
        "vud_ime_wait from 100.000 ms)\n"
        "       10.000 s +19.384 us   rank 0   COPY_MRAM_FROM_MATRIX\n"
    )
