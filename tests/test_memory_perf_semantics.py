"""The memory-saving representations keep exact semantics: sparse MRAM, copy-on-write pages
shared by a broadcast, partial page writes, reads of unwritten pages, lazily backed WRAM/IRAM."""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np
import pytest
from helpers import emu
from hypothesis import given, settings
from hypothesis import strategies as st

import aiopim
from aiopim._machine._memory import (
    MRAM_PAGE,
    MramBank,
    MramImage,
    RowMemory,
    zero_fill,
)
from aiopim._ops._xfer import SharedBytes
from aiopim.sdk import dpu_alloc

BACKENDS = ["asyncio", "trio"]
BANK = 4 * MRAM_PAGE  # small banks keep the property tests fast


class ReferenceBank:
    """The plain model: a dict of 64 KiB pages, written page by page."""

    def __init__(self) -> None:
        self.pages: dict[int, np.ndarray] = {}

    def write(self, offset: int, data: np.ndarray) -> None:
        pos = 0
        while pos < len(data):
            page, off = divmod(offset + pos, MRAM_PAGE)
            n = min(MRAM_PAGE - off, len(data) - pos)
            buf = self.pages.get(page)
            if buf is None and data[pos : pos + n].any():
                buf = self.pages[page] = np.zeros(MRAM_PAGE, np.uint8)
            if buf is not None:
                buf[off : off + n] = data[pos : pos + n]
            pos += n

    def read(self, offset: int, length: int) -> bytes:
        whole = np.zeros(BANK, np.uint8)
        for p, buf in self.pages.items():
            whole[p * MRAM_PAGE : (p + 1) * MRAM_PAGE] = buf
        return whole[offset : offset + length].tobytes()


def _data(seed: int, length: int, kind: str) -> np.ndarray:
    if kind == "zeros":
        return np.zeros(length, np.uint8)
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, length, dtype=np.uint8)
    if kind == "sparse":  # zeros with a few non-zero bytes
        data[rng.random(length) < 0.999] = 0
    return data


def _same(bank: MramBank, ref: ReferenceBank) -> None:
    assert sorted(bank.pages) == sorted(ref.pages)
    for p, buf in bank.pages.items():
        assert bytes(buf) == bytes(ref.pages[p]), f"page {p}"
    assert bank.resident_bytes == len(ref.pages) * MRAM_PAGE
    assert bytes(bank.read(0, BANK)) == ref.read(0, BANK)


span = st.tuples(st.integers(0, BANK - 1), st.integers(1, 2 * MRAM_PAGE + 100)).map(
    lambda t: (t[0], min(t[1], BANK - t[0]))
)
op = st.one_of(
    st.tuples(
        st.just("write"),
        st.integers(0, 2),
        span,
        st.integers(0, 99),
        st.sampled_from(["data", "zeros", "sparse"]),
    ),
    st.tuples(
        st.just("image"),
        st.sets(st.integers(0, 2), min_size=1),
        span,
        st.integers(0, 99),
        st.sampled_from(["data", "zeros", "sparse"]),
    ),
    st.tuples(st.just("clear"), st.integers(0, 2)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(op, max_size=8), st.integers(0, BANK - 1), st.integers(0, BANK))
def test_banks_match_the_page_by_page_model(ops: list[Any], at: int, length: int) -> None:
    banks = [MramBank(BANK) for _ in range(3)]
    refs = [ReferenceBank() for _ in range(3)]
    for o in ops:
        if o[0] == "clear":
            banks[o[1]].clear()
            refs[o[1]] = ReferenceBank()
            continue
        _, who, (offset, n), seed, kind = o
        data = _data(seed, n, kind)
        if o[0] == "write":
            banks[who].write(offset, data)
            refs[who].write(offset, data)
        else:
            image = MramImage(offset, data)
            data[:] = 7  # the image holds its own copy of the bytes
            for b in sorted(who):
                banks[b].write_image(image)
                refs[b].write(offset, _data(seed, n, kind))
        for bank, ref in zip(banks, refs, strict=True):
            _same(bank, ref)
    length = min(length, BANK - at)
    out = np.full(length, 0xA5, np.uint8)  # read_into overwrites every byte, zeros included
    banks[0].read_into(at, out)
    assert bytes(out) == refs[0].read(at, length)


def test_an_image_is_shared_until_a_bank_writes_over_it() -> None:
    data = np.arange(3 * MRAM_PAGE, dtype=np.uint64).astype(np.uint8)
    image = MramImage(MRAM_PAGE // 2, data)
    a, b = MramBank(BANK), MramBank(BANK)
    a.write_image(image)
    b.write_image(image)
    assert sorted(a.pages) == sorted(b.pages) == [0, 1, 2, 3]
    assert all(a.pages[p] is b.pages[p] for p in range(4))  # one copy of the bytes
    assert not a.pages[1].flags.writeable
    a.write(MRAM_PAGE + 3, np.array([0xFF], np.uint8))  # partial write into a shared page
    assert a.read(MRAM_PAGE + 3, 1)[0] == 0xFF
    assert b.read(MRAM_PAGE + 3, 1)[0] == data[MRAM_PAGE // 2 + 3]
    assert a.pages[1] is not b.pages[1] and a.pages[2] is b.pages[2]
    a.write(2 * MRAM_PAGE, np.ones(MRAM_PAGE, np.uint8))  # a whole shared page
    assert bytes(b.read(2 * MRAM_PAGE, MRAM_PAGE)) == bytes(
        data[3 * MRAM_PAGE // 2 : 5 * MRAM_PAGE // 2]
    )
    assert bytes(a.read(2 * MRAM_PAGE, MRAM_PAGE)) == b"\x01" * MRAM_PAGE


def test_an_image_over_written_edge_pages_merges_them() -> None:
    bank = MramBank(BANK)
    bank.write(0, np.full(2 * MRAM_PAGE, 9, np.uint8))
    image = MramImage(MRAM_PAGE - 16, np.full(32, 5, np.uint8))
    bank.write_image(image)
    out = bank.read(MRAM_PAGE - 24, 48)
    assert bytes(out) == b"\x09" * 8 + b"\x05" * 32 + b"\x09" * 8
    assert image.page_views[0][-16:].tolist() == [5] * 16  # the image itself is untouched
    assert image.page_views[0][0] == 0


def test_an_image_over_another_image_shares_the_merged_edge_page() -> None:
    # two broadcasts into one page (the key-sum's keys and values): the page holding both is
    # made once and shared by every bank that shared the first image's page
    keys = MramImage(0, np.full(MRAM_PAGE // 4, 3, np.uint8))
    values = MramImage(MRAM_PAGE // 4, np.full(MRAM_PAGE // 4, 7, np.uint8))
    banks = [MramBank(BANK) for _ in range(3)]
    banks[2].write(MRAM_PAGE // 2, np.ones(8, np.uint8))  # a private page: written in place
    for bank in banks:
        bank.write_image(keys)
        bank.write_image(values)
    expected = b"\x03" * (MRAM_PAGE // 4) + b"\x07" * (MRAM_PAGE // 4)
    for bank in banks:
        assert bytes(bank.read(0, MRAM_PAGE // 2)) == expected
    assert banks[0].pages[0] is banks[1].pages[0] and not banks[0].pages[0].flags.writeable
    assert banks[2].pages[0].flags.writeable and banks[2].read(MRAM_PAGE // 2, 1)[0] == 1
    assert not banks[0].read(MRAM_PAGE // 2, 8).any()
    assert not keys.page_views[0][MRAM_PAGE // 4 :].any()  # the images are untouched
    assert not values.page_views[0][: MRAM_PAGE // 4].any()
    banks[0].write(5, np.array([9], np.uint8))  # a bank's write copies the merged page
    assert banks[0].read(5, 1)[0] == 9 and banks[1].read(5, 1)[0] == 3
    assert banks[0].pages[0] is not banks[1].pages[0]


def test_shared_bytes_follow_the_host_buffer_between_jobs() -> None:
    buf = np.full(MRAM_PAGE, 3, np.uint8)
    shared = SharedBytes(0)
    first = shared.image(buf)
    assert shared.image(buf) is first  # unchanged bytes: the same image
    buf[100] = 4  # the host changed its buffer before the next rank's job ran
    second = shared.image(buf)
    assert second is not first and second.data[100] == 4 and first.data[100] == 3


@pytest.mark.parametrize("platform", ["linux", "darwin"])
@pytest.mark.parametrize("row_bytes", [4096 * 3, 4096 * 3 + 8])
def test_row_memories_are_zeroed_writable_rows_cleared_one_by_one(
    row_bytes: int, platform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on Linux a cleared row's pages are dropped (each row starts on a page of its own);
    # elsewhere its non-zero blocks are written with zeros
    monkeypatch.setattr(sys, "platform", platform)
    memory = RowMemory(3, row_bytes)
    rows = memory.rows
    assert rows.shape == (3, row_bytes) and rows.dtype == np.uint8 and rows.flags.writeable
    assert all(rows[r].flags.c_contiguous for r in range(3))
    assert not rows.any()
    for r in range(3):
        rows[r][5000] = r + 1
        rows[r][-1] = r + 7
    memory.clear(1)
    assert not rows[1].any()
    assert rows[0][5000] == 1 and rows[0][-1] == 7  # rows do not overlap
    assert rows[2][5000] == 3 and rows[2][-1] == 9
    rows[1][0] = 4  # a cleared row is written again as before
    assert rows[1][0] == 4 and int(rows[1].sum()) == 4


def test_zero_fill_zeroes_blocks_and_the_tail() -> None:
    row = np.zeros(4096 * 3 + 8, np.uint8)
    row[5000] = 1
    row[-1] = 2
    zero_fill(row)
    assert not row.any()


def _program() -> aiopim.Program:
    prog = aiopim.Program("cow", nr_tasklets=1)
    prog.host("who", np.uint32, 2)
    m = prog.mram("m", np.uint8, 3 * MRAM_PAGE)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        w = t.mem_alloc(8)
        who, writes = (int(v) for v in t.view(prog.address_of("who"), np.uint32, 2))
        if not writes:
            return
        t.view(w, np.uint8, 8)[:] = 0xC0 + who
        await t.mram_write(w, t.mram_address(m, MRAM_PAGE + 8 * who), 8)

    return prog


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_then_dpu_and_host_writes(backend: str) -> None:
    """A broadcast at an offset inside a page, over data already there on some DPUs; then each
    DPU writes 8 bytes of its own and the host writes to one DPU: every DPU reads back exactly
    its bytes, and the DPUs that wrote nothing still share the broadcast's pages."""
    prog = _program()
    n = 6
    base = np.arange(3 * MRAM_PAGE, dtype=np.uint32).astype(np.uint8)
    data = np.random.default_rng(5).integers(1, 256, 2 * MRAM_PAGE, dtype=np.uint8)

    async def main() -> tuple[np.ndarray, list[bool]]:
        dpus = await dpu_alloc(n, "")
        await dpus.load(prog)
        await dpus.copy_to("m", [base, None, base, None, None, None])
        await dpus.copy_to("m", data, offset=MRAM_PAGE // 2)  # a broadcast to both ranks
        who = np.array([[0, 1], [1, 1], [2, 1], [0, 0], [0, 0], [0, 0]], np.uint32)
        await dpus.copy_to("who", who)
        ds = dpus.dpu_list
        shared = [ds[4].mram.pages[p] is ds[5].mram.pages[p] for p in (0, 1, 2)]
        await dpus[3].copy_to("m", np.full(16, 0xEE, np.uint8), offset=8)
        await dpus.launch()  # DPUs 0..2 write into the broadcast's pages
        return await dpus.copy_from("m", np.uint8), shared

    out, shared = emu(ranks=2, dpus=3).run(main, backend=backend)
    assert shared == [True, True, True]
    for i in range(n):
        want = base.copy() if i in (0, 2) else np.zeros(3 * MRAM_PAGE, np.uint8)
        want[MRAM_PAGE // 2 : MRAM_PAGE // 2 + len(data)] = data
        if i < 3:
            want[MRAM_PAGE + 8 * i : MRAM_PAGE + 8 * i + 8] = 0xC0 + i
        if i == 3:
            want[8:24] = 0xEE
        assert np.array_equal(out[i], want), f"DPU {i}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_dpu_push_and_read_back_exact_bytes(backend: str) -> None:
    """Whole and partial pages, zero pages left unwritten, read back into caller buffers."""
    prog = _program()
    n = 4
    rng = np.random.default_rng(9)
    data = rng.integers(0, 256, (n, 2 * MRAM_PAGE + 64), dtype=np.uint8)
    data[1] = 0  # all zeros: nothing to store
    data[2, : MRAM_PAGE + 8] = 0  # a zero page, then data

    async def main() -> tuple[np.ndarray, list[int]]:
        dpus = await dpu_alloc(n, "")
        await dpus.load(prog)
        await dpus.copy_to("m", data, offset=MRAM_PAGE - 104)
        out = await dpus.copy_from("m", np.uint8)
        return out, [d.mram.resident_bytes for d in dpus.dpu_list]

    out, resident = emu(ranks=1, dpus=4).run(main, backend=backend)
    for i in range(n):
        want = np.zeros(3 * MRAM_PAGE, np.uint8)
        want[MRAM_PAGE - 104 : MRAM_PAGE - 104 + data.shape[1]] = data[i]
        assert np.array_equal(out[i], want), f"DPU {i}"
    assert resident == [3 * MRAM_PAGE, 0, 2 * MRAM_PAGE, 3 * MRAM_PAGE]


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_rank_reads_the_broadcast_buffer_when_its_job_runs(backend: str) -> None:
    """An asynchronous broadcast: rank 1 copies at once, rank 0 only once its DPUs stop. The host
    changes its buffer in between, so the ranks end with different bytes (as each job reads the
    host buffer when it runs), and rank 0's DPUs share the second version."""
    prog = aiopim.Program("busy", nr_tasklets=1)
    prog.host("cycles", np.uint32, 2)
    prog.mram("m", np.uint8, MRAM_PAGE)

    @prog.main
    async def main_(t: aiopim.Tasklet) -> None:
        t.compute(int(t.view(prog.address_of("cycles"), np.uint32, 2)[0]))

    buf = np.full(MRAM_PAGE, 1, np.uint8)

    async def main() -> tuple[np.ndarray, bool]:
        import anyio

        dpus = await dpu_alloc(4, "")
        await dpus.load(prog)
        await dpus.copy_to("cycles", np.array([10_000_000, 0], np.uint32))
        r0, _ = dpus.ranks
        await r0.launch(wait=False)
        await dpus.copy_to("m", buf, wait=False)
        await anyio.sleep(0.001)  # rank 1's copy is done, rank 0's DPUs still run
        buf[:] = 2
        await dpus.sync()
        d = r0.dpu_list
        return await dpus.copy_from("m", np.uint8), d[0].mram.pages[0] is d[1].mram.pages[0]

    out, shared = emu(ranks=2, dpus=2).run(main, backend=backend)
    assert out[:, 0].tolist() == [2, 2, 1, 1]
    assert all(len(set(row.tolist())) == 1 for row in out)
    assert shared


@pytest.mark.long
def test_full_machine_benchmark_quick_runs_and_checks_its_bytes() -> None:
    """``benchmarks/full_machine.py --quick`` checks every byte it reads back; this runs it and
    reads the memory section's figures (host memory, not time)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "full_machine.py"
    out = subprocess.run(
        [sys.executable, str(script), "--quick"], capture_output=True, text=True, check=True
    ).stdout
    assert "## Goal 4" in out and "## Goal 5" in out
    assert re.fullmatch(r"full_machine missed=\d+", out.rstrip().splitlines()[-1])
    memory = out[out.index("## Goal 5") :]
    assert memory.count(" ok") == 3, memory
