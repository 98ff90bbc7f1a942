"""Host memory of a process that runs emulator after emulator: aiopim's collection of dropped
emulators against Python's garbage collector alone.

An emulator's machine (ranks, DPUs, their runners) is a graph of objects that refer to each
other, so Python frees its WRAM, IRAM and MRAM only at a full garbage collection. Python runs
those by counts of new objects, and a machine is few objects holding many bytes. aiopim counts
the bytes dropped emulators hold and collects at ``GC_AFTER_DROPPED_BYTES`` (256 MiB).

Each mode runs in a fresh process that first builds ``--live`` long-lived objects (what a test
runner, a notebook or a campaign driver holds; a million in the default pytest run), then runs
``--emulators`` host programs one after another, each on a new emulator of one rank of 64
DPUs that writes 1 MiB of distinct MRAM per DPU. It prints each mode's peak resident memory and
CPU time; last line: ``emulator_memory peak_ratio=<gc alone / aiopim> cpu_ratio=<aiopim / gc
alone>``.

python benchmarks/emulator_memory.py [--quick] [--emulators 24] [--live 1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

import aiopim
import aiopim._emulator
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    DPU_XFER_DEFAULT,
    DPU_XFER_TO_DPU,
    dpu_alloc,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
)

MIB = 1 << 20
NR_DPUS = 64


def program() -> aiopim.Program:
    """Four tasklets read back blocks of the MiB the host wrote (a few thousand events per
    DPU, so the machine lives through many of the collector's young passes)."""
    prog = aiopim.Program("mram_read", nr_tasklets=4)
    data = prog.mram("data", np.uint8, MIB)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(2048)
        base = t.mram_address(data)
        for block in range(t.me(), 64, 4):
            await t.mram_read(base + block * 2048, buf, 2048)
            t.compute(200)

    return prog


async def host(seed: int) -> int:
    dpus = await dpu_alloc(NR_DPUS)
    await dpu_load(dpus, program())
    rng = np.random.default_rng(seed)
    buffers = rng.integers(0, 256, (NR_DPUS, MIB), dtype=np.uint8)  # every DPU its own bytes
    for i, dpu in enumerate(dpus.dpus):
        dpu_prepare_xfer(dpu, buffers[i])
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "data", 0, MIB, DPU_XFER_DEFAULT)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    return NR_DPUS


def child(mode: str, emulators: int, live: int) -> None:
    """One mode in this process: prints its peak resident memory (MiB) and CPU seconds."""
    if mode == "gc_alone":
        aiopim._emulator.GC_AFTER_DROPPED_BYTES = 1 << 62
    kept = [(i, str(i)) for i in range(live)]  # long-lived objects the collector walks
    machine = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=NR_DPUS)
    start = time.process_time()
    for i in range(emulators):
        assert aiopim.Emulator(machine).run(host, i) == NR_DPUS
    cpu = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    del kept
    print(json.dumps({"peak_mib": peak, "cpu_s": cpu}))


def measure(mode: str, emulators: int, live: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--emulators", str(emulators),
         "--live", str(live)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return dict(json.loads(out.splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI sizes (8 emulators)")
    parser.add_argument("--emulators", type=int, default=24, help="emulators run one by one")
    parser.add_argument("--live", type=int, default=1_000_000, help="long-lived objects held")
    parser.add_argument("--child", choices=["aiopim", "gc_alone"], help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    emulators = 8 if opts.quick else opts.emulators
    if opts.child:
        child(opts.child, emulators, opts.live)
        return 0
    print(f"{emulators} emulators of {NR_DPUS} DPUs, 1 MiB of MRAM each, {opts.live:,} live "
          "objects")  # fmt: skip
    rows = {mode: measure(mode, emulators, opts.live) for mode in ("aiopim", "gc_alone")}
    for mode, r in rows.items():
        print(f"  {mode:9s} peak {r['peak_mib']:7.0f} MiB   CPU {r['cpu_s']:6.2f} s")
    peak_ratio = rows["gc_alone"]["peak_mib"] / rows["aiopim"]["peak_mib"]
    cpu_ratio = rows["aiopim"]["cpu_s"] / rows["gc_alone"]["cpu_s"]
    print(f"emulator_memory peak_ratio={peak_ratio:.2f} cpu_ratio={cpu_ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
