"""Vector addition in PrIM's VA shape: split two arrays across DPUs, launch, gather, check.

python examples/vector_add.py --backend trio --dpus 128 --elements 1048576
"""

from __future__ import annotations

import argparse

import numpy as np

import aiopim
from aiopim.sdk import (
    DPU_MRAM_HEAP_POINTER_NAME,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_DEFAULT,
    DPU_XFER_FROM_DPU,
    DPU_XFER_TO_DPU,
    dpu_alloc,
    dpu_broadcast_to,
    dpu_foreach,
    dpu_free,
    dpu_get_nr_dpus,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_sync,
)

NR_TASKLETS = 16
BLOCK_BYTES = 1024  # bytes per DMA, as PrIM's BL=10
INSTRUCTIONS_PER_ELEMENT = 6  # load, load, add, store, index, branch (PrIM int32 add: 6)

# --- the DPU program ------------------------------------------------------------------------
vector_add = aiopim.Program("vector_add", nr_tasklets=NR_TASKLETS)
#: DPU_INPUT_ARGUMENTS: bytes of A (and of B) on this DPU
args = vector_add.host("DPU_INPUT_ARGUMENTS", np.uint32, 2)
barrier = vector_add.barrier("my_barrier")


@vector_add.main
async def va_main(t: aiopim.Tasklet) -> None:
    if t.me() == 0:
        t.mem_reset()
    await t.barrier_wait(barrier)
    size_bytes = int(t.view(args)[0])
    buf_a = t.mem_alloc(BLOCK_BYTES)
    buf_b = t.mem_alloc(BLOCK_BYTES)
    heap = t.mram_heap_pointer
    a_base, b_base = heap, heap + size_bytes
    for off in range(t.me() * BLOCK_BYTES, size_bytes, t.nr_tasklets * BLOCK_BYTES):
        n = min(BLOCK_BYTES, size_bytes - off)
        await t.mram_read(a_base + off, buf_a, n)
        await t.mram_read(b_base + off, buf_b, n)
        a = t.view(buf_a, np.int32, n // 4)
        a += t.view(buf_b, np.int32, n // 4)  # C overwrites A's block, as in PrIM VA
        t.compute(INSTRUCTIONS_PER_ELEMENT * (n // 4))
        await t.mram_write(buf_a, b_base + off, n)  # results go where B was


# --- the host program -----------------------------------------------------------------------
async def host(nr_dpus: int, nr_elements: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-(2**20), 2**20, nr_elements, dtype=np.int32)
    b = rng.integers(-(2**20), 2**20, nr_elements, dtype=np.int32)

    dpus = await dpu_alloc(nr_dpus, "")
    n = dpu_get_nr_dpus(dpus)
    per_dpu = -(-nr_elements // n)
    per_dpu += per_dpu % 2  # 8-byte multiple of int32
    nbytes = per_dpu * 4
    a_pad = np.zeros(per_dpu * n, dtype=np.int32)
    b_pad = np.zeros(per_dpu * n, dtype=np.int32)
    a_pad[:nr_elements], b_pad[:nr_elements] = a, b
    a_parts, b_parts = a_pad.reshape(n, per_dpu), b_pad.reshape(n, per_dpu)

    await dpu_load(dpus, vector_add)
    t0 = aiopim.now()
    await dpu_broadcast_to(
        dpus, "DPU_INPUT_ARGUMENTS", 0, np.array([nbytes, 0], np.uint32), 8, DPU_XFER_DEFAULT
    )
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, a_parts[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, nbytes, DPU_XFER_ASYNC
    )
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, b_parts[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, nbytes, nbytes, DPU_XFER_ASYNC
    )
    t_in = aiopim.now()
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    t_kernel = aiopim.now()
    c_parts = np.zeros((n, per_dpu), dtype=np.int32)
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, c_parts[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, nbytes, nbytes, DPU_XFER_DEFAULT
    )
    await dpu_sync(dpus)
    t_end = aiopim.now()
    await dpu_free(dpus)

    c = c_parts.reshape(-1)[:nr_elements]
    expected = a + b
    return {
        "dpus": n,
        "elements": nr_elements,
        "correct": bool(np.array_equal(c, expected)),
        "cpu_dpu_s": t_in - t0,
        "dpu_kernel_s": t_kernel - t_in,
        "dpu_cpu_s": t_end - t_kernel,
        "virtual_time_s": aiopim.now(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--dpus", type=int, default=128)
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    r = aiopim.run(
        host,
        opts.dpus,
        opts.elements,
        opts.seed,
        backend=opts.backend,
        seed=opts.seed,
        progress=opts.progress,
    )
    status = "OK" if r["correct"] else "FAILED"
    print(f"vector_add: {r['elements']} elements on {r['dpus']} DPUs ({opts.backend}): {status}")
    print(
        f"  CPU->DPU {r['cpu_dpu_s'] * 1e3:.6f} ms, DPU kernel {r['dpu_kernel_s'] * 1e3:.6f} ms, "
        f"DPU->CPU {r['dpu_cpu_s'] * 1e3:.6f} ms"
    )
    print(f"  virtual time {r['virtual_time_s']:.12f} s")
    return 0 if r["correct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
