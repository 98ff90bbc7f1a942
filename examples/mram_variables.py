"""The MRAM-variable example of UPMEM's memory-management guide, in Python.

``__mram`` variables are read and written like WRAM ones; each access goes through the
tasklet's 8-byte software cache in WRAM (an 8-byte DMA, and for items narrower than 8 bytes a
read-modify-write of the whole word). The kernel copies the WRAM array ``input`` into the MRAM
array ``output`` element by element, then the host reads ``output`` back.

python examples/mram_variables.py --backend trio
"""

from __future__ import annotations

import argparse

import numpy as np

import aiopim

N = 16
#: the WRAM ``input`` array: counting values (the guide's C source is not in the seed document)
INPUT = np.arange(N, dtype=np.uint32)

prog = aiopim.Program("mram_variable_example", nr_tasklets=1)
wram_input = prog.wram("input", np.uint32, N, init=INPUT)
output = prog.mram_noinit("output", np.uint32, N)
copied = prog.mram("copied", np.uint64, 1, init=[0])


@prog.main
async def mram_variable_example(t: aiopim.Tasklet) -> None:
    src = t.view(wram_input)
    for i in range(N):
        await t.mram_store(output, i, int(src[i]))  # output[i] = input[i]
        t.compute(3)
    await t.mram_store(copied, 0, await t.mram_load(copied, 0) + N)  # copied += N


async def host() -> tuple[list[int], int]:
    """Run the kernel on one DPU; return ``output`` and ``copied`` as read by the host."""
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(prog)
        await dpus.launch()
        out = await dpus.copy_from("output", np.uint32)
        count = await dpus.copy_from("copied", np.uint64)
        return out[0].tolist(), int(count[0][0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    out, count = aiopim.run(host, backend=opts.backend, progress=opts.progress)
    print(f"output = {out}")
    print(f"copied = {count}")
    return 0 if out == INPUT.tolist() and count == N else 1


if __name__ == "__main__":
    raise SystemExit(main())
