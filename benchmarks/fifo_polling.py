"""What WRAM FIFO polling costs the emulator: kernel events versus emulated poll iterations.

A DPU program with 16 tasklets processes a stream of FIFO elements pushed by the host with
``process_inputs_each_tasklet``; most of the time most tasklets poll an empty input FIFO. An
emulator that stepped every poll iteration would need one event per iteration; aiopim wakes the
pollers only when the host writes a FIFO pointer. The script prints, for the same run:

* the poll iterations the DPUs executed (instructions issued while spinning / loop size),
* the kernel events aiopim processed,
* their ratio (last line: ``fifo_polling iterations_per_event=<x> elements_per_s=<y>``),
  and the wall-clock rate of elements streamed through host push -> DPU -> host drain.

python benchmarks/fifo_polling.py [--quick] [--dpus 16] [--elements 400]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import aiopim
from aiopim import timing
from aiopim.dpu._runner import TaskletRunner

NR_TASKLETS = 16


def build_program() -> aiopim.Program:
    prog = aiopim.Program("stream", nr_tasklets=NR_TASKLETS)
    active = prog.host("active", np.uint64, 1, init=[1])
    fin = prog.input_fifo("fin", 4, 8)
    fout = prog.output_fifo("fout", 6, 8)
    mutex = prog.mutex("m")

    async def work(t: aiopim.Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        t.compute(200)
        out.view(np.uint64)[0] = int(element.view(np.uint64)[0]) + 1

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        await t.process_inputs_each_tasklet(fin, fout, work, mutex, active)

    return prog


async def host(nr_elements: int) -> tuple[int, int, int]:
    dpus = await aiopim.DpuSet.alloc(len_dpus := _DPUS[0])
    await dpus.load(build_program())
    fin = dpus.link_input_fifo("fin", np.uint64)
    fout = dpus.link_output_fifo("fout", np.uint64)
    await dpus.launch(wait=False)
    received = 0
    for i in range(nr_elements):
        await fin.push(np.full(len_dpus, i, np.uint64))
        await aiopim.current_emulator().delay(20 * timing.PS_PER_US)  # a slow producer
        if i % 16 == 15:
            received += sum(len(x) for x in await fout.drain())
    await dpus.copy_to("active", np.zeros(1, np.uint64), parallel=True)
    await dpus.sync()
    received += sum(len(x) for x in await fout.drain())
    runners = [d.runner for d in dpus.dpu_list]
    assert all(isinstance(r, TaskletRunner) for r in runners), runners
    spun = sum(r.pipeline.instructions for r in runners if isinstance(r, TaskletRunner))
    events = aiopim.current_emulator().kernel.events_processed
    await dpus.free()
    return received, spun, events


_DPUS = [16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dpus", type=int, default=16)
    parser.add_argument("--elements", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="CI sizes: 4 DPUs x 50 elements")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.dpus, opts.elements = 4, 50
    _DPUS[0] = opts.dpus
    machine = aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=opts.dpus)
    t0 = time.perf_counter()
    received, instructions, events = aiopim.run(host, opts.elements, machine=machine)
    wall = time.perf_counter() - t0
    iterations = instructions // timing.FIFO_POLL_LOOP_INSTRUCTIONS
    assert received == opts.elements * opts.dpus, (received, opts.elements * opts.dpus)
    print(f"{opts.dpus} DPUs x {NR_TASKLETS} tasklets, {opts.elements} elements per DPU")
    print(f"  instructions issued (work + polling): {instructions}")
    print(f"  poll-loop iterations a step-per-poll emulator would run: ~{iterations}")
    print(f"  kernel events processed by aiopim: {events}")
    print(f"  wall {wall:.2f} s, {received / wall:.0f} elements/s through push -> DPU -> drain")
    print(
        f"fifo_polling iterations_per_event={iterations / events:.1f} "
        f"elements_per_s={received / wall:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
