"""umem's own synchronisation examples, as the seed writes them (issue 35, item 9).

``aligned_alloc(128, 10 * sizeof(double))`` rounds the block up to 128 bytes, so both forms run
as written; the device bytes they leave show what each form syncs (10 bytes in C, 80 in C++).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import pytest
import umem_seed_sync as seed

import aiopim
from aiopim import umem

RANGE = np.arange(10, dtype=np.float64).tobytes()
Example = Callable[[umem.Context, umem.Context], Awaitable[list[float]]]


def test_aligned_alloc_rounds_the_block_up_to_the_alignment() -> None:
    host = umem.Host()
    with host.aligned_alloc(128, 10 * 8) as adr:
        assert host.is_ok(), host.get_message()
        assert (adr.size, adr.alignment, int(adr) % 128) == (128, 128, 0)
        adr.view(np.uint8)[:] = 7  # all 128 bytes are the caller's
    assert host.is_ok()


@pytest.mark.parametrize(
    ("example", "synced"), [(seed.c_example, 10), (seed.cxx_example, 80)], ids=["C", "C++"]
)
def test_each_form_leaves_what_it_synced_in_a_file_device(
    example: Example, synced: int, tmp_path: Path
) -> None:
    async def main() -> list[float]:
        with umem.File(tmp_path / "cuda.bin", "w+b") as cuda:
            return await example(umem.Host(), cuda)

    assert aiopim.run(main) == [float(i) for i in range(10)]
    device = (tmp_path / "cuda.bin").read_bytes()
    assert device[:synced] == RANGE[:synced]
    assert not any(device[synced:])  # the rest of the 128-byte block was never written


def test_both_forms_run_on_mram_and_leave_the_synced_bytes(backend: str) -> None:
    async def main() -> tuple[list[list[float]], list[bytes], list[int]]:
        values, device, times = [], [], []
        emu = aiopim.current_emulator()
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(aiopim.Program("empty"))
            heap = "__sys_used_mram_end"  # the first block umem hands out starts there
            for example in (seed.c_example, seed.cxx_example):
                await dpus.copy_to(heap, np.zeros(128, np.uint8))
                t0 = emu.now_ps
                values.append(await example(umem.Host(), umem.Mram(dpus)))
                times.append(emu.now_ps - t0)
                device.append((await dpus.copy_from(heap, np.uint8, 128))[0].tobytes())
        return values, device, times

    values, device, times = aiopim.run(main, backend=backend)
    assert values == [[float(i) for i in range(10)]] * 2
    assert device == [RANGE[:10] + bytes(118), RANGE + bytes(48)]
    # in ps; the C form moves 10 bytes as whole 8-byte granules, the partial one merged
    assert times == [210_981_820, 151_575_759]


def test_the_script_prints_every_run_and_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert seed.main(["--backend", "trio"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line[:18].rstrip() for line in lines[:-1]] == [
        f"{form:<3} Host <-> {device}"
        for device in ("MRAM", "Host", "File")
        for form in ("C", "C++")
    ]
    assert all("[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]" in line for line in lines[:-1])
    assert lines[-1] == "OK"
