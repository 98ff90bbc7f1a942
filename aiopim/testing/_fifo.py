"""WRAM FIFO host programs as data: an echo DPU program, FIFO operations and their interpreter.

:func:`fifo_echo_program` builds a DPU program whose tasklets return every input element
unchanged through the output FIFO (``process_inputs_all_tasklets`` or ``_each_tasklet``).
:func:`run_fifo_ops` plays a sequence of FIFO operations (pushes, drains, retry settings,
the parallel write that clears ``active``, syncs) through :class:`~aiopim.host.InputFifo`
and :class:`~aiopim.host.OutputFifo`, finds out per DPU which element each push delivered
(partial successes and SDK quirks included) and returns a :class:`FifoLog` that the FIFO
conservation checker reads.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio
import numpy as np

from .. import timing
from .._emulator import current_emulator
from .._errors import DpuError, JobType
from .._machine._config import MachineConfig
from .._machine._dpu import Dpu
from .._machine._wramfifo import WRITE_PTR
from .._ops._fifo import DpuQuirkWarning
from ..dpu import Program, Tasklet
from ..dpu._fifo import check_fifo_geometry
from ..host import DpuSet, InputFifo, OutputFifo
from ._checks import FifoReport, fifo_conservation
from ._jobs import OpResult

#: names in :func:`fifo_echo_program`
INPUT_FIFO = "fin"
OUTPUT_FIFO = "fout"
ACTIVE_SYMBOL = "active"
MODES = ("all", "each")
_M64 = (1 << 64) - 1
_PUSH = int(JobType.PARALLEL_FIFO_PUSH)


@dataclass(frozen=True)
class FifoGeometry:
    """One FIFO's shape: ``2**ptr_size`` elements of ``data_size`` bytes."""

    ptr_size: int
    data_size: int

    def __post_init__(self) -> None:
        check_fifo_geometry("geometry", self.ptr_size, self.data_size)

    @property
    def capacity(self) -> int:
        """Elements the FIFO holds."""
        return 1 << self.ptr_size

    @property
    def ring_bytes(self) -> int:
        """Bytes of the ring buffer in WRAM."""
        return self.data_size << self.ptr_size


@dataclass(frozen=True)
class FifoStream:
    """The shape of a :func:`fifo_echo_program`.

    ``work`` instructions are issued per element (by every tasklet in ``"all"`` mode, by the
    tasklet that took the element in ``"each"`` mode), scaled by ``1 + value % 3`` so that
    elements take different times and ``"each"`` outputs can overtake each other.
    """

    input: FifoGeometry
    output: FifoGeometry
    nr_tasklets: int = 1
    mode: str = "all"
    work: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if self.output.data_size < self.input.data_size:
            raise ValueError(
                f"the output elements ({self.output.data_size} B) must hold an input element "
                f"({self.input.data_size} B) to echo it"
            )
        if not 1 <= self.nr_tasklets <= timing.V1B.nr_threads:
            raise ValueError(f"nr_tasklets must be in 1..{timing.V1B.nr_threads} (v1B)")
        if self.work < 0:
            raise ValueError("work must be >= 0")

    @property
    def ordered(self) -> bool:
        """True when outputs come out in input order (``process_inputs_all_tasklets``)."""
        return self.mode == "all"


def element_words(value: int, data_size: int) -> np.ndarray:
    """The element that carries ``value``: word ``k`` is ``value * (k + 1)`` (mod 2**64)."""
    v = value & _M64
    return np.array([(v * (k + 1)) & _M64 for k in range(data_size // 8)], dtype=np.uint64)


def element_value(words: np.ndarray) -> tuple[int, bool]:
    """``(value, intact)`` of an element built by :func:`element_words`."""
    flat = [int(w) for w in np.asarray(words, dtype=np.uint64).reshape(-1)]
    value = flat[0]
    return value, all(w == (value * (k + 1)) & _M64 for k, w in enumerate(flat))


def _work(stream: FifoStream, element: np.ndarray) -> int:
    if not stream.work:
        return 0
    return stream.work * (1 + int(element.view(np.uint64)[0]) % 3)


def fifo_echo_program(stream: FifoStream, name: str = "aiopim-testing-fifo-echo") -> Program:
    """A DPU program that echoes every element of input FIFO ``fin`` to output FIFO ``fout``.

    The output element is the input element followed by zero bytes. The tasklets loop until
    the host clears the ``__host uint64_t active`` (initially 1) and ``fin`` is empty.
    """
    prog = Program(name, nr_tasklets=stream.nr_tasklets)
    active = prog.host(ACTIVE_SYMBOL, np.uint64, 1, init=[1])
    fin = prog.input_fifo(INPUT_FIFO, stream.input.ptr_size, stream.input.data_size)
    fout = prog.output_fifo(OUTPUT_FIFO, stream.output.ptr_size, stream.output.data_size)
    barrier = prog.barrier("fifo_barrier")
    mutex = prog.mutex("fifo_mutex")
    size = stream.input.data_size

    async def process_all(t: Tasklet, element: np.ndarray) -> None:
        n = _work(stream, element)
        if n:
            t.compute(n)
            await t.flush()

    async def reduce(t: Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        out[:] = 0
        out[:size] = element

    async def process_each(t: Tasklet, element: np.ndarray, out: np.ndarray) -> None:
        await process_all(t, element)
        await reduce(t, element, out)

    @prog.main
    async def main(t: Tasklet) -> None:
        if stream.mode == "all":
            await t.process_inputs_all_tasklets(fin, fout, process_all, reduce, barrier, active)
        else:
            await t.process_inputs_each_tasklet(fin, fout, process_each, mutex, active)

    return prog


# --- operations ------------------------------------------------------------------------------
@dataclass(frozen=True)
class FifoPush:
    """``InputFifo.push``: one element per DPU (``None`` skips a DPU), waiting or not.

    A push with a ``None`` must wait (``wait=True``): on the SDK's rank-wide fast path the
    skipped DPUs still get their write pointer advanced (a garbage element), and only a
    push that is alone in its window can be told apart.

    ``cancel_us``: the host cancels the push if it has not returned after that many
    microseconds of virtual time (0: at its first wait); its jobs already queued still run.
    A push with a ``None`` is never cancelled, for the same reason: the next push could
    start before it ends.
    """

    values: tuple[int | None, ...]
    wait: bool = True
    cancel_us: int | None = None


@dataclass(frozen=True)
class FifoDrain:
    """``OutputFifo.drain``: flush every DPU's output FIFO (synchronous).

    ``cancel_us``: the host cancels the drain if it has not returned after that many
    microseconds of virtual time; what its flushes take out comes back with a later drain.
    """

    cancel_us: int | None = None


@dataclass(frozen=True)
class FifoRetries:
    """``max_retries`` and ``time_for_retry_us`` of the input link (every rank)."""

    max_retries: int
    time_for_retry_us: int


@dataclass(frozen=True)
class FifoDelay:
    """The host waits ``us`` microseconds of virtual time."""

    us: int


@dataclass(frozen=True)
class FifoStop:
    """Clear ``active`` on every DPU with a ``DPU_XFER_PARALLEL`` write (async unless ``wait``)."""

    wait: bool = True


@dataclass(frozen=True)
class FifoSync:
    """``dpu_sync``. With ``safe`` (after a :class:`FifoStop` only) the host first clears
    ``active`` again, synchronously (an asynchronous stop is flushed when an earlier
    asynchronous push fails), then drains until every DPU's unreturned elements fit in its
    output FIFO, so that the DPUs can finish; ranks broken by an asynchronous failure are
    left alone."""

    safe: bool = True


FifoOp = FifoPush | FifoDrain | FifoRetries | FifoDelay | FifoStop | FifoSync

#: a drain routine under test: empties ``fout``'s FIFOs, returns per DPU an array
#: ``(k, items_per_element)`` of uint64, oldest first (like :meth:`OutputFifo.drain`)
DrainFn = Callable[[OutputFifo], Awaitable[list[np.ndarray]]]


# --- the log -----------------------------------------------------------------------------------
@dataclass
class FifoLog:
    """What :func:`run_fifo_ops` observed. DPUs are numbered in ``DPU_FOREACH`` order.

    ``pushed[i]`` is ``(dpu, value)`` offered to one DPU, ``accepted[i]`` whether that DPU
    received it (per DPU: a partial success on ``DPU_ERR_WRAM_FIFO_FULL`` counts for the DPUs
    that had room). Elements the SDK's fast-path quirk pushed to a DPU without a buffer are
    in ``garbage`` and, as accepted, in ``pushed``. ``drained`` lists ``(dpu, value)`` in
    the order they came out; ``corrupted`` the elements whose bytes were not an echo.
    ``broken_ranks`` (positions in the set's rank list, as ``rank_of[dpu]``) stayed broken
    by an asynchronous failure (sdk-reference.md §2.2) at the end.
    """

    nr_dpus: int
    ordered: bool
    rank_of: list[int]
    pushed: list[tuple[int, int]] = field(default_factory=list)
    accepted: list[bool] = field(default_factory=list)
    garbage: list[tuple[int, int]] = field(default_factory=list)
    drained: list[tuple[int, int]] = field(default_factory=list)
    corrupted: list[tuple[int, list[int]]] = field(default_factory=list)
    results: list[OpResult] = field(default_factory=list)
    broken_ranks: set[int] = field(default_factory=set)
    quirks: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[int | None]:
        """The error value of each operation (None when it succeeded)."""
        return [r.error for r in self.results]

    def report(self) -> FifoReport:
        """FIFO conservation over the DPUs of healthy ranks (one channel per DPU)."""
        keep = [self.rank_of[d] not in self.broken_ranks for d, _ in self.pushed]
        pushed = [e for e, k in zip(self.pushed, keep, strict=True) if k]
        accepted = [a for a, k in zip(self.accepted, keep, strict=True) if k]
        drained = [e for e in self.drained if self.rank_of[e[0]] not in self.broken_ranks]
        return fifo_conservation(
            pushed, accepted, drained, channel=lambda e: e[0], ordered=self.ordered
        )

    def broken_rank_problems(self) -> list[str]:
        """On broken ranks elements may stay inside the DPUs; nothing else may go wrong."""
        problems: list[str] = []
        for dpu in range(self.nr_dpus):
            if self.rank_of[dpu] not in self.broken_ranks:
                continue
            want = [
                v for (d, v), a in zip(self.pushed, self.accepted, strict=True) if d == dpu and a
            ]
            got = [v for d, v in self.drained if d == dpu]
            extra = Counter(got) - Counter(want)
            if extra:
                problems.append(f"DPU {dpu}: drained {sorted(extra.elements())} never accepted")
            elif self.ordered and got != want[: len(got)]:
                problems.append(f"DPU {dpu}: drained {got} is not a prefix of {want}")
        return problems

    def assert_conserved(self) -> None:
        """Every accepted element came back once (in order for ``"all"``), intact."""
        report = self.report()
        problems = [] if report.ok else [str(report)]
        problems += self.broken_rank_problems()
        if self.corrupted:
            problems.append(f"corrupted elements (dpu, words): {self.corrupted}")
        if problems:
            raise AssertionError("FIFO conservation violated: " + "; ".join(problems))


# --- the interpreter -----------------------------------------------------------------------------
@dataclass
class _Pending:
    op: int
    values: tuple[int | None, ...]  # for the DPUs of one rank


class _Player:
    def __init__(
        self, dpus: DpuSet, stream: FifoStream, poll_us: int, drain: DrainFn | None
    ) -> None:
        self.dpus = dpus
        self.drain_fn = drain
        self.stream = stream
        self.poll_us = poll_us
        self.emu = current_emulator()
        self.fin: InputFifo = dpus.link_input_fifo(INPUT_FIFO, np.uint64)
        self.fout: OutputFifo = dpus.link_output_fifo(OUTPUT_FIFO, np.uint64)
        self.ranks = dpus.rank_list
        self._position = {r.index: k for k, r in enumerate(self.ranks)}
        index = {id(d): i for i, d in enumerate(dpus.dpu_list)}
        self.rank_dpus = [[index[id(d)] for d in r.enabled_dpus] for r in self.ranks]
        rank_of = [0] * len(dpus)
        for k, members in enumerate(self.rank_dpus):
            for j in members:
                rank_of[j] = k
        self.log = FifoLog(len(dpus), stream.ordered, rank_of)
        self._wr_addr = self.fin.link.struct.offset + WRITE_PTR
        self.wr_base = [self._wr(d) for d in dpus.dpu_list]
        self.pending: list[list[_Pending]] = [[] for _ in self.ranks]
        self.jobs = [[0, 0] for _ in self.ranks]  # push jobs (submitted, ended or flushed)
        self.seen = 0
        self.stopped = False
        self.accepted = [0] * len(dpus)
        self.returned = [0] * len(dpus)
        self.rank_outs: dict[int, OutputFifo] = {}

    # -- observation ----------------------------------------------------------------------------
    def _wr(self, d: Dpu) -> int:
        """The write pointer of ``d``'s input FIFO in WRAM (only the host moves it)."""
        return int(d.wram[self._wr_addr : self._wr_addr + 8].view(np.uint64)[0])

    def _scan(self) -> set[int]:
        """Count the push jobs of new trace events; returns the ranks that got one submitted."""
        rec = self.emu.recorder
        if rec is None:
            raise RuntimeError("run_fifo_ops needs an emulator created with record=True")
        got_push: set[int] = set()
        # flat job tuples (time, kind, rank, seq, type, ...): see aiopim/_machine/_recorder.py
        for ev in rec.events[self.seen :]:
            kind = ev[1]
            if kind not in ("job_submit", "job_end", "job_flush") or ev[4] != _PUSH:
                continue
            k = self._position.get(ev[2])
            if k is None:
                continue
            if kind == "job_submit":
                self.jobs[k][0] += 1
                got_push.add(k)
            else:
                self.jobs[k][1] += 1
        self.seen = len(rec.events)
        return got_push

    def _resolve(self) -> None:
        """Attribute the write-pointer increments of every quiescent rank to its pushes.

        Within a rank, pushes run in order; the first one that fails (some DPU full) may
        have reached the DPUs with room, and everything queued after it is flushed. So,
        push by push, a DPU received the element while its increment count lasts.
        """
        dl = self.dpus.dpu_list
        for k, queue in enumerate(self.pending):
            if not queue or self.jobs[k][0] != self.jobs[k][1]:
                continue
            members = self.rank_dpus[k]
            remaining = {i: self._wr(dl[i]) - self.wr_base[i] for i in members}
            failed = False
            for p in queue:
                targeted = [i for i, v in zip(members, p.values, strict=True) if v is not None]
                after_failure = failed
                failed = failed or any(remaining[i] < 1 for i in targeted)
                for i, v in zip(members, p.values, strict=True):
                    if v is None:
                        continue
                    got = not after_failure and remaining[i] >= 1
                    if got:
                        remaining[i] -= 1
                        self.accepted[i] += 1
                    self.log.pushed.append((i, v))
                    self.log.accepted.append(got)
            last = queue[-1]
            for i, v in zip(members, last.values, strict=True):
                extra = remaining[i]
                if extra == 0:
                    continue
                if extra != 1 or v is not None or failed:
                    raise RuntimeError(
                        f"cannot attribute {extra} write-pointer increment(s) of DPU {i} to the "
                        f"pushes of ops {[p.op for p in queue]}"
                    )
                # the SDK's fast path advanced the pointer of a DPU without a buffer (QUIRK)
                slot = (self._wr(dl[i]) - 1) & (self.stream.input.capacity - 1)
                value = self._slot_value(dl[i], slot)
                self.log.pushed.append((i, value))
                self.log.accepted.append(True)
                self.log.garbage.append((i, value))
                self.accepted[i] += 1
            for i in members:
                self.wr_base[i] = self._wr(dl[i])
            queue.clear()

    def _slot_value(self, d: Dpu, slot: int) -> int:
        data = self.fin.link.data.offset + slot * self.stream.input.data_size
        return int(d.wram[data : data + 8].view(np.uint64)[0])

    def _broken(self) -> set[int]:
        return {k for k, r in enumerate(self.ranks) if r.job_error}

    # -- operations -------------------------------------------------------------------------------
    async def play(self, i: int, op: FifoOp) -> None:
        cancel_us = op.cancel_us if isinstance(op, FifoPush | FifoDrain) else None
        if cancel_us is None:
            await self._play(i, op)
            return
        with anyio.move_on_after(cancel_us / 1e6):
            await self._play(i, op)

    async def _play(self, i: int, op: FifoOp) -> None:
        if isinstance(op, FifoPush):
            await self._push(i, op)
        elif isinstance(op, FifoDrain):
            await self._drain([(list(range(len(self.dpus))), self.fout)])
        elif isinstance(op, FifoRetries):
            self.fin.max_retries = op.max_retries
            self.fin.time_for_retry_us = op.time_for_retry_us
        elif isinstance(op, FifoDelay):
            await self.emu.delay(op.us * timing.PS_PER_US, f"FIFO op {i}: delay")
        elif isinstance(op, FifoStop):
            self.stopped = True
            zero = np.zeros(1, np.uint64)
            await self.dpus.copy_to(ACTIVE_SYMBOL, zero, parallel=True, wait=op.wait)
        elif op.safe:
            await self.safe_sync(i)
        else:
            await self.dpus.sync()

    async def _push(self, i: int, op: FifoPush) -> None:
        n = len(self.dpus)
        if len(op.values) != n:
            raise ValueError(f"op {i}: {len(op.values)} values for {n} DPUs")
        if any(v is None for v in op.values) and (not op.wait or op.cancel_us is not None):
            raise ValueError(
                f"op {i}: a push that skips DPUs (None) must wait and not be cancelled "
                "(see FifoPush)"
            )
        size = self.stream.input.data_size
        elements = [None if v is None else element_words(v, size) for v in op.values]
        self._scan()
        try:
            await self.fin.push(elements, wait=op.wait)
        finally:
            got = self._scan()
            for k, members in enumerate(self.rank_dpus):
                if k in got:
                    vals = tuple(op.values[j] for j in members)
                    self.pending[k].append(_Pending(i, vals))
                    continue
                for j in members:  # refused at the call: nothing reached these DPUs
                    value = op.values[j]
                    if value is not None:
                        self.log.pushed.append((j, value))
                        self.log.accepted.append(False)

    def _outputs(self) -> list[tuple[list[int], OutputFifo]]:
        broken = self._broken()
        if not broken:
            return [(list(range(len(self.dpus))), self.fout)]
        out: list[tuple[list[int], OutputFifo]] = []
        for k, members in enumerate(self.rank_dpus):
            if k in broken:
                continue
            if k not in self.rank_outs:
                self.rank_outs[k] = OutputFifo(self.dpus.ranks[k], self.fout.link, np.uint64)
            out.append((members, self.rank_outs[k]))
        return out

    async def _drain(self, fifos: list[tuple[list[int], OutputFifo]]) -> None:
        for members, fout in fifos:
            if self.drain_fn is not None:
                self._take(members, await self.drain_fn(fout))
                continue
            try:
                await fout._flush()
            finally:
                # a failed drain kept what the other ranks' flush jobs took out; a cancelled
                # one keeps what they take out after the cancellation
                self._take_kept()

    def _take_kept(self) -> None:
        """Log what every link object kept, per DPU in the order of the flushes that took it
        out (a flush of the whole set's link and one of a rank's link on the same rank run
        in the rank's queue order)."""
        parts: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(len(self.dpus))]
        fouts = [(list(range(len(self.dpus))), self.fout)]
        fouts += [(self.rank_dpus[k], fout) for k, fout in self.rank_outs.items()]
        for members, fout in fouts:
            for j, flushes in zip(members, fout._take_flushes(), strict=True):
                parts[j] += flushes
        for j, flushes in enumerate(parts):
            flushes.sort(key=lambda part: part[0])
            for _, rows in flushes:
                self._take([j], [rows])

    def _take(self, members: list[int], batches: list[np.ndarray]) -> None:
        for j, rows in zip(members, batches, strict=True):
            for row in rows:
                value, intact = element_value(row[: self.stream.input.data_size // 8])
                tail = row[self.stream.input.data_size // 8 :]
                if not intact or tail.any():
                    self.log.corrupted.append((j, [int(w) for w in row]))
                self.log.drained.append((j, value))
                self.returned[j] += 1

    async def safe_sync(self, i: int) -> None:
        if not self.stopped:
            raise ValueError(f"op {i}: a safe FifoSync needs a FifoStop before it")
        # an asynchronous stop may have been flushed by an earlier asynchronous failure
        await self._stop_healthy()
        cap = self.stream.output.capacity
        while True:
            fifos = self._outputs()
            with contextlib.suppress(DpuError):  # a failed push flushed a drain: drain again
                await self._drain(fifos)
            self._settle()
            members = [j for m, _ in fifos for j in m]
            if all(
                not self.pending[self.log.rank_of[j]] and self.accepted[j] - self.returned[j] <= cap
                for j in members
            ):
                break
            await self.emu.delay(self.poll_us * timing.PS_PER_US, f"FIFO op {i}: drain poll")
        for healthy in self._healthy_sets():
            await healthy.sync()

    def _settle(self) -> None:
        self._scan()
        self._resolve()

    async def finish(self) -> None:
        """Stop (if not yet), drain until the DPUs can finish, sync, drain the rest."""
        if not self.stopped:
            await self._stop_healthy()
        await self.safe_sync(-1)
        await self._drain(self._outputs())
        self._settle()

    async def _stop_healthy(self) -> None:
        self.stopped = True
        zero = np.zeros(1, np.uint64)
        for healthy in self._healthy_sets():
            await healthy.copy_to(ACTIVE_SYMBOL, zero, parallel=True)

    def _healthy_sets(self) -> list[DpuSet]:
        """The whole set, or else each rank that no asynchronous failure broke."""
        broken = self._broken()
        if not broken:
            return [self.dpus]
        return [self.dpus.ranks[k] for k in range(len(self.ranks)) if k not in broken]


async def run_fifo_ops(
    dpus: DpuSet,
    stream: FifoStream,
    ops: Sequence[FifoOp],
    *,
    launch: bool = True,
    finish: bool = True,
    poll_us: int = 5,
    drain: DrainFn | None = None,
) -> FifoLog:
    """Play ``ops`` on ``dpus`` (whole ranks, :func:`fifo_echo_program` of ``stream`` loaded).

    With ``launch`` the DPUs are launched asynchronously first. A :class:`~aiopim.DpuError`
    raised by an operation is logged and the sequence goes on. With ``finish`` the host then
    clears ``active`` (if no op did), drains until the DPUs can stop, syncs and drains the
    rest, on every rank that no asynchronous failure broke. ``DpuQuirkWarning`` messages are
    collected in the log instead of being raised.

    ``drain`` replaces :meth:`OutputFifo.drain` by your own routine (see :data:`DrainFn`),
    to property-test it. When :meth:`OutputFifo.drain` raises (the flush of another rank
    failed), the elements the healthy ranks' flush jobs took out are logged from
    :meth:`OutputFifo.take_held`.
    """
    emu = current_emulator()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DpuQuirkWarning)
        player = _Player(dpus, stream, poll_us, drain)
        log = player.log
        if launch:
            await dpus.launch(wait=False)
        for i, op in enumerate(ops):
            called = emu.now_ps
            error: int | None = None
            try:
                await player.play(i, op)
            except DpuError as exc:
                error = exc.value
            player._settle()
            log.results.append(OpResult(i, called, emu.now_ps, error))
        if finish:
            await player.finish()
        log.broken_ranks = player._broken()
    for w in caught:
        if issubclass(w.category, DpuQuirkWarning):
            log.quirks.append(str(w.message))
        else:  # not ours to keep: warn again, outside the recording block
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return log


async def fifo_host(
    machine: MachineConfig,
    stream: FifoStream,
    ops: Sequence[FifoOp],
    drain: DrainFn | None = None,
) -> FifoLog:
    """A whole host program: allocate every rank of ``machine``, load the echo program of
    ``stream``, launch and play ``ops`` (``pim.execute(fifo_host, machine, stream, ops, ...)``)."""
    dpus = await DpuSet.alloc(nr_ranks=machine.nr_ranks)
    await dpus.load(fifo_echo_program(stream))
    return await run_fifo_ops(dpus, stream, ops, drain=drain)
