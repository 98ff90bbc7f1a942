"""Property: random alloc/copy/set/connect/sync/free sequences over Host, File, MRAM and WRAM
contexts agree byte for byte with a plain-bytes model and never touch memory outside the
allocated ranges."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from helpers import spin_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim import umem
from aiopim.sdk import DPU_MRAM_HEAP_POINTER_NAME
from aiopim.testing import Pim
from aiopim.umem import StatusType

MACHINE = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=2)
SENTINEL = 0xC3
MRAM_REGION = 4096  # checked bytes above the heap pointer


#: the DPUs (of the set of 2) behind each DPU context
DPUS = {"mram2": [0, 1], "wram2": [0, 1], "mram1": [1]}


@dataclass(eq=False)
class Rec:
    """A live address and the model of its bytes (one bytearray per lane)."""

    adr: umem.Address
    name: str
    lanes: list[bytearray]
    mate: Rec | None = None
    pairs: list[Rec] = field(default_factory=list)


def model_copy(src: Rec, so: int, dst: Rec, do: int, n: int) -> None:
    k, m = len(src.lanes), len(dst.lanes)
    data = [bytes(lane[so : so + n]) for lane in src.lanes]
    src_dpus, dst_dpus = DPUS.get(src.name), DPUS.get(dst.name)
    if src_dpus is not None and dst_dpus is not None and set(dst_dpus) <= set(src_dpus):
        rows = [src_dpus.index(d) for d in dst_dpus]  # each DPU its own bytes
    elif m > 1 and k == m:
        rows = list(range(k))
    else:
        rows = [0] * m  # the reading DPU, broadcast
    for row, lane in zip(rows, dst.lanes, strict=True):
        lane[do : do + n] = data[row]


async def scenario(data: st.DataObject, workdir: Path) -> None:
    dpus = await aiopim.DpuSet.alloc(2)
    prog = spin_program()
    await dpus.load(prog)
    heap = dpus.symbol(DPU_MRAM_HEAP_POINTER_NAME).offset
    wram_top = aiopim.current_emulator().config.chip_profile.wram_size
    wram_start = (prog.heap_start + 7) & -8
    wram_win = aiopim.Symbol("window", wram_start, wram_top - wram_start)
    await dpus.copy_to("m", np.full(4096, 0x11, np.uint8))
    await dpus.copy_to("x", np.arange(4, dtype=np.uint32))
    await dpus.copy_to(DPU_MRAM_HEAP_POINTER_NAME, np.full(MRAM_REGION, SENTINEL, np.uint8))
    await dpus.copy_to(wram_win, np.full(wram_win.size, SENTINEL, np.uint8))

    host = umem.Host()
    file = umem.File(workdir / "mem.bin", "w+b")
    contexts: dict[str, umem.Context] = {
        "host": host,
        "file": file,
        "mram2": umem.Mram(dpus),
        "mram1": umem.Mram(dpus.dpus[1]),
        "wram2": umem.Wram(dpus),
    }
    names = sorted(contexts)
    live: list[Rec] = []
    freed: list[umem.Address] = []
    touched: list[tuple[str, int, int]] = []  # (context, start, end) of every allocation

    def new_rec(adr: umem.Address, name: str, lanes: list[bytearray]) -> Rec:
        assert adr, contexts[name].get_message()
        rec = Rec(adr, name, lanes)
        live.append(rec)
        touched.append((name, int(adr), int(adr) + adr.size))
        return rec

    def expect(failing: str | None = None, status: StatusType | None = None) -> None:
        for name, ctx in contexts.items():
            want = status if name == failing else StatusType.OK
            assert ctx.get_status() is want, (name, ctx.get_message())
            ctx.clear_status()

    async def free(rec: Rec) -> None:
        for pair in list(rec.pairs):
            await free(pair)
        rec.adr.free()
        live.remove(rec)
        if rec.mate is not None:
            rec.mate.pairs.remove(rec)
        freed.append(rec.adr)

    ops = ["alloc", "copy", "set", "scatter", "connect", "sync", "update", "free", "freed"]
    for _ in range(data.draw(st.integers(1, 12), label="steps")):
        op = data.draw(st.sampled_from(ops if live else ["alloc"]), label="op")
        if op == "alloc":
            name = data.draw(st.sampled_from(names), label="context")
            ctx = contexts[name]
            kind = data.draw(st.sampled_from(["calloc", "alloc", "aligned"]), label="kind")
            lanes = ctx.nr_lanes
            if kind == "calloc":
                size = data.draw(st.integers(0, 40), label="size")
                adr = await ctx.calloc(1, size)
                new_rec(adr, name, [bytearray(size) for _ in range(lanes)])
            else:
                c = data.draw(st.integers(0, 255), label="c")
                if kind == "alloc":
                    size = data.draw(st.integers(0, 40), label="size")
                    adr = ctx.alloc(size)
                else:
                    a = data.draw(st.sampled_from([8, 16, 64]), label="alignment")
                    asked = data.draw(st.integers(1, 2 * a), label="size")
                    adr = ctx.aligned_alloc(a, asked)
                    size = -(-asked // a) * a  # umem rounds the block up to the alignment
                    assert int(adr) % a == 0 and adr.size == size
                await adr.set(c)
                new_rec(adr, name, [bytearray([c]) * size for _ in range(lanes)])
            expect()
        elif op in ("copy", "set"):
            dst = data.draw(st.sampled_from(live), label="dst")
            do = data.draw(st.integers(0, dst.adr.size), label="dst offset")
            n = data.draw(st.integers(0, 48), label="nbytes")
            if op == "set":
                c = data.draw(st.integers(0, 255), label="c")
                await (dst.adr + do).set(c, n)
                if n > dst.adr.size - do:
                    expect(dst.name, StatusType.IndexError)
                    continue
                for lane in dst.lanes:
                    lane[do : do + n] = bytes([c]) * n
                expect()
                continue
            src = data.draw(st.sampled_from(live), label="src")
            so = data.draw(st.integers(0, src.adr.size), label="src offset")
            await (src.adr + so).copy_to(dst.adr + do, n)
            if n > src.adr.size - so:
                expect(src.name, StatusType.IndexError)
            elif n > dst.adr.size - do:
                expect(dst.name, StatusType.IndexError)
            else:
                model_copy(src, so, dst, do, n)
                expect()
        elif op == "scatter":  # different bytes on each DPU
            rec = data.draw(st.sampled_from(live), label="rec")
            size = rec.adr.size
            base = np.frombuffer(data.draw(st.binary(min_size=size, max_size=size)), np.uint8)
            rows = np.stack([base + 37 * i for i in range(len(rec.lanes))]).astype(np.uint8)
            await rec.adr.ctx.scatter(rec.adr, rows)
            for lane, row in zip(rec.lanes, rows, strict=True):
                lane[:] = row.tobytes()
            expect()
        elif op == "connect":
            mate = data.draw(st.sampled_from(live), label="mate")
            name = data.draw(st.sampled_from(names), label="dest")
            a = data.draw(st.sampled_from([0, 8, 64]), label="alignment")
            dest = contexts[name]
            pair = await mate.adr.connect(dest, mate.adr.size, a)
            mutual = dest is contexts[mate.name]
            zero = mutual and (a == 0 or int(mate.adr) % a == 0)
            assert pair.zero_copy == zero
            if zero:
                rec = Rec(pair, name, mate.lanes, mate)
                live.append(rec)
            else:
                rec = new_rec(pair, name, [bytearray(mate.adr.size) for _ in range(dest.nr_lanes)])
                rec.mate = mate
                model_copy(mate, 0, rec, 0, mate.adr.size)
            mate.pairs.append(rec)
            expect()
        elif op in ("sync", "update"):
            pairs = [r for r in live if r.mate is not None]
            if not pairs:
                continue
            rec = data.draw(st.sampled_from(pairs), label="pair")
            assert rec.mate is not None
            n = data.draw(st.integers(0, rec.adr.size), label="nbytes")
            if op == "sync":
                await rec.adr.sync(n)
                if not rec.adr.zero_copy:
                    model_copy(rec, 0, rec.mate, 0, n)
            else:
                await rec.adr.update(n)
                if not rec.adr.zero_copy:
                    model_copy(rec.mate, 0, rec, 0, n)
            expect()
        elif op == "free":
            await free(data.draw(st.sampled_from(live), label="freed"))
            expect()
        elif freed:
            gone = data.draw(st.sampled_from(freed), label="gone")
            target = data.draw(st.sampled_from(live), label="target")
            before = await target.adr.gather()
            await gone.copy_to(target.adr, 1)
            name = next(n for n, c in contexts.items() if c is gone.ctx)
            expect(name, StatusType.ValueError)
            assert (await target.adr.gather() == before).all()

    # every live address holds exactly what the model says, on every lane
    for rec in live:
        rows = await rec.adr.gather()
        assert rows.shape == (len(rec.lanes), rec.adr.size)
        for row, lane in zip(rows, rec.lanes, strict=True):
            assert row.tobytes() == bytes(lane), (rec.name, rec.adr)
    expect()

    # and nothing outside the allocations changed
    def outside(name: str, lo: int, n: int, dpu: int | None = None) -> np.ndarray:
        mask = np.ones(n, bool)
        for ctx, start, end in touched:
            covers = ctx == name or (name == "mram2" and ctx == "mram1" and dpu == 1)
            if covers:
                mask[max(0, start - lo) : max(0, end - lo)] = False
        return mask

    mram = await dpus.copy_from(DPU_MRAM_HEAP_POINTER_NAME, np.uint8, MRAM_REGION)
    wram = await dpus.copy_from(wram_win, np.uint8, wram_win.size)
    for i in range(2):
        assert (mram[i][outside("mram2", heap, MRAM_REGION, i)] == SENTINEL).all()
        assert (wram[i][outside("wram2", wram_start, wram_win.size)] == SENTINEL).all()
    assert ((await dpus.copy_from("m", np.uint8, 4096)) == 0x11).all()
    assert (await dpus.copy_from("x", np.uint32, 4)).tolist() == [[0, 1, 2, 3]] * 2
    content = np.frombuffer((workdir / "mem.bin").read_bytes(), np.uint8)
    assert (content[outside("file", 0, len(content))] == 0).all()
    file.close()
    await dpus.free()


def check(pim: Pim, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pim.run(scenario, data, Path(tmp), machine=MACHINE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_umem_agrees_with_a_bytes_model(pim: Pim, data: st.DataObject) -> None:
    check(pim, data)


@pytest.mark.long
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_umem_agrees_with_a_bytes_model_long(pim: Pim, data: st.DataObject) -> None:
    check(pim, data)
