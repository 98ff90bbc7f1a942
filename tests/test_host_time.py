"""Host seconds become kernel picoseconds through one conversion, identically on both backends."""

from __future__ import annotations

import math

import anyio
import pytest
from helpers import wall_clock_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# --- the host's clock and the clock its timers fire on ----------------------------------------
TIMED_OPS = ("move_on_after", "fail_after", "sleep", "sleep_until")


def _hair_above(ps: int, ulps: int) -> float:
    """A float that rounds to ``ps`` picoseconds but lies ``ulps`` floats above ``ps / 1e12``."""
    x = ps_to_seconds(ps)
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


#: host durations in seconds: any float, whole picoseconds, and floats a hair above one
durations = st.one_of(
    st.floats(0, 2e-3, allow_nan=False),
    st.integers(0, 2 * 10**9).map(ps_to_seconds),
    st.builds(_hair_above, st.integers(0, 2 * 10**9), st.integers(1, 4)),
)
timed_steps = st.lists(st.tuples(st.sampled_from(TIMED_OPS), durations), min_size=1, max_size=6)


async def _timed_steps(start: float, steps: list[tuple[str, float]]) -> list[int]:
    """Run ``steps`` after sleeping ``start`` seconds; check each deadline is reached on the
    picosecond it rounds to and that the host clock then shows it; the times, in ps."""
    emu = aiopim.current_emulator()
    await anyio.sleep(start)
    times = [emu.now_ps]
    for op, delay in steps:
        t0 = anyio.current_time()
        deadline = t0 + delay
        if op == "move_on_after":
            with anyio.move_on_after(delay) as scope:
                await anyio.sleep(1)
            assert scope.cancelled_caught
            deadline = scope.deadline
        elif op == "fail_after":
            with pytest.raises(TimeoutError), anyio.fail_after(delay) as scope:
                await anyio.sleep(1)
            deadline = scope.deadline
        elif op == "sleep":
            await anyio.sleep(delay)
        else:
            await anyio.sleep_until(deadline)
        now = anyio.current_time()
        assert emu.now_ps == seconds_to_ps(deadline), (op, delay)
        assert seconds_to_ps(now) == emu.now_ps, (op, delay, now)
        if op != "sleep_until":  # anyio's sleep_until on asyncio sleeps a recomputed delay
            assert now >= deadline, (op, delay, now, deadline)
        times.append(emu.now_ps)
    return times


def check_timed_steps(start: float, steps: list[tuple[str, float]]) -> None:
    """Both backends reach every deadline at the same picosecond, without spinning."""
    with wall_clock_limit(10):
        results = {b: aiopim.run(_timed_steps, start, steps, backend=b) for b in BACKENDS}
    assert results["asyncio"] == results["trio"]


def test_a_timeout_a_hair_above_its_picosecond_ends_on_both_backends() -> None:
    # 0.000657254016 s is a whole picosecond; its float successor rounds to it, and anyio's
    # cancel scope compares the float: the loop must show a time at or past it
    check_timed_steps(0.0, [("move_on_after", _hair_above(657_254_016, 1))])
    check_timed_steps(1.25e-6, [("fail_after", _hair_above(657_254_016, 3))])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=durations, steps=timed_steps)
def test_host_clock_and_timers_agree(start: float, steps: list[tuple[str, float]]) -> None:
    check_timed_steps(start, steps)


@pytest.mark.long
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=durations, steps=timed_steps)
def test_host_clock_and_timers_agree_long(start: float, steps: list[tuple[str, float]]) -> None:
    check_timed_steps(start, steps)
