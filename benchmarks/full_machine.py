"""The full emulated machine: transfer rates and host memory, each figure next to its target.

python benchmarks/full_machine.py            # every section (about 2 min, 8.5 GiB of RAM at peak)
python benchmarks/full_machine.py --quick    # small sizes for CI (a few seconds, < 1 GiB)
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
    cells = [header] + [
        (r.what, r.value, r.target, "" if r.ok is None else ("ok" if r.ok else "MISSED"))
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    for i, c in enumerate(cells):
        print("  ".join(s.ljust(w) for s, w in zip(c, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


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


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "transfers": child_transfers,
    "idle": child_idle,
    "broadcast": child_broadcast,
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


SECTIONS: dict[str, tuple[str, Callable[[bool], list[Row]]]] = {
    "transfers": ("Goal 4: host <-> MRAM transfers", goal4_transfers),
    "memory": ("Goal 5: host memory of ranks, DPUs and broadcasts", goal5_memory),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI)")
    ap.add_argument("--only", choices=sorted(SECTIONS), action="append", help="one section")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "PARAMS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        name, params = args.child
        print(json.dumps(CHILDREN[name](**json.loads(params))))
        return 0
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores" + ", --quick" * args.quick,
        flush=True,
    )
    missed = 0
    for key in args.only or list(SECTIONS):
        title, fn = SECTIONS[key]
        rows = fn(args.quick)
        print_table(title, rows)
        missed += sum(r.ok is False for r in rows)
    print(f"\nfull_machine missed={missed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
