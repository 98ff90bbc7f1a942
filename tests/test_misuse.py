"""Host API misuse: freed and stale handles, wrong types and values, free joining non-blocking
callbacks, and the star import under ``mypy --strict``; on both backends."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mypy.api
import numpy as np
import pytest
from helpers import emu, spin_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
import aiopim.sdk as sdk
from aiopim import timing
from aiopim.host import DpuSet
from aiopim.sdk import (
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_NONBLOCKING,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_DEFAULT,
    DPU_XFER_TO_DPU,
    DpuError,
    DpuErrorCode,
    dpu_alloc,
    dpu_alloc_ranks,
    dpu_broadcast_to,
    dpu_callback,
    dpu_copy_from,
    dpu_copy_to,
    dpu_fifo_prepare_xfer,
    dpu_fifo_push_xfer,
    dpu_foreach,
    dpu_free,
    dpu_get_nr_dpus,
    dpu_get_nr_ranks,
    dpu_launch,
    dpu_link_input_fifo,
    dpu_load,
    dpu_log_read,
    dpu_prepare_xfer,
    dpu_push_xfer,
    dpu_rank_foreach,
    dpu_sync,
    get_fifo_size,
)
from aiopim.testing import FifoGeometry, FifoStream, fifo_echo_program

E = DpuErrorCode
BACKENDS = ("asyncio", "trio")
ROOT = Path(__file__).resolve().parent.parent
STREAM = FifoStream(FifoGeometry(2, 8), FifoGeometry(2, 16), 1, "all", 0)


def double_program() -> aiopim.Program:
    """Each DPU doubles its 16 uint32 of ``x`` (one tasklet)."""
    prog = aiopim.Program("double", nr_tasklets=1)
    x = prog.host("x", np.uint32, 16)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.view(x)[:] *= 2
        t.compute(32)

    return prog


def run(fn: Callable[[], Awaitable[Any]], backend: str, **kw: Any) -> Any:
    return emu(ranks=kw.pop("ranks", 2), dpus=kw.pop("dpus", 2), **kw).run(fn, backend=backend)


async def expect(code: DpuErrorCode, call: Callable[[], Any]) -> None:
    """``call()`` (awaited if it returns an awaitable) raises DpuError with ``code``."""
    with pytest.raises(DpuError) as info:
        result = call()
        if hasattr(result, "__await__"):
            await result
    assert info.value.code == code, info.value


async def check_doubles(dpus: Any, seed: int) -> None:
    """A fresh valid program on ``dpus`` computes the right data on every DPU."""
    prog = double_program()
    await dpu_load(dpus, prog)
    n = dpu_get_nr_dpus(dpus)
    inputs = [np.arange(16, dtype=np.uint32) * (i + 1) + seed for i in range(n)]
    for (d, _), data in zip(dpu_foreach(dpus), inputs, strict=True):
        dpu_prepare_xfer(d, data)
    await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 64, DPU_XFER_DEFAULT)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    for (d, i), data in zip(dpu_foreach(dpus), inputs, strict=True):
        out = np.zeros(16, np.uint32)
        await dpu_copy_from(d, "x", 0, out, 64)
        np.testing.assert_array_equal(out, data * 2, err_msg=f"DPU {i}")


# --- 1. freed handles --------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_call_on_a_freed_set_and_its_children_is_refused(backend: str) -> None:
    async def host() -> None:
        dpus = await dpu_alloc(4, "")
        await dpu_load(dpus, fifo_echo_program(STREAM))
        link = dpu_link_input_fifo(dpus, "fin")
        dpu_children = [d for d, _ in dpu_foreach(dpus)]
        rank_children = [r for r, _ in dpu_rank_foreach(dpus)]
        await dpu_free(dpus)
        one = np.zeros(2, np.uint32)
        calls: list[Callable[[], Any]] = []
        for s in [dpus, dpu_children[1], rank_children[1]]:
            calls += [
                lambda s=s: dpu_copy_to(s, "active", 0, one, 8),
                lambda s=s: dpu_prepare_xfer(s, one),
                lambda s=s: dpu_push_xfer(s, DPU_XFER_TO_DPU, "active", 0, 8, DPU_XFER_ASYNC),
                lambda s=s: dpu_broadcast_to(s, "active", 0, one, 8, DPU_XFER_ASYNC),
                lambda s=s: dpu_load(s, spin_program()),
                lambda s=s: dpu_launch(s, DPU_SYNCHRONOUS),
                lambda s=s: dpu_launch(s, 0),
                lambda s=s: dpu_sync(s),
                lambda s=s: dpu_callback(s, lambda *a: 0, None, DPU_CALLBACK_ASYNC),
                lambda s=s: dpu_get_nr_dpus(s),
                lambda s=s: dpu_get_nr_ranks(s),
                lambda s=s: dpu_foreach(s),
                lambda s=s: dpu_link_input_fifo(s, "fin"),
                lambda s=s: dpu_fifo_prepare_xfer(s, link, one),
                lambda s=s: dpu_fifo_push_xfer(s, link, DPU_XFER_DEFAULT),
                lambda s=s: dpu_free(s),
            ]
        calls += [
            lambda: dpu_copy_from(dpu_children[0], "active", 0, one, 8),
            lambda: dpu_log_read(dpu_children[0]),
            lambda: get_fifo_size(link, dpu_children[0]),
        ]
        for call in calls:
            await expect(E.DPU_ERR_INVALID_DPU_SET, call)

    run(host, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stale_handle_never_reaches_the_next_owner(backend: str) -> None:
    async def host() -> None:
        old = await dpu_alloc(4, "")
        await dpu_load(old, double_program())
        old_dpu = next(d for d, _ in dpu_foreach(old))
        await dpu_free(old)
        new = await dpu_alloc(4, "")  # the same ranks
        assert new.rank_list == old.rank_list
        junk = np.full(16, 7, np.uint32)
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpu_copy_to(old, "x", 0, junk, 64))
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpu_launch(old, DPU_SYNCHRONOUS))
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpu_launch(old_dpu, 0))
        # nothing of the old owner's calls is queued: the new owner's first calls succeed
        await check_doubles(new, seed=3)
        assert dpu_get_nr_dpus(new) == 4

    run(host, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_async_failure_before_free_is_not_left_to_the_next_owner(backend: str) -> None:
    async def host() -> None:
        old = await dpu_alloc(4, "")
        await dpu_load(old, spin_program())
        buf = np.zeros(4, np.uint8)
        dpu_prepare_xfer(old, buf)  # MRAM offset 4: the job fails (offsets are multiples of 8)
        await dpu_push_xfer(old, DPU_XFER_TO_DPU, "m", 4, 4, DPU_XFER_ASYNC)
        await dpu_free(old)
        # the same failing job on the freed handle is refused, before and after a new owner

        def again() -> Any:
            return dpu_push_xfer(old, DPU_XFER_TO_DPU, "m", 4, 4, DPU_XFER_ASYNC)

        await expect(E.DPU_ERR_INVALID_DPU_SET, again)
        new = await dpu_alloc(4, "")
        await expect(E.DPU_ERR_INVALID_DPU_SET, again)
        await check_doubles(new, seed=1)  # its first calls see nothing of the old owner

    run(host, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dpuset_after_its_async_with_is_refused(backend: str) -> None:
    async def host() -> None:
        async with await DpuSet.alloc(2) as dpus:
            await dpus.load(double_program())
            first = dpus[0]
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpus.launch())
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpus.copy_to("x", np.zeros(16, np.uint32)))
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: first.copy_from("x", np.uint32, 16))
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: len(dpus))
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpus.free())

    run(host, backend)


# --- 2. wrong types and values ------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_types_and_values_are_refused_at_the_call(backend: str) -> None:
    async def host() -> None:
        await expect(E.DPU_ERR_ALLOCATION, lambda: dpu_alloc(-5, ""))
        await expect(E.DPU_ERR_ALLOCATION, lambda: dpu_alloc(1 << 40, ""))
        await expect(E.DPU_ERR_ALLOCATION, lambda: dpu_alloc_ranks(-1, ""))
        await expect(E.DPU_ERR_INVALID_PROFILE, lambda: dpu_alloc(1, "nokey"))
        for bad, name in [(None, "nr_dpus"), (2.0, "nr_dpus"), (True, "nr_dpus"), ("2", "nr_dpus")]:
            with pytest.raises(TypeError, match=name):
                await dpu_alloc(bad, "")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="profile"):
            await dpu_alloc(1, 5)  # type: ignore[arg-type]
        dpus = await dpu_alloc(np.int64(2), None)  # NumPy integers are ints
        await dpu_load(dpus, spin_program())
        buf = np.zeros(16, np.uint8)
        dpu_prepare_xfer(dpus, buf)
        with pytest.raises(TypeError, match="length"):
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 4.0, 0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="length"):
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, True, 0)
        with pytest.raises(TypeError, match="offset"):
            await dpu_copy_to(dpus, "x", None, buf, 4)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="flags"):
            await dpu_push_xfer(dpus, DPU_XFER_TO_DPU, "x", 0, 4, 0.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="symbol_name"):
            await dpu_copy_to(dpus, 3, 0, buf, 4)  # type: ignore[arg-type]
        await expect(
            E.DPU_ERR_INVALID_MEMORY_TRANSFER, lambda: dpu_push_xfer(dpus, 0, "x", 0, 4, -1)
        )
        # host buffers: too short to send from, read-only to receive into
        await expect(
            E.DPU_ERR_INVALID_MEMORY_TRANSFER, lambda: dpu_copy_to(dpus, "x", 0, buf[:3], 4)
        )
        frozen = np.zeros(16, np.uint8)
        frozen.flags.writeable = False
        first = next(d for d, _ in dpu_foreach(dpus))
        await expect(
            E.DPU_ERR_INVALID_MEMORY_TRANSFER, lambda: dpu_copy_from(first, "x", 0, frozen, 4)
        )
        await expect(
            E.DPU_ERR_INVALID_SYMBOL_ACCESS, lambda: dpu_copy_to(dpus, "x", 0, buf, np.int32(-4))
        )
        await expect(
            E.DPU_ERR_INVALID_SYMBOL_ACCESS, lambda: dpu_copy_to(dpus, "x", 1 << 62, buf, 4)
        )
        with pytest.raises(TypeError, match="callback"):
            await dpu_callback(dpus, None, None, 0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="dpu_set"):
            await dpu_launch(None, DPU_SYNCHRONOUS)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="link"):
            await dpu_fifo_push_xfer(dpus, None, DPU_XFER_DEFAULT)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="fifo_name"):
            dpu_link_input_fifo(dpus, None)  # type: ignore[arg-type]
        # the set is untouched by all this: a valid program still computes
        await check_doubles(dpus, seed=9)

    run(host, backend)


# --- 3. dpu_free joins non-blocking callbacks ----------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_free_waits_for_a_running_nonblocking_callback(backend: str) -> None:
    times: dict[str, int] = {}

    async def host() -> None:
        dpus = await dpu_alloc(4, "")  # two ranks: one callback per rank
        now = aiopim.now

        async def slow(s: Any, rank_id: int, args: Any) -> int:
            times.setdefault("start", round(now() * 1e12))
            await anyio.sleep(1e-3 * (rank_id + 1))  # 1 ms on rank 0, 2 ms on rank 1
            times[f"end{rank_id}"] = round(now() * 1e12)
            return 0

        t0 = round(now() * 1e12)
        await dpu_callback(dpus, slow, None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING)
        times["queued"] = round(now() * 1e12) - t0
        await dpu_sync(dpus)  # the callback jobs have started (a free would drop queued jobs)
        times["synced"] = round(now() * 1e12) - t0
        await dpu_free(dpus)
        times["freed"] = round(now() * 1e12) - t0
        times["start"] -= t0
        times["end0"] -= t0
        times["end1"] -= t0

    run(host, backend)
    ms = timing.PS_PER_US * 1000
    assert times["queued"] == 0 and times["start"] == 0, times
    assert times["synced"] == 0  # non-blocking: the rank moves on at once
    assert times["end0"] == ms and times["end1"] == 2 * ms
    assert times["freed"] == 2 * ms  # the free returns when the last callback has returned


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nonblocking_callback_can_free_its_own_set(backend: str) -> None:
    freed_at: list[int] = []

    async def host() -> None:
        dpus = await dpu_alloc(2, "")

        async def free_it(s: Any, rank_id: int, args: Any) -> int:
            await anyio.sleep(1e-3)
            await dpu_free(dpus)  # does not wait for itself
            freed_at.append(round(aiopim.now() * 1e12))
            return 0

        await dpu_callback(dpus, free_it, None, DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING)
        await dpu_sync(dpus)
        await anyio.sleep(2e-3)
        await expect(E.DPU_ERR_INVALID_DPU_SET, lambda: dpu_sync(dpus))

    run(host, backend, ranks=1)
    assert freed_at == [timing.PS_PER_US * 1000]


# --- 4. the star import under mypy --strict -------------------------------------------------------
def test_error_code_names_are_exactly_the_enum_members() -> None:
    names = {n for n in sdk.__all__ if n.startswith("DPU_ERR_") or n == "DPU_OK"}
    assert names == {m.name for m in DpuErrorCode}
    for m in DpuErrorCode:
        assert getattr(sdk, m.name) is m
    assert len(sdk.__all__) == len(set(sdk.__all__))
    assert all(hasattr(sdk, n) for n in sdk.__all__)


@pytest.mark.long  # mypy follows every aiopim module: about 12 s of CPU
def test_star_import_type_checks_under_mypy_strict(tmp_path: Path) -> None:
    user = tmp_path / "user_program.py"
    user.write_text(
        textwrap.dedent(
            """\
            import numpy as np

            import aiopim
            from aiopim.sdk import *

            prog = aiopim.Program("double", nr_tasklets=4)
            data = prog.host("data", np.uint32, 64)


            @prog.main
            async def main(t: aiopim.Tasklet) -> None:
                chunk = t.view(data)[t.me() :: t.nr_tasklets]
                chunk *= 2
                t.compute(4 * len(chunk))


            async def host() -> None:
                dpus = await dpu_alloc(128, "")
                await dpu_load(dpus, prog)
                await dpu_copy_to(dpus, "data", 0, np.arange(64, dtype=np.uint32), 256)
                await dpu_launch(dpus, DPU_SYNCHRONOUS)
                out = bytearray(256)
                await dpu_copy_from(dpus.dpus[0], "data", 0, out, 256)
                try:
                    await dpu_free(dpus)
                except DpuError as exc:
                    code: DpuErrorCode = exc.code
                    assert code == DPU_ERR_INVALID_DPU_SET
                print(np.frombuffer(out, np.uint32)[:4], aiopim.now())


            aiopim.run(host, backend="trio")
            """
        )
    )
    old = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(ROOT)  # this checkout's aiopim
    try:
        out, err, status = mypy.api.run(
            ["--strict", "--cache-dir", str(tmp_path / "mypy_cache"), str(user)]
        )
    finally:
        if old is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = old
    assert status == 0, out + err
    assert "Success: no issues found" in out


# --- the misuse property ------------------------------------------------------------------------
#: every code a call on a live set may raise in these sequences (call-time checks, the sticky
#: error of an earlier asynchronous job, a DPU program or FIFO state)
LIVE_CODES = {
    E.DPU_ERR_ALLOCATION,
    E.DPU_ERR_INVALID_DPU_SET,
    E.DPU_ERR_INVALID_PROFILE,
    E.DPU_ERR_UNKNOWN_SYMBOL,
    E.DPU_ERR_INVALID_SYMBOL_ACCESS,
    E.DPU_ERR_INVALID_WRAM_ACCESS,
    E.DPU_ERR_INVALID_MRAM_ACCESS,
    E.DPU_ERR_INVALID_MEMORY_TRANSFER,
    E.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER,
    E.DPU_ERR_NO_PROGRAM_LOADED,
    E.DPU_ERR_DIFFERENT_DPU_PROGRAMS,
    E.DPU_ERR_DPU_ALREADY_RUNNING,
    E.DPU_ERR_WRAM_FIFO_FULL,
    E.DPU_ERR_NONBLOCKING_SYNC_CALLBACK,
}

ints = st.sampled_from([0, 4, 8, 16, 64, 4096])
bad_numbers = st.sampled_from([-8, -1, 3, 1 << 40, 2.0, 4.5, True, None, "8", np.int32(8)])
sizes = st.one_of(ints, ints, bad_numbers)
flag_values = st.one_of(st.sampled_from([0, 1, 2, 4, 6, 7, 8, 15]), bad_numbers)
symbols = st.sampled_from(["x", "x", "m", "fin", "nosuch", 5, None])
handles = st.integers(0, 7)
programs = st.sampled_from(["misuse", "misuse", "spin", None])


def misuse_program() -> aiopim.Program:
    """``x`` doubled by one tasklet; an MRAM buffer and two FIFOs nobody pops (they fill up)."""
    prog = aiopim.Program("misuse", nr_tasklets=1)
    x = prog.host("x", np.uint32, 16)
    prog.mram("m", np.uint8, 4096)
    prog.input_fifo("fin", 1, 8)
    prog.output_fifo("fout", 1, 8)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.view(x)[:] *= 2
        t.compute(32)

    return prog


def _callback(s: Any, rank_id: int, args: Any) -> int:
    return 0


@dataclass(frozen=True)
class Call:
    """One API call of a random sequence: ``op`` and its raw arguments."""

    op: str
    args: tuple[Any, ...]


def _call(op: str, *args: st.SearchStrategy[Any]) -> st.SearchStrategy[Call]:
    return st.builds(Call, st.just(op), st.tuples(*args))


bools = st.booleans()
calls = st.one_of(
    _call("alloc", st.one_of(st.sampled_from([1, 2, 4, 0]), bad_numbers)),
    _call("alloc_ranks", st.sampled_from([1, 2, 3, -1, None])),
    _call("free", handles),
    _call("load", handles, programs),
    _call("copy_to", handles, symbols, sizes, sizes),
    _call(
        "push_xfer",
        handles,
        st.sampled_from([0, 1, 2, -1, None]),
        symbols,
        sizes,
        sizes,
        flag_values,
    ),
    _call("copy_from", handles, symbols, sizes, sizes),
    _call("launch", handles, flag_values),
    _call("sync", handles),
    _call("callback", handles, st.sampled_from([_callback, _callback, None, 5]), flag_values),
    _call("link", handles, symbols),
    _call("fifo_push", handles, st.integers(0, 3), flag_values),
    _call("children", handles),
    # the Pythonic face
    _call("set_copy_to", handles, symbols, sizes, bools, bools),
    _call("set_copy_from", handles, symbols, sizes, sizes),
    _call("set_launch", handles, bools),
    _call("set_call", handles, st.sampled_from([_callback, None]), bools, bools),
    _call("set_push", handles, st.integers(0, 3), bools),
)


class Misuse:
    """Plays a call sequence and checks every outcome."""

    def __init__(self) -> None:
        self.sets: list[Any] = []
        self.links: list[Any] = []
        self.outcomes: list[str] = []

    def handle(self, i: int) -> Any:
        return self.sets[i % len(self.sets)] if self.sets else None

    async def call(self, c: Call) -> None:
        a = c.args
        buf = np.zeros(64, np.uint8)
        if c.op == "alloc":
            self.sets.append(await dpu_alloc(a[0], ""))
        elif c.op == "alloc_ranks":
            self.sets.append(await dpu_alloc_ranks(a[0], ""))
        elif c.op == "free":
            await dpu_free(self.handle(a[0]))
        elif c.op == "load":
            prog = {"spin": spin_program(), "misuse": misuse_program(), None: None}[a[1]]
            await dpu_load(self.handle(a[0]), prog)
        elif c.op == "copy_to":
            await dpu_copy_to(self.handle(a[0]), a[1], a[2], buf, a[3])
        elif c.op == "push_xfer":
            s = self.handle(a[0])
            dpu_prepare_xfer(s, buf)
            await dpu_push_xfer(s, a[1], a[2], a[3], a[4], a[5])
        elif c.op == "copy_from":
            await dpu_copy_from(self.handle(a[0]), a[1], a[2], buf, a[3])
        elif c.op == "launch":
            await dpu_launch(self.handle(a[0]), a[1])
        elif c.op == "sync":
            await dpu_sync(self.handle(a[0]))
        elif c.op == "callback":
            await dpu_callback(self.handle(a[0]), a[1], None, a[2])
        elif c.op == "link":
            s = self.handle(a[0])
            link = dpu_link_input_fifo(s, a[1])
            sdk.dpu_fifo_set_push_max_retries(link, s, 2)
            self.links.append(link)
        elif c.op == "fifo_push":
            link = self.links[a[1] % len(self.links)] if self.links and a[1] else None
            s = self.handle(a[0])
            if link is not None:
                dpu_fifo_prepare_xfer(s, link, buf[:8])
            await dpu_fifo_push_xfer(s, link, a[2])
        elif c.op == "children":
            s = self.handle(a[0])
            self.sets += [d for d, _ in dpu_foreach(s)][-1:]
            self.sets += [r for r, _ in dpu_rank_foreach(s)][-1:]
        else:
            await self.call_dpuset(c)

    async def call_dpuset(self, c: Call) -> None:
        a = c.args
        s = self.handle(a[0])  # never None: every sequence starts with an allocation
        if c.op == "set_copy_to":
            await s.copy_to(a[1], np.zeros(16, np.uint32), offset=a[2], wait=a[3], parallel=a[4])
        elif c.op == "set_copy_from":
            out = await s.copy_from(a[1], np.uint32, a[2], offset=a[3])
            assert out.shape[0] == len(s)
        elif c.op == "set_launch":
            await s.launch(wait=a[1])
        elif c.op == "set_call":
            await s.call(a[1], wait=a[2], blocking=a[3] or not a[2])
        else:
            fifo = s.link_input_fifo("fin", np.uint64)
            fifo.max_retries = 1
            n = len(s) if a[1] else 3  # 3 elements for 2 or 4 DPUs: refused at the call
            await fifo.push(np.arange(n, dtype=np.uint64), wait=a[2])

    async def play(self, c: Call) -> None:
        target = self.handle(c.args[0]) if c.op not in ("alloc", "alloc_ranks") else None
        freed = target is not None and target._freed
        try:
            await self.call(c)
        except DpuError as exc:
            code = E(exc.value & 0xFFFF)
            if freed:
                assert code == E.DPU_ERR_INVALID_DPU_SET, (c, exc)
            else:
                assert code in LIVE_CODES, (c, exc)
            self.outcomes.append(code.name)
            return
        except TypeError as exc:
            assert not freed, (c, exc)  # a freed handle is refused before anything else
            self.outcomes.append("TypeError")
            return
        assert not freed, f"{c} accepted on a freed set"
        self.outcomes.append("ok")

    async def finish(self) -> None:
        """Free what is live, then a fresh valid program must compute the right data."""
        for s in self.sets:
            if s._root and not s._freed:
                await dpu_free(s)
        dpus = await dpu_alloc(4, "")
        await check_doubles(dpus, seed=len(self.outcomes))
        await dpu_free(dpus)


def _run_sequence(backend: str, sequence: list[Call]) -> list[str]:
    player = Misuse()

    async def host() -> None:
        for c in sequence:
            await player.play(c)
        await player.finish()

    run(host, backend)
    return player.outcomes


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=st.lists(calls, min_size=1, max_size=14))
def test_random_misuse_only_raises_sdk_errors_or_type_errors(
    backend: str, sequence: list[Call]
) -> None:
    _run_sequence(backend, [Call("alloc", (2,)), Call("load", (0, "misuse")), *sequence])


@pytest.mark.long
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=st.lists(calls, min_size=1, max_size=40))
def test_random_misuse_long(backend: str, sequence: list[Call]) -> None:
    _run_sequence(backend, [Call("alloc", (2,)), Call("load", (0, "misuse")), *sequence])


@pytest.mark.parametrize("backend", BACKENDS)
def test_free_while_a_fifo_push_job_runs(backend: str) -> None:
    """A push job already running when its set is freed finishes with the link state it was
    given at the call (found by the long run: the job re-checked the freed allocation inside
    the kernel)."""

    async def host() -> None:
        dpus = await dpu_alloc(2, "")
        await dpu_load(dpus, misuse_program())
        fifo = dpus.link_input_fifo("fin", np.uint64)
        fifo.max_retries = 1
        await fifo.push(np.arange(len(dpus), dtype=np.uint64), wait=False)
        await anyio.sleep(1e-9)  # the push job has started: it is reading the FIFO pointers
        await dpu_free(dpus)  # waits for the running job
        fresh = await dpu_alloc(4, "")
        await check_doubles(fresh, seed=1)
        await dpu_free(fresh)

    run(host, backend)
