"""umem's host <-> device synchronisation example, with a DPU's MRAM in place of the GPU.

python examples/umem_sync.py --backend trio

``sync_example`` is device independent: the same function runs with a second Host, a File and
MRAM as the device; only the constructors in ``host_program`` differ. With MRAM, the device's
own work is a DPU launch that doubles the values in place, queued between the transfer jobs.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

import aiopim
from aiopim import umem

N = 10  # doubles

# --- a DPU program that doubles N float64 values at an MRAM address given by the host --------
scale = aiopim.Program("scale", nr_tasklets=1)
scale_args = scale.host("args", np.uint32, 2)  # MRAM address, number of doubles


@scale.main
async def scale_main(t: aiopim.Tasklet) -> None:
    adr, count = (int(v) for v in t.view(scale_args))
    buf = t.mem_alloc(8 * count)
    await t.mram_read(adr, buf, 8 * count)
    t.view(buf, np.float64, count)[:] *= 2
    t.compute(4 * count)
    await t.mram_write(buf, adr, 8 * count)


# --- umem's example, device independent -------------------------------------------------------
DeviceStep = Callable[[umem.Address], Awaitable[None]]


async def double_through_umem(adr: umem.Address) -> None:
    """Device work written with umem calls only: read, double, write back."""
    values = np.frombuffer(await adr.read(), np.float64) * 2
    await adr.copy_from(values)


async def sync_example(
    host: umem.Context, device: umem.Context, device_step: DeviceStep = double_through_umem
) -> list[float]:
    """Mirror N doubles of ``device`` in ``host``, initialise them, sync, let the device change
    them, update the mirror; leaving the ``with`` blocks disconnects and frees."""
    device_alignment = 128  # umem rounds the 80-byte block up to 128 bytes
    with device.aligned_alloc(device_alignment, N * 8) as device_adr:
        host_alignment = 64
        with await device_adr.connect(host, N * 8, host_alignment) as host_adr:
            host_adr.view(np.float64)[:] = range(N)  # initialise the array as range(N)
            await host_adr.sync()  # now the device memory holds range(N)
            await device_step(device_adr)  # say, the device changed the data...
            await host_adr.update()  # ...so we pull it into the host mirror
            result: list[float] = host_adr.view(np.float64).tolist()
    for ctx in (host, device):
        if not ctx.is_ok():
            raise RuntimeError(f"{ctx!r}: {ctx.get_message()}")
    return result


# --- running it against three devices -----------------------------------------------------------
Run = tuple[str, list[float], float]


async def host_program(workdir: Path) -> list[Run]:
    runs: list[Run] = []

    async def report(
        name: str, host: umem.Context, device: umem.Context, *step: DeviceStep
    ) -> None:
        t0 = aiopim.now()
        values = await sync_example(host, device, *step)
        runs.append((name, values, aiopim.now() - t0))

    await report("Host -> Host (zero-copy)", umem.Host(), umem.Host())
    with umem.File(workdir / "device.bin", "w+b") as f:
        await report("Host -> File", umem.Host(), f)
    async with await aiopim.DpuSet.alloc(1) as dpus:
        await dpus.load(scale)
        mram = umem.Mram(dpus)
        await report("Host -> MRAM", umem.Host(), mram)

        async def on_dpu(adr: umem.Address) -> None:
            await dpus.copy_to("args", np.array([int(adr), N], np.uint32))
            await dpus.launch()

        await report("Host -> MRAM, DPU launch", umem.Host(), mram, on_dpu)
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
    expected = [2.0 * i for i in range(N)]
    for name, values, seconds in runs:
        print(f"{name:<26} {values}  ({seconds * 1e6:.3f} us virtual)")
    ok = all(values == expected for _, values, _ in runs)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
