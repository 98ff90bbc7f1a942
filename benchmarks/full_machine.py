"""The full emulated machine: interpreter, Python kernels, transfers and host memory, each figure
by its target.

python benchmarks/full_machine.py            # every section (about 8 min, 8.5 GiB of RAM at peak)
python benchmarks/full_machine.py --quick    # small sizes for CI (under a minute, < 1 GiB)
python benchmarks/full_machine.py --only memory

Every measurement runs in a fresh interpreter (``--child NAME``), so peak memory figures
(``VmHWM`` from ``/proc/self/status``) belong to that measurement alone. A section is one
function returning table rows; ``print_table`` prints them all the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _table import print_columns

MIB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent


# --- measuring --------------------------------------------------------------------------------
def _status_mib(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def rss_mib() -> float:
    """Resident memory of this process now."""
    return _status_mib("VmRSS")


def peak_mib() -> float:
    """Peak resident memory of this process since it started (or since ``reset_peak``)."""
    return _status_mib("VmHWM")


def reset_peak() -> None:
    """Restart the peak at the current resident memory (Linux 4.0+)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def run_child(name: str, **params: Any) -> dict[str, Any]:
    """Run measurement ``name`` in a fresh interpreter and return what it reports."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, json.dumps(params)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"measurement {name} failed ({out.returncode}):\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@dataclass
class Row:
    """One line of a table: a measured figure, its target, and whether it meets it."""

    what: str
    value: str
    target: str
    ok: bool | None  # None: informational


def print_table(title: str, rows: list[Row]) -> None:
    """Print ``rows`` under ``title`` as aligned columns."""
    print(f"\n## {title}\n")
    header = ("figure", "measured", "target", "")
    print_columns(
        [header]
        + [
            (r.what, r.value, r.target, "" if r.ok is None else ("ok" if r.ok else "MISSED"))
            for r in rows
        ]
    )


# --- measurements (each runs in its own interpreter) --------------------------------------------
def _program() -> Any:
    import numpy as np

    import aiopim

    prog = aiopim.Program("idle", nr_tasklets=16)
    prog.host("x", np.uint32, 16)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        return None

    return prog


def _fill_row(row: Any, i: int) -> None:
    """Write the bytes of DPU ``i``: a fixed pattern with no zero page, marked with ``i``."""
    import numpy as np

    pattern = np.random.default_rng(1).integers(1, 256, MIB, dtype=np.uint8)
    blocks = row.reshape(-1, min(len(row), MIB))
    blocks[:] = pattern[: blocks.shape[1]]
    blocks[:, :8] = i + 1


def _host_data(nr: int, size: int) -> Any:
    """``nr`` different buffers of ``size`` bytes (``_fill_row``), written once."""
    import numpy as np

    data = np.empty((nr, size), dtype=np.uint8)
    for i in range(nr):
        _fill_row(data[i], i)
    return data


def child_transfers(nr_dpus: int, size: int, repeat: int) -> dict[str, Any]:
    """Push ``size`` bytes to each of ``nr_dpus`` DPUs' MRAM and read them back, next to
    NumPy copying the same bytes into fresh arrays."""
    import numpy as np

    import aiopim
    from aiopim.sdk import (
        DPU_MRAM_HEAP_POINTER_NAME,
        DPU_XFER_DEFAULT,
        DPU_XFER_FROM_DPU,
        DPU_XFER_TO_DPU,
        Symbol,
        dpu_alloc,
        dpu_foreach,
        dpu_free,
        dpu_get_symbol,
        dpu_load,
        dpu_prepare_xfer,
        dpu_push_xfer_symbol,
    )

    base = rss_mib()
    src = _host_data(nr_dpus, size)  # read back into the same buffers, then checked
    host_mib = rss_mib() - base
    want = np.empty(size, dtype=np.uint8)

    def numpy_rates() -> tuple[float, float, float]:
        t0 = time.perf_counter()
        copies = [row.copy() for row in src]  # into fresh memory, like unwritten MRAM
        t1 = time.perf_counter()
        for row, c in zip(src, copies, strict=True):
            c[:] = row  # over memory written before
        t2 = time.perf_counter()
        for row, c in zip(src, copies, strict=True):
            row[:] = c  # back into the caller's buffer
        t3 = time.perf_counter()
        del copies
        return t1 - t0, t2 - t1, t3 - t2

    np_times = [numpy_rates() for _ in range(repeat)]
    prog = _program()
    # the heap symbol stops 1 MiB short of the end; a symbol built by hand reaches all 64 MiB,
    # as a C host may with its own struct dpu_symbol_t
    heap = dpu_get_symbol(prog, DPU_MRAM_HEAP_POINTER_NAME)
    mram = Symbol("whole MRAM", heap.address & ~(64 * MIB - 1), 64 * MIB)
    emu_times: list[tuple[float, float, float]] = []
    peak_above = 0.0

    async def main() -> None:
        nonlocal peak_above
        for _ in range(repeat):
            dpus = await dpu_alloc(nr_dpus, "")  # the allocation resets MRAM: unwritten again
            await dpu_load(dpus, prog)
            reset_peak()
            before = peak_mib()
            t = [time.perf_counter()]
            for way in (DPU_XFER_TO_DPU, DPU_XFER_TO_DPU, DPU_XFER_FROM_DPU):
                for d, i in dpu_foreach(dpus):
                    dpu_prepare_xfer(d, src[i])
                await dpu_push_xfer_symbol(dpus, way, mram, 0, size, DPU_XFER_DEFAULT)
                t.append(time.perf_counter())
            peak_above = max(peak_above, peak_mib() - before)
            emu_times.append((t[1] - t[0], t[2] - t[1], t[3] - t[2]))
            for i in range(nr_dpus):
                _fill_row(want, i)
                assert np.array_equal(src[i], want), f"DPU {i} read back other bytes"
            await dpu_free(dpus)

    aiopim.Emulator(record=False).run(main)
    # NumPy once more after the emulator, so neither side gets all the first touches of memory
    np_times += [numpy_rates() for _ in range(repeat)]
    total = nr_dpus * size / MIB
    res: dict[str, Any] = {"mib": total, "host_mib": host_mib, "peak_above_host_mib": peak_above}
    for k, way in enumerate(("to", "over", "from")):
        res[f"numpy_{way}"] = total / min(t[k] for t in np_times)
        res[f"emu_{way}"] = total / min(t[k] for t in emu_times)
    return res


def child_idle(nr_dpus: int) -> dict[str, Any]:
    """Allocate ``nr_dpus`` (-1: the whole machine) and load a program."""
    import aiopim
    from aiopim.sdk import DPU_ALLOCATE_ALL, dpu_alloc, dpu_get_nr_dpus, dpu_load

    prog = _program()
    base = rss_mib()
    got = 0

    async def main() -> None:
        nonlocal got
        dpus = await dpu_alloc(DPU_ALLOCATE_ALL if nr_dpus < 0 else nr_dpus, "")
        await dpu_load(dpus, prog)
        got = dpu_get_nr_dpus(dpus)

    t0 = time.perf_counter()
    aiopim.Emulator(record=False).run(main)
    return {
        "import_mib": base,
        "above_mib": peak_mib() - base,
        "dpus": got,
        "s": time.perf_counter() - t0,
    }


def child_broadcast(nr_ranks: int, size: int) -> dict[str, Any]:
    """Broadcast ``size`` bytes to the MRAM of ``nr_ranks`` ranks, then let one DPU per rank
    write over part of them and read everything back."""
    import numpy as np

    import aiopim
    from aiopim.sdk import (
        DPU_MRAM_HEAP_POINTER_NAME,
        DPU_XFER_DEFAULT,
        dpu_alloc_ranks,
        dpu_broadcast_to,
        dpu_copy_from,
        dpu_copy_to,
        dpu_foreach,
        dpu_get_nr_dpus,
        dpu_load,
    )

    prog = _program()
    data = _host_data(1, size)[0]
    back = np.empty(size, dtype=np.uint8)
    back.fill(0)
    patched = data.copy()
    patched[MIB : 2 * MIB] = 0xEE
    patch = patched[MIB : 2 * MIB].copy()
    base = rss_mib()
    stats: dict[str, Any] = {}

    async def main() -> None:
        dpus = await dpu_alloc_ranks(nr_ranks, "")
        await dpu_load(dpus, prog)
        t0 = time.perf_counter()
        await dpu_broadcast_to(dpus, DPU_MRAM_HEAP_POINTER_NAME, 0, data, size, DPU_XFER_DEFAULT)
        stats["broadcast_s"] = time.perf_counter() - t0
        stats["dpus"] = dpu_get_nr_dpus(dpus)
        for d, i in dpu_foreach(dpus):
            if i % 64 == 0:  # one DPU per rank writes over 1 MiB: private pages for it only
                await dpu_copy_to(d, DPU_MRAM_HEAP_POINTER_NAME, MIB, patch, MIB)
            if i % 64 in (0, 1):
                await dpu_copy_from(d, DPU_MRAM_HEAP_POINTER_NAME, 0, back, size)
                want = patched if i % 64 == 0 else data
                assert np.array_equal(back, want), f"DPU {i} read back other bytes"

    aiopim.Emulator(record=False).run(main)
    stats["above_host_mib"] = peak_mib() - base
    stats["mib"] = size / MIB
    return stats


# --- the instruction-set interpreter (goals 1-2) -------------------------------------------------
def _isa_counting() -> list[int]:
    """Count the instructions of every interpreter run that ends: [instructions, runs]."""
    from aiopim.isa import _runner

    seen = [0, 0]
    report = _runner.IsaRunner.report

    def counting(self: Any, arg: Any) -> None:
        seen[0] += self.instructions
        seen[1] += 1
        report(self, arg)

    _runner.IsaRunner.report = counting  # type: ignore[method-assign]
    return seen


def _isa_batch_time(clock: Callable[[], float]) -> list[float]:
    """Add up the time ``clock`` measures in the scheduler's calls of the compiled batch:
    [seconds] (reset it between runs)."""
    from aiopim.isa import _runner

    spent = [0.0]
    call = _runner.IsaScheduler._call

    def timed(self: Any, *args: Any) -> int:
        start = clock()
        try:
            return call(self, *args)
        finally:
            spent[0] += clock() - start

    _runner.IsaScheduler._call = timed  # type: ignore[method-assign,assignment]
    return spent


def _first_use() -> dict[str, Any]:
    """Run a tiny binary twice in this process: nothing is compiled at run time, so the first
    run costs what the second does (plus importing the engine)."""
    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]
    import isa_rate

    import aiopim

    prog, _ = isa_rate.program(10)

    async def tiny() -> None:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        await dpus.launch()

    times = []
    for _ in range(2):
        start = time.perf_counter()
        aiopim.run(tiny)
        times.append(time.perf_counter() - start)
    return {"first_s": times[0], "second_s": times[1]}


def child_isa_compute(
    nr_dpus: int, iterations: int, engine: str, repeat: int = 1
) -> dict[str, Any]:
    """The compute-bound loop of ``benchmarks/isa_rate.py`` on ``nr_dpus`` DPUs: the fastest
    of ``repeat`` launches, each on a fresh emulator (all must compute the same values), on
    the ``compiled`` or ``python`` engine."""
    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]
    import isa_rate
    import numpy as np

    import aiopim
    from aiopim.isa import set_engine

    set_engine(engine)
    info = _first_use()
    prog, _ = isa_rate.program(iterations)
    expected, _ = isa_rate.plain_python(iterations)
    seen = _isa_counting()
    timing: dict[str, float] = {}

    async def main() -> tuple[list[list[int]], list[int]]:
        dpus = await aiopim.DpuSet.alloc(nr_dpus)
        await dpus.load(prog)
        wall, cpu = time.perf_counter(), time.process_time()
        await dpus.launch()
        timing["wall"] = time.perf_counter() - wall
        timing["cpu"] = time.process_time() - cpu
        out = await dpus.copy_from("out", np.uint32, isa_rate.THREADS)
        return out.tolist(), [d.last_run_ps for d in dpus.dpu_list]

    results = []
    for _ in range(repeat):
        seen[0] = 0
        values, runs = aiopim.run(main)
        results.append((timing["cpu"], timing["wall"], values, runs, seen[0]))
    cpu, wall, values, runs, instructions = min(results, key=lambda r: r[0])
    return {
        **info,
        "ok": all(v == expected for v in values) and all(r[2:] == results[0][2:] for r in results),
        "values": values,
        "runs_ps": runs,
        "instructions": instructions,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_mib": peak_mib(),
    }


def child_isa_keysum(nr_ranks: int, nr_dpus: int, engine: str, repeat: int = 1) -> dict[str, Any]:
    """``examples/wram_fifo_keysum.py --kernel isa`` on ``nr_ranks`` ranks (or ``nr_dpus``): the
    fastest of ``repeat`` runs, each on a fresh emulator (all must receive the same pairs), on
    the ``compiled`` or ``python`` engine."""
    sys.path[:0] = [str(ROOT / "examples")]
    import wram_fifo_keysum as ks

    import aiopim
    from aiopim.isa import set_engine

    set_engine(engine)
    info = _first_use()
    # the binary is assembled once, before the runs, as the compute loop's is (a host program
    # loads a DPU binary built beforehand)
    program = ks.build_binary()
    ks.build_binary = lambda: program
    seen = _isa_counting()
    runs = []
    for _ in range(repeat):
        seen[0] = 0
        wall, cpu = time.perf_counter(), time.process_time()
        r = aiopim.run(ks.host, nr_ranks, nr_dpus, 16, "all", 0, "isa", backend="trio")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        runs.append((cpu, wall, r, seen[0]))
    cpu, wall, r, instructions = min(runs, key=lambda run: run[0])
    same = all(sorted(run[2]["received"]) == sorted(r["received"]) for run in runs)
    return {
        **info,
        "ok": bool(r["complete"] and not r["wrong"] and same),
        "dpus": r["dpus"],
        "checked": r["checked"],
        "received": sorted(r["received"]),
        "virtual_s": r["virtual_time_s"],
        "instructions": instructions,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_mib": peak_mib(),
    }


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "transfers": child_transfers,
    "idle": child_idle,
    "broadcast": child_broadcast,
    "isa_compute": child_isa_compute,
    "isa_keysum": child_isa_keysum,
}


# --- sections (one per goal of the full-machine issue) ---------------------------------------
def goal4_transfers(quick: bool) -> list[Row]:
    """Goal 4: host <-> MRAM at >= 50 % of NumPy's copy rate; peak memory = MRAM + buffers."""
    nr, size = (8, 16 * MIB) if quick else (64, 64 * MIB)
    r = run_child("transfers", nr_dpus=nr, size=size, repeat=3)
    rows = []
    for way, label in (
        ("to", "host -> unwritten MRAM"),
        ("over", "host -> written MRAM"),
        ("from", "MRAM -> host"),
    ):
        emu, ref = r[f"emu_{way}"], r[f"numpy_{way}"]
        rows.append(
            Row(
                f"{label}, {nr} x {size // MIB} MiB",
                f"{emu:,.0f} MiB/s = {emu / ref:.2f} x NumPy ({ref:,.0f} MiB/s)",
                ">= 0.50 x NumPy",
                emu / ref >= 0.5,
            )
        )
    mram, extra = r["mib"], r["peak_above_host_mib"]
    rows.append(
        Row(
            "peak RSS of the transfers, above the host buffers",
            f"{extra:,.1f} MiB = {extra / mram:.3f} x MRAM written ({mram:,.0f} MiB; "
            f"host buffers {r['host_mib']:,.0f} MiB)",
            "<= 1.01 x MRAM written",  # the page tables: about 120 bytes per 64 KiB page
            extra <= 1.01 * mram,
        )
    )
    return rows


def goal5_memory(quick: bool) -> list[Row]:
    """Goal 5: ranks and memories cost host memory when allocated and written, not before."""
    rows = []
    one = run_child("idle", nr_dpus=64)
    rows.append(
        Row(
            f"1 rank allocated, program loaded ({one['dpus']} DPUs)",
            f"{one['above_mib']:.0f} MiB above import ({one['import_mib']:.0f} MiB)",
            "<= 80 MiB",
            one["above_mib"] <= 80,
        )
    )
    full = run_child("idle", nr_dpus=-1)
    rows.append(
        Row(
            f"whole machine allocated, program loaded ({full['dpus']} DPUs)",
            f"{full['above_mib']:.0f} MiB above import, "
            f"{full['above_mib'] + full['import_mib']:.0f} MiB in all, {full['s']:.1f} s",
            "<= 300 MiB",
            full["above_mib"] <= 300,
        )
    )
    ranks, size = (8, 16 * MIB) if quick else (40, 63 * MIB)
    b = run_child("broadcast", nr_ranks=ranks, size=size)
    private = b["dpus"] * b["mib"]
    rows.append(
        Row(
            f"broadcast {b['mib']:.0f} MiB to {ranks} ranks ({b['dpus']} DPUs)",
            f"{b['above_host_mib']:,.0f} MiB above the host buffers "
            f"(private copies: {private:,.0f} MiB = {private / b['above_host_mib']:,.0f} x); "
            f"{b['broadcast_s']:.2f} s",
            "a few hundred MiB",
            b["above_host_mib"] <= 400,
        )
    )
    return rows


def _rate(r: dict[str, Any]) -> float:
    return r["instructions"] / max(r["cpu_s"], 1e-9)


def goal1_isa_rate(quick: bool) -> list[Row]:
    """The compiled engine: no warm-up, its rate on a hand-written loop and on the key-sum,
    against the same source run as plain Python (same results and virtual times)."""
    rows: list[Row] = []
    big = run_child(
        "isa_compute", nr_dpus=64, iterations=2000 if quick else 20000, engine="compiled", repeat=3
    )
    rows.append(
        Row(
            "compiled engine: first and second run of a tiny binary in a process",
            f"{big['first_s']:.2f} s, then {big['second_s']:.2f} s",
            "nothing compiled at run time",
            big["first_s"] <= max(1.2 * big["second_s"], big["second_s"] + 0.5),
        )
    )
    rows.append(
        Row(
            f"compute loop, 64 DPUs x 16 threads ({big['instructions']:,} instructions)",
            f"{_rate(big) / 1e6:,.0f} M instr/s per core ({big['wall_s']:.2f} s wall, "
            f"{big['cpu_s']:.2f} s CPU), results {'ok' if big['ok'] else 'WRONG'}",
            "",
            big["ok"],
        )
    )
    small = {"nr_dpus": 2, "iterations": 300 if quick else 1500}
    fast = run_child("isa_compute", engine="compiled", **small)
    py = run_child("isa_compute", engine="python", **small)
    same = fast["values"] == py["values"] and fast["runs_ps"] == py["runs_ps"]
    rows.append(
        Row(
            f"compute loop, 2 DPUs: compiled / pure Python ({py['instructions']:,} instructions)",
            f"{_rate(fast) / _rate(py):,.0f} x ({_rate(py) / 1e3:,.0f} k instr/s pure Python); "
            f"results and run times {'identical' if same else 'DIFFER'}",
            "identical",
            same and fast["ok"],
        )
    )
    ks = run_child("isa_keysum", nr_ranks=1, nr_dpus=0, engine="compiled", repeat=3)
    rows.append(
        Row(
            f"key-sum binary, 64 DPUs ({ks['instructions']:,} instructions)",
            f"{_rate(ks) / 1e6:,.0f} M instr/s per core ({ks['wall_s']:.1f} s wall), "
            f"{ks['checked']} pairs {'ok' if ks['ok'] else 'WRONG'}",
            "",
            ks["ok"],
        )
    )
    if not quick:
        one = run_child("isa_keysum", nr_ranks=0, nr_dpus=1, engine="compiled")
        one_py = run_child("isa_keysum", nr_ranks=0, nr_dpus=1, engine="python")
        same = (one["received"], one["virtual_s"]) == (one_py["received"], one_py["virtual_s"])
        rows.append(
            Row(
                "key-sum binary, 1 DPU: compiled / pure Python",
                f"{_rate(one) / _rate(one_py):,.0f} x; pairs and virtual time "
                f"{'identical' if same else 'DIFFER'}",
                "identical",
                same and one["ok"],
            )
        )
    return rows


def goal2_isa_machine(quick: bool) -> list[Row]:
    """The assembled key-sum on 40 ranks, a compute-bound binary on every DPU."""
    rows: list[Row] = []
    ranks = 2 if quick else 40
    ks = run_child("isa_keysum", nr_ranks=ranks, nr_dpus=0, engine="compiled")
    rows.append(
        Row(
            f"key-sum --kernel isa, {ranks} ranks ({ks['dpus']} DPUs, {ks['checked']} pairs)",
            f"{ks['wall_s']:.1f} s wall ({ks['cpu_s']:.1f} s CPU), {ks['peak_mib']:,.0f} MiB "
            f"peak, {'all checked' if ks['ok'] else 'WRONG'}",
            "<= 5 s wall, <= 1024 MiB" if not quick else "<= 1024 MiB",
            ks["ok"] and (quick or ks["wall_s"] <= 5) and ks["peak_mib"] <= 1024,
        )
    )
    dpus = 128 if quick else 2560
    # 16 threads issue one instruction per cycle: 5 per iteration and thread, 1 ms = 400k cycles
    c = run_child("isa_compute", nr_dpus=dpus, iterations=5100, engine="compiled")
    shortest = min(c["runs_ps"]) / 1e9
    rows.append(
        Row(
            f"compute-bound binary on {dpus} DPUs ({c['instructions']:,} instructions)",
            f"{c['wall_s']:.1f} s wall ({c['cpu_s']:.1f} s CPU), shortest run {shortest:.3f} ms, "
            f"{c['peak_mib']:,.0f} MiB peak, results {'ok' if c['ok'] else 'WRONG'}",
            ">= 1 ms each",
            c["ok"] and shortest >= 1.0,
        )
    )
    return rows


def goal3_python_kernels(quick: bool) -> list[Row]:
    """Goal 3: the key-sum demo with Python kernels (``benchmarks/keysum_python.py``'s runs)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import keysum_python

    counts = (1, 2) if quick else (1, 40)
    runs = {n: keysum_python.measure(ROOT, n, "trio") for n in counts}
    rows: list[Row] = []
    for n, r in runs.items():
        target = 1.5 if n == 1 else 60.0 * n / 40
        rows.append(
            Row(
                f"key-sum, Python kernels, {n} rank{'s' if n > 1 else ''} ({r['dpus']} DPUs)",
                f"{r['cpu_s']:.2f} s CPU ({r['cpu_s'] / n:.2f} s per rank), "
                f"{r['cpu_s'] / r['events'] * 1e6:.2f} us per kernel event, results ok",
                f"<= {target:g} s CPU" if n in (1, 40) else f"<= {target:g} s CPU (40 ranks: 60 s)",
                r["cpu_s"] <= target,
            )
        )
    first, last = (runs[n]["cpu_s"] / runs[n]["events"] for n in (counts[0], counts[-1]))
    rows.append(
        Row(
            f"CPU per kernel event, {counts[-1]} ranks / 1 rank",
            f"{last / first:.2f} x",
            "flat (<= 1.1 x)",
            last / first <= 1.1,
        )
    )
    # what the same DPU code costs with no runtime around it (keysum_python.py --floor)
    bare = keysum_python.measure_floor(ROOT)
    one = runs[1]
    left = (1.5 - bare["cpu_s"]) / one["events"] * 1e6
    rows.append(
        Row(
            "the same DPU code, 1 rank, on a bare runtime (coroutines, events, DMA copies)",
            f"{bare['cpu_s']:.2f} s CPU; aiopim {one['cpu_s'] / bare['cpu_s']:.2f} x that, "
            f"{(one['cpu_s'] - bare['cpu_s']) / one['events'] * 1e6:.2f} us per event above it; "
            + (f"1.5 s leaves {left:.2f} us" if left > 0 else "over 1.5 s on its own"),
            "",
            None,
        )
    )
    return rows


SECTIONS: dict[str, tuple[str, Callable[[bool], list[Row]]]] = {
    "isa_rate": ("Goal 1: instruction-set interpreter rate", goal1_isa_rate),
    "isa_machine": ("Goal 2: interpreted binaries on the whole machine", goal2_isa_machine),
    "python_kernels": ("Goal 3: the key-sum with Python kernels", goal3_python_kernels),
    "transfers": ("Goal 4: host <-> MRAM transfers", goal4_transfers),
    "memory": ("Goal 5: host memory of ranks, DPUs and broadcasts", goal5_memory),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI)")
    ap.add_argument("--only", choices=sorted(SECTIONS), action="append", help="one section")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "PARAMS"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    args = ap.parse_args()
    if args.child:
        name, params = args.child
        print(json.dumps(CHILDREN[name](**json.loads(params))))
        return 0
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores" + ", --quick" * args.quick,
        flush=True,
    )
    from aiopim._progress import Progress  # not in the children: their memory is measured

    missed = 0
    keys = args.only or list(SECTIONS)
    # measurements run in child processes: the display counts sections
    with Progress("full_machine", total=len(keys), unit="sections", enabled=args.progress) as bar:
        for done, key in enumerate(keys):
            bar.update(done, section=key)
            title, fn = SECTIONS[key]
            rows = fn(args.quick)
            print_table(title, rows)
            missed += sum(r.ok is False for r in rows)
        bar.update(len(keys))
    print(f"\nfull_machine missed={missed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
