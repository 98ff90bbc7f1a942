"""umem's own host <-> device synchronisation examples, C and C++ forms, as the seed writes them.

python examples/umem_seed_sync.py --backend trio

``c_example`` and ``cxx_example`` are the two programs of libumem's documentation line by line,
with the same names and steps; only what Python writes differently changes (methods instead of
``umem_*`` functions, ``with`` blocks instead of C++ scopes, ``await`` where a DPU copy takes
virtual time). Its GPU is a DPU's MRAM here (``umem.Mram``); as the seed says, the code after
the constructors is device independent, so ``main`` also runs both with a second Host and a
File as the "cuda" context. Two things the seed's text leaves as they are:

- ``aligned_alloc(128, 10 * sizeof(double))`` asks for 80 bytes at a 128-byte alignment; umem
  rounds the block up to 128 bytes (C11's ``aligned_alloc`` would refuse the size).
- The C form syncs ``10`` bytes (the C++ form ``10 * sizeof(double)``): only the first 10 bytes
  of the array reach the device and come back; the rest of the device block stays as it was.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import aiopim
from aiopim import umem

SIZEOF_DOUBLE = np.dtype(np.float64).itemsize


async def c_example(host: umem.Context, cuda: umem.Context) -> list[float]:
    """The C API example (``umemHost_ctor(&host)`` / ``umemCuda_ctor(&cuda, 0)`` are the
    caller's); returns the host array at the end."""
    # allocate a length 10 array of doubles in GPU device aligned in
    # 128 byte boundaries
    cuda_alignment = 128
    cuda_adr = cuda.aligned_alloc(cuda_alignment, 10 * SIZEOF_DOUBLE)
    # establish a connection between host and GPU memories.
    # for allocated host buffer, we'll use alignment 64
    host_alignment = 64
    host_adr = await cuda.connect(cuda_adr, 10 * SIZEOF_DOUBLE, host, host_alignment)
    # application specific code, for instace, initialize the array
    # as range(10):
    ptr = host_adr.view(np.float64)
    for i in range(10):
        ptr[i] = float(i)
    await cuda.sync_from(cuda_adr, host, host_adr, 10)
    # now the GPU device memory is initialized as range(10)
    # say, the GPU device changed the allocated data, so we sync the
    # data to host buffer:
    await cuda.sync_to(cuda_adr, host, host_adr, 10)
    values: list[float] = ptr.tolist()
    # disconnect the host and GPU device memories, this also frees host buffer
    cuda.disconnect(cuda_adr, host, host_adr, host_alignment)
    # free the allocated memory area in the GPU device
    cuda.aligned_free(cuda_adr)
    return values


async def cxx_example(host: umem.Context, cuda: umem.Context) -> list[float]:
    """The C++ API example (``umem::Host host; umem::Cuda cuda(0);`` are the caller's)."""
    # allocate a length 10 array of doubles in GPU device aligned in
    # 128 byte boundaries
    cuda_alignment = 128
    with cuda.aligned_alloc(cuda_alignment, 10 * SIZEOF_DOUBLE) as cuda_adr:
        # establish a connection between host and GPU memories.
        # for allocated host buffer, we'll use alignment 64
        host_alignment = 64
        with await cuda_adr.connect(host, 10 * SIZEOF_DOUBLE, host_alignment) as host_adr:
            # application specific code, for instace, initialize the array
            # as range(10):
            ptr = host_adr.view(np.float64)
            for i in range(10):
                ptr[i] = float(i)
            await host_adr.sync(10 * SIZEOF_DOUBLE)
            # now the GPU device memory is initialized as range(10)
            # say, the GPU device changed the allocated data, so we sync the
            # data to host buffer:
            await host_adr.update(10 * SIZEOF_DOUBLE)
            values: list[float] = ptr.tolist()
            # leaving the scope frees host_adr and cuda_adr
    return values


Run = tuple[str, list[float], float]


async def _run(name: str, host: umem.Context, cuda: umem.Context, runs: list[Run]) -> None:
    for form, example in (("C", c_example), ("C++", cxx_example)):
        t0 = aiopim.now()
        values = await example(host, cuda)
        for ctx in (host, cuda):
            if not ctx.is_ok():
                raise RuntimeError(f"{form} example, {ctx!r}: {ctx.get_message()}")
        runs.append((f"{form:<3} {name}", values, aiopim.now() - t0))


async def host_program(workdir: Path) -> list[Run]:
    """Both examples with three "cuda" contexts: MRAM, a second Host, a File."""
    runs: list[Run] = []
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(aiopim.Program("empty"))
        await _run("Host <-> MRAM", umem.Host(), umem.Mram(dpus), runs)
    await _run("Host <-> Host", umem.Host(), umem.Host(), runs)
    with umem.File(workdir / "cuda.bin", "w+b") as cuda:
        await _run("Host <-> File", umem.Host(), cuda, runs)
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
        print(f"{name:<18} {values}  ({seconds * 1e6:.3f} us virtual)")
    ok = all(values == expected for _, values, _ in runs)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
