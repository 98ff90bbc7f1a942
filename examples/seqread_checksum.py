"""The sequential-reader example of UPMEM's memory-management guide, in Python.

MRAM holds a buffer size ``N`` (4 bytes) followed by ``N`` bytes; one tasklet sums the bytes
through a sequential reader (a WRAM cache refilled by DMA a page at a time) and stores the
checksum at the start of MRAM. The host loads the guide's sample image, 64 KB of counting
bytes, and reads the checksum back.

python examples/seqread_checksum.py --backend trio
"""

from __future__ import annotations

import argparse

import numpy as np

import aiopim
from aiopim.dpu import SeqReader

SAMPLE_BYTES = 64 * 1024
#: the checksum of 64 KB of counting bytes: 256 rounds of 0 + 1 + ... + 255
EXPECTED = 256 * sum(range(256))

# no printf: MRAM starts with the data, as in the guide's image
prog = aiopim.Program("seqreader_example", nr_tasklets=1, stdio=False)
MRAM_BASE = "__sys_used_mram_end"  # DPU_MRAM_HEAP_POINTER: offset 0 of this program's MRAM


def sample_image() -> np.ndarray:
    """``sample.bin``: the size, then 64 KB of counting bytes (padded to 8 bytes for the
    host transfer)."""
    data = (np.arange(SAMPLE_BYTES) & 0xFF).astype(np.uint8)
    image = np.concatenate([np.array([SAMPLE_BYTES], "<u4").view(np.uint8), data])
    return np.concatenate([image, np.zeros(-len(image) % 8, np.uint8)])


@prog.main
async def seqreader_example(t: aiopim.Tasklet) -> None:
    base = t.mram_heap_pointer
    t.mem_reset()
    header = t.mem_alloc(8)
    await t.mram_read(base, header, 8)
    n = int(t.view(header, np.uint32, 1)[0])
    cache = t.seqread_alloc()
    reader = SeqReader()
    p = await t.seqread_init(cache, base + 4, reader)
    checksum = 0
    for _ in range(n):
        checksum += int(t.view(p, np.uint8, 1)[0])
        t.compute(4)  # load, add, loop control (the seqread_get fast path is charged apart)
        p = await t.seqread_get(p, 1, reader)
    t.view(header, np.uint32, 2)[:] = (checksum & 0xFFFFFFFF, 0)
    await t.mram_write(header, base, 8)


async def host() -> tuple[int, float]:
    """Load the sample image, run, return the checksum and the kernel's virtual time."""
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(prog)
        await dpus.copy_to(MRAM_BASE, sample_image())
        t0 = aiopim.now()
        await dpus.launch()
        t1 = aiopim.now()
        out = await dpus.copy_from(MRAM_BASE, np.uint32, 2)
        return int(out[0][0]), t1 - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    checksum, seconds = aiopim.run(host, backend=opts.backend, progress=opts.progress)
    print(f"checksum = {checksum:#x} ({checksum})")
    print(f"launch took {seconds * 1e3:.6f} ms of virtual time")
    return 0 if checksum == EXPECTED else 1


if __name__ == "__main__":
    raise SystemExit(main())
