"""Every headline figure of the README and the docs, beside its goal and its anchor.

Runs the benchmark scripts (their ``--quick`` forms with ``--quick``), each in its own
interpreter, one after the other, and prints one row per figure: the figure, its goal (or ``-``
when it is only reported), its anchor (what it is measured against: SimPy's rate, NumPy's copy,
the bare-coroutine floor of ``keysum_python.py --floor``, the pure-Python engine, a plain Python
loop, the published PrIM figures) and ``ok`` / ``MISSED``. A script that fails counts as
missed. Last line: ``missed=<number of figures that missed their goal>``.

python benchmarks/report.py [--quick]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from _table import print_columns

from aiopim._progress import Progress

HERE = Path(__file__).resolve().parent


class Figure(NamedTuple):
    what: str
    value: str
    goal: str
    anchor: str
    #: None: reported only (no goal)
    ok: bool | None


Parser = Callable[[str], list[Figure]]


def _num(pattern: str, out: str) -> float:
    """The number the group of ``pattern`` captures in ``out`` (the last match)."""
    found = re.findall(pattern, out, re.MULTILINE)
    if not found:
        raise ValueError(f"no match for {pattern!r}")
    return float(str(found[-1]).replace(",", ""))


def kernel_vs_simpy(out: str) -> list[Figure]:
    ratio = _num(r"^kernel_vs_simpy ratio=([\d.]+)$", out)
    simpy = _num(r"^simpy\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d,]+)$", out)
    aiopim = _num(r"^aiopim\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d,]+)$", out)
    return [
        Figure(
            "rank-queue jobs/s (kernel_vs_simpy.py)",
            f"{aiopim:,.0f} jobs/s = {ratio:.2f}x SimPy",
            ">= 2.0x SimPy",
            f"SimPy {simpy:,.0f} jobs/s",
            ratio >= 2.0,
        )
    ]


def keysum_floor(out: str) -> list[Figure]:
    bare = _num(r"bare runtime .*?: ([\d.]+) s CPU", out)
    real = _num(r"^\s+aiopim:\s+([\d.]+) s CPU", out)
    ratio = _num(r"^keysum_python floor_ratio=([\d.]+)$", out)
    return [
        Figure(
            "key-sum, Python kernels, 1 rank (keysum_python.py --floor)",
            f"{real:.2f} s CPU = {ratio:.2f}x the floor",
            "<= 1.5x the floor",
            f"bare-coroutine floor {bare:.2f} s CPU",
            ratio <= 1.5,
        )
    ]


def full_machine_transfers(out: str) -> list[Figure]:
    figures = []
    for m in re.finditer(
        r"^(\S.*?MiB)\s+([\d,]+ MiB/s) = ([\d.]+) x NumPy \(([\d,]+ MiB/s)\)\s+>= ([\d.]+) x NumPy",
        out,
        re.MULTILINE,
    ):
        label, rate, ratio, numpy, goal = m.groups()
        figures.append(
            Figure(
                f"{label} (full_machine.py)",
                f"{rate} = {ratio}x NumPy",
                f">= {goal}x NumPy",
                f"NumPy's copy {numpy}",
                float(ratio) >= float(goal),
            )
        )
    if not figures:
        raise ValueError("no transfer rows")
    return figures


def isa_engine(out: str) -> list[Figure]:
    loop = _num(r"loop_ips=(\d+)", out)
    times = _num(r"compiled_vs_python=(\d+)", out)
    fast = _num(r"fast_rows=([\d.]+)", out)
    return [
        Figure(
            "engine on isa_rate's loop (isa_engine.py)",
            f"{loop:.2e} instr/CPU s = {times:.0f}x pure Python",
            "-",
            f"pure-Python engine {loop / times:.2e} instr/CPU s",
            None,
        ),
        Figure(
            "fast rows, worst workload (isa_engine.py)",
            f"{fast:.2f}x",
            "-",
            "the compiled engine's general path",
            None,
        ),
    ]


def isa_rate(out: str) -> list[Figure]:
    jit = _num(r"jit_ips=(\d+)", out)
    ratio = _num(r"ratio=([\d.]+)$", out)
    return [
        Figure(
            "engine on a 5-instruction loop (isa_rate.py)",
            f"{jit:.2e} instr/s = {ratio:.2f}x the plain loop",
            "-",
            f"plain Python loop {jit / ratio:.2e} ops/s",
            None,
        )
    ]


def prim_isa(out: str) -> list[Figure]:
    red = _num(r"red_ips=(\d+)", out)
    trns = _num(r"trns_ips=(\d+)", out)
    ok = _num(r"ok=(\d)$", out) == 1
    return [
        Figure(
            "PrIM RED / TRNS binaries, 64 DPUs (prim_isa.py)",
            f"{red:.2e} / {trns:.2e} instr/CPU s",
            "results right",
            "NumPy's results",
            ok,
        )
    ]


def prim_report(out: str) -> list[Figure]:
    m = re.search(r"^prim within_10pct=(\d+)/(\d+) worst_ratio=([\d.]+)$", out, re.MULTILINE)
    if m is None:
        raise ValueError("no prim line")
    k, n, worst = int(m[1]), int(m[2]), float(m[3])
    return [
        Figure(
            "PrIM microbenchmarks in virtual time (prim/report.py)",
            f"{k}/{n} within 10 %, worst ratio {worst:.3f}",
            "all within 10 %",
            "published PrIM figures",
            k == n,
        )
    ]


def bridge(out: str) -> list[Figure]:
    a = _num(r"asyncio=(\d+)", out)
    t = _num(r"trio=(\d+)", out)
    return [
        Figure(
            "awaited calls through the bridge (bridge_throughput.py)",
            f"asyncio {a:,.0f} / trio {t:,.0f} calls/s",
            "-",
            "-",
            None,
        )
    ]


def fifo_polling(out: str) -> list[Figure]:
    per = _num(r"iterations_per_event=([\d.]+)", out)
    return [
        Figure(
            "WRAM FIFO polling (fifo_polling.py)",
            f"{per:.1f} poll iterations per kernel event",
            "> 1",
            "an emulator stepping every poll",
            per > 1,
        )
    ]


def explore(out: str) -> list[Figure]:
    rate = _num(r"^explore schedules_per_s=([\d.]+)$", out)
    keysum = _num(r"^keysum_fifo schedules_per_s=([\d.]+)$", out)
    return [
        Figure(
            "schedules explored (explore_rate.py)",
            f"racy_callback {rate:.1f}/s, keysum_fifo {keysum:.1f}/s",
            "-",
            "-",
            None,
        )
    ]


#: (script and its arguments, the parser of its output); under --quick each also gets --quick
RUNS: list[tuple[list[str], Parser]] = [
    (["kernel_vs_simpy.py"], kernel_vs_simpy),
    (["keysum_python.py", "--floor"], keysum_floor),
    (["full_machine.py", "--only", "transfers"], full_machine_transfers),
    (["isa_engine.py"], isa_engine),
    (["isa_rate.py"], isa_rate),
    (["prim_isa.py"], prim_isa),
    (["prim/report.py"], prim_report),
    (["bridge_throughput.py"], bridge),
    (["fifo_polling.py"], fifo_polling),
    (["explore_rate.py"], explore),
]


def run(args: list[str], parse: Parser) -> tuple[list[Figure], float]:
    """Run one script; its figures (an ``ERROR`` figure if it fails) and its wall seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(HERE / args[0]), *args[1:]], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    name = " ".join(args)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [Figure(name, f"ERROR: {tail}", "runs", "-", False)], wall
    try:
        return parse(proc.stdout), wall
    except ValueError as e:
        return [Figure(name, f"ERROR: output not understood ({e})", "runs", "-", False)], wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the scripts' quick forms (CI)")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    figures: list[Figure] = []
    with Progress("report", total=len(RUNS), unit="scripts", enabled=opts.progress) as bar:
        for done, (args, parse) in enumerate(RUNS):
            full = [*args, "--quick"] if opts.quick else args
            bar.update(done, running=" ".join(full))
            found, wall = run(full, parse)
            print(f"ran {' '.join(full)} ({wall:.1f} s)", file=sys.stderr, flush=True)
            figures += found
        bar.update(len(RUNS))
    print(f"python {sys.version.split()[0]}" + (", --quick (CI sizes)" if opts.quick else ""))
    print_columns(
        [("figure", "measured", "goal", "anchor", "")]
        + [
            (
                f.what,
                f.value,
                f.goal,
                f.anchor,
                "" if f.ok is None else ("ok" if f.ok else "MISSED"),
            )
            for f in figures
        ]
    )
    print(f"missed={sum(f.ok is False for f in figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
