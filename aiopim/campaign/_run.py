"""One run of a campaign, wherever it executes: its record as one JSON line.

:func:`execute_run` is what every executor calls (it pickles by reference). It never raises
for a failure of the run itself: a program that raises, cannot be imported or returns a value
that is not JSON-serialisable gives a record with ``status = "failed"``, the error and the
traceback, so the campaign goes on.
"""

from __future__ import annotations

import functools
import json
import time
import traceback
from typing import Any

from .._emulator import Emulator
from ._figures import counting_emulator, figures
from ._spec import CampaignError, RunSpec, call_arguments, import_program

#: keys of a record that are the same wherever and whenever the run executes
TABLE_KEYS = (
    "run",
    "label",
    "params",
    "seed",
    "status",
    "result",
    "virtual_time_ps",
    "cpu_dpu_ps",
    "dpu_kernel_ps",
    "inter_dpu_ps",
    "dpu_cpu_ps",
    "instructions",
    "digest",
    "error",
    "traceback",
)


def _json_default(value: Any) -> Any:
    """NumPy scalars become Python numbers; anything else is not JSON-serialisable."""
    item = getattr(value, "item", None)
    if item is not None and getattr(value, "shape", None) == ():
        return item()
    raise TypeError(f"a value of type {type(value).__name__} is not JSON-serialisable")


def _innermost(exc: BaseException) -> BaseException:
    """A task group's wrapping of one error, unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _run_function(spec: RunSpec) -> tuple[Any, Emulator]:
    fn = import_program(spec)
    kwargs = call_arguments(spec, fn)
    emu = Emulator(spec.machine_config(), seed=spec.seed, explore=spec.explore, record=False)
    counting_emulator(emu)
    try:
        main = functools.partial(fn, **kwargs)
        value = emu.run(main, backend=spec.backend, time_limit=spec.time_limit)
    except Exception as exc:
        exc.add_note(f"aiopim campaign: {spec.label}")
        raise _Failed(exc, emu) from exc
    return value, emu


def _run_scenario(spec: RunSpec) -> tuple[Any, Emulator]:
    from ..scenario import replay
    from ._scenario import load_with_overrides

    if spec.explore:
        raise CampaignError(f"{spec.label}: a scenario replay cannot explore schedules")
    scenario = load_with_overrides(spec)
    result = replay(scenario, backend=spec.backend, seed=spec.seed, time_limit=spec.time_limit)
    error = None if result.error is None else result.error.code.name
    value = {"scenario": scenario.name, "error": error}
    return value, result.emulator


class _Failed(Exception):
    """The program failed after its emulator existed (its figures are still worth keeping)."""

    def __init__(self, error: BaseException, emulator: Emulator) -> None:
        super().__init__(str(error))
        self.error = error
        self.emulator = emulator


def execute_run(spec: RunSpec) -> str:
    """Run ``spec`` and return its record as one line of JSON (sorted keys)."""
    t0 = time.perf_counter()
    record: dict[str, Any] = {
        "run": spec.index,
        "label": spec.label,
        "key": spec.key(),
        "params": dict(spec.params),
        "seed": spec.seed,
        "status": "ok",
        "result": None,
        "error": None,
        "traceback": None,
    }
    emu: Emulator | None = None
    try:
        value, emu = _run_scenario(spec) if spec.is_scenario else _run_function(spec)
        record["result"] = value
    except Exception as exc:
        if isinstance(exc, _Failed):
            emu, exc = exc.emulator, exc.error  # type: ignore[assignment]
        _fail(record, _innermost(exc), spec)
    if emu is not None and emu.recorder is not None:
        record.update(figures(emu))
    record["wall_s"] = round(time.perf_counter() - t0, 6)
    try:
        return json.dumps(record, sort_keys=True, default=_json_default)
    except (TypeError, ValueError) as exc:
        record["result"] = None
        record["status"] = "failed"
        record["error"] = (
            f"the program returned a value that is not JSON-serialisable ({exc}); "
            "return numbers, strings, booleans, lists and dicts"
        )
        record["traceback"] = None
        return json.dumps(record, sort_keys=True, default=_json_default)


def _fail(record: dict[str, Any], exc: BaseException, spec: RunSpec) -> None:
    """Record the failure (the message without the run's label: tables and errors add it)."""
    record["status"] = "failed"
    if isinstance(exc, CampaignError):
        record["error"] = str(exc).removeprefix(f"{spec.label}: ")
    else:
        record["error"] = f"{type(exc).__name__}: {exc}".rstrip().removesuffix(":")
    record["traceback"] = "".join(traceback.format_exception(exc))
