"""Memclave's usage example, step for step: add two vectors inside a secure enclave.

python examples/memclave_add.py --backend trio --seed 0

Allocate any rank, wait for its DPUs, use 8 transfer workers, exchange a random key (about
10 s of virtual time), load the sealed ``add`` subkernel, broadcast ``a`` and ``b``, launch,
wait, gather ``c`` from the 64 DPUs and check ``c[i][j] == 3 * j``. Prints the virtual time of
each phase.
"""

from __future__ import annotations

import argparse
import random

import numpy as np

import aiopim
from aiopim.memclave import (
    VUD_ALLOC_ANY,
    VudRank,
    vud_broadcast_to,
    vud_error_str,
    vud_gather_from,
    vud_ime_install_key,
    vud_ime_launch,
    vud_ime_load,
    vud_ime_wait,
    vud_rank_alloc,
    vud_rank_free,
    vud_rank_nr_workers,
)

N = 64

# --- the subkernel: c = a + b over 64 words in MRAM -------------------------------------------
add = aiopim.Program("add", nr_tasklets=1)
a_var = add.mram("a", np.uint64, N)
b_var = add.mram("b", np.uint64, N)
c_var = add.mram("c", np.uint64, N)


@add.main
async def add_main(t: aiopim.Tasklet) -> None:
    buf_a = t.mem_alloc(8 * N)
    buf_b = t.mem_alloc(8 * N)
    await t.mram_read(t.mram_address(a_var), buf_a, 8 * N)
    await t.mram_read(t.mram_address(b_var), buf_b, 8 * N)
    c = t.view(buf_a, np.uint64, N)
    c += t.view(buf_b, np.uint64, N)
    t.compute(7 * N)  # 64-bit add loop: ld, ld, add, addc, sd, index, branch
    await t.mram_write(buf_a, t.mram_address(c_var), 8 * N)


# --- the host program ---------------------------------------------------------------------------
def phase(name: str, start: float) -> float:
    now = aiopim.now()
    print(f"{name:<28} {now - start:12.6f} s   (t = {now:.6f} s)")
    return now


def failed(r: VudRank, what: str) -> bool:
    if r.err:
        print(f"{what}: {r.err.name}: {vud_error_str(r.err)} ({r.detail})")
        return True
    return False


async def host(seed: int) -> int:
    t = phase("start", 0.0)
    r = await vud_rank_alloc(VUD_ALLOC_ANY)
    if failed(r, "Cannot allocate rank."):
        return 1
    await vud_ime_wait(r)
    vud_rank_nr_workers(r, 8)
    t = phase("alloc + wait for the loader", t)

    key = random.Random(seed).randbytes(32)  # the C example reads /dev/urandom
    await vud_ime_install_key(r, key)
    if failed(r, "key exchange failed"):
        await vud_rank_free(r)
        return 1
    t = phase("key exchange", t)

    a = np.arange(N, dtype=np.uint64)
    b = 2 * np.arange(N, dtype=np.uint64)
    await vud_ime_load(r, add)
    t = phase("seal + load subkernel", t)
    await vud_broadcast_to(r, N, a, "a")
    await vud_broadcast_to(r, N, b, "b")
    t = phase("broadcast a, b", t)

    await vud_ime_launch(r)
    await vud_ime_wait(r)
    t = phase("launch + wait", t)

    c = np.zeros((64, N), dtype=np.uint64)
    await vud_gather_from(r, N, "c", c)
    t = phase("gather c", t)
    if failed(r, "subkernel run failed"):
        await vud_rank_free(r)
        return 1
    ok = bool((c == 3 * np.arange(N, dtype=np.uint64)).all())
    await vud_rank_free(r)
    print(f"c[i][j] == 3*j on 64 DPUs: {'ok' if ok else 'WRONG'}; total {aiopim.now():.6f} s")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = ap.parse_args()
    return aiopim.run(host, opts.seed, backend=opts.backend, seed=opts.seed, progress=opts.progress)


if __name__ == "__main__":
    raise SystemExit(main())
