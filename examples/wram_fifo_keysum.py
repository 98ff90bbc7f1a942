"""The key-sum WRAM FIFO example of UPMEM's "WRAM Parallel Access" guide, on aiopim.

The DPUs hold key/value pairs in MRAM; the host streams keys 0..63 into each DPU's input FIFO
while the DPUs run, drains (key, sum) pairs from the output FIFOs every 32 keys with a parallel
callback, stops the DPUs by clearing ``active`` with a parallel transfer, syncs and drains the rest.

python examples/wram_fifo_keysum.py --ranks 1 --backend asyncio
python examples/wram_fifo_keysum.py --ranks 4 --backend trio
python examples/wram_fifo_keysum.py --dpus 1 --mode each
python examples/wram_fifo_keysum.py --ranks 1 --kernel isa   # the DPU program in assembly
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import aiopim
from aiopim.isa import assemble
from aiopim.sdk import (
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_DEFAULT,
    DPU_CALLBACK_PARALLEL,
    DPU_XFER_DEFAULT,
    DPU_XFER_NO_RESET,
    DPU_XFER_PARALLEL,
    DPU_XFER_TO_DPU,
    DpuSet,
    dpu_alloc,
    dpu_alloc_ranks,
    dpu_broadcast_to,
    dpu_callback,
    dpu_fifo_link_free,
    dpu_fifo_link_t,
    dpu_fifo_prepare_xfer,
    dpu_fifo_push_xfer,
    dpu_foreach,
    dpu_free,
    dpu_get_nr_dpus,
    dpu_launch,
    dpu_link_input_fifo,
    dpu_link_output_fifo,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_sync,
    get_fifo_elem,
    get_fifo_size,
)

NR_ELEMS = 4 << 10
NR_KEYS = 64
CACHE_SIZE = 256
INPUT_FIFO_PTR_SIZE, INPUT_FIFO_DATA_SIZE = 5, 8
OUTPUT_FIFO_PTR_SIZE, OUTPUT_FIFO_DATA_SIZE = 6, 16
#: the scan loop's body per element: load key, compare, branch, load value, 64-bit add
INSTRUCTIONS_PER_ELEMENT = 6
#: tasklet counts whose share of the elements is a whole number of cache blocks ("all" mode)
ALL_MODE_TASKLETS = [n for n in range(1, 25) if NR_ELEMS % (n * CACHE_SIZE) == 0]


# --- the DPU program ------------------------------------------------------------------------
def build_program(nr_tasklets: int, mode: str) -> aiopim.Program:
    """The guide's DPU program; ``mode`` picks process_inputs_all_tasklets or _each_tasklet."""
    if mode == "all" and NR_ELEMS % (nr_tasklets * CACHE_SIZE):
        # as in the guide's C code, each tasklet scans NR_ELEMS / NR_TASKLETS elements in whole
        # CACHE_SIZE blocks; other counts would overlap the next share and read past the end
        raise ValueError(
            f"mode 'all' needs NR_ELEMS / NR_TASKLETS to be a multiple of {CACHE_SIZE}: "
            f"use {ALL_MODE_TASKLETS} tasklets, not {nr_tasklets}"
        )
    prog = aiopim.Program("wram_fifo_example", nr_tasklets=nr_tasklets)
    active = prog.host("active", np.uint64, 1, init=[1])
    barrier = prog.barrier("barrier", nr_tasklets)
    mutex = prog.mutex("fifo_mutex")
    input_fifo = prog.input_fifo("input_fifo", INPUT_FIFO_PTR_SIZE, INPUT_FIFO_DATA_SIZE)
    output_fifo = prog.output_fifo("output_fifo", OUTPUT_FIFO_PTR_SIZE, OUTPUT_FIFO_DATA_SIZE)
    keys = prog.mram_noinit("keys", np.uint32, NR_ELEMS)
    values = prog.mram_noinit("values", np.uint32, NR_ELEMS)
    cache_keys = prog.wram("cache_keys", np.uint32, nr_tasklets * CACHE_SIZE)
    cache_values = prog.wram("cache_values", np.uint32, nr_tasklets * CACHE_SIZE)
    sum_tasklets = prog.wram("sum_tasklets", np.uint64, nr_tasklets)

    async def scan(t: aiopim.Tasklet, key: int, first: int, last: int) -> int:
        """Sum the values of ``key`` over elements [first, last) through this tasklet's cache."""
        ck = prog.address_of(cache_keys) + t.me() * CACHE_SIZE * 4
        cv = prog.address_of(cache_values) + t.me() * CACHE_SIZE * 4
        total = 0
        for i in range(first, last, CACHE_SIZE):
            await t.mram_read(t.mram_address(keys, i * 4), ck, CACHE_SIZE * 4)
            await t.mram_read(t.mram_address(values, i * 4), cv, CACHE_SIZE * 4)
            k = t.view(ck, np.uint32, CACHE_SIZE)
            v = t.view(cv, np.uint32, CACHE_SIZE)
            total += int(v[k == key].sum(dtype=np.uint64))
            t.compute(INSTRUCTIONS_PER_ELEMENT * CACHE_SIZE)
        return total

    async def values_sum_compute(t: aiopim.Tasklet, element: np.ndarray) -> None:
        per_tasklet = NR_ELEMS // t.nr_tasklets
        key = int(element.view(np.uint32)[0])
        sums = t.view(sum_tasklets)
        sums[t.me()] = await scan(t, key, t.me() * per_tasklet, (t.me() + 1) * per_tasklet)

    async def values_sum_reduce(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        total = int(t.view(sum_tasklets).sum(dtype=np.uint64))
        t.compute(3 * t.nr_tasklets + 6)
        out.view(np.uint64)[:2] = (int(element.view(np.uint32)[0]), total)

    async def values_sum_each(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        key = int(element.view(np.uint32)[0])
        out.view(np.uint64)[:2] = (key, await scan(t, key, 0, NR_ELEMS))

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if mode == "all":
            await t.process_inputs_all_tasklets(
                input_fifo, output_fifo, values_sum_compute, values_sum_reduce, barrier, active
            )
        else:
            await t.process_inputs_each_tasklet(
                input_fifo, output_fifo, values_sum_each, mutex, active
            )

    return prog


#: the same DPU program in DPU assembly, run instruction by instruction (``--kernel isa``)
KEYSUM_ASM = Path(__file__).resolve().parent / "isa" / "keysum.S"


def build_binary() -> aiopim.DpuProgram:
    """``examples/isa/keysum.S`` assembled into a DPU binary (16 tasklets, mode "all")."""
    return aiopim.load_elf(assemble(KEYSUM_ASM.read_text(), "v1B"), name="keysum")


# --- the host program -----------------------------------------------------------------------
@dataclass
class FlushArgs:
    """What the flush callback needs (``struct flush_args_t``)."""

    output_link: dpu_fifo_link_t
    rings: dict[int, np.ndarray]
    sums: list[int]
    received: list[tuple[int, int, int]] = field(default_factory=list)
    wrong: list[tuple[int, int, int]] = field(default_factory=list)


def flush_output_fifos(rank: DpuSet, rank_id: int, args: FlushArgs) -> int:
    """Read the (key, sum) pairs a flush brought back and compare them with the host's sums."""
    for dpu, _ in dpu_foreach(rank):
        ident = dpu.dpu_list[0].dpu_id
        ring = args.rings[ident]
        for i in range(get_fifo_size(args.output_link, dpu)):
            key, total = get_fifo_elem(args.output_link, dpu, ring, i).view(np.uint64).tolist()
            args.received.append((ident, key, total))
            if key >= NR_KEYS or total != args.sums[key]:
                args.wrong.append((ident, key, total))
    return 0


async def host(
    nr_ranks: int, nr_dpus: int, nr_tasklets: int, mode: str, seed: int, kernel: str = "python"
) -> dict[str, Any]:
    dpus = await (dpu_alloc(nr_dpus) if nr_dpus else dpu_alloc_ranks(nr_ranks))
    program = build_binary() if kernel == "isa" else build_program(nr_tasklets, mode)
    await dpu_load(dpus, program)
    n = dpu_get_nr_dpus(dpus)

    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 1024, NR_ELEMS, dtype=np.uint32)
    values = rng.integers(0, 1024, NR_ELEMS, dtype=np.uint32)
    await dpu_broadcast_to(dpus, "keys", 0, keys, NR_ELEMS * 4, DPU_XFER_DEFAULT)
    await dpu_broadcast_to(dpus, "values", 0, values, NR_ELEMS * 4, DPU_XFER_DEFAULT)
    sums = np.zeros(NR_KEYS, dtype=np.uint64)
    np.add.at(sums, keys[keys < NR_KEYS], values[keys < NR_KEYS].astype(np.uint64))

    input_link = dpu_link_input_fifo(dpus, "input_fifo")
    output_link = dpu_link_output_fifo(dpus, "output_fifo")
    # one ring per DPU (the guide shares one buffer, which works only because its DPUs agree)
    rings = {
        d.dpu_list[0].dpu_id: np.zeros(output_link.ring_bytes, np.uint8)
        for d, _ in dpu_foreach(dpus)
    }
    for dpu, _ in dpu_foreach(dpus):
        dpu_fifo_prepare_xfer(dpu, output_link, rings[dpu.dpu_list[0].dpu_id])
    flush_args = FlushArgs(output_link, rings, sums.tolist())

    key = np.zeros(2, dtype=np.uint32)  # one 8-byte element; read when each push job runs
    dpu_fifo_prepare_xfer(dpus, input_link, key)

    t0 = aiopim.now()
    await dpu_launch(dpus, DPU_ASYNCHRONOUS)
    for k in range(NR_KEYS):
        key[0] = k
        await dpu_fifo_push_xfer(dpus, input_link, DPU_XFER_NO_RESET)
        if (k + 1) % 32 == 0:
            await dpu_fifo_push_xfer(dpus, output_link, DPU_XFER_NO_RESET)
            await dpu_callback(dpus, flush_output_fifos, flush_args, DPU_CALLBACK_PARALLEL)

    active = np.zeros(1, dtype=np.uint64)
    dpu_prepare_xfer(dpus, active)
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_PARALLEL)
    await dpu_sync(dpus)

    await dpu_fifo_push_xfer(dpus, output_link, DPU_XFER_DEFAULT)
    await dpu_callback(dpus, flush_output_fifos, flush_args, DPU_CALLBACK_DEFAULT)
    elapsed = aiopim.now() - t0

    dpu_fifo_link_free(input_link)
    dpu_fifo_link_free(output_link)
    await dpu_free(dpus)
    per_dpu: dict[int, list[int]] = {}
    for ident, k, _ in flush_args.received:
        per_dpu.setdefault(ident, []).append(k)
    complete = len(per_dpu) == n and all(
        sorted(ks) == list(range(NR_KEYS)) for ks in per_dpu.values()
    )
    in_order = all(ks == list(range(NR_KEYS)) for ks in per_dpu.values())
    return {
        "dpus": n,
        "checked": len(flush_args.received),
        "wrong": flush_args.wrong,
        "complete": complete,
        "in_order": in_order,
        "received": flush_args.received,
        "elapsed_s": elapsed,
        "virtual_time_s": aiopim.now(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--ranks", type=int, default=1, help="ranks to allocate (64 DPUs each)")
    parser.add_argument("--dpus", type=int, default=0, help="allocate DPUs instead of ranks")
    parser.add_argument("--tasklets", type=int, default=16)
    parser.add_argument("--mode", choices=["all", "each"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kernel",
        choices=["python", "isa"],
        default="python",
        help="the DPU program as a Python kernel, or assembled from examples/isa/keysum.S",
    )
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    if opts.kernel == "isa" and (opts.mode, opts.tasklets) != ("all", 16):
        parser.error("--kernel isa is the 16-tasklet program of mode 'all'")
    if opts.mode == "all" and opts.tasklets not in ALL_MODE_TASKLETS:
        parser.error(f"--mode all needs --tasklets in {ALL_MODE_TASKLETS}")
    wall, cpu = time.perf_counter(), time.process_time()
    r = aiopim.run(
        host,
        opts.ranks,
        opts.dpus,
        opts.tasklets,
        opts.mode,
        opts.seed,
        opts.kernel,
        backend=opts.backend,
        progress=opts.progress,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    ok = r["complete"] and not r["wrong"]
    print(
        f"wram_fifo_keysum ({opts.mode}, {opts.backend}): {r['checked']} (key, sum) pairs checked "
        f"on {r['dpus']} DPUs: {'OK' if ok else 'FAILED'}"
    )
    print(f"  launch to last drain {r['elapsed_s'] * 1e3:.6f} ms")
    print(f"  virtual time {r['virtual_time_s']:.12f} s")
    # stderr: stdout stays the same on every run and backend
    print(f"  wall time {wall:.1f} s, CPU time {cpu:.2f} s", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
