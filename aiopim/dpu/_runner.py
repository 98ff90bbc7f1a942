"""Engine 1: Python kernels run as tasklet coroutines of the kernel.

The :class:`TaskletRunner` of a DPU holds what the Python runtime needs around the tasklets:
the revolver pipeline as processor sharing, the DMA engine and the tasklets busy-polling WRAM.
"""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable, Coroutine
from heapq import heappop, heappush
from types import FrameType
from typing import TYPE_CHECKING, Any

from .. import timing
from .._machine._engine import DpuRunner
from .._runtime._kernel import PRIO_NORMAL, Command, Entry, LocalQueue, Process

if TYPE_CHECKING:
    from .._machine._dpu import Dpu


class DpuFault(Exception):
    """Raised inside DPU code to stop the DPU in fault (software ``code``, memory or DMA)."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        self.reason = reason
        self.code = code
        super().__init__(reason if code is None else f"fault {code}: {reason}")


_REVOLVER = timing.REVOLVER_CYCLES


class Pipeline:
    """The revolver pipeline as processor sharing.

    A tasklet issues at most one instruction every 11 cycles and the DPU at most one per cycle,
    so each of ``n`` computing tasklets progresses at ``1/max(11, n)`` instruction per cycle.
    ``attained`` is the service (instructions) every computing tasklet has received since the
    pipeline was last empty; a tasklet that needs ``k`` more finishes when it reaches its target.
    Checked against PrIM's hardware logs (``benchmarks/prim/report.py``): one tasklet takes
    11 cycles per instruction and the DPU saturates at 11 tasklets, within 1 % from 1 to 24.
    """

    __slots__ = (
        "_actor",
        "_armed",
        "_heap",
        "_seq",
        "_timer",
        "attained",
        "cycle_ps",
        "instructions",
        "kernel",
        "n",
        "queue",
        "spin_attained",
        "spinning",
        "t",
    )

    def __init__(self, queue: LocalQueue, cycle_ps: float, actor: int) -> None:
        self.kernel = queue.kernel
        #: where the pipeline's timer is scheduled (the DPU's events)
        self.queue = queue
        self.cycle_ps = cycle_ps
        self._actor = actor
        self.n = 0
        self.attained = 0.0
        self.t = 0
        #: (target, seq, process, what runs when the target is reached, its argument)
        self._heap: list[tuple[float, int, Process, Callable[[Any], None], Any]] = []
        self._seq = 0
        #: the timer: the queue's slot, moved in place instead of cancelled and scheduled anew
        self._timer: Entry = [0, PRIO_NORMAL, actor, 0, self._on_timer, None]
        self._armed = False
        self.instructions = 0
        #: tasklets busy-polling memory: they take issue slots but have no instruction target
        self.spinning = 0
        #: instructions each spinning tasklet has issued since the pipeline started spinning
        self.spin_attained = 0.0

    def reset(self) -> None:
        """Forget every computing tasklet (DPU stopped)."""
        if self._armed:
            self._armed = False
            self.queue.set_slot(None)
        self._heap.clear()
        self.n = 0
        self.attained = 0.0
        self.spinning = 0

    def _advance(self) -> None:
        now = self.kernel.now
        active = self.n + self.spinning
        if active:
            share = (now - self.t) / ((active if active > _REVOLVER else _REVOLVER) * self.cycle_ps)
            if self.n:
                self.attained += share
            if self.spinning:
                self.spin_attained += share
        self.t = now

    def spin(self) -> float:
        """A tasklet starts busy-polling; returns the spin mark to pass to :meth:`unspin`."""
        self._advance()
        self.spinning += 1
        self._reschedule()
        return self.spin_attained

    def unspin(self, mark: float) -> None:
        """A polling tasklet saw its condition; count the instructions it issued meanwhile."""
        self._advance()
        self.spinning -= 1
        self.instructions += int(self.spin_attained - mark)
        self._reschedule()

    def compute(
        self,
        proc: Process,
        instructions: int,
        then: Callable[[Any], None] | None = None,
        arg: Any = None,
    ) -> None:
        """Run ``instructions`` for ``proc``; it resumes when they have issued.

        With ``then``, ``then(arg)`` runs instead of the resume (same instant, same actor): a
        command that continues with more work without stepping the tasklet's coroutine.
        """
        # _advance(), inline
        now = self.kernel.now
        active = self.n + self.spinning
        if active:
            share = (now - self.t) / ((active if active > _REVOLVER else _REVOLVER) * self.cycle_ps)
            if self.n:
                self.attained += share
            if self.spinning:
                self.spin_attained += share
        self.t = now
        self.instructions += instructions
        self._seq += 1
        heappush(
            self._heap,
            (self.attained + instructions, self._seq, proc, then or proc.resume, arg),
        )
        self.n += 1
        # _reschedule(), inline
        heap = self._heap
        active = self.n + self.spinning
        dt = (
            (heap[0][0] - self.attained)
            * (active if active > _REVOLVER else _REVOLVER)
            * self.cycle_ps
        )
        k = self.kernel
        timer = self._timer
        timer[0] = now + (math.ceil(dt - 1e-6) if dt > 1e-6 else 0)
        k._seq += 1
        timer[3] = k._seq
        if k._explore is not None:
            timer[2] = k._explore.getrandbits(62)
        self._armed = True
        q = self.queue
        if q._draining:  # set_slot(), inline: the queue is running this DPU's events
            q.slot = timer
        else:
            q.set_slot(timer)

    def _reschedule(self) -> None:
        heap = self._heap
        if not heap:
            if self._armed:
                self._armed = False
                self.queue.set_slot(None)
            self.attained = 0.0
            return
        remaining = heap[0][0] - self.attained
        active = self.n + self.spinning
        dt = remaining * (active if active > _REVOLVER else _REVOLVER) * self.cycle_ps
        k = self.kernel
        # the timer moves: the same key as cancelling it and scheduling a new one at ``when``
        timer = self._timer
        timer[0] = k.now + (math.ceil(dt - 1e-6) if dt > 1e-6 else 0)
        k._seq += 1
        timer[3] = k._seq
        if k._explore is not None:
            timer[2] = k._explore.getrandbits(62)
        self._armed = True
        self.queue.set_slot(timer)

    def _on_timer(self, _: Any) -> None:
        self._armed = False
        self._advance()
        heap = self._heap
        q = self.queue
        limit = self.attained + 1e-6
        # the tasklets whose instructions are done (several: one group entry)
        group: list[tuple[int, int, Callable[[Any], None], Any]] = []
        while heap and heap[0][0] <= limit:
            _, _, proc, then, arg = heappop(heap)
            self.n -= 1
            q.call_soon_in(group, then, arg, proc.actor)
        q.post_group(group)
        self._reschedule()


class ComputeCommand(Command):
    """Await the issue of ``instructions`` in the DPU pipeline."""

    __slots__ = ("instructions", "pipeline")

    def __init__(self, pipeline: Pipeline, instructions: int) -> None:
        self.pipeline = pipeline
        self.instructions = instructions

    def arm(self, proc: Process) -> None:
        proc.blocked_on = "compute"
        self.pipeline.compute(proc, self.instructions)


_DMA_COSTS: dict[timing.ChipProfile, dict[int, tuple[int, int]]] = {}


class DmaEngine:
    """The DPU's MRAM<->WRAM DMA engine: requests served in order, latencies overlap.

    The engine moves one request at a time at 1/beta bytes per cycle (2 B/cycle, the MRAM
    peak); the fixed part alpha of a request overlaps the bytes of the next one, so two
    tasklets streaming 1 KiB blocks already saturate it (PrIM: COPY-DMA saturates with 2).
    Issuing a DMA costs the tasklet no pipeline slot: a tasklet waiting for its DMA leaves the
    pipeline to the others.
    """

    __slots__ = ("_actor", "_costs", "bytes", "chip", "free_at", "kernel", "queue", "requests")

    def __init__(self, queue: LocalQueue, chip: timing.ChipProfile, actor: int) -> None:
        self.kernel = queue.kernel
        #: where completions are scheduled (the DPU's events)
        self.queue = queue
        self.chip = chip
        self._actor = actor
        self.free_at = 0
        self.requests = 0
        self.bytes = 0
        #: (engine occupancy, latency) in picoseconds by ``2 * size + write``, one table per
        #: chip for the whole machine
        self._costs = _DMA_COSTS.setdefault(chip, {})

    def submit(self, size: int, write: bool, done: Callable[[Any], None], arg: Any) -> int:
        """Queue a DMA of ``size`` bytes; ``done(arg)`` runs at completion. Returns its time."""
        cost = self._costs.get(size + size + write)
        if cost is None:
            busy, latency = timing.dma_cycles(size, write=write)
            cost = (self.chip.cycles_to_ps(busy), self.chip.cycles_to_ps(latency))
            self._costs[size + size + write] = cost
        now = self.kernel.now
        start = now if now > self.free_at else self.free_at
        self.free_at = start + cost[0]
        when = start + cost[1]
        self.requests += 1
        self.bytes += size
        self.queue.call_at(when, done, arg, self._actor)
        return when


class DmaCommand(Command):
    """Await one DMA; ``apply`` copies the bytes when the transfer completes."""

    __slots__ = ("apply", "engine", "size", "write")

    def __init__(
        self, engine: DmaEngine, size: int, write: bool, apply: Callable[[], None]
    ) -> None:
        self.engine = engine
        self.size = size
        self.write = write
        self.apply = apply

    def arm(self, proc: Process) -> None:
        proc.blocked_on = "DMA"
        self.engine.submit(self.size, self.write, self._complete, proc)

    def _complete(self, proc: Process) -> None:
        if proc.done:
            return
        try:
            self.apply()
        except BaseException as exc:
            proc.throw(exc)
            return
        proc.resume(None)


class MramDmaCommand(Command):
    """``mram_read`` / ``mram_write``: issue the tasklet's pending ``instructions``, then one
    DMA between MRAM offset ``mram`` and WRAM ``wram``, with one step of the tasklet.

    The DMA is submitted at the instant (and in the event) the tasklet would have resumed
    after its instructions issued, exactly as a compute then a DMA awaited in turn would do it.
    The bytes move when the transfer completes.
    """

    __slots__ = ("instructions", "mram", "runner", "size", "wram", "write")

    def __init__(
        self, runner: TaskletRunner, instructions: int, mram: int, wram: int, size: int, write: bool
    ) -> None:
        self.runner = runner
        self.instructions = instructions
        self.mram = mram
        self.wram = wram
        self.size = size
        self.write = write

    def arm(self, proc: Process) -> None:
        if self.instructions:
            proc.blocked_on = "compute"
            self.runner.pipeline.compute(proc, self.instructions, self._issue, proc)
        else:
            proc.blocked_on = "DMA"
            self.runner.dma.submit(self.size, self.write, self._complete, proc)

    def _issue(self, proc: Process) -> None:
        if proc.done:
            return
        proc.blocked_on = "DMA"
        self.runner.dma.submit(self.size, self.write, self._complete, proc)

    def _complete(self, proc: Process) -> None:
        if proc.done:
            return
        dpu = self.runner.dpu
        w = self.wram
        try:
            if self.write:
                dpu.mram.write(self.mram, dpu.wram[w : w + self.size].copy())
            else:
                dpu.mram.read_into(self.mram, dpu.wram[w : w + self.size])
        except BaseException as exc:
            proc.throw(exc)
            return
        proc.resume(None)


class SpinCommand(Command):
    """Busy-poll WRAM: the tasklet keeps its issue slot until a watched range is written.

    The poll loop's instructions are not stepped one by one: the tasklet sits in the pipeline
    as a spinner (slowing its neighbours like a real polling loop) and is resumed when the host
    (or a FIFO operation) writes any of ``ranges``.
    """

    __slots__ = ("label", "mark", "proc", "ranges", "runner")

    def __init__(self, runner: TaskletRunner, ranges: list[tuple[int, int]], label: str) -> None:
        self.runner = runner
        self.ranges = ranges
        self.label = label
        self.mark = 0.0
        self.proc: Process  # set by arm(); only armed commands are in Dpu.spinners

    def arm(self, proc: Process) -> None:
        proc.blocked_on = self.label
        self.proc = proc
        self.mark = self.runner.pipeline.spin()
        self.runner.spinners.append(self)

    def watches(self, start: int, end: int) -> bool:
        """True if ``[start, end)`` overlaps a watched range."""
        return any(lo < end and start < hi for lo, hi in self.ranges)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _place(frame: FrameType, line: int) -> str:
    return f"at {os.path.basename(frame.f_code.co_filename)}:{line} in {frame.f_code.co_name}"


def traceback_location(exc: BaseException) -> str:
    """``at FILE:LINE in FUNCTION`` of the innermost frame outside aiopim that ``exc`` went
    through (the kernel's line that faulted), or ``""`` if there is none."""
    user = [
        (frame, line)
        for frame, line in traceback.walk_tb(exc.__traceback__)
        if not frame.f_code.co_filename.startswith(_PACKAGE_DIR)
    ]
    return _place(*user[-1]) if user else ""


def coroutine_location(coro: Any, *, call: bool = True) -> str:
    """``at FILE:LINE in FUNCTION`` of the innermost frame of a suspended tasklet coroutine
    outside aiopim, with (``call``) the runtime call it waits in (``, waiting in mram_read``)."""
    frames: list[FrameType] = []
    obj = coro
    while obj is not None:
        frame = getattr(obj, "cr_frame", None) or getattr(obj, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        obj = getattr(obj, "cr_await", None) or getattr(obj, "gi_yieldfrom", None)
    if not frames:
        return "(finished)"
    user = [i for i, f in enumerate(frames) if not f.f_code.co_filename.startswith(_PACKAGE_DIR)]
    at = user[-1] if user else 0
    text = _place(frames[at], frames[at].f_lineno)
    inner = [f.f_code.co_name for f in frames[at + 1 :] if f.f_code.co_name != "__await__"]
    return f"{text}, waiting in {inner[0]}" if inner and call else text


class TaskletRunner(DpuRunner):
    """The tasklets of a Python kernel on one DPU, with its pipeline and DMA engine."""

    watches_wram = True  # host writes wake the tasklets polling them

    def __init__(self, dpu: Dpu) -> None:
        super().__init__(dpu)
        self.kernel = dpu.kernel
        #: the DPU's events: its tasklets only meet the rest of the machine through kernel
        #: events (host transfers, launches), so they are kept apart and merged in exact order
        self.queue = LocalQueue(dpu.kernel)
        self.pipeline = Pipeline(self.queue, dpu.chip.cycle_ps, dpu.actor)
        self.dma = DmaEngine(self.queue, dpu.chip, dpu.actor)
        self.tasklets: list[Process] = []
        self._live = 0
        #: tasklets busy-polling WRAM, resumed by :meth:`wram_written`
        self.spinners: list[SpinCommand] = []

    def spawn(self, tasklet_id: int, coro: Coroutine[Any, Any, Any]) -> Process:
        """Start one tasklet coroutine on this DPU."""
        dpu = self.dpu
        proc = Process(
            self.queue,
            coro,
            dpu.actor | tasklet_id,
            f"DPU {dpu.name} tasklet {tasklet_id}",
            self._tasklet_exit,
        )
        self.queue.call_soon(proc.resume, None, proc.actor)
        self.tasklets.append(proc)
        self._live += 1
        return proc

    def live_threads(self) -> int:
        return self._live

    def location(self) -> list[tuple[int, str]]:
        return [
            (proc.actor & 31, coroutine_location(proc.coro))
            for proc in self.tasklets
            if not proc.done
        ]

    def _tasklet_exit(self, proc: Process, exc: BaseException | None) -> None:
        dpu = self.dpu
        if not dpu.running:
            return
        self._live -= 1
        if exc is not None:
            tid = proc.actor & 31
            where = f"DPU {dpu.name} tasklet {tid} {traceback_location(exc)}".rstrip()
            if isinstance(exc, DpuFault):
                dpu.stop_in_fault(exc.reason, exc.code, tid, exc, where)
            else:
                reason = f"unhandled {type(exc).__name__} in tasklet {tid}: {exc}"
                dpu.stop_in_fault(reason, None, tid, exc, where)
            return
        if self._live == 0:
            dpu.run_ended()

    def halt(self) -> None:
        self.pipeline.reset()
        self.spinners = []
        for proc in self.tasklets:
            if not proc.done:
                proc.done = True
                proc.coro.close()
        self.tasklets = []
        self._live = 0

    def wram_written(self, start: int, length: int) -> None:
        """Resume the tasklets polling ``[start, start+length)``."""
        if not self.spinners:
            return
        end = start + length
        keep: list[SpinCommand] = []
        group: list[tuple[int, int, Callable[[Any], None], Any]] = []
        q = self.queue
        for spin in self.spinners:  # a spinner's tasklet is parked: it cannot have exited
            if spin.watches(start, end):
                self.pipeline.unspin(spin.mark)
                proc = spin.proc
                proc.blocked_on = None
                q.call_soon_in(group, proc.resume, None, proc.actor)
            else:
                keep.append(spin)
        self.spinners = keep
        q.post_group(group)

    def blocked(self) -> list[str]:
        return [
            f"{p.name} waiting on {p.blocked_on or 'something'} "
            f"{coroutine_location(p.coro, call=False)}"
            for p in self.tasklets
            if not p.done
        ]
