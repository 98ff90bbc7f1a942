"""Property: for random DIDL functions (types, arrays, mailbox and MRAM mappings) and random
arguments, a Python kernel receives exactly the words and bytes sent, and the worker returns
exactly what the kernel posted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiopim
from aiopim.kelonia import (
    PYTHON,
    BasicDpuAssemblyLine,
    DpuDeviceDescription,
    DpuFoundry,
    KeloniaInterface,
    parse_didl,
)

SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}


@dataclass(frozen=True)
class PSpec:
    name: str
    direction: str
    scalar: str
    is_array: bool
    count: int
    kind: str
    first: int  # sysmbox word / mbox first tasklet / MRAM offset
    last: int  # last tasklet (mbox)
    col: int  # first mailbox word per tasklet (mbox)
    width: int  # words per tasklet (mbox)
    sent: tuple[int, ...]  # values the host sends (in / inout)
    posted: tuple[int, ...]  # values the kernel posts (out / inout)

    @property
    def wpe(self) -> int:
        return 2 if self.scalar == "u64" else 1

    def mapping(self) -> str:
        if self.kind == "sysmbox":
            return f"sysmbox[{self.first}..{self.first + self.count * self.wpe - 1}]"
        if self.kind == "mbox":
            return f"mbox[{self.first}..{self.last}][{self.col}..{self.col + self.width - 1}]"
        return f"dram[{self.first:#x}]"

    def decl(self) -> str:
        return f"{self.name}: {self.direction} {self.scalar}" + (
            f"[{self.count}]" if self.is_array else ""
        )

    def words(self, values: tuple[int, ...]) -> list[int]:
        out: list[int] = []
        for v in values:
            out += [v & 0xFFFFFFFF, v >> 32] if self.scalar == "u64" else [v]
        return out

    def slots(self) -> list[tuple[int, int]]:
        if self.kind == "sysmbox":
            return [(-1, self.first + i) for i in range(self.count * self.wpe)]
        return [
            (t, self.col + w) for t in range(self.first, self.last + 1) for w in range(self.width)
        ]

    def raw(self, values: tuple[int, ...]) -> bytes:
        return b"".join(v.to_bytes(SIZES[self.scalar], "little") for v in values)

    @property
    def nbytes8(self) -> int:
        return -(-self.count * SIZES[self.scalar] // 8) * 8


@dataclass(frozen=True)
class Spec:
    nr_tasklets: int
    sysmbox: int
    mbox: int
    params: tuple[PSpec, ...]

    def didl(self) -> str:
        decls = ", ".join(p.decl() for p in self.params)
        maps = ",\n  ".join(f"{p.name} <- {p.mapping()}" for p in self.params)
        return f"// random\nfunction randomCall({decls}) {{\n  {maps}\n}}\n"


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    nr_tasklets = draw(st.integers(1, 4))
    sys_words = cols = mram = 0
    params = []
    for i in range(draw(st.integers(1, 5))):
        direction = draw(st.sampled_from(["in", "out", "inout"]))
        scalar = draw(st.sampled_from(list(SIZES)))
        wpe = 2 if scalar == "u64" else 1
        kind = draw(st.sampled_from(["mbox", "dram"] + (["sysmbox"] if direction == "in" else [])))
        first = last = col = width = 0
        if kind == "sysmbox":
            count = draw(st.integers(1, 3))
            first, sys_words = sys_words, sys_words + count * wpe
        elif kind == "mbox":
            nt = draw(st.integers(1, nr_tasklets))
            first = draw(st.integers(0, nr_tasklets - nt))
            last, per = first + nt - 1, draw(st.integers(1, 2))
            count, width, col = nt * per, per * wpe, cols
            cols += width
        else:
            count = draw(st.integers(1, 5))
            first = mram
            mram += -(-count * SIZES[scalar] // 8) * 8 + 8 * draw(st.integers(0, 2))
        is_array = count > 1 or draw(st.booleans())
        value = st.integers(0, (1 << (8 * SIZES[scalar])) - 1)
        values = st.lists(value, min_size=count, max_size=count).map(tuple)
        sent = draw(values) if direction != "out" else ()
        posted = draw(values) if direction != "in" else ()
        params.append(
            PSpec(f"p{i}Value", direction, scalar, is_array, count, kind, first, last, col,
                  width, sent, posted)
        )  # fmt: skip
    return Spec(nr_tasklets, sys_words, cols, tuple(params))


def _device(spec: Spec, record: dict[Any, Any]) -> DpuDeviceDescription:
    iface = KeloniaInterface(parse_didl(spec.didl(), "random.didl"))
    prog = aiopim.Program("random", nr_tasklets=spec.nr_tasklets, stdio=False)
    prog.mailboxes(sysmbox=spec.sysmbox, mbox=spec.mbox)
    buf = prog.wram("buf", np.uint8, 64)
    posts = {
        slot: word
        for p in spec.params
        if p.kind == "mbox" and p.posted
        for slot, word in zip(p.slots(), p.words(p.posted), strict=True)
    }

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        me = t.me()
        if me == 0 and spec.sysmbox:
            record["sys"] = t.sys_mbox_recv().tolist()
        if spec.mbox:
            box = t.mbox_recv().copy()
            record[me] = box.tolist()
            for (tasklet, w), word in posts.items():
                if tasklet == me:
                    box[w] = word
            t.mbox_send(box)
        if me == 0:
            at = prog.address_of(buf)
            for p in spec.params:
                if p.kind != "dram":
                    continue
                await t.mram_read(p.first, at, p.nbytes8)
                record[p.name] = t.view(at, np.uint8, p.nbytes8).tobytes()
                if p.posted:
                    raw = p.raw(p.posted)
                    t.view(at, np.uint8, len(raw))[:] = np.frombuffer(raw, np.uint8)
                    await t.mram_write(at, p.first, p.nbytes8)

    return DpuDeviceDescription(iface, prog)


def _arg(p: PSpec) -> Any:
    return list(p.sent) if p.is_array else p.sent[0]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs())
def test_kernels_receive_what_was_sent_and_workers_return_what_was_posted(
    backend: str, spec: Spec
) -> None:
    record: dict[Any, Any] = {}
    device = _device(spec, record)
    inputs = [p for p in spec.params if p.direction != "out"]

    async def host() -> Any:
        line = BasicDpuAssemblyLine.using_dpu(device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            worker = assembly.worker(device.interface.Task.random_call)
            return await worker.random_call(*[_arg(p) for p in inputs])

    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=1))
    result = emu.run(host, backend=backend)
    for p in inputs:  # what the kernel received
        if p.kind == "dram":
            assert record[p.name][: len(p.raw(p.sent))] == p.raw(p.sent)
            continue
        for (t, w), word in zip(p.slots(), p.words(p.sent), strict=True):
            assert (record["sys"] if t < 0 else record[t])[w] == word
    outputs = [p for p in spec.params if p.direction != "in"]
    got = [] if result is None else [result] if len(outputs) == 1 else list(result)
    assert len(got) == len(outputs)
    for p, value in zip(outputs, got, strict=True):  # what the worker returned
        if p.is_array:
            assert isinstance(value, np.ndarray) and value.dtype == np.dtype(
                f"uint{8 * SIZES[p.scalar]}"
            )
            assert value.tolist() == list(p.posted)
        else:
            assert isinstance(value, np.unsignedinteger) and int(value) == p.posted[0]
