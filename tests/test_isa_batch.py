"""The batched interpreter: every running DPU in one loop call per chunk, DMA served inside the
loop while the MRAM page is known to it, worker threads. Results and virtual times must not
depend on any of it (pure Python, compiled, one or several threads, one DPU at a time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from isa_programs import Asm, elf

import aiopim
from aiopim.isa import _runner, set_engine

THREADS = 16
ROUNDS = 3
ITERATIONS = 40
DPUS = 12


def _program() -> aiopim.elf.ElfProgram:
    """Each thread: ROUNDS times (a compute loop, store its value, sdma it to ``out``, ldma its
    word of ``src`` back over it, add it in); finally the value to ``res``."""

    def make(buf: int, out: int, src: int, res: int) -> Asm:
        a = Asm()
        a.label("chain")
        a("sub:zrici", ra="id", imm=THREADS - 1, cc="geu", pc="work")
        a("boot:rici", ra="id", imm=1, cc="nz", pc="chain")
        a.label("work")
        a("add:rri", rc="r1", ra="id", imm=1)
        a("add:rri", rc="r3", ra="zero", imm=ROUNDS)
        a("add:rri", rc="r4", ra="id8", imm=buf)
        a.label("round")
        a("add:rri", rc="r0", ra="zero", imm=ITERATIONS)
        a.label("loop")
        a("add:rrr", rc="r1", ra="r1", rb="r0")
        a("xor:rrr", rc="r2", ra="r1", rb="r0")
        a("lsl:rri", rc="r2", ra="r2", shift=3)
        a("or:rrr", rc="r1", ra="r1", rb="r2")
        a("add:rrici", rc="r0", ra="r0", imm=-1, cc="nz", pc="loop")
        a("sw:erir", endian="little", ra="r4", off=0, rb="r1")
        a("add:rri", rc="r5", ra="id8", imm=out)
        a("sdma:rri", ra="r4", rb="r5", immDma=0)
        a("add:rri", rc="r6", ra="id8", imm=src)
        a("ldma:rri", ra="r4", rb="r6", immDma=0)
        a("lw:erri", endian="little", rc="r2", ra="r4", off=0)
        a("add:rrr", rc="r1", ra="r1", rb="r2")
        a("add:rrici", rc="r3", ra="r3", imm=-1, cc="nz", pc="round")
        a("sw:erir", endian="little", ra="id4", off=res, rb="r1")
        a("stop:ci", cc="false", pc=0)
        return a

    hv = {"buf": bytes(8 * THREADS), "res": bytes(4 * THREADS)}
    mv = {"out": bytes(8 * THREADS), "src": bytes(8 * THREADS)}
    _, lay = elf(make(0, 0, 0, 0), nr_tasklets=THREADS, host_vars=hv, mram_vars=mv)

    def mram(name: str) -> int:
        return int(lay[name][0]) & ~0x08000000

    prog, _ = elf(
        make(lay["buf"][0], mram("out"), mram("src"), lay["res"][0]),
        nr_tasklets=THREADS,
        host_vars=hv,
        mram_vars=mv,
    )
    return prog


def _expected(dpu: int) -> list[int]:
    m32 = 0xFFFFFFFF
    src = _src(dpu)
    out = []
    for t in range(THREADS):
        r1 = t + 1
        for _ in range(ROUNDS):
            r0 = ITERATIONS
            while True:
                r1 = (r1 + r0) & m32
                r2 = ((r1 ^ r0) << 3) & m32
                r1 |= r2
                r0 = (r0 - 1) & m32
                if r0 == 0:
                    break
            r1 = (r1 + int(src[2 * t])) & m32
        out.append(r1)
    return out


def _src(dpu: int) -> np.ndarray:
    return (np.arange(2 * THREADS, dtype=np.uint32) * 977 + dpu * 131).astype(np.uint32)


PROGRAM = _program()


def _run(backend: str) -> tuple[list[list[int]], list[list[int]], list[int], int, list[int]]:
    async def main() -> Any:
        dpus = await aiopim.DpuSet.alloc(DPUS)
        await dpus.load(PROGRAM)
        await dpus.copy_to("src", [_src(i) for i in range(DPUS)])
        await dpus.launch()
        res = (await dpus.copy_from("res", np.uint32, THREADS)).tolist()
        out = (await dpus.copy_from("out", np.uint32, 2 * THREADS)).tolist()
        runs = [d.last_run_ps for d in dpus.dpu_list]
        reqs = [d.runner.dma_requests for d in dpus.dpu_list]
        return res, out, runs, round(aiopim.now() * 1e12), reqs

    result: tuple[list[list[int]], list[list[int]], list[int], int, list[int]] = aiopim.run(
        main, backend=backend
    )
    return result


@pytest.fixture
def restore() -> Iterator[None]:
    yield
    set_engine(None)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_batched_runs_agree_on_every_path(
    backend: str, restore: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_engine("python")
    reference = _run(backend)
    res, _out, runs, _, reqs = reference
    assert res == [_expected(i) for i in range(DPUS)]
    assert reqs == [2 * ROUNDS * THREADS] * DPUS
    assert len(set(runs)) == 1  # the DPUs run the same instructions at the same times
    set_engine("compiled")
    assert _run(backend) == reference
    # several worker threads, a few DPUs each
    monkeypatch.setenv("AIOPIM_ISA_THREADS", "3")
    monkeypatch.setattr(_runner, "_MIN_DPUS_PER_THREAD", 2)
    assert _run(backend) == reference
    # the page list started afresh again and again while the DPUs run
    monkeypatch.setattr(_runner.IsaScheduler, "MAX_PAGES", 3)
    assert _run(backend) == reference
    # the per-DPU path (a cycle bound turns batching off) agrees too
    monkeypatch.setattr(_runner.IsaRunner, "max_run_cycles", 1 << 40)
    assert _run(backend) == reference
    assert _run("asyncio" if backend == "trio" else "trio") == reference
