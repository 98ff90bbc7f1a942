"""CPU cost of the key-sum WRAM FIFO demo with Python kernels, per rank and per kernel event.

Runs ``examples/wram_fifo_keysum.py`` (16 tasklets, mode ``all``, 64 keys per DPU, trio) on 1
rank and on N ranks, each in a fresh interpreter, and prints for each: CPU seconds, CPU seconds
per rank, kernel events, CPU microseconds per kernel event, kernel events per key (one key is
one input element processed by one DPU), the virtual time reached, and the CPU-per-rank ratio
before / now. "Before" is either measured in the same way on an older checkout of the package
(``--before PATH``: each rank count runs there right before it runs here) or, without it, the
figures of ``BEFORE`` below. The results are checked (every (key, sum) pair right, the same
virtual time for every rank count and both packages).

python benchmarks/keysum_python.py                      # 1 and 4 ranks
python benchmarks/keysum_python.py --ranks-list 1,4,40  # the full machine too (minutes)
python benchmarks/keysum_python.py --quick              # 1 rank only
python benchmarks/keysum_python.py --before /tmp/old    # side by side with an older checkout
python benchmarks/keysum_python.py --windows            # what running DPUs ahead would group
python benchmarks/keysum_python.py --floor              # the runtime against a bare one (1 rank)

``--windows`` logs the time of every event of a 1-rank run (per DPU, and the kernel's own) and
counts how many events a DPU would run each time it is entered if DPUs could run ahead of each
other: not at all (the exact order), by at most 1, 2 or 5 µs past the next event of any other
DPU, or up to the next kernel event.

``--floor`` runs the example's own DPU code on one rank, ``--repeat`` times each way,
alternately, in fresh interpreters: on aiopim, and on a bare runtime that keeps only what any
emulation of this program in Python coroutines must do (every tasklet resumed through the same
chain of coroutines at every barrier and DMA, one heap event for each resume and one for the
timing event before it, the DMA's bytes copied, the example's NumPy work) and models no time,
no pipeline, no FIFO. It prints both fastest CPU times, their ratio, and the CPU per event the
runtime adds to the floor against what the 1.5 s goal leaves it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from heapq import heapify, heappop, heappush
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: ranks -> (CPU s per rank, kernel events per key) of the runtime before round 3 (commit
#: d88be10), measured with ``--before`` on the development VM (trio, shared 2-core machine):
#: used when ``--before`` is not given.
BEFORE: dict[int, tuple[float, float]] = {1: (1.96, 162.32), 4: (2.49, 162.32), 40: (3.84, 162.32)}

#: the start of a child script: the package of checkout ``root`` (argv[1]) and its example
_LOAD_EXAMPLE = r"""
import functools, gc, importlib.util, json, sys, time
root, ranks = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, root)
import aiopim
path = root + "/examples/wram_fifo_keysum.py"
spec = importlib.util.spec_from_file_location("wram_fifo_keysum", path)
example = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = example
spec.loader.exec_module(example)
"""

#: one measurement, run in a fresh interpreter with the package under test on sys.path
_CHILD = (
    _LOAD_EXAMPLE
    + r"""
backend = sys.argv[3]

async def main():
    r = await example.host(ranks, 0, 16, "all", 0)
    r["events"] = aiopim.current_emulator().kernel.events_processed
    return r

assert aiopim.__file__.startswith(root), aiopim.__file__
gc.collect()
t0 = time.process_time()
r = aiopim.run(main, backend=backend)
cpu = time.process_time() - t0
ok = r["complete"] and not r["wrong"]
print(json.dumps({"cpu_s": cpu, "events": r["events"], "dpus": r["dpus"], "ok": ok,
                  "virtual_time_s": r["virtual_time_s"], "keys": r["dpus"] * example.NR_KEYS}))
"""
)


#: one run on ``ranks`` ranks that logs the time of every event, per DPU and for the kernel
_CHILD_TIMES = (
    _LOAD_EXAMPLE
    + r"""
from aiopim._runtime import _kernel
from aiopim.dpu import _runner, _tasklet
dpu_times, kernel_times, clock, depth = {}, [], [], [0]

def log_dpu(cls, name, dpu_of):
    fn = getattr(cls, name)
    def logged(self, arg):
        dpu = dpu_of(self, arg)
        if dpu is not None and not depth[0]:  # an event, not a call made by one
            dpu_times.setdefault(dpu, []).append(clock[0].now)
        depth[0] += 1
        try:
            return fn(self, arg)
        finally:
            depth[0] -= 1
    setattr(cls, name, logged)

log_dpu(_kernel.Process, "resume",
        lambda p, _: p.actor >> 5 if type(p.kernel) is _kernel.LocalQueue else None)
log_dpu(_tasklet._BarrierCommand, "_arrive", lambda _, p: p.actor >> 5)
log_dpu(_runner.MramDmaCommand, "_issue", lambda _, p: p.actor >> 5)
log_dpu(_runner.MramDmaCommand, "_complete", lambda _, p: p.actor >> 5)
log_dpu(_runner.Pipeline, "_on_timer", lambda p, _: p._actor >> 5)
for name in ("call_at", "call_soon"):  # the kernel's own events (host jobs, polls, ...)
    fn = getattr(_kernel.Kernel, name)
    def schedule(self, *args, _fn=fn, **kw):
        args = list(args)
        i = 1 if _fn.__name__ == "call_at" else 0
        cb = args[i]
        def run(arg, _cb=cb):
            kernel_times.append(clock[0].now)
            _cb(arg)
        args[i] = run
        return _fn(self, *args, **kw)
    setattr(_kernel.Kernel, name, schedule)

async def main():
    clock.append(aiopim.current_emulator().kernel)
    return await example.host(ranks, 0, 16, "all", 0)

r = aiopim.run(main, backend="trio")
print(json.dumps({"dpus": [sorted(t) for t in dpu_times.values()], "kernel": sorted(kernel_times)}))
"""
)


#: the floor: the example's program on a bare runtime (see ``--floor``), one rank
_CHILD_FLOOR = (
    _LOAD_EXAMPLE
    + r"""
import heapq
import numpy as np
from aiopim._machine._program import MRAM_BIT

NR_TASKLETS, NR_DPUS = 16, 64 * ranks
prog = example.build_program(NR_TASKLETS, "all")
rng = np.random.default_rng(0)  # the host program's data
keys = rng.integers(0, 1024, example.NR_ELEMS, dtype=np.uint32)
values = rng.integers(0, 1024, example.NR_ELEMS, dtype=np.uint32)
mram = np.zeros((prog.address_of("values") & ~MRAM_BIT) + values.nbytes, np.uint8)
for name, data in (("keys", keys), ("values", values)):  # one copy, as broadcast keeps it
    at = prog.address_of(name) & ~MRAM_BIT
    mram[at : at + data.nbytes] = data.view(np.uint8)
expected = [int(values[keys == k].sum(dtype=np.uint64)) for k in range(example.NR_KEYS)]


class Wait:
    __slots__ = ()

    def __await__(self):
        return (yield self)


WAIT = Wait()


class BareTasklet:
    # the calls the example's DPU code makes; a DMA copies at once, nothing is timed or checked
    def __init__(self, wram, tid, out):
        self.wram, self._id, self.out = wram, tid, out
        self.nr_tasklets = NR_TASKLETS

    def me(self):
        return self._id

    def compute(self, instructions):
        pass

    def mram_address(self, var, offset=0):
        return prog.address_of(var) + offset

    def mram_read(self, mram_addr, wram_addr, size):
        at = mram_addr & ~MRAM_BIT
        self.wram[wram_addr : wram_addr + size] = mram[at : at + size]
        return WAIT

    def view(self, where, dtype=np.uint8, count=None):
        if type(where) is int:
            dt = np.dtype(dtype)
            return self.wram[where : where + (count or 1) * dt.itemsize].view(dt)
        at = prog.address_of(where)
        return self.wram[at : at + where.size].view(where.dtype)

    async def process_inputs_all_tasklets(self, fin, fout, process, reduce, barrier, active):
        head = np.zeros(8, np.uint8)
        for key in range(example.NR_KEYS):
            await WAIT  # the loop's barrier
            head.view(np.uint32)[0] = key
            await process(self, head)
            await WAIT
            if self._id == 0:
                element = np.zeros(16, np.uint8)
                await reduce(self, head, element)
                self.out.append(element.view(np.uint64).tolist())
            await WAIT


heap, outs, seq, events = [], [], [0], [0]
# an event's key: (time, priority, a key per tasklet, sequence number), as the kernel's


def resume(coro):
    try:
        coro.send(None)
    except StopIteration:
        return
    seq[0] += 1  # what the tasklet awaits ends in an event, which resumes it in another
    heapq.heappush(heap, [now[0] + 1280, 1, id(coro) & 0xFFFF, seq[0], timed, coro])


def timed(coro):
    seq[0] += 1
    heapq.heappush(heap, [now[0], 1, id(coro) & 0xFFFF, seq[0], resume, coro])


now = [0]
for d in range(NR_DPUS):
    wram, out = np.zeros(65536, np.uint8), []
    outs.append(out)
    for t in range(NR_TASKLETS):
        seq[0] += 1
        coro = prog._main(BareTasklet(wram, t, out))
        heap.append([0, 1, id(coro) & 0xFFFF, seq[0], resume, coro])
heapq.heapify(heap)
gc.collect()
gc.disable()  # as Kernel.run does
t0 = time.process_time()
while heap:
    entry = heapq.heappop(heap)
    now[0] = entry[0]
    events[0] += 1
    entry[4](entry[5])
cpu = time.process_time() - t0
gc.enable()
ok = all(out == [[k, expected[k]] for k in range(example.NR_KEYS)] for out in outs)
print(json.dumps({"cpu_s": cpu, "events": events[0], "ok": ok}))
"""
)


def drains(dpus: list[list[int]], kernel: list[int], window: int | None) -> int:
    """How many times the DPUs' events would be entered if each DPU, once due, ran its events
    up to the next kernel event and (``window`` not None) no further than ``window`` past the
    next event of any other DPU. Window 0 is the exact order of today."""
    heap = [(times[0], d) for d, times in enumerate(dpus) if times]
    heapify(heap)
    at = [0] * len(dpus)
    nk = 0
    count = 0
    while heap:
        t, d = heappop(heap)
        while nk < len(kernel) and kernel[nk] < t:
            nk += 1
        bound = kernel[nk] if nk < len(kernel) else 1 << 62
        times = dpus[d]
        i = at[d] + 1
        if window is None:
            while i < len(times) and times[i] < bound:
                i += 1
        else:
            other = heap[0][0] + window if heap else 1 << 62
            while i < len(times) and times[i] <= other and times[i] < bound:
                i += 1
        count += 1
        at[d] = i
        if i < len(times):
            heappush(heap, (times[i], d))
    return count


def run_child(child: str, root: Path, *args: object) -> dict[str, Any]:
    """Run script ``child`` in a fresh interpreter with checkout ``root``'s package on the path
    (its arguments: ``root``, then ``args``); what it printed last, as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", child, str(root), *map(str, args)],
        env=dict(os.environ, PYTHONPATH=str(root)),
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
    )
    r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return r


def windows(root: Path, ranks: int) -> None:
    """Events per entry into a DPU if DPUs ran ahead of each other (see ``drains``)."""
    r = run_child(_CHILD_TIMES, root, ranks)
    dpus, kernel = r["dpus"], r["kernel"]
    events = sum(len(t) for t in dpus)
    print(f"{events} DPU events and {len(kernel)} kernel events on {ranks} rank(s)")
    print(f"{'run ahead by at most':>24} {'entries':>8} {'events per entry':>17}")
    for window, label in [
        (0, "0 (the exact order)"),
        (1_000_000, "1 us"),
        (2_000_000, "2 us"),
        (5_000_000, "5 us"),
        (None, "up to the next kernel event"),
    ]:
        n = drains(dpus, kernel, window)
        print(f"{label:>24} {n:>8} {events / n:17.2f}")


def measure_floor(root: Path, ranks: int = 1) -> dict[str, Any]:
    """One run of the example's DPU code on the bare runtime (see ``--floor``)."""
    r = run_child(_CHILD_FLOOR, root, ranks)
    if not r["ok"]:
        raise SystemExit("the bare runtime computed wrong sums")
    return r


def floor(root: Path, repeat: int) -> None:
    """The example on aiopim against the same DPU code on a bare runtime (see ``--floor``)."""
    bare: list[dict[str, Any]] = []
    real: list[dict[str, Any]] = []
    for _ in range(repeat):
        bare.append(measure_floor(root))
        real.append(measure(root, 1, "trio"))
    b = min(r["cpu_s"] for r in bare)
    a = min(r["cpu_s"] for r in real)
    events = real[0]["events"]
    print(f"one rank, fastest of {repeat} alternating runs each:")
    print(
        f"  bare runtime (coroutines, events, DMA copies, NumPy): {b:.2f} s CPU, "
        f"{bare[0]['events']} events"
    )
    print(f"  aiopim:                                               {a:.2f} s CPU, {events} events")
    print(f"  aiopim / bare: {a / b:.2f}x")
    left = (1.5 - b) / events * 1e6
    print(
        f"  CPU per event above the bare runtime: {(a - b) / events * 1e6:.2f} us; "
        + (f"the 1.5 s goal leaves {left:.2f} us" if left > 0 else "the bare runtime is over 1.5 s")
    )
    print(f"keysum_python floor_ratio={a / b:.2f}")


def measure(root: Path, ranks: int, backend: str) -> dict[str, Any]:
    """One run of the demo on ``ranks`` ranks with the package of checkout ``root``."""
    r = run_child(_CHILD, root, ranks, backend)
    if not r["ok"]:
        raise SystemExit(f"keysum on {ranks} ranks ({root}): wrong results")
    return r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks-list", default="1,4", help="comma-separated rank counts")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="trio")
    parser.add_argument("--quick", action="store_true", help="1 rank only; --floor: 1 run")
    parser.add_argument(
        "--before", type=Path, help="a checkout of an older aiopim to measure side by side"
    )
    parser.add_argument(
        "--windows",
        action="store_true",
        help="only count how many events a DPU would run at a time if it ran ahead (1 rank)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="only compare one rank on aiopim with the same DPU code on a bare runtime",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (--floor)")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.repeat = 1
    if opts.windows:
        windows(ROOT, 1)
        return 0
    if opts.floor:
        floor(ROOT, opts.repeat)
        return 0
    counts = [1] if opts.quick else [int(x) for x in opts.ranks_list.split(",")]
    print(
        f"{'ranks':>5} {'DPUs':>5} {'CPU s':>8} {'s/rank':>7} {'events':>10} "
        f"{'us/event':>8} {'ev/key':>6} {'virtual s':>16} {'before s/rank':>13} {'ratio':>6}"
    )
    virtual: set[float] = set()
    per_event: list[float] = []
    for ranks in counts:
        if opts.before is not None:
            old = measure(opts.before.resolve(), ranks, opts.backend)
            virtual.add(old["virtual_time_s"])
            before: float | None = old["cpu_s"] / ranks
        else:
            before = BEFORE[ranks][0] if ranks in BEFORE else None
        r = measure(ROOT, ranks, opts.backend)
        per_rank = r["cpu_s"] / ranks
        us_event = r["cpu_s"] / r["events"] * 1e6
        per_event.append(us_event)
        virtual.add(r["virtual_time_s"])
        ratio = f"{before / per_rank:5.2f}x" if before is not None else "   n/a"
        shown = f"{before:13.2f}" if before is not None else f"{'n/a':>13}"
        print(
            f"{ranks:>5} {r['dpus']:>5} {r['cpu_s']:8.2f} {per_rank:7.2f} {r['events']:>10} "
            f"{us_event:8.2f} {r['events'] / r['keys']:6.2f} {r['virtual_time_s']:16.12f} "
            f"{shown} {ratio}",
            flush=True,
        )
    if len(virtual) != 1:
        raise SystemExit(f"virtual time differs between runs: {sorted(virtual)}")
    growth = per_event[-1] / per_event[0]
    print(
        f"keysum_python cpu_per_event_growth={growth:.2f} "
        f"(CPU per event at {counts[-1]} rank(s) / at {counts[0]})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
