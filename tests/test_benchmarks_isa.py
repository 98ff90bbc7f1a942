"""The instruction-set engine's benchmarks run in their quick form and print their last line.

Figures are not asserted (the machines are shared and noisy); what each script checks itself
(the same instructions and virtual times on every variant, results computed right) is.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _last_line(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    return out.strip().splitlines()[-1]


def test_isa_engine_quick_compares_its_variants() -> None:
    line = _last_line(str(BENCHMARKS / "isa_engine.py"), "--quick")
    assert re.fullmatch(
        r"isa_engine (red_ips=\d+ trns_ips=\d+ )?loop_ips=\d+ fast_rows=[\d.]+ "
        r"compiled_vs_python=\d+",
        line,
    ), line


def test_isa_rate_runs_small() -> None:
    line = _last_line(
        str(BENCHMARKS / "isa_rate.py"),
        "--iterations",
        "2000",
        "--python-iterations",
        "100",
        "--repeat",
        "1",
    )
    assert re.fullmatch(r"isa_rate jit_ips=\d+ python_ips=\d+ ratio=[\d.]+", line), line
