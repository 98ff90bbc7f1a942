"""Python models that stand in for a binary, and the registry that binds them by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import (
    TYPE_CHECKING,
    Any,
    Protocol,
    TypeVar,
    cast,
    overload,
    runtime_checkable,
)

from ..dpu._program import MainFn
from ..dpu._tasklet import start_tasklets

if TYPE_CHECKING:
    from .._machine._dpu import Dpu
    from ._program import ElfProgram


# ================================================================================================
# behaviours: what runs when an ELF program is launched
# ================================================================================================
@runtime_checkable
class DpuBehaviour(Protocol):
    """What executes a loaded ELF program when its DPU boots.

    ``start`` is called by :meth:`ElfProgram.boot` at the launch's virtual time; it must spawn
    the tasklets with ``dpu.runner_of(TaskletRunner).spawn(tid, coroutine)`` (or spawn none:
    the DPU then stops at once). :class:`PythonModel` is the implementation for Python
    kernels.
    """

    def start(self, dpu: Dpu, program: ElfProgram) -> None:
        """Spawn the program's tasklets on ``dpu``."""


class PythonModel:
    """A Python kernel standing in for the binary: ``main(t)`` runs on every tasklet.

    The :class:`~aiopim.Tasklet` it receives resolves names against the binary:
    ``t.view(program.address_of("x"), np.uint32, n)``, ``t.view(program.var("x", np.uint32))``,
    ``t.mram_heap_pointer``, ``t.mem_alloc`` (heap from ``__sys_heap_pointer_reset``) …
    """

    def __init__(self, main: MainFn) -> None:
        if not callable(main):
            raise TypeError(f"a model must be an async main(t) function, not {main!r}")
        self.main = main

    def start(self, dpu: Dpu, program: ElfProgram) -> None:
        """Spawn one :class:`~aiopim.Tasklet` per ``NR_TASKLETS``, as ``Program.boot`` does."""
        start_tasklets(dpu, program, self.main)

    def __repr__(self) -> str:
        return f"PythonModel({getattr(self.main, '__qualname__', self.main)!r})"


Model = MainFn | DpuBehaviour
_M = TypeVar("_M")
#: program name -> (model as registered, its behaviour), converted once at registration
_REGISTRY: dict[str, tuple[Model, DpuBehaviour]] = {}


def _as_behaviour(model: object) -> DpuBehaviour:
    if isinstance(model, DpuBehaviour):
        return model
    if callable(model):
        return PythonModel(cast(MainFn, model))
    raise TypeError(
        f"a model must be an async main(t) function or have start(dpu, program), not {model!r}"
    )


@overload
def register_model(program_name: str) -> Callable[[_M], _M]: ...
@overload
def register_model(program_name: str, model: _M) -> _M: ...
def register_model(program_name: str, model: Any = None) -> Any:
    """Bind ``model`` to every ELF program called ``program_name`` (default name: file stem).

    ``model`` is an ``async def main(t)`` Python kernel or a :class:`DpuBehaviour`. The lookup
    happens at launch, so a model may be registered before or after loading. Without ``model``
    this is a decorator: ``@register_model("checksum")``. Registering again replaces.
    """
    if model is None:

        def decorate(fn: _M) -> _M:
            register_model(program_name, fn)
            return fn

        return decorate
    _REGISTRY[program_name] = (model, _as_behaviour(model))  # validated now, not at launch
    return model


def unregister_model(program_name: str) -> None:
    """Remove the model registered for ``program_name`` (no error if there is none)."""
    _REGISTRY.pop(program_name, None)


def registered_model(program_name: str) -> Model | None:
    """The model registered for ``program_name``, if any."""
    entry = _REGISTRY.get(program_name)
    return None if entry is None else entry[0]
