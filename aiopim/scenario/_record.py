"""Record a host program's run as a scenario file whose replay produces the same trace.

The emulator's operation log sees every host call (allocations, loads, launches, transfers,
syncs, callbacks) with its virtual start time and host task. DPU programs are replaced by the
``recorded`` kernel, which runs each DPU for exactly the recorded time, so the replay does not
need the original program or data. Callbacks become host functions that compute for the time
the original ones took.

Limits (refused with a clear message): callbacks that call DPU operations themselves or raise,
DPU faults, IRAM symbols, two different programs with one name. Ties between host tasks acting
at the same virtual instant are replayed in task order, which matches the original for the
usual shapes (one host task, or tasks that act at different instants).
"""

from __future__ import annotations

import contextvars
import inspect
import json
import os
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .._core import _ops
from .._core._emulator import Emulator
from .._core._errors import DpuError
from .._core._machine import MachineConfig
from .._core._program import DPU_MRAM_HEAP_POINTER_NAME, DpuProgram, MemorySpace, Symbol
from .._core._recorder import host_task_label
from .._core._set import DpuSetBase
from ..trace import Timeline, chrome_trace
from ._replay import outside_event_loop

_in_op: contextvars.ContextVar[bool] = contextvars.ContextVar("aiopim_rec_in_op", default=False)
_in_callback: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiopim_rec_in_callback", default=False
)
_XFER_BITS = _ops.DPU_XFER_ASYNC | _ops.DPU_XFER_PARALLEL | _ops.DPU_XFER_NO_RESET


class RecordingError(ValueError):
    """The run did something a scenario cannot reproduce."""


class OpRecorder:
    """An ``Emulator.op_log`` that writes down host operations as scenario steps."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.machine = emulator.config
        #: per host task: its label and steps (dicts with the scenario keys, plus "_end")
        self.tasks: list[tuple[str, list[dict[str, Any]]]] = []
        self._task_ids: dict[int, int] = {}
        self.roots: list[tuple[str, DpuSetBase]] = []
        self.programs: dict[str, DpuProgram] = {}
        self.problems: list[str] = []

    # -- OpLog ---------------------------------------
    def run(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Awaitable[Any]:
        """Run the operation, writing it down unless it is nested in another one."""
        return self._run(op, fn, args, kwargs)

    async def _run(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if _in_op.get():  # e.g. the sync inside dpu_status
            return await fn(*args, **kwargs)
        if _in_callback.get():
            self.problems.append(f"a callback called {op}; callbacks must not use the DPUs")
            return await fn(*args, **kwargs)
        ident = anyio.get_current_task().id
        idx = self._task_ids.get(ident)
        if idx is None:
            idx = self._task_ids[ident] = len(self.tasks)
            self.tasks.append((host_task_label.get(), []))
        emu = self.emulator
        step: dict[str, Any] = {"op": op, "at": emu.now_ps}
        args = self._describe(step, op, args)
        self.tasks[idx][1].append(step)
        token = _in_op.set(True)
        try:
            result = await fn(*args, **kwargs)
        except DpuError as exc:
            step["error"] = exc.code.name
            step["_end"] = emu.now_ps
            raise
        finally:
            _in_op.reset(token)
        step["_end"] = emu.now_ps
        if op == "alloc":
            self.roots.append((step["set"], result))
        return result

    # -- describing operations ---------------------------------------
    def _describe(self, step: dict[str, Any], op: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if op == "alloc":
            _, _, nr_dpus, nr_ranks, profile = args
            step["set"] = "dpus" if not self.roots else f"dpus{len(self.roots) + 1}"
            if nr_dpus is not None:
                step["dpus"] = nr_dpus
            else:
                step["ranks"] = nr_ranks
            if profile:
                step["profile"] = profile
            return args
        dset = args[0]
        step.update(self._target(dset))
        if op == "load":
            prog: DpuProgram = args[1]
            known = self.programs.get(prog.name)
            if known is not None and known is not prog:
                self.problems.append(f"two different programs are named {prog.name!r}")
            self.programs[prog.name] = prog
            step["program"] = prog.name
        elif op in ("free", "sync", "status"):
            pass
        elif op == "launch":
            step["async"] = args[1] != _ops.DPU_SYNCHRONOUS
        elif op == "push_xfer":
            _, xfer, symbol, offset, length, flags = args
            step["op"] = "copy_to" if xfer == _ops.DPU_XFER_TO_DPU else "copy_from"
            if xfer not in (_ops.DPU_XFER_TO_DPU, _ops.DPU_XFER_FROM_DPU):
                self.problems.append(f"dpu_push_xfer with xfer={xfer}")
            self._xfer(step, symbol, offset, length, flags)
            members = dset.dpu_list
            has = [
                i for i, d in enumerate(members) if _ops._matrix(d.rank).get(d.index) is not None
            ]
            if len(has) != len(members):
                step["dpus"] = has
        elif op == "broadcast_to":
            _, symbol, offset, _data, length, flags = args
            step["op"] = "copy_to"
            step["broadcast"] = True
            self._xfer(step, symbol, offset, length, flags)
        elif op == "copy_from":
            _, symbol, offset, _dst, length = args
            step["op"] = "dpu_copy_from"
            step["symbol"] = _symbol_name(symbol)
            step["bytes"] = length
            if offset:
                step["offset"] = offset
        elif op == "callback":
            _, fn, cb_args, flags = args
            for bit, key in (
                (_ops.DPU_CALLBACK_ASYNC, "async"),
                (_ops.DPU_CALLBACK_NONBLOCKING, "nonblocking"),
                (_ops.DPU_CALLBACK_SINGLE_CALL, "single_call"),
                (_ops.DPU_CALLBACK_PARALLEL, "parallel"),
            ):
                if flags & bit:
                    step[key] = True
            times: list[int] = []
            results: list[int] = []
            step["_times"], step["_results"] = times, results
            return (dset, self._wrap_callback(fn, times, results), cb_args, flags)
        else:
            self.problems.append(f"the operation {op!r} cannot be recorded yet")
        return args

    def _xfer(
        self, step: dict[str, Any], symbol: Any, offset: int, length: int, flags: int
    ) -> None:
        step["symbol"] = _symbol_name(symbol)
        step["bytes"] = length
        if offset:
            step["offset"] = offset
        if flags & ~_XFER_BITS:
            self.problems.append(f"transfer flags {flags:#x} have unknown bits")
        for bit, key in (
            (_ops.DPU_XFER_ASYNC, "async"),
            (_ops.DPU_XFER_PARALLEL, "parallel"),
            (_ops.DPU_XFER_NO_RESET, "no_reset"),
        ):
            if flags & bit:
                step[key] = True

    def _wrap_callback(
        self, fn: Callable[..., Any], times: list[int], results: list[int]
    ) -> Callable[..., Awaitable[Any]]:
        emu = self.emulator

        async def recorded_callback(call_set: Any, rank_id: int, args: Any) -> Any:
            t0 = emu.now_ps
            token = _in_callback.set(True)
            try:
                result = fn(call_set, rank_id, args)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException:
                self.problems.append(
                    "a callback raised; only callbacks that return can be recorded"
                )
                raise
            finally:
                _in_callback.reset(token)
            times.append(emu.now_ps - t0)
            results.append(int(result) if isinstance(result, int) else 0)
            return result

        return recorded_callback

    def _target(self, dset: DpuSetBase) -> dict[str, Any]:
        for name, root in reversed(self.roots):
            if dset is root or (not dset.is_single_dpu and dset.rank_list == root.rank_list):
                return _set_key(name)
        for name, root in reversed(self.roots):
            if dset.is_single_dpu:
                dpu = dset.dpu_list[0]
                if dpu in root.dpu_list:
                    return {**_set_key(name), "dpu": root.dpu_list.index(dpu)}
            elif len(dset.rank_list) == 1 and dset.rank_list[0] in root.rank_list:
                return {**_set_key(name), "rank": root.rank_list.index(dset.rank_list[0])}
        self.problems.append(f"{dset!r} does not come from an allocation seen by the recorder")
        return {}

    # -- writing ---------------------------------------
    def scenario(self, name: str, description: str, end_ps: int) -> str:
        """The scenario TOML of everything recorded."""
        if self.problems:
            raise RecordingError(
                "this run cannot be turned into a scenario: "
                + "; ".join(sorted(set(self.problems)))
            )
        cfg = self.machine
        out = [
            "# Recorded by aiopim: replay with `aiopim replay THIS_FILE`.",
            "[scenario]",
            f"name = {_value(name)}",
        ]
        if description:
            out.append(f"description = {_value(description)}")
        out += [
            "",
            "[machine]",
            f"ranks = {cfg.nr_ranks}",
            f"dpus_per_rank = {cfg.nr_dpus_per_rank}",
            f"chip = {_value(cfg.chip)}",
        ]
        for pname, prog in sorted(self.programs.items()):
            out += ["", *self._program(pname, prog)]
        last_end = 0
        for i, (label, steps) in enumerate(self.tasks):
            out += ["", "[[tasks]]", f"name = {_value('main' if i == 0 else f'task{i}')}"]
            if label != ("main" if i == 0 else f"task{i}"):
                out.append(f"label = {_value(label)}")
            lines = []
            prev_end = 0
            for step in steps:
                lines.append("  " + _inline(self._step(step, prev_end)) + ",")
                prev_end = step["_end"]
                last_end = max(last_end, prev_end)
            if i == 0 and end_ps > last_end:
                lines.append("  " + _inline({"op": "sleep", "at": end_ps}) + ",")
            out += ["steps = [", *lines, "]"]
        out += ["", "[expect]", f"time = {end_ps}", ""]
        return "\n".join(out)

    def _step(self, step: dict[str, Any], prev_end: int) -> dict[str, Any]:
        out = {k: v for k, v in step.items() if not k.startswith("_") and k != "at"}
        if step["at"] > prev_end:
            out = {"op": out.pop("op"), "at": step["at"], **out}
        if "_times" in step:
            times, results = step["_times"], step["_results"]
            if any(times):
                out["host_time"] = times[0] if len(set(times)) == 1 else times
            if any(results):
                out["result"] = results[0] if len(set(results)) == 1 else results
        if "error" in out:
            out["error"] = out.pop("error")  # last, for reading
        return out

    def _program(self, name: str, prog: DpuProgram) -> list[str]:
        symbols: dict[str, str] = {}
        for sym in prog.symbols().values():
            if sym.name in ("CLOCKS_PER_SEC", DPU_MRAM_HEAP_POINTER_NAME):
                continue
            if sym.space is MemorySpace.IRAM:
                raise RecordingError(f"program {name!r}: IRAM symbol {sym.name!r} not supported")
            symbols[sym.name] = f"{sym.space.value.lower()}:{sym.size}"
        image = sum(len(im.data) for im in prog.images())
        runs: dict[str, list[int]] = {}
        rec = self.emulator.recorder
        assert rec is not None
        for t, kind, f in rec.iter_events():
            if kind != "dpu_run" or f["program"] != name:
                continue
            if f["fault"] is not None:
                raise RecordingError(
                    f"a DPU running {name!r} stopped in fault ({f['fault']}); faults cannot be "
                    "recorded yet"
                )
            dname = self.emulator.rank(f["rank"]).dpus[f["dpu"]].name
            runs.setdefault(dname, []).append(t - f["start"])
        out = [
            f"[programs.{_key(name)}]",
            'kernel = "recorded"',
            "tasklets = 1",
        ]
        if image:
            out.append(f"image_bytes = {image}")
        out.append(f"symbols = {_inline(symbols)}")
        out.append(f"[programs.{_key(name)}.runs]")
        if runs:
            common, _ = Counter(tuple(v) for v in runs.values()).most_common(1)[0]
            out.append(f"all = {_value(list(common))}")
            out.extend(
                f"{_key(dname)} = {_value(runs[dname])}"
                for dname in sorted(runs, key=_dpu_order)
                if tuple(runs[dname]) != common
            )
        return out


def _dpu_order(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in name.split("."))


def _set_key(name: str) -> dict[str, Any]:
    return {} if name == "dpus" else {"set": name}


def _symbol_name(symbol: str | Symbol) -> str:
    return symbol.name if isinstance(symbol, Symbol) else str(symbol)


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return _inline(v)
    raise TypeError(f"cannot write {v!r} to TOML")


def _inline(d: dict[str, Any]) -> str:
    return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in d.items()) + " }"


@dataclass
class Recording:
    """A recorded run: the program's result, the emulator, and the scenario text."""

    result: Any
    emulator: Emulator
    scenario_text: str
    name: str = "recorded"

    @property
    def timeline(self) -> Timeline:
        """The timeline of the recorded run."""
        return Timeline.from_emulator(self.emulator)

    def chrome_trace(self, *, per_dpu: bool = True) -> str:
        """Chrome trace JSON of the recorded run."""
        return chrome_trace(self.timeline, per_dpu=per_dpu, metadata={"scenario": self.name})

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the scenario file."""
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(self.scenario_text)


def record(
    main: Callable[..., Awaitable[Any]],
    *args: Any,
    machine: MachineConfig | None = None,
    backend: str = "asyncio",
    seed: int = 0,
    name: str = "recorded",
    description: str = "",
) -> Recording:
    """Run ``main(*args)`` as ``aiopim.run`` would and write it down as a scenario."""
    emu = Emulator(machine, seed=seed, record=True)
    log = OpRecorder(emu)
    emu.op_log = log
    result = outside_event_loop(lambda: emu.run(main, *args, backend=backend))
    emu.op_log = None
    return Recording(result, emu, log.scenario(name, description, emu.now_ps), name)
