"""Kelonia's actor-driven model: DPUs that keep running and answer messages.

An actor is one DPU of an :class:`ActorDpuAssembly`. Its program loops over an input WRAM FIFO
(the *inbox*) and pushes one reply per message into an output WRAM FIFO (the *outbox*), in
message order, until the host clears its ``active`` flag — ``process_inputs_all_tasklets`` is
exactly that loop. A DIDL function gives the message (its ``in`` parameters) and the reply (its
``out`` parameters): their mailbox words, in declaration order, are one FIFO element.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np

from .. import DpuError, DpuErrorCode, DpuProgram, DpuSet, timing
from ..host import InputFifo, OutputFifo
from ._coreapi import Dpu
from ._didl import MEMORY_COPY, Function, Param
from ._errors import DpuFoundryError, DpuLowLevelError
from ._foundry import BasicDpuAssembly, DpuDeviceDescription, _low_level, check_nr_dpus
from ._interface import StubbedInterface, bind_arguments, from_words, result_value, to_words

#: Bytes of a mailbox word (a FIFO element carries whole words)
WORD = 4
#: A message: the ``in`` values in declaration order, or a mapping by snake_case name
Message = Sequence[Any] | Mapping[str, Any]


@dataclass(frozen=True)
class Reply:
    """An actor's answer: ``index`` is the message's number among those sent to ``actor``
    (0 for the first); ``value`` is what a worker call would return."""

    actor: int
    index: int
    value: Any


def _words(params: Sequence[Param]) -> int:
    return sum(p.count * p.words_per_element for p in params)


@dataclass(frozen=True)
class ActorDpuAssemblyLine:
    """``nr_dpus`` actors of ``device`` answering ``task`` through the program's input FIFO
    ``inbox`` and output FIFO ``outbox``, running while its ``__host`` flag ``active`` is set."""

    nr_dpus: int
    device: DpuDeviceDescription
    task: str
    inbox: str = "inbox"
    outbox: str = "outbox"
    active: str = "active"

    @classmethod
    def using_dpu(
        cls, device: DpuDeviceDescription, task: enum.Enum | str, **names: str
    ) -> ActorDpuAssemblyLine:
        """One actor."""
        return cls.using_dpus(1, device, task, **names)

    @classmethod
    def using_dpus(
        cls, nr_dpus: int, device: DpuDeviceDescription, task: enum.Enum | str, **names: str
    ) -> ActorDpuAssemblyLine:
        """``nr_dpus`` actors (``names``: ``inbox=``, ``outbox=``, ``active=``)."""
        name = device.interface.task_name(task)
        if name == MEMORY_COPY:
            raise DpuFoundryError("actors answer a DIDL function, not memory_copy")
        f = device.interface.didl.function(name)
        mram = [m.param for m in f.mappings if m.kind == "dram"]
        if mram:
            raise DpuFoundryError(
                f"{f.name} maps {', '.join(map(repr, mram))} to MRAM; an actor's messages and "
                "replies travel in FIFO elements only (copy MRAM data before start())"
            )
        return cls(check_nr_dpus(nr_dpus), device, name, **names)

    @property
    def function(self) -> Function:
        """The DIDL function whose calls are the messages."""
        return self.device.interface.didl.function(self.task)

    def check(self, program: DpuProgram) -> None:
        """Nothing to check before loading: the FIFOs are read from WRAM once loaded."""

    def assemble(self, dpus: DpuSet | None, program: DpuProgram | None) -> ActorDpuAssembly:
        """The fleet over loaded ``dpus`` (None, None on the stubbed backend)."""
        return ActorDpuAssembly(self, dpus, program)


class ActorDpuAssembly(BasicDpuAssembly):
    """A fleet of actors: ``start()``, ``send(actor, message)``, ``async for reply in
    replies()``, ``stop()``. Before ``start()`` (and after ``stop()``) the ``memory_copy``
    workers fill or read each DPU's MRAM."""

    def __init__(
        self, line: ActorDpuAssemblyLine, dpus: DpuSet | None, program: DpuProgram | None = None
    ) -> None:
        super().__init__(line, dpus, program)  # type: ignore[arg-type]
        self.actor_line = line
        self.function = line.function
        self._running = False
        self._start_ps = 0  # when start() launched the DPUs
        self._sent = [0] * line.nr_dpus
        self._answered = [0] * line.nr_dpus
        self._replies: deque[Reply] = deque()
        #: actors whose fault an error has reported (a fault is raised once by stop())
        self._reported: set[int] = set()
        #: per actor, a link to its own input FIFO (a push to one DPU touches no other) and
        #: the lock that orders its pushes; one link drains every output FIFO at once
        self._inboxes: list[InputFifo] = []
        self._push_locks = [anyio.Lock() for _ in range(line.nr_dpus)]
        self._outbox: OutputFifo | None = None
        #: once a DPU is in fault: one link per reachable rank, by rank index
        self._rank_outboxes: dict[int, OutputFifo] = {}
        self._drain_lock = anyio.Lock()
        if dpus is not None:
            self._outbox = self._link(dpus)

    def _link(self, dpus: DpuSet) -> OutputFifo:
        line, f = self.actor_line, self.function
        try:
            self._inboxes = [d.link_input_fifo(line.inbox, np.uint32) for d in dpus]
            outbox = dpus.link_output_fifo(line.outbox, np.uint32)
            dpus.symbol(line.active)
        except DpuError as exc:
            raise DpuFoundryError(
                f"an actor program declares INPUT_FIFO_INIT({line.inbox}, …), "
                f"OUTPUT_FIFO_INIT({line.outbox}, …) and a __host flag {line.active!r}: "
                f"{exc.detail or exc}"
            ) from None
        for fifo, params, what in (
            (self._inboxes[0], f.inputs, "message"),
            (outbox, f.outputs, "reply"),
        ):
            need = WORD * _words(params)
            if fifo.link.data_size < need:
                raise DpuFoundryError(
                    f"{f.name} {what}s are {need} bytes ({need // WORD} words) but FIFO "
                    f"{fifo.link.name!r} has {fifo.link.data_size}-byte elements; declare it "
                    f"with a data_size of at least {-(-need // 8) * 8}"
                )
        return outbox

    # -- the fleet ---------------------------------------------------------------------------
    @property
    def inboxes(self) -> list[InputFifo]:
        """Per actor, the link to its input FIFO (tune ``max_retries``, ``time_for_retry_us``;
        empty on the stubbed backend)."""
        return list(self._inboxes)

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._running

    @property
    def outstanding(self) -> int:
        """Messages sent and not yet answered."""
        return sum(self._sent) - sum(self._answered)

    def worker(self, *args: Any) -> Any:
        """The ``memory_copy`` worker of a DPU, while the actors are stopped."""
        if len(args) in (1, 2) and self.interface.task_name(args[-1]) != MEMORY_COPY:
            raise DpuFoundryError(
                f"an actor fleet answers {self.function.python_name} through send(); "
                "build a BasicDpuAssemblyLine to call it as a function"
            )
        if self._running:
            raise DpuFoundryError(
                "the actors are running: their DPUs' job queues hold the launch until stop(), "
                "so copy MRAM data before start() or after stop()"
            )
        return super().worker(*args)

    async def start(self) -> None:
        """Set every actor's ``active`` flag and launch the DPUs without waiting."""
        self._check_usable()
        if self._running:
            raise DpuFoundryError("the actors are already running")
        dpus = self._dpus
        if dpus is not None:
            flag = np.zeros(dpus.symbol(self.actor_line.active).size, np.uint8)
            flag[0] = 1
            await dpus.copy_to(self.actor_line.active, flag)
            self._start_ps = dpus.emulator.now_ps
            await dpus.launch(wait=False)
            self._reported.clear()
        self._running = True

    async def send(self, actor: int, message: Message) -> None:
        """Post ``message`` to ``actor``'s inbox; it waits there until the actor takes it.

        An actor whose outbox may be full gets its replies drained first (they are kept for
        :meth:`replies`). If the inbox stays full for the link's whole retry budget the replies
        are drained and the push tried again; ``DPU_ERR_WRAM_FIFO_FULL`` when no reply came.
        """
        self._check_usable()
        number = self._actor(actor)
        inputs = self._bind(message)
        if self._dpus is None:
            await self._stub_call(number, inputs, message)
            return
        element = self._element(number, inputs)
        async with self._push_locks[number]:
            # counted first: a drain may meet the reply before this task resumes (a cancelled
            # push still runs, so its message stays counted)
            self._sent[number] += 1
            try:
                await self._deliver(number, element)
            except DpuError:
                self._sent[number] -= 1  # nothing was pushed
                raise

    def replies(self, *, poll_us: float = 10.0) -> ReplyStream:
        """Replies as they come (``async for reply in fleet.replies()``), until every message
        sent so far is answered; drains the outboxes every ``poll_us`` of virtual time."""
        return ReplyStream(self, round(poll_us * timing.PS_PER_US))

    async def stop(self) -> None:
        """Clear ``active`` (a parallel write), let the actors answer what their inboxes
        hold, wait for the DPUs to stop; their replies stay available to :meth:`replies`.
        Raises the fault of an actor that no earlier error reported."""
        self._check_usable()
        if not self._running:
            return
        self._running = False
        if self._dpus is None:
            return
        zero = np.zeros(self._dpus.symbol(self.actor_line.active).size, np.uint8)

        async def clear_active(rank: DpuSet) -> None:  # one buffer per DPU: one buffer for
            # all would be a broadcast, which the SDK never runs in parallel with the DPUs
            await rank.copy_to(self.actor_line.active, [zero] * len(rank), parallel=True)

        await self._on_reachable_ranks(clear_active)
        while any(d.running for rank in self._reachable_ranks() for d in rank.dpu_list):
            if not await self._collect():
                await self._dpus.emulator.delay(round(10 * timing.PS_PER_US), "actors to stop")
        await self._on_reachable_ranks(DpuSet.sync)
        await self._collect()
        unreported = [n for n, f in enumerate(self._dpus.faults) if f and n not in self._reported]
        if unreported:
            raise self._fault_error(unreported[0])

    async def clear(self) -> None:
        """Stop the actors if they run, then free the DPUs."""
        try:
            if self._running and not self._cleared:
                await self.stop()
        finally:
            await super().clear()

    # -- messages ----------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self._cleared:
            raise DpuFoundryError("the assembly is cleared")

    def _actor(self, actor: object) -> int:
        if isinstance(actor, bool) or not isinstance(actor, int | np.integer):
            raise TypeError(f"actor must be a DPU number (int), not {type(actor).__name__}")
        if not 0 <= int(actor) < self.nr_dpus:
            raise DpuFoundryError(f"actor {actor} is not in the fleet of {self.nr_dpus}")
        return int(actor)

    def _bind(self, message: object) -> list[np.ndarray]:
        f = self.function
        if isinstance(message, Mapping):
            return bind_arguments(f, (), message)
        if isinstance(message, tuple | list):
            return bind_arguments(f, message, {})
        raise TypeError(
            f"{f.python_name} messages are a tuple of the in values "
            f"({', '.join(p.python_name for p in f.inputs)}) or a dict by name, "
            f"not {type(message).__name__}"
        )

    def _element(self, number: int, inputs: list[np.ndarray]) -> np.ndarray:
        """The input-FIFO element of a message: its words in order, then zeros."""
        element = np.zeros(self._inboxes[number].link.data_size // WORD, np.uint32)
        at = 0
        for p, elems in zip(self.function.inputs, inputs, strict=True):
            words = to_words(p, elems)
            element[at : at + words.size] = words
            at += words.size
        return element

    async def _deliver(self, number: int, element: np.ndarray) -> None:
        assert self._dpus is not None and self._outbox is not None
        dpu = self._dpus.dpu_list[number]
        if dpu.rank.index in self._broken_ranks():
            raise self._broken_error(number)
        if self._sent[number] - 1 - self._answered[number] >= self._outbox.capacity:
            await self._collect()  # its outbox may be full: the actor would not take more
        while not await self._push(number, element):
            stopped = self._stopped(dpu)
            if not await self._collect() or stopped:
                raise self._inbox_full(number)

    async def _push(self, number: int, element: np.ndarray) -> bool:
        """One push (False: the inbox stayed full for the link's whole retry budget)."""
        try:
            await self._inboxes[number].push(element)
        except DpuError as exc:
            if exc.code is DpuErrorCode.DPU_ERR_WRAM_FIFO_FULL:
                return False
            raise self._error(number, exc) from exc
        return True

    def _inbox_full(self, number: int) -> DpuLowLevelError:
        assert self._dpus is not None
        inbox = self._inboxes[number]
        state = "is not running" if self._stopped(self._dpus.dpu_list[number]) else "takes none"
        return DpuLowLevelError(
            DpuErrorCode.DPU_ERR_WRAM_FIFO_FULL,
            number,
            self.function.python_name,
            f"actor {number}'s inbox stayed full for {inbox.max_retries} retries of "
            f"{inbox.time_for_retry_us} us with no reply to drain: the actor {state} "
            f"(start() the fleet, or check the program takes its messages)",
        )

    async def _stub_call(self, number: int, inputs: list[np.ndarray], message: object) -> None:
        """The stubbed backend: the task's worker answers at once."""
        iface = self.interface
        assert isinstance(iface, StubbedInterface)
        factory = iface.worker_factories().get(self.function.name)
        if factory is None:
            raise DpuFoundryError(
                f"the stubbed interface {iface.name!r} has no worker for {self.function.name}"
            )
        method = getattr(factory(number), self.function.python_name)
        if isinstance(message, Mapping):
            value = await method(**message)
        else:
            value = await method(*message)  # type: ignore[misc]
        index = self._sent[number]
        self._sent[number] += 1
        self._answered[number] += 1
        self._replies.append(Reply(number, index, value))

    # -- replies -----------------------------------------------------------------------------
    async def _collect(self) -> bool:
        """Drain the outboxes into the reply queue; True if it brought a reply."""
        async with self._drain_lock:
            try:
                batches = await self._drain()
            except DpuError as exc:
                raise self._error(self._first_fault(), exc) from exc
        got = False
        for number, rows in batches:
            for row in rows:
                self._replies.append(self._decode(number, row))
                got = True
        return got

    async def _drain(self) -> list[tuple[int, np.ndarray]]:
        """``(actor, replies)`` of every actor that can be reached: all of them through one
        link while no DPU is in fault, else rank by rank, leaving out the broken ranks."""
        assert self._dpus is not None and self._outbox is not None
        if not any(self._dpus.faults):
            return list(enumerate(await self._outbox.drain()))
        out: list[tuple[int, np.ndarray]] = []
        number = {id(d): i for i, d in enumerate(self._dpus.dpu_list)}
        for rank in self._reachable_ranks():
            link = self._rank_outboxes.get(rank.rank_list[0].index)
            if link is None:
                link = rank.link_output_fifo(self.actor_line.outbox, np.uint32)
                self._rank_outboxes[rank.rank_list[0].index] = link
            for d, rows in zip(rank.dpu_list, await link.drain(), strict=True):
                out.append((number[id(d)], rows))
        return out

    def _decode(self, number: int, row: np.ndarray) -> Reply:
        f, index = self.function, self._answered[number]
        if index >= self._sent[number]:
            raise DpuLowLevelError(
                DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
                number,
                f.python_name,
                f"actor {number} pushed reply {index + 1} to {self._sent[number]} message(s): "
                "an actor answers each message exactly once",
            )
        self._answered[number] += 1
        outs, at = [], 0
        for p in f.outputs:
            n = p.count * p.words_per_element
            try:
                outs.append(from_words(p, row[at : at + n]))
            except ValueError as exc:
                raise DpuLowLevelError(
                    DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER, number, f.python_name, str(exc)
                ) from None
            at += n
        return Reply(number, index, result_value(f, outs))

    # -- faults ------------------------------------------------------------------------------
    def _broken_ranks(self) -> set[int]:
        """Ranks with a DPU in fault: the fault of a running (asynchronous) launch is the
        rank's sticky error, so the rank takes no job any more (the SDK cannot restart it)."""
        assert self._dpus is not None
        return {d.rank.index for d in self._dpus.dpu_list if d.fault is not None}

    def _reachable_ranks(self) -> list[DpuSet]:
        assert self._dpus is not None
        broken = self._broken_ranks()
        return [r for r in self._dpus.ranks if r.rank_list[0].index not in broken]

    async def _on_reachable_ranks(self, job: Callable[[DpuSet], Awaitable[None]]) -> None:
        """``job(rank)`` on every rank not broken, skipping one that a fault breaks meanwhile."""
        for rank in self._reachable_ranks():
            try:
                await job(rank)
            except DpuError:
                if rank.rank_list[0].index not in self._broken_ranks():
                    raise

    def _broken_error(self, number: int) -> DpuLowLevelError:
        assert self._dpus is not None
        if self._dpus.faults[number] is not None:
            return self._fault_error(number)
        culprit = next(
            i
            for i, d in enumerate(self._dpus.dpu_list)
            if d.fault is not None and d.rank is self._dpus.dpu_list[number].rank
        )
        return DpuLowLevelError(
            DpuErrorCode.DPU_ERR_DPU_FAULT,
            number,
            self.function.python_name,
            f"actor {number} shares its rank with actor {culprit}, which is in fault: the rank "
            "takes no more jobs (give each actor its own rank where this matters)",
        )

    def _first_fault(self) -> int:
        faults = self._dpus.faults if self._dpus is not None else []
        return next((i for i, f in enumerate(faults) if f is not None), 0)

    def _error(self, number: int, exc: DpuError) -> DpuLowLevelError:
        """``exc`` as the error of actor ``number`` (its fault, if it is in fault)."""
        if isinstance(exc, DpuLowLevelError):
            return exc
        if self._dpus is not None and self._dpus.faults[number] is not None:
            return self._fault_error(number)
        return _low_level(self._slots[number], self.function.python_name, exc)

    def _fault_error(self, number: int) -> DpuLowLevelError:
        assert self._dpus is not None
        fault = self._dpus.faults[number]
        assert fault is not None
        self._reported.add(number)
        owed = self._sent[number] - self._answered[number]
        return DpuLowLevelError(
            DpuErrorCode.DPU_ERR_DPU_FAULT,
            number,
            self.function.python_name,
            f"actor {number} is in fault, owing {owed} repl{'y' if owed == 1 else 'ies'}: "
            f"{fault.describe()}",
        )

    def _dead(self) -> int | None:
        """An actor owing replies that cannot come: its DPU stopped, or its rank is broken
        (None: every actor owing replies can still answer)."""
        dpus = self._dpus
        if dpus is None:
            return None
        broken = self._broken_ranks()
        for i, d in enumerate(dpus.dpu_list):
            if self._sent[i] > self._answered[i] and (self._stopped(d) or d.rank.index in broken):
                return i
        return None

    def _stopped(self, dpu: Dpu) -> bool:
        """``dpu`` is not running and will not start: the fleet is stopped, or the DPU
        stopped after the launch of ``start()`` booted it (a queued launch has not yet)."""
        if dpu.running:
            return False
        return not self._running or dpu.fault is not None or dpu.boot_time >= self._start_ps

    def _dead_error(self, number: int) -> Exception:
        """Why ``number`` owes replies it cannot give: a fault, or a DPU that is not running."""
        assert self._dpus is not None
        if self._dpus.dpu_list[number].rank.index in self._broken_ranks():
            return self._broken_error(number)
        owed = self._sent[number] - self._answered[number]
        why = "stopped (its program returned)" if self._running else "not started (start())"
        return DpuFoundryError(
            f"actor {number} owes {owed} repl{'y' if owed == 1 else 'ies'} but is {why}"
        )


class ReplyStream:
    """``async for reply in fleet.replies()``: replies oldest first, per actor in message
    order, until every message sent so far is answered."""

    def __init__(self, fleet: ActorDpuAssembly, poll_ps: int) -> None:
        self._fleet = fleet
        self._poll_ps = poll_ps

    def __aiter__(self) -> ReplyStream:
        return self

    async def __anext__(self) -> Reply:
        fleet = self._fleet
        while not fleet._replies:
            if fleet.outstanding == 0:
                raise StopAsyncIteration
            dead = fleet._dead()  # before the drain: what a stopped DPU pushed is in it
            if await fleet._collect():
                break
            if dead is not None:
                raise fleet._dead_error(dead)
            assert fleet._dpus is not None
            await fleet._dpus.emulator.delay(self._poll_ps, "the actors' replies")
        return fleet._replies.popleft()


__all__ = ["ActorDpuAssembly", "ActorDpuAssemblyLine", "Message", "Reply", "ReplyStream"]
