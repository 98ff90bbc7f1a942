"""The umem examples: one device-independent function on Host, File and MRAM; the scripts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import umem_host
import umem_sync
from helpers import script_outputs

import aiopim
from aiopim import umem

ROOT = Path(__file__).resolve().parent.parent


def test_the_same_functions_run_on_host_file_and_mram(backend: str, tmp_path: Path) -> None:
    async def main() -> dict[str, list[list[float]]]:
        dpus = await aiopim.DpuSet.alloc(2)
        await dpus.load(umem_sync.scale)
        out: dict[str, list[list[float]]] = {}
        devices = {
            "host": umem.Host(),
            "file": umem.File(tmp_path / "d.bin", "w+b"),
            "mram": umem.Mram(dpus),
        }
        for name, device in devices.items():
            out[name] = [
                await umem_host.range_of_doubles(device),
                await umem_sync.sync_example(umem.Host(), device),
            ]
            assert device.is_ok()
        return out

    results = aiopim.run(main, backend=backend)
    expected = [[float(i) for i in range(10)], [2.0 * i for i in range(10)]]
    assert results == {"host": expected, "file": expected, "mram": expected}
    assert umem_host.host_example() == expected[0]


def test_the_dpu_launch_changes_mram_between_sync_and_update(backend: str) -> None:
    async def main() -> list[float]:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(umem_sync.scale)

            async def on_dpu(adr: umem.Address) -> None:
                await dpus.copy_to("args", np.array([int(adr), umem_sync.N], np.uint32))
                await dpus.launch()

            return await umem_sync.sync_example(umem.Host(), umem.Mram(dpus), on_dpu)

    assert aiopim.run(main, backend=backend) == [2.0 * i for i in range(10)]


def test_scripts_exit_0_with_identical_output() -> None:
    for script in ("umem_sync.py", "umem_host.py"):
        outs = script_outputs(ROOT / "examples" / script)
        assert outs[0] == outs[1]
        assert outs[0].endswith("OK\n") and "us virtual" in outs[0]
