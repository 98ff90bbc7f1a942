"""Per-DPU event queues (``LocalQueue``) run every event exactly where the kernel's own heap
would have run it.

Each generated program is run twice: once with every event in the kernel's heap, and once
with the events of each actor group in a local queue of its own (a DPU's), the group's movable
timer in the queue's slot instead of being cancelled and scheduled again. Both runs must log
the same events in the same order at the same times, and stop for the host at the same points
(a resolved host waiter, the bound of ``run``), with or without exploration keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pytest
import wram_fifo_keysum as keysum
from hypothesis import given, settings
from hypothesis import strategies as st

import aiopim
from aiopim._runtime._kernel import PRIO_LATE, PRIO_NORMAL, Entry, Kernel, LocalQueue

#: actors of group g are GROUP_ACTORS * (g + 1) + 0..7; kernel events use 1..7
GROUP_ACTORS = 1 << 8


@dataclass(frozen=True)
class Spec:
    """One event of a generated program."""

    parent: int  # the event that schedules it (-1: scheduled before the run)
    delay: int  # after its parent's time
    group: int  # -1: a kernel event
    actor: int  # 0..7 within its group
    priority: int
    cancel: int  # an event this one cancels when it runs (-1: none)
    timer: int  # >= 0: this event moves its group's timer to now + timer
    wakes_host: bool  # resolves a host waiter (the kernel's run returns after it)


@dataclass
class Program:
    specs: list[Spec]
    groups: int
    limits: list[int]
    explore: int | None
    log: list[tuple[Any, ...]] = field(default_factory=list)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    groups = draw(st.integers(1, 3))
    n = draw(st.integers(1, 40))
    specs = []
    for i in range(n):
        group = draw(st.integers(-1, groups - 1))
        specs.append(
            Spec(
                parent=draw(st.integers(-1, i - 1)),
                delay=draw(st.sampled_from([0, 0, 1, 2, 5])),
                group=group,
                actor=draw(st.integers(0, 7)),
                priority=draw(st.sampled_from([PRIO_NORMAL, PRIO_NORMAL, PRIO_LATE])),
                cancel=draw(st.integers(-1, n - 1)),
                timer=draw(st.sampled_from([-1, -1, 0, 1, 3])) if group >= 0 else -1,
                wakes_host=draw(st.booleans()) and draw(st.booleans()),
            )
        )
    limits = sorted(draw(st.lists(st.integers(0, 20), max_size=3)))
    explore = draw(st.one_of(st.none(), st.integers(0, 2**16)))
    return Program(specs, groups, limits, explore)


def actor_of(spec: Spec) -> int:
    return spec.actor + 1 if spec.group < 0 else GROUP_ACTORS * (spec.group + 1) + spec.actor


class Runner:
    """Runs a program on a kernel, with or without local queues."""

    def __init__(self, prog: Program, local: bool) -> None:
        self.prog = prog
        self.k = Kernel(explore_seed=prog.explore)
        self.local = local
        self.queues = [LocalQueue(self.k) for _ in range(prog.groups)]
        self.entries: dict[int, Entry] = {}
        self.children: dict[int, list[int]] = {}
        for i, s in enumerate(prog.specs):
            self.children.setdefault(s.parent, []).append(i)
        # the movable timer of each group: one entry per group (local: the queue's slot)
        self.timers: list[Entry | None] = [None] * prog.groups
        self.log: list[tuple[Any, ...]] = []

    def schedule(self, i: int) -> None:
        s = self.prog.specs[i]
        when = self.k.now + s.delay
        if s.group >= 0 and self.local:
            q = self.queues[s.group]
            self.entries[i] = q.call_at(when, self.fire, i, actor_of(s), s.priority)
        else:
            self.entries[i] = self.k.call_at(when, self.fire, i, actor_of(s), s.priority)

    def move_timer(self, group: int, delay: int) -> None:
        actor = GROUP_ACTORS * (group + 1)  # the group's first actor, as a DPU's pipeline
        k = self.k
        if not self.local:
            old = self.timers[group]
            if old is not None:
                Kernel.cancel(old)
            self.timers[group] = k.call_at(k.now + delay, self.timer_fired, group, actor)
            return
        slot = self.timers[group]
        if slot is None:
            slot = self.timers[group] = [0, PRIO_NORMAL, actor, 0, self.timer_fired, group]
        slot[0] = k.now + delay
        k._seq += 1
        slot[3] = k._seq
        if k._explore is not None:
            slot[2] = k._explore.getrandbits(62)
        self.queues[group].set_slot(slot)

    def timer_fired(self, group: int) -> None:
        if not self.local:
            self.timers[group] = None
        self.log.append(("timer", group, self.k.now))

    def fire(self, i: int) -> None:
        s = self.prog.specs[i]
        self.log.append(("event", i, self.k.now))
        if s.cancel >= 0 and s.cancel in self.entries:
            Kernel.cancel(self.entries[s.cancel])
        if s.timer >= 0:
            self.move_timer(s.group, s.timer)
        for child in self.children.get(i, []):
            self.schedule(child)
        if s.wakes_host:
            self.k.new_waiter("host").resolve()

    def run(self) -> list[tuple[Any, ...]]:
        k = self.k
        for i in self.children.get(-1, []):
            self.schedule(i)
        bounds = [*self.prog.limits, 1 << 62]
        for limit in bounds:
            while True:
                k.run(limit)
                self.log.append(("stop", k.now, len(k.host_pending), k.next_event_time()))
                if not k.host_pending:
                    break
                k.host_pending.clear()
            if limit > k.now and limit < 1 << 62:
                k.now = limit
        self.log.append(("events", k.events_processed))
        return self.log


@settings(max_examples=30, deadline=None)
@given(programs())
def test_local_queues_keep_the_kernel_order(prog: Program) -> None:
    assert Runner(prog, local=True).run() == Runner(prog, local=False).run()


@pytest.mark.long
@settings(max_examples=500, deadline=None)
@given(programs())
def test_local_queues_keep_the_kernel_order_long(prog: Program) -> None:
    assert Runner(prog, local=True).run() == Runner(prog, local=False).run()


def test_a_queue_event_runs_between_kernel_events_by_key() -> None:
    """A DPU's events interleave with kernel events by (time, priority, actor, sequence)."""
    k = Kernel()
    q = LocalQueue(k)
    log: list[str] = []
    k.call_at(5, lambda _: log.append("kernel late"), None, actor=1, priority=PRIO_LATE)
    q.call_at(5, lambda _: log.append("dpu"), None, actor=GROUP_ACTORS)
    k.call_at(5, lambda _: log.append("kernel actor 1"), None, actor=1)
    q.call_at(3, lambda _: log.append("dpu first"), None, actor=GROUP_ACTORS + 1)
    k.call_at(5, lambda _: log.append("kernel big actor"), None, actor=GROUP_ACTORS + 50)
    k.run(1 << 62)
    assert log == ["dpu first", "kernel actor 1", "dpu", "kernel big actor", "kernel late"]
    assert k.events_processed == 5
    assert k.next_event_time() is None


#: (ranks, DPUs per rank, tasklets, mode) -> (virtual time, kernel events, trace digest), as
#: measured with every DPU event in the kernel's heap (before the per-DPU queues)
KEYSUM_TRACES = {
    (2, 4, 16, "all"): (0.006697609614, 84784, "8e9e69e3332fc926bb47"),
    (1, 3, 16, "each"): (0.004322205385, 14897, "6eaefae042907f25e280"),
    (3, 2, 4, "all"): (0.01290810171, 38343, "42a1278af91c272a4246"),
}


@pytest.mark.parametrize("case", list(KEYSUM_TRACES), ids=lambda c: "-".join(map(str, c)))
def test_keysum_trace_is_unchanged_on_both_backends(case: tuple[int, int, int, str]) -> None:
    """Python kernels on several ranks: the whole trace (jobs, FIFO pointers the host read,
    DPU runs), the virtual time and the number of kernel events are those of the kernel-heap
    order, on asyncio and trio."""
    ranks, per_rank, tasklets, mode = case
    for backend in ("asyncio", "trio"):
        emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=per_rank))
        r = emu.run(keysum.host, ranks, 0, tasklets, mode, 11, backend=backend)
        assert r["wrong"] == [] and r["complete"]
        assert emu.recorder is not None
        digest = hashlib.sha256(emu.recorder.to_jsonl().encode()).hexdigest()[:20]
        assert (r["virtual_time_s"], emu.kernel.events_processed, digest) == KEYSUM_TRACES[case]
