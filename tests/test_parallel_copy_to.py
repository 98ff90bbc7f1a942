"""``DpuSet.copy_to(..., parallel=True)`` of one buffer is a parallel write on a set of DPUs; on a
single DPU's handle the flag is ignored, as the SDK's ``dpu_push_xfer`` ignores it there
(docs/quirks.md)."""

from __future__ import annotations

import anyio
import numpy as np
from helpers import emu

import aiopim

WORK = 100_000  # instructions: 100,000 x 11 cycles x 2.5 ns = 2.75 ms alone on a DPU


def _program() -> aiopim.Program:
    prog = aiopim.Program("waits_for_flag", nr_tasklets=1)
    prog.host("flag", np.uint32, 2)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.compute(WORK)
        await t.flush()

    return prog


def _write_at(backend: str, target: str) -> tuple[int, int]:
    """(when the parallel write returned, when DPU 1's run ended), in ps."""

    async def host() -> tuple[int, int]:
        async with await aiopim.DpuSet.alloc(2) as dpus:
            await dpus.load(_program())
            await dpus.launch(wait=False)
            await anyio.sleep(1e-3)
            where = dpus if target == "set" else dpus.dpus[1]
            await where.copy_to("flag", np.ones(2, np.uint32), parallel=True)
            written_at = aiopim.current_emulator().now_ps
            await dpus.sync()
            return written_at, dpus.dpu_list[1].last_run_ps

    return emu(ranks=1, dpus=2).run(host, backend=backend)


def test_parallel_copy_of_one_buffer_to_a_set_does_not_wait_for_the_dpus(backend: str) -> None:
    written_at, run_ps = _write_at(backend, "set")
    assert run_ps > 2_000_000_000  # the DPUs ran past 2 ms
    assert written_at == 1_102_080_000  # 1 ms in, while they ran: the parallel job's cost


def test_parallel_copy_to_one_dpu_waits_for_the_rank_as_the_sdk_does(backend: str) -> None:
    written_at, run_ps = _write_at(backend, "one DPU")
    assert run_ps > 2_000_000_000
    assert written_at > run_ps  # after the DPUs stopped
