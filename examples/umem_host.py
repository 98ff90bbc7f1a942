"""umem as a malloc/free replacement: ten doubles initialised as range(10), then freed.

python examples/umem_host.py --backend trio

``host_example`` is umem's first example on host RAM, written through a NumPy view of the
address. ``range_of_doubles`` is the same program written without touching host pointers, so
it runs unchanged on a Host, a File and a DPU's MRAM: only the constructors differ.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import aiopim
from aiopim import umem


def host_example() -> list[float]:
    """Allocate ten zeroed doubles on the host, fill them through the pointer, free them."""
    host = umem.Host()
    with host.calloc(8, 10) as adr:  # leaving the block frees adr
        ptr = adr.view(np.float64)
        for i in range(10):
            ptr[i] = float(i)
        return ptr.tolist()


async def range_of_doubles(ctx: umem.Context) -> list[float]:
    """The same in any context: the data goes in and out by copies."""
    async with await ctx.calloc(8, 10) as adr:
        await adr.copy_from(np.arange(10, dtype=np.float64))
        values = np.frombuffer(await adr.read(), np.float64).tolist()
    if not ctx.is_ok():
        raise RuntimeError(f"{ctx!r}: {ctx.get_message()}")
    return values


async def host_program(workdir: Path) -> list[tuple[str, list[float], float]]:
    runs = [("Host, through the pointer", host_example(), 0.0)]
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(aiopim.Program("empty"))
        with umem.File(workdir / "doubles.bin", "w+b") as f:
            for name, ctx in (("Host", umem.Host()), ("File", f), ("MRAM", umem.Mram(dpus))):
                t0 = aiopim.now()
                runs.append((name, await range_of_doubles(ctx), aiopim.now() - t0))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        runs = aiopim.run(host_program, Path(tmp), backend=opts.backend, progress=opts.progress)
    expected = [float(i) for i in range(10)]
    for name, values, seconds in runs:
        print(f"{name:<26} {values}  ({seconds * 1e6:.3f} us virtual)")
    ok = all(values == expected for _, values, _ in runs)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
