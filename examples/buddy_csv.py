"""The buddy allocator example of UPMEM's memory-management guide, in Python.

A CSV list of cities and their states is read from MRAM; each line's state is copied into a
temporary string from the buddy allocator, and every state seen for the first time is logged
with ``printf`` (read back on the host with ``dpu_log_read``).

python examples/buddy_csv.py --backend trio
"""

from __future__ import annotations

import argparse
import io

import numpy as np

import aiopim
from aiopim.dpu import NULL
from aiopim.sdk import dpu_log_read

#: The guide's input file is not part of the seed document; this list is ours.
CSV = (
    "Sacramento,California\n"
    "Austin,Texas\n"
    "San Diego,California\n"
    "Houston,Texas\n"
    "Albany,New York\n"
    "Buffalo,New York\n"
    "Denver,Colorado\n"
    "Dallas,Texas\n"
)
EXPECTED_STATES = ["California", "Texas", "New York", "Colorado"]
CSV_BYTES = (len(CSV) + 7) & ~7
BUDDY_HEAP = 4096

prog = aiopim.Program("buddy_example", nr_tasklets=1)
csv = prog.mram("csv", np.uint8, CSV_BYTES, init=np.frombuffer(CSV.encode(), np.uint8))


@prog.main
async def buddy_example(t: aiopim.Tasklet) -> None:
    t.mem_reset()
    t.buddy_init(BUDDY_HEAP)
    text = t.buddy_alloc(CSV_BYTES)  # rounded to a power of two, DMA-aligned
    for off in range(0, CSV_BYTES, 2048):
        await t.mram_read(t.mram_address(csv, off), text + off, min(2048, CSV_BYTES - off))
    raw = t.view(text, np.uint8, len(CSV)).tobytes()
    seen: list[tuple[int, int]] = []  # (buddy string, length) of the states already logged
    pos = 0
    while pos < len(raw):
        end = raw.index(b"\n", pos)
        comma = raw.index(b",", pos)
        state = raw[comma + 1 : end]
        t.compute(4 * (end - pos))
        tmp = t.buddy_alloc(len(state) + 1)  # temporary C string
        t.view(tmp, np.uint8, len(state) + 1)[:] = np.frombuffer(state + b"\0", np.uint8)
        known = any(n == len(state) and t.view(s, np.uint8, n).tobytes() == state for s, n in seen)
        t.compute(8 * len(seen))
        if known:
            t.buddy_free(tmp)
        else:
            seen.append((tmp, len(state)))
            t.printf("%s\n", t.view(tmp, np.uint8, len(state)).tobytes())
        pos = end + 1
    for s, _ in seen:
        t.buddy_free(s)
    t.buddy_free(text)
    t.dpu_assert(t.buddy_alloc(BUDDY_HEAP) != NULL, "the buddy heap is whole again")


async def host() -> str:
    """Run the kernel on one DPU; return its log."""
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(prog)
        await dpus.launch()
        out = io.StringIO()
        dpu_log_read(dpus.dpus[0], out)
        return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    log = aiopim.run(host, backend=opts.backend, progress=opts.progress)
    print(log, end="")
    return 0 if log.splitlines()[1:] == EXPECTED_STATES else 1


if __name__ == "__main__":
    raise SystemExit(main())
