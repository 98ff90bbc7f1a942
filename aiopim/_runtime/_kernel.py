"""The virtual-time kernel: one integer clock, a deterministic event heap, kernel processes.

Events are ordered by ``(time, priority, actor, sequence)``. ``actor`` is a stable identity
assigned by the emulator (rank, DPU, tasklet), so ties never depend on event-loop arrival
order. In exploration mode the actor key is replaced by a seeded random permutation.
Kernel processes (DPU tasklets) are coroutines stepped here directly, never by asyncio/trio.
The events of one DPU can be kept in a :class:`LocalQueue` of their own, merged into this order
exactly (the kernel's heap then holds one entry per DPU instead of all of its events).
"""

from __future__ import annotations

import gc
import random
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from heapq import heappop, heappush
from typing import Any

INFINITY = 1 << 127
PS_PER_SECOND = 10**12


def seconds_to_ps(seconds: float) -> int:
    """Host seconds as kernel picoseconds: the nearest picosecond (the one conversion used
    for every host duration and deadline, on both backends)."""
    return round(seconds * 1e12)


def ps_to_seconds(ps: int) -> float:
    """Kernel picoseconds as host seconds."""
    return ps / 1e12


#: Priorities inside one instant: lower runs first.
PRIO_NORMAL = 1
PRIO_LATE = 2

Callback = Callable[[Any], None]
# [time, priority, tiebreak, seq, callback, arg]; callback None = cancelled; a seventh item
# marks an event that touches no running instruction-set DPU before that time (see Delay)
Entry = list[Any]


class Kernel:
    """Owns virtual time and runs emulated events in a deterministic order."""

    def __init__(self, *, explore_seed: int | None = None) -> None:
        self.now = 0
        self._heap: list[Entry] = []
        self._seq = 0
        #: sequence numbers of the proxies of local queues: after every event's
        self._proxy_seq = 1 << 62
        self._explore: random.Random | None = (
            random.Random(explore_seed) if explore_seed is not None else None
        )
        #: host waiters resolved but not yet delivered to the event loop, in kernel order
        self.host_pending: deque[HostWaiter] = deque()
        #: live host waiters (for deadlock reports)
        self.host_waiting: dict[int, HostWaiter] = {}
        self._waiter_ids = 0
        #: callables describing blocked emulated actors (for deadlock reports)
        self.blocked_reporters: list[Callable[[], list[str]]] = []
        self.events_processed = 0
        #: per-kernel state of the DPU engines (the instruction-set scheduler), dropped with it
        self.services: dict[str, Any] = {}
        #: set by a process that failed with an exception the emulator could not route
        self.crashed: BaseException | None = None
        #: the time bound of the current :meth:`run`: host tasks act at an event or at it
        self.limit = INFINITY

    # -- scheduling ---------------------------------------
    @property
    def exploring(self) -> bool:
        """Whether simultaneous events are permuted (each scheduled event draws a random key)."""
        return self._explore is not None

    def call_at(
        self, when: int, fn: Callback, arg: Any = None, actor: int = 0, priority: int = PRIO_NORMAL
    ) -> Entry:
        """Run ``fn(arg)`` at virtual time ``when`` (picoseconds); returns a cancellable entry."""
        if when < self.now:
            when = self.now
        self._seq += 1
        if self._explore is not None:
            # a fresh random key per event: simultaneous events are permuted
            actor = self._explore.getrandbits(62)
        entry: Entry = [when, priority, actor, self._seq, fn, arg]
        heappush(self._heap, entry)
        return entry

    def call_soon(
        self, fn: Callback, arg: Any = None, actor: int = 0, priority: int = PRIO_NORMAL
    ) -> Entry:
        """Run ``fn(arg)`` at the current virtual time, after what is already due."""
        self._seq += 1
        if self._explore is not None:
            actor = self._explore.getrandbits(62)
        entry: Entry = [self.now, priority, actor, self._seq, fn, arg]
        heappush(self._heap, entry)
        return entry

    def is_last(self, entry: Entry) -> bool:
        """True if ``entry`` is the last one scheduled (outside exploration mode): scheduling
        the same call again at the same time would give an entry of the same rank."""
        return entry[3] == self._seq and self._explore is None

    @staticmethod
    def cancel(entry: Entry) -> None:
        """Cancel a scheduled entry (no effect if it already ran)."""
        entry[4] = None

    def _first_live(self) -> Entry | None:
        """The earliest live entry (cancelled ones and stale queue proxies at the head of the
        heap are dropped), or None."""
        heap = self._heap
        while heap:
            entry = heap[0]
            if entry[4] is None:
                heappop(heap)
                continue
            queue = entry[5]
            if type(queue) is LocalQueue and not queue.settle(entry):
                continue
            return entry
        return None

    def next_event_time(self) -> int | None:
        """Time of the earliest live event, or None."""
        entry = self._first_live()
        return None if entry is None else int(entry[0])

    def next_synced_event_time(self) -> int | None:
        """:meth:`next_event_time`, skipping the events that touch no running instruction-set
        DPU before a later time (see :class:`Delay`), but no further than that time."""
        heap = self._heap
        skipped: list[Entry] = []
        bound: int | None = None
        try:
            while (entry := self._first_live()) is not None and len(entry) > 6:
                skipped.append(heappop(heap))
                bound = entry[6] if bound is None else min(bound, entry[6])
            if entry is None:
                return bound
            return int(entry[0]) if bound is None else min(int(entry[0]), bound)
        finally:
            for entry in skipped:
                heappush(heap, entry)

    def run(self, limit: int) -> None:
        """Process events due at or before ``limit`` until a host task has been woken.

        The cyclic garbage collector is paused meanwhile: events create next to no cyclic
        garbage, but with many DPUs every pending event's objects live long enough to reach
        the oldest generation, and the full collections that follow cost 10-20 % of a run.
        """
        heap = self._heap
        pending = self.host_pending
        self.limit = limit
        n = 0
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            while heap and not pending:
                entry = heap[0]
                if entry[0] > limit:
                    break
                heappop(heap)
                fn = entry[4]
                if fn is None:
                    continue
                arg = entry[5]
                if type(arg) is LocalQueue:  # a queue's proxy: its events set the time
                    arg._drain()
                    continue
                self.now = entry[0]
                n += 1
                fn(arg)
        finally:
            self.events_processed += n
            if collecting:
                gc.enable()

    # -- processes ---------------------------------------
    def spawn(
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        actor: int,
        name: str,
        on_exit: Callable[[Process, BaseException | None], None] | None = None,
    ) -> Process:
        """Start a kernel process at the current time (stepped by the kernel, not the loop)."""
        proc = Process(self, coro, actor, name, on_exit)
        self.call_soon(proc.resume, None, actor)
        return proc

    # -- host waiters ---------------------------------------
    def new_waiter(
        self, description: str | Callable[[], str], *, daemon: bool = False
    ) -> HostWaiter:
        """A one-shot result a host task can await (see the bridge)."""
        self._waiter_ids += 1
        w = HostWaiter(self, self._waiter_ids, description, daemon)
        self.host_waiting[w.ident] = w
        return w

    def describe_host_waits(self) -> list[str]:
        """Human-readable list of what the host tasks wait for."""
        return [
            f"host task waiting for {w.describe()}"
            for w in self.host_waiting.values()
            if not w.daemon
        ]

    def describe_blocked(self) -> list[str]:
        """Human-readable list of everything that is waiting (host tasks and actors)."""
        lines = self.describe_host_waits()
        for reporter in self.blocked_reporters:
            lines.extend(reporter())
        return lines


class LocalQueue:
    """The events of one group of actors (a DPU) in a heap of their own.

    The group is represented in the kernel's heap by one proxy entry with the time, priority
    and actor of its earliest event; when the proxy is due, the group's events run while each
    one precedes the kernel's earliest entry. The merge is exact: every event runs at the same
    place of the ``(time, priority, actor, sequence)`` order as if it were in the kernel's heap
    (sequence numbers and exploration keys come from the kernel), as long as no event outside
    the group has one of its actors. Only the kernel's heap stays small, and a group's
    simultaneous events run together.

    Besides its heap the queue has one *slot*: an entry its owner (the DPU's pipeline) moves
    in place instead of cancelling it and scheduling another (see :meth:`set_slot`).
    """

    __slots__ = ("_draining", "_heap", "_key", "_proxy", "kernel", "slot")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._heap: list[Entry] = []
        #: the entry standing for this queue in the kernel's heap (None while draining or empty)
        self._proxy: Entry | None = None
        #: the event the proxy stands for (a copy of its key if it is the slot)
        self._key: list[Any] | None = None
        #: the movable entry (not in the heap), or None
        self.slot: Entry | None = None
        self._draining = False

    @property
    def now(self) -> int:
        """The kernel's virtual time."""
        return self.kernel.now

    @property
    def crashed(self) -> BaseException | None:
        """The kernel's unrouted failure (see :attr:`Kernel.crashed`)."""
        return self.kernel.crashed

    @crashed.setter
    def crashed(self, exc: BaseException | None) -> None:
        self.kernel.crashed = exc

    def call_at(
        self, when: int, fn: Callback, arg: Any = None, actor: int = 0, priority: int = PRIO_NORMAL
    ) -> Entry:
        """:meth:`Kernel.call_at` for an event of this group."""
        k = self.kernel
        if when < k.now:
            when = k.now
        k._seq += 1
        if k._explore is not None:
            actor = k._explore.getrandbits(62)
        entry: Entry = [when, priority, actor, k._seq, fn, arg]
        heappush(self._heap, entry)
        if not self._draining:
            key = self._key
            if key is None or entry < key:
                self._post(entry)
        return entry

    def call_soon(
        self, fn: Callback, arg: Any = None, actor: int = 0, priority: int = PRIO_NORMAL
    ) -> Entry:
        """:meth:`Kernel.call_soon` for an event of this group."""
        k = self.kernel
        k._seq += 1
        if k._explore is not None:
            actor = k._explore.getrandbits(62)
        entry: Entry = [k.now, priority, actor, k._seq, fn, arg]
        heappush(self._heap, entry)
        if not self._draining:
            key = self._key
            if key is None or entry < key:
                self._post(entry)
        return entry

    def is_last(self, entry: Entry) -> bool:
        """:meth:`Kernel.is_last`."""
        return self.kernel.is_last(entry)

    def call_soon_in(
        self, group: list[tuple[int, int, Callback, Any]], fn: Callback, arg: Any, actor: int
    ) -> None:
        """:meth:`call_soon`, its entry kept in ``group`` until :meth:`post_group` puts the
        group's calls in the heap as one entry (without exploration; with it, at once).

        Each call gets its sequence number here, as :meth:`call_soon` would give it, and runs
        at its own place among the other events: only heap operations and entries are saved.
        """
        k = self.kernel
        if k.exploring:
            self.call_soon(fn, arg, actor)
            return
        k._seq += 1
        group.append((actor, k._seq, fn, arg))

    def post_group(self, group: list[tuple[int, int, Callback, Any]]) -> None:
        """Schedule the calls of ``group`` (see :meth:`call_soon_in`) at the current time.

        The group's entry carries the key of its first call (smallest actor, then sequence
        number) and is put back with the key of the next one whenever another event comes
        first."""
        if not group:
            return
        if len(group) == 1:
            actor, seq, fn, arg = group[0]
            entry: Entry = [self.kernel.now, PRIO_NORMAL, actor, seq, fn, arg]
        else:
            # popped from the end: the smallest (actor, sequence) first; both unique per call
            group.sort(reverse=True)
            actor, seq = group[-1][:2]
            entry = [self.kernel.now, PRIO_NORMAL, actor, seq, self._run_group, group]
        heappush(self._heap, entry)
        if not self._draining:
            key = self._key
            if key is None or entry < key:
                self._post(entry)

    def _run_group(self, group: list[tuple[int, int, Callback, Any]]) -> None:
        """Run the calls of a group entry (see :meth:`post_group`; its first call is due) while
        no other event precedes the next one; put the rest back with the next call's key."""
        k = self.kernel
        now = k.now
        _, _, fn, arg = group.pop()
        fn(arg)
        if not group:
            return
        heap = self._heap
        kheap = k._heap
        pending = k.host_pending
        n = 0
        # the next call goes on unless the host waits or an entry's key comes before its own
        # (every other pending event is at ``now`` or later)
        while group:
            actor, seq, fn, arg = group[-1]
            key = [now, PRIO_NORMAL, actor, seq]
            slot = self.slot
            if (
                pending
                or (heap and heap[0] < key)
                or (slot is not None and slot < key)
                or (kheap and kheap[0] < key)
            ):
                break
            group.pop()
            n += 1
            fn(arg)
        k.events_processed += n
        if group:
            actor, seq = group[-1][:2]
            heappush(heap, [now, PRIO_NORMAL, actor, seq, self._run_group, group])

    def set_slot(self, entry: Entry | None) -> None:
        """Make ``entry`` the slot (None: empty it).

        The owner may change the slot entry's time, actor and sequence number in place before
        calling this again (never while it is due: the queue empties the slot before running
        it). The sequence number must be fresh from the kernel (``kernel._seq``), and in
        exploration mode the actor a fresh random key, as :meth:`call_at` would make them.
        """
        self.slot = entry
        if entry is not None and not self._draining:
            key = self._key
            if key is None or entry < key:
                self._post(entry)

    def _post(self, head: Entry) -> None:
        """Stand for this queue in the kernel's heap with the time, priority and actor of
        ``head``; the proxy's own sequence number sorts after every event's, so a cancelled
        proxy never ties with a live one."""
        proxy = self._proxy
        if proxy is not None:
            proxy[4] = None
        k = self.kernel
        k._proxy_seq += 1
        proxy = [head[0], head[1], head[2], k._proxy_seq, self._drain, self]
        heappush(k._heap, proxy)
        self._proxy = proxy
        # the key of a heap entry never changes; the slot's does
        self._key = head if head is not self.slot else head[:4]

    def _first(self) -> Entry | None:
        """The earliest live event (cancelled ones at the head of the heap are dropped)."""
        heap = self._heap
        while heap and heap[0][4] is None:
            heappop(heap)
        slot = self.slot
        if heap:
            head = heap[0]
            return slot if slot is not None and slot < head else head
        return slot

    def settle(self, proxy: Entry) -> bool:
        """True if ``proxy`` carries the time of this queue's earliest live event; otherwise
        replace it (cancelled events were at the head, or the slot moved)."""
        first = self._first()
        if proxy is self._proxy and first is not None and first[0] == proxy[0]:
            return True
        proxy[4] = None
        if proxy is self._proxy:
            self._proxy = self._key = None
            if first is not None:
                self._post(first)
        return False

    def _drain(self, _: Any = None) -> None:
        """Run this queue's events while they come before everything else (the proxy's event:
        the kernel runs it without setting its time, which only the queue's events set)."""
        self._proxy = self._key = None
        self._draining = True
        k = self.kernel
        heap = self._heap
        kheap = k._heap
        pending = k.host_pending
        limit = k.limit
        n = 0
        try:
            while True:
                slot = self.slot
                if heap:
                    entry = heap[0]
                    if slot is not None and slot < entry:
                        entry = slot
                    elif entry[4] is None:
                        heappop(heap)
                        continue
                elif slot is not None:
                    entry = slot
                else:
                    break
                if entry[0] > limit or pending or (kheap and kheap[0] < entry):
                    break
                if entry is slot:
                    self.slot = None
                else:
                    heappop(heap)
                k.now = entry[0]
                n += 1
                entry[4](entry[5])
        finally:
            self._draining = False
            k.events_processed += n
            # _first() and _post(), inline
            while heap and heap[0][4] is None:
                heappop(heap)
            slot = self.slot
            if heap and (slot is None or heap[0] < slot):
                first = heap[0]
                key: Entry | None = first
            elif slot is not None:
                first = slot
                key = slot[:4]
            else:
                key = None
            if key is not None and self._proxy is None:
                k._proxy_seq += 1
                proxy = [first[0], first[1], first[2], k._proxy_seq, self._drain, self]
                heappush(kheap, proxy)
                self._proxy = proxy
                self._key = key


class HostWaiter:
    """A one-shot value or error that a host coroutine awaits through the bridge."""

    __slots__ = ("_kernel", "daemon", "description", "error", "handle", "ident", "state", "value")

    PENDING = 0
    RESOLVED = 1
    DELIVERED = 2
    ABANDONED = 3

    def __init__(
        self, kernel: Kernel, ident: int, description: str | Callable[[], str], daemon: bool
    ) -> None:
        self._kernel = kernel
        self.ident = ident
        self.description = description
        self.daemon = daemon
        self.state = HostWaiter.PENDING
        self.value: Any = None
        self.error: BaseException | None = None
        #: backend-specific handle set by the bridge while a task awaits (future / trio task)
        self.handle: Any = None

    def describe(self) -> str:
        """What the waiting host task waits for."""
        d = self.description
        return d if isinstance(d, str) else d()

    def resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        """Complete the waiter; the host task is woken when the event loop is next idle."""
        if self.state != HostWaiter.PENDING:
            return
        self.value = value
        self.error = error
        self.state = HostWaiter.RESOLVED
        self._kernel.host_waiting.pop(self.ident, None)
        self._kernel.host_pending.append(self)

    def abandon(self) -> None:
        """The awaiting host task was cancelled: drop the result."""
        if self.state in (HostWaiter.PENDING, HostWaiter.RESOLVED):
            self.state = HostWaiter.ABANDONED
            self._kernel.host_waiting.pop(self.ident, None)

    @property
    def pending(self) -> bool:
        """True until the waiter is resolved or abandoned."""
        return self.state == HostWaiter.PENDING


class Command:
    """Base of objects a kernel process awaits; ``arm`` decides when it resumes."""

    __slots__ = ()

    def arm(self, proc: Process) -> None:
        raise NotImplementedError

    def __await__(self) -> Generator[Command, Any, Any]:
        return (yield self)


class Delay(Command):
    """Resume the awaiting process after ``ps`` picoseconds.

    ``until``: a promise that, from its resumption to that later time, the process touches no
    running instruction-set DPU other than through writes scheduled into its run beforehand
    (``IsaRunner.write_at``): the DPUs need not be brought to the resumption's time, only to
    ``until``."""

    __slots__ = ("ps", "until")

    def __init__(self, ps: int, until: int | None = None) -> None:
        self.ps = ps
        self.until = until

    def arm(self, proc: Process) -> None:
        k = proc.kernel
        entry = k.call_at(k.now + self.ps, proc.resume, None, proc.actor)
        if self.until is not None:
            entry.append(self.until)


class WaitQueue(Command):
    """FIFO queue of parked processes; ``await queue`` parks the caller."""

    __slots__ = ("label", "waiters")

    def __init__(self, label: str) -> None:
        self.label = label
        self.waiters: deque[Process] = deque()

    def arm(self, proc: Process) -> None:
        proc.blocked_on = self.label
        self.waiters.append(proc)

    def wake_one(self, value: Any = None) -> bool:
        """Resume the longest-waiting process (at the current time); False if none."""
        if not self.waiters:
            return False
        proc = self.waiters.popleft()
        proc.blocked_on = None
        proc.kernel.call_soon(proc.resume, value, proc.actor)
        return True

    def wake_all(self, value: Any = None) -> int:
        """Resume every waiting process in FIFO order; returns how many."""
        waiters = self.waiters
        n = len(waiters)
        if n > 1:
            q = waiters[0].kernel
            if type(q) is LocalQueue and all(proc.kernel is q for proc in waiters):
                # the processes of one DPU: one group entry
                group: list[tuple[int, int, Callback, Any]] = []
                for proc in waiters:
                    proc.blocked_on = None
                    q.call_soon_in(group, proc.resume, value, proc.actor)
                waiters.clear()
                q.post_group(group)
                return n
        while waiters:  # wake_one, inline
            proc = waiters.popleft()
            proc.blocked_on = None
            proc.kernel.call_soon(proc.resume, value, proc.actor)
        return n


class Process:
    """A coroutine stepped by the kernel; it awaits :class:`Command` objects."""

    __slots__ = ("actor", "blocked_on", "coro", "done", "kernel", "name", "on_exit")

    def __init__(
        self,
        kernel: Kernel | LocalQueue,
        coro: Coroutine[Any, Any, Any],
        actor: int,
        name: str,
        on_exit: Callable[[Process, BaseException | None], None] | None,
    ) -> None:
        self.kernel = kernel
        self.coro = coro
        self.actor = actor
        self.name = name
        self.on_exit = on_exit
        self.blocked_on: str | None = None
        self.done = False

    def resume(self, value: Any) -> None:
        """Step the coroutine with ``value`` and arm whatever it awaits next."""
        if self.done:
            return
        try:
            cmd = self.coro.send(value)
        except StopIteration:
            self._exit(None)
            return
        except BaseException as exc:  # a fault of the emulated program
            self._exit(exc)
            return
        try:
            cmd.arm(self)
        except AttributeError:
            self.coro.close()
            self._exit(
                TypeError(
                    f"{self.name} awaited {cmd!r}; a DPU program may only await aiopim "
                    "runtime operations (DMA, barriers, ...), not host/event-loop objects"
                )
            )

    def throw(self, exc: BaseException) -> None:
        """Raise ``exc`` inside the coroutine at its current await."""
        if self.done:
            return
        try:
            cmd = self.coro.throw(exc)
        except StopIteration:
            self._exit(None)
            return
        except BaseException as err:
            self._exit(err)
            return
        cmd.arm(self)

    def _exit(self, exc: BaseException | None) -> None:
        self.done = True
        if self.on_exit is not None:
            self.on_exit(self, exc)
        elif exc is not None:
            self.kernel.crashed = exc
