"""Device interfaces at run time: the ``Task`` enum, argument checks and the word codec."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from ._didl import MEMORY_COPY, Function, Interface, Param, load_didl, parse_didl, snake_case
from ._errors import DpuFoundryError

#: ``factory(dpu_number) -> worker`` of the stubbed backend
WorkerFactory = Callable[[int], Any]
#: A task: a member of an interface's ``Task`` enum (or its DIDL / snake_case name)
TaskLike = enum.Enum | str


def task_enum(didl: Interface) -> type[enum.Enum]:
    """The ``Task`` enum of an interface: one member per function plus ``memory_copy``."""
    members = [(f.python_name, f.name) for f in didl.functions]
    members.append((snake_case(MEMORY_COPY), MEMORY_COPY))
    return enum.Enum("Task", members)  # type: ignore[return-value]


class KeloniaInterface:
    """A device interface: what a DPU program offers the host, from its DIDL.

    Generated modules subclass it with the DIDL in ``didl``; :func:`load_interface` builds one
    from a file at run time."""

    didl: ClassVar[Interface]
    Task: ClassVar[type[enum.Enum]]
    _instances: ClassVar[dict[type[KeloniaInterface], KeloniaInterface]] = {}

    def __init__(self, didl: Interface | None = None) -> None:
        if didl is not None:
            self.didl = didl  # type: ignore[misc]
            self.Task = task_enum(didl)  # type: ignore[misc]
        elif not hasattr(type(self), "didl"):
            raise TypeError("give the interface's DIDL (or use a generated interface class)")

    @classmethod
    def instance(cls) -> Self:
        """The shared instance of a generated interface class."""
        inst = KeloniaInterface._instances.get(cls)
        if inst is None:
            inst = KeloniaInterface._instances[cls] = cls()
        return inst  # type: ignore[return-value]

    @property
    def name(self) -> str:
        """The interface's name (its DIDL file's stem)."""
        return self.didl.name

    def task_name(self, task: TaskLike) -> str:
        """The DIDL name of ``task`` (``"countCharacters"``, ``"memoryCopy"``)."""
        raw = task.value if isinstance(task, enum.Enum) else task
        if raw in (MEMORY_COPY, snake_case(MEMORY_COPY)):
            return MEMORY_COPY
        if isinstance(raw, str):
            try:
                return self.didl.function(raw).name
            except KeyError:
                pass
        known = ", ".join([f.python_name for f in self.didl.functions] + ["memory_copy"])
        raise DpuFoundryError(f"{task!r} is not a task of interface {self.name!r} ({known})")

    def stubbed(self, factories: Mapping[str, WorkerFactory]) -> StubbedInterface:
        """The same interface on the stubbed backend, with these worker factories."""
        return StubbedInterface(self.didl, factories)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class StubbedInterface(KeloniaInterface):
    """An interface whose workers come from factories (mocks, reference models), no DPU.

    Override :meth:`worker_factories` (as generated ``Stubbed…`` classes invite) or pass the
    factories; build them with :class:`WorkerFactoryBuilder`."""

    def __init__(
        self, didl: Interface | None = None, factories: Mapping[str, WorkerFactory] | None = None
    ) -> None:
        super().__init__(didl)
        self._factories = dict(factories or {})

    def worker_factories(self) -> Mapping[str, WorkerFactory]:
        """Task name → ``factory(dpu_number)``."""
        return self._factories


@dataclass
class WorkerFactoryBuilder:
    """``WorkerFactoryBuilder().with_worker(lambda dpu: w, Task.x).build()``."""

    _factories: dict[str, WorkerFactory] = field(default_factory=dict)

    def with_worker(self, factory: WorkerFactory, *tasks: TaskLike) -> WorkerFactoryBuilder:
        """Serve ``tasks`` with ``factory(dpu_number)``."""
        if not callable(factory):
            raise TypeError("factory must be callable as factory(dpu_number)")
        if not tasks:
            raise TypeError("with_worker needs at least one task")
        for t in tasks:
            name = t.value if isinstance(t, enum.Enum) else t
            if not isinstance(name, str):
                raise TypeError(f"task must be a Task member or a name, not {t!r}")
            self._factories[name] = factory
        return self

    def build(self) -> dict[str, WorkerFactory]:
        """The factories, by task name."""
        return dict(self._factories)


def load_interface(path: str | Path) -> KeloniaInterface:
    """The interface of a DIDL file, at run time (no generated module needed)."""
    return KeloniaInterface(load_didl(path))


def interface_from_text(text: str, name: str, file: str = "<didl>") -> KeloniaInterface:
    """The interface of DIDL ``text``."""
    return KeloniaInterface(parse_didl(text, file, name=name))


# -- arguments and results --------------------------------------------------------------------
def bind_arguments(f: Function, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[np.ndarray]:
    """The ``in`` values of a call as element arrays, in parameter order (TypeError/ValueError
    naming the parameter on a bad argument)."""
    inputs = f.inputs
    names = [p.python_name for p in inputs]
    if len(args) > len(inputs):
        raise TypeError(f"{f.python_name}() takes {len(inputs)} arguments, got {len(args)}")
    values: dict[str, Any] = dict(zip(names, args, strict=False))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{f.python_name}() got an unexpected argument {k!r}")
        if k in values:
            raise TypeError(f"{f.python_name}() got two values for {k!r}")
        values[k] = v
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"{f.python_name}() is missing {', '.join(map(repr, missing))}")
    return [elements(p, values[p.python_name]) for p in inputs]


def elements(p: Param, value: Any) -> np.ndarray:
    """``value`` as a 1-D array of ``p``'s dtype and length, checked."""
    bits = 8 * p.dtype.itemsize
    name = p.python_name
    if p.length is None:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int ({p.scalar}), not {type(value).__name__}")
        v = int(value)
        if not 0 <= v < 1 << bits:
            raise ValueError(f"{name}={v} does not fit {p.scalar}")
        return np.array([v], dtype=p.dtype)
    if isinstance(value, bytes | bytearray | memoryview):
        arr = np.frombuffer(value, np.uint8)
    elif isinstance(value, str):
        raise TypeError(f"{name} must hold integers ({p.scalar}[{p.length}]), not a str")
    elif isinstance(value, list | tuple) and all(
        isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value
    ):
        arr = np.array([int(v) for v in value], dtype=object)  # no float detour for big ints
    else:
        arr = np.asarray(value)
    if arr.dtype.kind == "O" and all(
        isinstance(v, int) and not isinstance(v, bool) for v in arr.reshape(-1)
    ):
        lo, hi = min(arr.reshape(-1), default=0), max(arr.reshape(-1), default=0)
    elif arr.dtype.kind in "iu":
        lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    else:
        raise TypeError(f"{name} must hold integers ({p.scalar}[{p.length}]), not {arr.dtype}")
    if arr.shape != (p.count,):
        raise ValueError(f"{name} must have {p.count} elements ({p.scalar}), got shape {arr.shape}")
    if lo < 0 or hi >= 1 << bits:
        raise ValueError(f"{name} has values that do not fit {p.scalar}")
    return arr.astype(p.dtype)


def to_words(p: Param, elems: np.ndarray) -> np.ndarray:
    """Mailbox words of ``elems`` (u64: two words per element, low word first)."""
    if p.scalar == "u64":
        return elems.astype("<u8").view("<u4").astype(np.uint32)
    return elems.astype(np.uint32)


def from_words(p: Param, words: np.ndarray) -> np.ndarray:
    """Elements of ``p`` from its mailbox words; ``ValueError`` if a word does not fit."""
    w = np.asarray(words, dtype=np.uint32)
    if p.scalar == "u64":
        return w.astype("<u4").view("<u8").astype(np.uint64)
    bits = 8 * p.dtype.itemsize
    if bits < 32 and w.size and int(w.max()) >> bits:
        bad = int(w[np.argmax(w >> bits != 0)])
        raise ValueError(f"{p.name!r} is {p.scalar} but the DPU posted {bad:#x}")
    return w.astype(p.dtype)


def result_value(f: Function, outputs: Sequence[np.ndarray]) -> Any:
    """What a worker call returns: None, one value, or a tuple in parameter order (arrays for
    ``T[n]``, NumPy scalars for scalars)."""
    vals: list[Any] = [
        o if p.length is not None else o[0] for p, o in zip(f.outputs, outputs, strict=True)
    ]
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else tuple(vals)
