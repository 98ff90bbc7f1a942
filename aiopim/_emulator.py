"""The emulated machine tied to one kernel, one clock and one host event loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import math
import signal
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

import anyio
import trio

from ._errors import TimeLimitError
from ._locate import running_dpus
from ._machine._config import MachineConfig
from ._machine._machine import Machine
from ._machine._rank import Rank
from ._machine._recorder import Recorder
from ._ops._oplog import OpLog
from ._runtime._backends import (
    BACKENDS as BACKEND_CLASSES,
)
from ._runtime._backends import (
    AsyncioBackend,
    TrioBackend,
    VirtualEventLoop,
    VirtualTrioClock,
    backend_class,
)
from ._runtime._bridge import Bridge
from ._runtime._kernel import HostWaiter, Kernel, ps_to_seconds, seconds_to_ps

T = TypeVar("T")
#: seconds between two samples of a run's progress (see Emulator.run)
PROGRESS_SAMPLE_INTERVAL = 0.2
#: names of the host backends, in a fixed order
BACKENDS: tuple[str, ...] = tuple(BACKEND_CLASSES)


class Emulator:
    """One emulated UPMEM system and its virtual clock.

    Use :func:`aiopim.run` for whole programs, or hand :meth:`anyio_backend` to the anyio
    pytest plugin (or :meth:`trio_clock` to pytest-trio) to run tests in virtual time.
    """

    def __init__(
        self,
        machine: MachineConfig | None = None,
        *,
        seed: int = 0,
        explore: bool = False,
        record: bool = True,
    ) -> None:
        self.seed = seed
        self.kernel = Kernel(explore_seed=seed if explore else None)
        self.bridge = Bridge(self.kernel)
        self.bridge.emulator = weakref.ref(self)
        self.recorder: Recorder | None = Recorder(self.kernel) if record else None
        self.machine = Machine(self.kernel, machine or MachineConfig(), self.recorder)
        weakref.finalize(self, _dropped, self.machine).atexit = False
        #: observer of host operations (``aiopim.scenario.record``); None when not recording
        self.op_log: OpLog | None = None
        self._callback_requests: deque[Callable[[], Awaitable[None]]] = deque()
        self._service_waiter: HostWaiter | None = None
        self._service_running = False
        self._host_errors: list[BaseException] = []

    # -- machine ---------------------------------------
    @property
    def config(self) -> MachineConfig:
        """The machine's configuration (an allocation profile may change it)."""
        return self.machine.config

    def rank(self, index: int) -> Rank:
        """Rank ``index`` of the machine (built on first use)."""
        return self.machine.rank(index)

    # -- running ---------------------------------------
    def asyncio_loop_factory(self) -> asyncio.AbstractEventLoop:
        """An asyncio event loop running in this emulator's virtual time."""
        return AsyncioBackend(self.bridge).loop_factory(self)

    def trio_clock(self) -> trio.abc.Clock:
        """A trio clock running this emulator's virtual time (pass as ``clock=``)."""
        return TrioBackend(self.bridge).clock(self)

    def anyio_backend(self, backend: str) -> tuple[str, dict[str, Any]]:
        """``(name, options)`` for ``anyio.run`` or the anyio pytest plugin's ``anyio_backend``."""
        cls = backend_class(backend)
        return cls.name, cls(self.bridge).anyio_options(self)

    def run(
        self,
        main: Callable[..., Awaitable[T]],
        *args: Any,
        backend: str = "asyncio",
        time_limit: float | None = None,
        progress: bool | None = False,
    ) -> T:
        """Run ``main(*args)`` as the host program, in virtual time, on ``backend``.

        The run ends when ``main`` returns, whatever the DPUs are doing. ``time_limit``: seconds
        of virtual time the run may take; past them it stops with :class:`TimeLimitError`.
        Ctrl-C stops it with ``KeyboardInterrupt``, noting where each running DPU was.
        ``progress``: show the virtual time reached, the DPUs running and the wall time on
        standard error (None: only if it is a terminal); it changes nothing in the run.
        """
        cls = backend_class(backend)
        # no owner: this call keeps the emulator alive, and after it trio's runner (a cycle)
        # would keep it alive until the garbage collector runs
        name, options = cls.name, cls(self.bridge).anyio_options()
        limit_ps = _time_limit_ps(time_limit)
        # Ctrl-C is watched only if it would interrupt the program (the loop installs its own
        # handler for the default one; it is chained to in _root)
        watch = _sigint_is_default()
        description = getattr(main, "__name__", "run")
        try:
            with self._progress(description, progress):
                result: T = anyio.run(
                    self._root, main, args, limit_ps, watch, backend=name, backend_options=options
                )
        except BaseException as exc:
            if _is_interrupt(exc):
                raise self._interrupted(exc) from None
            raise
        return result

    @contextlib.contextmanager
    def _progress(self, description: str, enabled: bool | None) -> Iterator[None]:
        """Show the run's progress while inside (if ``enabled``, see :func:`progress_enabled`).

        A thread samples the kernel's clock and the ranks' counts of running DPUs a few times
        a second: the kernel may run for minutes between two host steps, and it pays nothing
        for a display it does not know about (it only reads them: the run is unchanged).
        """
        from ._progress import Progress, progress_enabled  # rich only for a display

        if not progress_enabled(enabled):
            yield
            return
        stop = threading.Event()
        with Progress(description, enabled=True) as bar:

            def sample() -> None:
                while True:
                    bar.update(0, **self._progress_fields())
                    if stop.wait(PROGRESS_SAMPLE_INTERVAL):
                        return

            sampler = threading.Thread(target=sample, name="aiopim progress", daemon=True)
            sampler.start()
            try:
                yield
            finally:
                stop.set()
                sampler.join()
                bar.update(0, **self._progress_fields())

    def _progress_fields(self) -> dict[str, str]:
        """The progress display's fields (read from another thread: no iteration over state
        the run may change meanwhile)."""
        from ._progress import virtual_time

        running = sum(r.running_dpus for r in list(self.machine._ranks.values()))
        return {"virtual_time": virtual_time(self.kernel.now), "DPUs_running": str(running)}

    def _interrupted(self, exc: BaseException) -> KeyboardInterrupt:
        """The ``KeyboardInterrupt`` of a Ctrl-C, with a note of where the DPUs were."""
        ki = exc if isinstance(exc, KeyboardInterrupt) else KeyboardInterrupt()
        if ki is not exc:
            ki.__traceback__ = exc.__traceback__
        running = running_dpus(self.machine)
        ki.add_note(
            f"aiopim: interrupted at t={ps_to_seconds(self.kernel.now):.9f}s of virtual time; "
            + (
                "DPUs still running:\n  " + "\n  ".join(running)
                if running
                else "no DPU was running"
            )
        )
        return ki

    async def _root(
        self,
        main: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
        limit_ps: int | None = None,
        watch_sigint: bool = False,
    ) -> T:
        bridge = self.bridge
        bridge.start_run(limit_ps)
        bridge.describe_running = functools.partial(running_dpus, self.machine)
        finished = False
        result: Any = None
        error: Exception | None = None
        with _sigint_interrupts(bridge) if watch_sigint else contextlib.nullcontext():
            async with anyio.create_task_group() as tg:
                self._service_running = True
                service = anyio.CancelScope()
                tg.start_soon(self._callback_service, service)
                try:
                    with anyio.CancelScope() as scope:
                        bridge.main_scope = scope
                        try:
                            result = await main(*args)
                            finished = True
                        except Exception as exc:  # re-raised outside the task group, unwrapped
                            error = exc
                finally:
                    # the run ends when the host returns, whatever the DPUs are doing (the host
                    # process exits and frees its ranks): the kernel runs no more
                    bridge.ended = True
                    bridge.main_scope = None
                    service.cancel()
        raised = self._run_error(finished, error)
        if raised is not None:
            raise raised
        return result  # type: ignore[no-any-return]

    def _run_error(self, finished: bool, error: Exception | None) -> BaseException | None:
        """What the run ended with: the bridge's failure (a deadlock, a DPU crash, the time
        limit), else ``error`` from the host program, else a callback's error. The emulator
        keeps none of them: the next run starts clean."""
        failure, self.bridge.failure = self.bridge.failure, None
        host_errors, self._host_errors = self._host_errors, []
        if failure is not None and (not finished or isinstance(failure, TimeLimitError)):
            return failure
        if error is not None:
            return error
        return host_errors[0] if host_errors else None

    # -- host callbacks ---------------------------------------
    @property
    def runs_host_callbacks(self) -> bool:
        """True inside :meth:`run`, whose host task group runs callback jobs."""
        return self._service_running

    def call_host(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn()`` as a new host task (callback jobs); deterministic, one per idle pass."""
        self._callback_requests.append(fn)
        w = self._service_waiter
        if w is not None and w.pending:
            self.kernel.call_soon(lambda _: w.resolve() if w.pending else None)

    async def _callback_service(self, scope: anyio.CancelScope) -> None:
        # cancelled through its own scope, so the task ends normally: a cancellation escaping
        # the task would be kept by asyncio, with frames holding this emulator
        try:
            with scope:
                await self._serve_callbacks()
        finally:
            self._service_running = False
            self._service_waiter = None

    async def _serve_callbacks(self) -> None:
        """Start each requested callback job as a host task, one per idle pass."""
        async with anyio.create_task_group() as tg:
            while True:
                if not self._callback_requests:
                    w = self.kernel.new_waiter("callback requests", daemon=True)
                    self._service_waiter = w
                    await self.bridge.wait(w)
                    continue
                fn = self._callback_requests.popleft()
                tg.start_soon(self._run_host_fn, fn)
                # let the new task run until it blocks before starting another
                w = self.kernel.new_waiter("callback start", daemon=True)
                self.kernel.call_soon(_resolve_waiter, w)
                await self.bridge.wait(w)

    async def _run_host_fn(self, fn: Callable[[], Awaitable[None]]) -> None:
        try:
            await fn()
        except Exception as exc:
            self._host_errors.append(exc)
            self.bridge._fail(exc)

    async def delay(self, ps: int, description: str = "virtual time") -> None:
        """Let ``ps`` picoseconds of virtual time pass for the calling host task."""
        w = self.kernel.new_waiter(description)
        self.kernel.call_at(self.kernel.now + ps, lambda _: w.resolve())
        await self.bridge.wait(w)

    @property
    def now_ps(self) -> int:
        """Virtual time in picoseconds."""
        return self.kernel.now


#: bytes of memories that dropped emulators may hold before aiopim runs the garbage collector
GC_AFTER_DROPPED_BYTES = 256 << 20
_dropped_bytes = 0


def _dropped(machine: Machine) -> None:
    """An emulator was dropped. Its machine's objects refer to each other (a rank and its DPUs,
    a DPU and its runner), so only the garbage collector frees them; it runs by counts of new
    objects, and a machine is few objects holding many bytes. Collect once dropped machines hold
    :data:`GC_AFTER_DROPPED_BYTES`, so a process running emulators one after another (tests,
    sweeps) keeps the memory of a few."""
    global _dropped_bytes
    _dropped_bytes += machine.held_bytes()
    if _dropped_bytes >= GC_AFTER_DROPPED_BYTES:
        _dropped_bytes = 0
        gc.collect()


def _resolve_waiter(w: HostWaiter) -> None:
    w.resolve()


def _time_limit_ps(time_limit: float | None) -> int | None:
    """A run's ``time_limit`` in picoseconds (None: no limit)."""
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float):
        raise TypeError(
            f"time_limit must be a number of seconds of virtual time, not "
            f"{type(time_limit).__name__}"
        )
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise ValueError(
            f"time_limit must be a positive number of seconds of virtual time (or None for no "
            f"limit), not {time_limit!r}"
        )
    return max(1, seconds_to_ps(time_limit))


def _sigint_is_default() -> bool:
    """Whether Ctrl-C raises KeyboardInterrupt here (the main thread, Python's own handler)."""
    return (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


@contextlib.contextmanager
def _sigint_interrupts(bridge: Bridge) -> Iterator[None]:
    """Make Ctrl-C end the run even while the kernel runs, then do what the event loop does
    on Ctrl-C (its own handler, installed when the loop started, is called next)."""
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: FrameType | None) -> None:
        bridge.interrupt()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, previous)


def _is_interrupt(exc: BaseException) -> bool:
    """A KeyboardInterrupt, or a task group's wrapping of KeyboardInterrupts only."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_interrupt(e) for e in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


def current_emulator() -> Emulator:
    """The emulator whose virtual clock drives the running event loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if isinstance(loop, VirtualEventLoop):
        emu = _emulator_of(loop.aiopim_bridge)
        if emu is not None:
            return emu
    if loop is None:
        try:
            clock = trio.lowlevel.current_clock()
        except RuntimeError:
            clock = None
        if isinstance(clock, VirtualTrioClock):
            emu = _emulator_of(clock.aiopim_bridge)
            if emu is not None:
                return emu
    raise RuntimeError(
        "no aiopim emulator drives this event loop: start the program with aiopim.run(main), "
        "or give the test an Emulator's anyio_backend()/trio_clock()"
    )


def _emulator_of(bridge: Bridge) -> Emulator | None:
    emu = bridge.emulator() if bridge.emulator is not None else None
    return emu if isinstance(emu, Emulator) else None


def now() -> float:
    """Current virtual time in seconds."""
    return ps_to_seconds(current_emulator().kernel.now)


def run(
    main: Callable[..., Awaitable[T]],
    *args: Any,
    backend: str = "asyncio",
    seed: int = 0,
    machine: MachineConfig | None = None,
    explore: bool = False,
    time_limit: float | None = None,
    progress: bool | None = False,
) -> T:
    """Run the host program ``main(*args)`` on a fresh emulator in virtual time (see
    :meth:`Emulator.run` for when the run ends, ``time_limit`` and ``progress``)."""
    return Emulator(machine, seed=seed, explore=explore).run(
        main, *args, backend=backend, time_limit=time_limit, progress=progress
    )
