"""Host seconds become kernel picoseconds through one conversion, identically on both backends."""

from __future__ import annotations

import anyio
import pytest

import aiopim
from aiopim._runtime._kernel import ps_to_seconds, seconds_to_ps

BACKENDS = ("asyncio", "trio")


@pytest.mark.parametrize("backend", BACKENDS)
def test_three_sleeps_of_200us_end_at_exactly_600us(backend: str) -> None:
    async def main() -> list[int]:
        emu = aiopim.current_emulator()
        times = []
        for _ in range(3):
            await anyio.sleep(200e-6)
            times.append(emu.now_ps)
        return times

    assert aiopim.run(main, backend=backend) == [200_000_000, 400_000_000, 600_000_000]


@pytest.mark.parametrize("backend", BACKENDS)
def test_decimal_sleeps_land_on_exact_picoseconds(backend: str) -> None:
    durations = [1e-6, 0.1, 3.3e-9, 7e-12, 0.000123456789, 2.5, 1e-3, 0.07]

    async def main() -> list[int]:
        emu = aiopim.current_emulator()
        out = []
        for d in durations:
            await anyio.sleep(d)
            out.append(emu.now_ps)
        return out

    expected, total = [], 0
    for d in durations:
        total += round(d * 10**12)
        expected.append(total)
    assert aiopim.run(main, backend=backend) == expected


def test_both_backends_give_identical_times_for_timeouts() -> None:
    async def main() -> list[int]:
        emu = aiopim.current_emulator()
        out = []
        with anyio.move_on_after(0.3e-3):
            await anyio.sleep(1)
        out.append(emu.now_ps)
        with pytest.raises(TimeoutError):
            with anyio.fail_after(1.7e-6):
                await anyio.sleep(1)
        out.append(emu.now_ps)
        await anyio.sleep(0.5e-12)  # rounds to no time at all
        out.append(emu.now_ps)
        return out

    results = {b: aiopim.run(main, backend=b) for b in BACKENDS}
    assert results["asyncio"] == results["trio"] == [300_000_000, 301_700_000, 301_700_000]


def test_conversion_rounds_to_the_nearest_picosecond() -> None:
    assert seconds_to_ps(200e-6) == 200_000_000
    assert seconds_to_ps(0.1 + 0.2) == 300_000_000_000
    assert seconds_to_ps(0.4e-12) == 0
    assert seconds_to_ps(0.6e-12) == 1
    assert ps_to_seconds(seconds_to_ps(1.5)) == 1.5
