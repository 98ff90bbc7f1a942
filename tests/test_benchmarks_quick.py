"""Every benchmark script runs in its quick form and prints a last line that parses.

Each script of ``benchmarks/`` and ``benchmarks/prim/`` is listed in ``SCRIPTS`` with the regular
expression of its last line, or in ``COVERED_ELSEWHERE`` with the test that already runs its quick
form; a script in neither makes :func:`test_every_script_is_covered` fail, so a new benchmark
cannot be forgotten. Figures are not asserted (the machines are shared and noisy); what each
script checks itself (results right, the same virtual times) is.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_module

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

NUM = r"[\d.]+"

#: script (relative to benchmarks/) -> (last line's pattern, whether it is ``long``)
SCRIPTS: dict[str, tuple[str, bool]] = {
    "kernel_vs_simpy.py": (rf"kernel_vs_simpy ratio={NUM}", False),
    "bridge_throughput.py": (r"bridge completions_per_s asyncio=\d+ trio=\d+", False),
    "explore_rate.py": (rf"explore schedules_per_s={NUM}", True),
    "fifo_polling.py": (rf"fifo_polling iterations_per_event={NUM} elements_per_s=\d+", False),
    "keysum_python.py": (
        rf"keysum_python cpu_per_event_growth={NUM} \(CPU per event at 1 rank\(s\) / at 1\)",
        True,
    ),
    # the three PrIM scripts' host programs also run in the default suite, through
    # prim/report.py below and tests/test_timing_model.py
    "prim/arithmetic_throughput.py": (rf"prim_arithmetic best_mops={NUM}", True),
    "prim/mram_latency.py": (
        rf"prim_mram_latency read_mbps={NUM} write_mbps={NUM} bytes=\d+",
        True,
    ),
    "prim/prim_stream.py": (rf"prim_stream mem=MRAM best_mbps={NUM}", True),
    "prim/report.py": (rf"prim within_10pct=\d+/\d+ worst_ratio={NUM}", False),
    "prim_isa.py": (r"prim_isa red_ips=\d+ trns_ips=\d+ ok=1", False),
    "isa_corpus.py": (r"isa_corpus compiled_ips=\d+ python_ips=\d+ same=1", True),
    # a Dask LocalCluster: 10-20 s of wall time to start on a shared VM
    "campaign_scaling.py": (
        rf"campaign_scaling runs=\d+ same=1 procs_speedup={NUM} dask_overhead_pct=-?{NUM}",
        True,
    ),
    "emulator_memory.py": (rf"emulator_memory peak_ratio={NUM} cpu_ratio={NUM}", True),
    "report.py": (r"missed=\d+", True),  # about 40 s of CPU: every quick form above
}

#: scripts whose quick form another test runs -> that test
COVERED_ELSEWHERE: dict[str, str] = {
    "full_machine.py": "tests/test_memory_perf_semantics.py::"
    "test_full_machine_benchmark_quick_runs_and_checks_its_bytes",
    "isa_engine.py": "tests/test_benchmarks_isa.py::test_isa_engine_quick_compares_its_variants",
    "isa_rate.py": "tests/test_benchmarks_isa.py::test_isa_rate_runs_small",
}

#: modules imported by the scripts, not scripts
LIBRARIES = {"_table.py", "prim/prim_common.py", "prim/published.py", "prim/isa_kernels.py"}


def _scripts() -> set[str]:
    found = {p.name for p in BENCHMARKS.glob("*.py")}
    found |= {f"prim/{p.name}" for p in (BENCHMARKS / "prim").glob("*.py")}
    return found


def test_every_script_is_covered() -> None:
    listed = set(SCRIPTS) | set(COVERED_ELSEWHERE) | LIBRARIES
    assert _scripts() == listed, f"not covered: {sorted(_scripts() - listed)}"


def _corpus() -> Path:
    """Where ``isa_corpus.py`` looks for the corpus of UPMEM-built binaries."""
    default = BENCHMARKS.parent.parent / "shared" / "conformance"
    return Path(os.environ.get("AIOPIM_CONFORMANCE_DIR", default))


def _prim_binaries_missing() -> str | None:
    """Why ``prim_isa.py`` cannot run here (its PrIM binaries are not found), or None."""
    module = load_module(BENCHMARKS / "prim_isa.py", "_prim_isa_paths")
    prim = module.corpus_dir() / "prim"
    if all(module.binary_path(prim / b).is_file() for b in ("RED", "TRNS")):
        return None
    return f"PrIM binaries not found under {prim} (set AIOPIM_CONFORMANCE_DIR to the corpus)"


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=pytest.mark.long) if long else s for s, (_, long) in SCRIPTS.items()],
)
def test_quick_form_prints_its_last_line(script: str) -> None:
    if script == "prim_isa.py" and (why := _prim_binaries_missing()) is not None:
        pytest.skip(why)
    if script == "isa_corpus.py" and not (corpus := _corpus()).is_dir():
        pytest.skip(f"the conformance corpus is not at {corpus} (set AIOPIM_CONFORMANCE_DIR)")
    pattern, _ = SCRIPTS[script]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(pattern, line), line
