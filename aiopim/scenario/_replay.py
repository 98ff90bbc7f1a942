"""Replay a scenario on a fresh emulator and check its expectations."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import numpy as np

from .._emulator import Emulator
from .._errors import DeadlockError, DpuError
from .._machine._program import DpuProgram
from .._machine._recorder import host_task_label
from .._ops._fifo import FifoLink
from .._runtime._kernel import PRIO_LATE
from ..host import DpuSet
from ..timing import format_ps
from ..trace import Summary, Timeline, chrome_trace, summarize
from ..trace._timeline import dpu_name
from ._spec import ACTIONS, KERNELS, DataCheck, Scenario, ScenarioError, Step, TaskSpec

#: actor of host sleeps: after every emulated event of the same instant (like an event-loop
#: timer, which fires once the kernel has run everything due)
HOST_SLEEP_ACTOR = 1 << 62

T = TypeVar("T")

#: name of the scenario task a host task runs
_task_name: contextvars.ContextVar[str] = contextvars.ContextVar("aiopim_scenario_task", default="")

#: progress callback: ``(steps done, steps in total, virtual ps)``
Progress = Callable[[int, int, int], None]


class ReplayContext:
    """What a running action sees: the emulator, named DPU sets, programs, buffers, events."""

    def __init__(self, scenario: Scenario, emulator: Emulator, progress: Progress | None) -> None:
        self.scenario = scenario
        self.emulator = emulator
        self.sets: dict[str, DpuSet] = {}
        self.programs: dict[str, DpuProgram] = build_programs(scenario)
        self.buffers: dict[str, np.ndarray] = {}
        #: FIFO streams: buffer name -> (rank index, DPU index) -> drained elements, in order
        self.streams: dict[str, dict[tuple[int, int], list[np.ndarray]]] = {}
        #: FIFO links by scenario name
        self.links: dict[str, FifoLink] = {}
        #: how many times each step ran (keyed by ``id(step)``; e.g. for ``increment``)
        self.runs: dict[int, int] = {}
        self.events: dict[str, anyio.Event] = {}
        self._progress = progress
        self._total = scenario.total_steps()
        self.done = 0
        #: the step each unfinished scenario task is running (by task name), for deadlocks
        self.current: dict[str, Step] = {}
        #: errors that steps declaring ``error`` raised, in order
        self.expected: list[RaisedError] = []

    def event(self, name: str) -> anyio.Event:
        """The scenario event ``name`` (created on first use)."""
        ev = self.events.get(name)
        if ev is None:
            ev = self.events[name] = anyio.Event()
        return ev

    def target(self, step: Step) -> DpuSet:
        """The DPU set a step names with ``set`` (narrowed by ``rank`` or ``dpu``)."""
        name: str = step.params["set"]
        dset = self.sets.get(name)
        if dset is None:
            raise self.error(step, f"the DPU set {name!r} is not allocated (yet)")
        rank: int | None = step.params.get("rank")
        dpu: int | None = step.params.get("dpu")
        if rank is not None:
            ranks = dset.ranks
            if not 0 <= rank < len(ranks):
                raise self.error(step, f"rank {rank} out of range: {name!r} has {len(ranks)}")
            return ranks[rank]
        if dpu is not None:
            if not 0 <= dpu < len(dset):
                raise self.error(step, f"dpu {dpu} out of range: {name!r} has {len(dset)}")
            return dset[dpu]
        return dset

    async def sleep_until(self, when: int) -> None:
        """Let the calling host task sleep until virtual time ``when`` (ps)."""
        emu = self.emulator
        k = emu.kernel
        if when <= k.now:
            return
        w = k.new_waiter(f"virtual time {format_ps(when)}")
        k.call_at(when, lambda _: w.resolve(), None, HOST_SLEEP_ACTOR, PRIO_LATE)
        await emu.bridge.wait(w)

    def error(self, step: Step, message: str) -> ScenarioError:
        """A run-time error located at ``step``."""
        return ScenarioError(
            message, source=self.scenario.source, line=step.line, key=f"{step.key} ({step.op})"
        )

    async def run_steps(self, steps: list[Step]) -> None:
        """Run ``steps`` in order (used by ``repeat``)."""
        for s in steps:
            await self.run_step(s)

    async def run_step(self, step: Step) -> None:
        """Run one step: wait for ``at``, run the action, check ``error``."""
        self.current[_task_name.get()] = step
        if step.at is not None:
            await self.sleep_until(step.at)
        kind = ACTIONS[step.op]
        try:
            await kind.run(self, step)
        except DpuError as exc:
            raised = RaisedError(exc, step, self.emulator.now_ps)
            if step.error is None or exc.code.name != step.error:
                raise StepFailed(raised) from exc
            self.expected.append(raised)
        else:
            if step.error is not None:
                raise self.error(step, f"expected the step to fail with {step.error}")
        self.done += 1
        if self._progress is not None:
            self._progress(self.done, self._total, self.emulator.now_ps)


@dataclass(frozen=True)
class RaisedError:
    """A DpuError a step raised, and when (virtual ps)."""

    error: DpuError
    step: Step
    time_ps: int

    def text(self, times: int = 1) -> str:
        """``DPU_ERR_...: raised at 192.405 us by tasks[0].steps[5] (fifo_push, line 37)``
        (``times``: how often the step raised it, this being the first), then the error's
        message on an indented line."""
        step = self.step
        where = f"{step.key} ({step.op}, line {step.line})" if step.line else step.key
        when = f"at {format_ps(self.time_ps)} by {where}"
        if times > 1:
            when = f"{times} times by {where}, first at {format_ps(self.time_ps)}"
        return f"{self.error.code.name}: raised {when}\n  {self.error.detail}"


class StepFailed(Exception):
    """A step raised a DpuError it did not expect."""

    def __init__(self, raised: RaisedError) -> None:
        self.raised = raised
        self.step = raised.step
        self.error = raised.error
        super().__init__(str(raised.error))


def build_programs(scenario: Scenario) -> dict[str, DpuProgram]:
    """Fresh DPU programs for every ``[programs.*]`` table."""
    out = {}
    for name, spec in scenario.programs.items():
        try:
            out[name] = KERNELS[spec.kernel].build(spec)
        except (ValueError, DpuError) as exc:
            raise ScenarioError(
                str(exc), source=scenario.source, line=spec.line, key=spec.key
            ) from None
    return out


@dataclass
class Replay:
    """The outcome of a replay."""

    scenario: Scenario
    emulator: Emulator
    buffers: dict[str, np.ndarray]
    #: FIFO streams (``fifo_drain ... into``): (rank, DPU) -> drained elements, oldest first
    streams: dict[str, dict[tuple[int, int], list[np.ndarray]]] = field(default_factory=dict)
    #: the DpuError that ended the replay (when ``[expect] error`` allowed it)
    error: DpuError | None = None
    #: the error that ended the replay, with its step and time (when ``[expect] error`` allowed it)
    raised: RaisedError | None = None
    #: errors raised by steps that declare ``error``, in order
    expected_step_errors: list[RaisedError] = field(default_factory=list)
    _timeline: Timeline | None = field(default=None, repr=False)

    @property
    def end_ps(self) -> int:
        """Final virtual time."""
        return self.emulator.now_ps

    @property
    def timeline(self) -> Timeline:
        """The recorded timeline."""
        if self._timeline is None:
            self._timeline = Timeline.from_emulator(self.emulator)
        return self._timeline

    def chrome_trace(self, *, per_dpu: bool = True) -> str:
        """Chrome trace JSON (byte-identical across runs and backends)."""
        return chrome_trace(
            self.timeline, per_dpu=per_dpu, metadata={"scenario": self.scenario.name}
        )

    def summary(self) -> Summary:
        """Figures of the timeline."""
        return summarize(self.timeline)

    def expected_errors(self) -> list[str]:
        """One line (and the error's message) per error the scenario declares: the replay's
        (``[expect] error``), then each step's (``error = ...``) with how often it was raised."""
        out = []
        declared = self.scenario.expect.error
        if declared is not None:
            if self.raised is not None:
                out.append(f"expected {self.raised.text()}")
            else:  # only without the check, which refuses a replay that missed it
                out.append(f"expected {declared}: not raised")
        seen: dict[int, list[RaisedError]] = {}
        for r in self.expected_step_errors:
            seen.setdefault(id(r.step), []).append(r)
        out.extend(f"expected {raised[0].text(len(raised))}" for raised in seen.values())
        return out


def replay(
    scenario: Scenario,
    *,
    backend: str = "asyncio",
    seed: int = 0,
    progress: Progress | None = None,
    check: bool = True,
    time_limit: float | None = None,
) -> Replay:
    """Run ``scenario`` in virtual time; with ``check``, raise if an expectation fails.
    ``time_limit``: seconds of virtual time it may take (:class:`~aiopim.TimeLimitError`)."""
    emu = Emulator(scenario.machine, seed=seed, record=True)
    ctx = ReplayContext(scenario, emu, progress)
    failure: list[StepFailed] = []
    broken: list[ScenarioError] = []

    async def run_task(task: TaskSpec, scope: anyio.CancelScope) -> None:
        host_task_label.set(task.label)
        _task_name.set(task.name)
        try:
            await ctx.run_steps(task.steps)
            ctx.current.pop(task.name, None)
        except StepFailed as exc:
            failure.append(exc)
            scope.cancel()
        except ScenarioError as exc:
            broken.append(exc)
            scope.cancel()

    async def main() -> None:
        k = emu.kernel
        async with anyio.create_task_group() as tg:
            for task in scenario.tasks:
                tg.start_soon(run_task, task, tg.cancel_scope)
                # the kernel runs only once every host task is blocked: the new task has run
                # up to its first wait before the next one starts (the same on both backends)
                w = k.new_waiter(f"task {task.name!r} to start", daemon=True)
                k.call_soon(lambda w: w.resolve(), w)
                await emu.bridge.wait(w)

    try:
        outside_event_loop(lambda: emu.run(main, backend=backend, time_limit=time_limit))
    except BaseException as exc:
        dead = _only_deadlock(exc)
        if dead is None:
            raise
        raise _deadlock(ctx, dead) from exc
    if broken:
        raise broken[0]
    result = Replay(scenario, emu, ctx.buffers, ctx.streams)
    result.expected_step_errors = ctx.expected
    expect = scenario.expect
    if failure:
        f = failure[0]
        if expect.error is None or f.error.code.name != expect.error:
            raise ctx.error(f.step, f"failed: {f.error}") from f.error
        result.error = f.error
        result.raised = f.raised
    if check:
        check_expectations(result)
    return result


def _only_deadlock(exc: BaseException) -> DeadlockError | None:
    """The DeadlockError ``exc`` is, or that every leaf of the exception group ``exc`` is."""
    if isinstance(exc, DeadlockError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        match, rest = exc.split(DeadlockError)
        if match is not None and rest is None:
            leaf: BaseException = match
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            return leaf if isinstance(leaf, DeadlockError) else None
    return None


def _deadlock(ctx: ReplayContext, exc: DeadlockError) -> ScenarioError:
    """The deadlock as a scenario error located at the step of the first blocked task."""
    sc = ctx.scenario
    waiting = list(ctx.current.items())
    where = "; ".join(
        f"task {name!r} is in {step.key} ({step.op}"
        + (f" for event {step.params['event']!r})" if step.op == "wait" else ")")
        for name, step in waiting
    )
    blocked = "\n  ".join(exc.summary) or "(no emulated actor is waiting)"
    message = (
        f"the replay deadlocked at {format_ps(exc.now_ps)}: every host task is blocked and nothing "
        f"can wake them ({where or 'no step running'}). Blocked:\n  {blocked}"
    )
    first = waiting[0][1] if waiting else None
    return ScenarioError(
        message,
        source=sc.source,
        line=first.line if first is not None else None,
        key=first.key if first is not None else "",
    )


def outside_event_loop(fn: Callable[[], T]) -> T:
    """Call ``fn()``, in a helper thread if this thread already runs an event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    box: list[Any] = []

    def target() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:
            box.append((False, exc))

    thread = threading.Thread(target=target, name="aiopim replay")
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def check_expectations(result: Replay) -> None:
    """Raise :class:`ScenarioError` at the first expectation the replay does not meet."""
    sc = result.scenario
    ex = sc.expect
    if ex.error is not None and result.error is None:
        raise ScenarioError(
            f"expected the replay to fail with {ex.error}, but it succeeded",
            source=sc.source,
            line=ex.error_line,
            key="expect.error",
        )
    if ex.time_ps is not None and result.end_ps != ex.time_ps:
        raise ScenarioError(
            f"final virtual time is {format_ps(result.end_ps)} ({result.end_ps} ps), expected "
            f"{format_ps(ex.time_ps)} ({ex.time_ps} ps)",
            source=sc.source,
            line=ex.time_line,
            key="expect.time",
        )
    for d in ex.data:
        if d.count is not None or d.first is not None:
            problem = _check_stream(result.streams.get(d.buffer, {}), d)
            if problem:
                raise ScenarioError(
                    f"FIFO stream {d.buffer!r}: {problem}", source=sc.source, line=d.line, key=d.key
                )
            continue
        buf = result.buffers.get(d.buffer)
        arr = None if buf is None else _as_dtype(buf, d.dtype)
        if arr is None:
            problem = (
                "no step filled it during the replay"
                if buf is None
                else f"its {_row_bytes(buf)} bytes per DPU are not a whole number of {d.dtype} "
                "values"
            )
            raise ScenarioError(
                f"buffer {d.buffer!r}: {problem}", source=sc.source, line=d.line, key=d.key
            )
        ok: bool
        got: Any
        if d.equals is not None:
            got = arr[: len(d.equals)].tolist()
            ok = got == d.equals
            want: Any = d.equals
        elif d.all is not None:
            bad = np.flatnonzero(arr != d.all)
            ok = bad.size == 0
            got = f"element {int(bad[0])} = {int(arr[bad[0]])}" if bad.size else ""
            want = f"every element = {d.all}"
        else:
            got = int(arr.sum(dtype=np.uint64 if d.dtype.startswith("u") else np.int64))
            ok = got == d.sum
            want = f"sum {d.sum}"
        if not ok:
            raise ScenarioError(
                f"buffer {d.buffer!r} ({d.dtype}): expected {want}, got {got}",
                source=sc.source,
                line=d.line,
                key=d.key,
            )


def _row_bytes(buf: np.ndarray) -> int:
    """Bytes of one row of ``buf`` (one DPU's part of a transfer buffer)."""
    return int(buf.shape[-1]) * buf.itemsize if buf.ndim else buf.itemsize


def _as_dtype(buf: np.ndarray, dtype: str) -> np.ndarray | None:
    """The rows of ``buf`` as one flat array of ``dtype`` (None if a row does not divide)."""
    if _row_bytes(buf) % np.dtype(dtype).itemsize:
        return None
    return np.ascontiguousarray(buf).reshape(-1).view(np.uint8).view(np.dtype(dtype))


def _check_stream(stream: dict[tuple[int, int], list[np.ndarray]], d: DataCheck) -> str:
    """What is wrong with a drained FIFO stream ("" if it meets the check)."""
    if not stream:
        return "no DPU was drained into it"
    for (rank, dpu), elements in sorted(stream.items()):
        where = f"DPU {dpu_name(rank, dpu)}"
        if d.count is not None and len(elements) != d.count:
            return f"{where} drained {len(elements)} element(s), expected {d.count}"
        if d.first is None or d.step is None:
            continue
        views = [_as_dtype(e, d.dtype) for e in elements]
        if any(v is None for v in views):
            return f"{where}: its elements are not a whole number of {d.dtype} values"
        rows = [v.tolist() for v in views if v is not None]
        if d.sort:
            rows.sort()
        width = len(d.first)
        for i, row in enumerate(rows):
            want = [d.first[w] + i * d.step[w] for w in range(width)]
            if row[:width] != want:
                return f"{where} element {i} is {row[:width]}, expected {want}"
    return ""
