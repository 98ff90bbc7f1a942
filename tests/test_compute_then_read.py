"""A tasklet's WRAM accesses happen at the instant of its last await: ``t.compute`` only charges
instructions, so a kernel that computes and then reads WRAM the host writes while it runs needs
``await t.flush()`` in between (docs/runtime.md, "Time"; issue 35, item 11)."""

from __future__ import annotations

import anyio
import numpy as np
from helpers import V1B_CYCLE_PS, emu

import aiopim

WORK = 100_000  # 100,000 instructions of 11 cycles at 2.5 ns = 2.75 ms alone on a DPU
HOST_AT = 1e-3  # the host's parallel transfer starts 1 ms into the run


def _program(flush_first: bool) -> aiopim.Program:
    """Reads ``flag`` after the work (``seen[0]``), writes ``out`` after the work, then
    flushes and reads ``flag`` again (``seen[1]``); ``flush_first`` flushes the work first."""
    prog = aiopim.Program("compute_then_read", nr_tasklets=1)
    flag = prog.host("flag", np.uint32, 2)
    seen = prog.host("seen", np.uint32, 2)
    out = prog.host("out", np.uint32, 2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(WORK)
        if flush_first:
            await t.flush()
        t.view(seen)[0] = t.view(flag)[0]
        t.view(out)[0] = 42
        await t.flush()
        t.view(seen)[1] = t.view(flag)[0]

    return prog


def _run(flush_first: bool, backend: str) -> tuple[list[int], list[int], int]:
    """(seen, out as the host read it 1 ms into the run, the run's end in ps)."""

    async def host() -> tuple[list[int], list[int], int]:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(_program(flush_first))
            await dpus.launch(wait=False)
            await anyio.sleep(HOST_AT)
            early = await dpus.copy_from("out", np.uint32, 2, parallel=True)
            await dpus.copy_to("flag", np.ones(2, np.uint32), parallel=True)
            await dpus.sync()
            seen = await dpus.copy_from("seen", np.uint32, 2)
            return seen[0].tolist(), early[0].tolist(), dpus.dpu_list[0].last_run_ps

    return emu(ranks=1, dpus=1).run(host, backend=backend)


def test_a_read_after_compute_without_flush_sees_the_boot_instant(backend: str) -> None:
    seen, early, run_ps = _run(flush_first=False, backend=backend)
    assert run_ps >= WORK * 11 * V1B_CYCLE_PS > HOST_AT * 1e12  # the host wrote mid-run
    assert seen == [0, 1]  # stale before the flush, the host's value after it
    assert early == [42, 0]  # the result was visible before the work that made it


def test_flush_before_the_read_sees_the_host_write(backend: str) -> None:
    seen, early, _ = _run(flush_first=True, backend=backend)
    assert seen == [1, 1]
    assert early == [0, 0]
