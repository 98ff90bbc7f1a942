"""Fresh emulated machines for tests: one per run, on a chosen backend, optionally explored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._emulator import BACKENDS, Emulator
from .._errors import DeadlockError
from .._machine._config import MachineConfig
from .._machine._recorder import Recorder

T = TypeVar("T")

#: machine of the fixtures unless a test asks for another (small: built for every example)
DEFAULT_MACHINE = MachineConfig(nr_ranks=4, nr_dpus_per_rank=8)


def replay_hint(backend: str, explore_seed: int | None) -> str:
    """How to rerun a program with exactly the same schedule."""
    if explore_seed is None:
        return f"aiopim: backend={backend!r}, stable event order (no exploration)"
    return (
        f"aiopim: backend={backend!r}, explore_seed={explore_seed}; replay with "
        f"Emulator(machine, seed={explore_seed}, explore=True).run(main, backend={backend!r}) "
        f"or pim.run(main, explore_seed={explore_seed})"
    )


def new_emulator(
    machine: MachineConfig | None = None,
    *,
    explore_seed: int | None = None,
    record: bool = True,
) -> Emulator:
    """An emulator with its own virtual clock; ``explore_seed`` permutes simultaneous events."""
    return Emulator(
        machine or DEFAULT_MACHINE,
        seed=explore_seed or 0,
        explore=explore_seed is not None,
        record=record,
    )


@dataclass
class Execution(Generic[T]):
    """One run of a host program: its value or error and the emulator that ran it."""

    emulator: Emulator
    backend: str
    explore_seed: int | None
    value: T | None = None
    error: Exception | None = None

    @property
    def deadlock(self) -> DeadlockError | None:
        """The run's :class:`~aiopim.DeadlockError`, if it deadlocked (also inside a group)."""
        return _find_deadlock(self.error)

    @property
    def events(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Recorded events ``(time_ps, kind, fields)``."""
        return recorder_of(self.emulator).iter_events()

    @property
    def jobs(self) -> list[dict[str, Any]]:
        """Recorded jobs (see ``Recorder.jobs``)."""
        return recorder_of(self.emulator).jobs()

    def trace(self) -> str:
        """The byte-stable JSON-lines trace of the run."""
        return recorder_of(self.emulator).to_jsonl()

    def unwrap(self) -> T:
        """The value, or raise the error (with a replay note)."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def _find_deadlock(error: BaseException | None) -> DeadlockError | None:
    if isinstance(error, DeadlockError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _find_deadlock(inner)
            if found is not None:
                return found
    return None


def recorder_of(emu: Emulator) -> Recorder:
    """The emulator's recorder (a ValueError if it records nothing)."""
    if emu.recorder is None:
        raise ValueError("the emulator was created with record=False")
    return emu.recorder


class Pim:
    """Runs host programs on fresh emulated machines on one backend (the ``pim`` fixture).

    Each :meth:`run` builds a new machine and clock, so it is safe to call once per
    Hypothesis example; ``explore_seed`` turns on schedule exploration for that run.
    """

    def __init__(self, backend: str, machine: MachineConfig | None = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        self.backend = backend
        self.machine = machine or DEFAULT_MACHINE

    def __repr__(self) -> str:
        return f"Pim(backend={self.backend!r}, machine={self.machine})"

    def emulator(
        self, *, machine: MachineConfig | None = None, explore_seed: int | None = None
    ) -> Emulator:
        """A fresh emulator (own clock) for this harness's machine or ``machine``."""
        return new_emulator(machine or self.machine, explore_seed=explore_seed)

    def execute(
        self,
        main: Callable[..., Awaitable[T]],
        *args: Any,
        machine: MachineConfig | None = None,
        explore_seed: int | None = None,
    ) -> Execution[T]:
        """Run ``main(*args)`` on a fresh machine; an exception is kept in the result."""
        emu = self.emulator(machine=machine, explore_seed=explore_seed)
        run = Execution[T](emu, self.backend, explore_seed)
        try:
            run.value = emu.run(main, *args, backend=self.backend)
        except Exception as exc:
            exc.add_note(replay_hint(self.backend, explore_seed))
            run.error = exc
        return run

    def run(
        self,
        main: Callable[..., Awaitable[T]],
        *args: Any,
        machine: MachineConfig | None = None,
        explore_seed: int | None = None,
    ) -> T:
        """Run ``main(*args)`` on a fresh machine and return its value (errors propagate)."""
        return self.execute(main, *args, machine=machine, explore_seed=explore_seed).unwrap()
