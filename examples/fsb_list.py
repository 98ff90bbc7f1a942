"""The fixed-size block allocator example of UPMEM's memory-management guide, in Python.

A linked list is built from fsb blocks, some values are filtered out of it, the rest is summed
(the guide's documented result: 0x45) and the list is given back to the allocator.

python examples/fsb_list.py --backend trio
"""

from __future__ import annotations

import argparse

import numpy as np

import aiopim
from aiopim.dpu import NULL

#: The guide's C source is not part of the seed document; the data and the filter below are
#: ours, chosen so that the documented result (0x45) comes out.
DATA = [3, 12, 7, 42, 18, 9, 25, 64, 2, 18]
LIMIT = 20  # values above it are filtered out
NODE = 8  # struct { uint32_t value; struct node *next; }

prog = aiopim.Program("fsb_example", nr_tasklets=1)
result = prog.host("result", np.uint32)


@prog.main
async def fsb_example(t: aiopim.Tasklet) -> None:
    t.mem_reset()
    allocator = t.fsb_alloc(NODE, len(DATA))

    def node(ptr: int) -> np.ndarray:
        return t.view(ptr, np.uint32, 2)  # [value, next]

    head = NULL
    for value in reversed(DATA):  # push front: the list keeps DATA's order
        n = t.fsb_get(allocator)
        node(n)[:] = (value, head)
        head = n
        t.compute(6)
    prev, cur = NULL, head  # filter: unlink and free the values above LIMIT
    while cur != NULL:
        value, nxt = (int(x) for x in node(cur))
        if value > LIMIT:
            if prev == NULL:
                head = nxt
            else:
                node(prev)[1] = nxt
            t.fsb_free(allocator, cur)
        else:
            prev = cur
        cur = nxt
        t.compute(8)
    total, cur = 0, head  # sum what is left
    while cur != NULL:
        value, cur = (int(x) for x in node(cur))
        total += value
        t.compute(5)
    t.view(result)[0] = total
    while head != NULL:  # clean the list
        nxt = int(node(head)[1])
        t.fsb_free(allocator, head)
        head = nxt


async def host() -> int:
    """Run the kernel on one DPU and return ``result``."""
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(prog)
        await dpus.launch()
        return int((await dpus.copy_from("result", np.uint32))[0][0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    total = aiopim.run(host, backend=opts.backend, progress=opts.progress)
    print(f"fsb_example: sum of the remaining values = {total:#x}")
    return 0 if total == 0x45 else 1


if __name__ == "__main__":
    raise SystemExit(main())
