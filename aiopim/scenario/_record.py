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
import os
import tomllib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np
import tomli_w

from .. import _ops, timing
from .._dpulist import format_dpu_list
from .._emulator import Emulator
from .._errors import DpuError
from .._machine._config import MachineConfig
from .._machine._program import (
    DPU_MRAM_HEAP_POINTER_NAME,
    DpuProgram,
    MemoryImage,
    MemorySpace,
    Symbol,
)
from .._machine._recorder import host_task_label
from .._machine._wramfifo import DATA_SIZE, INPUT_STRUCT_SIZE, OUTPUT_STRUCT_SIZE, PTR_SIZE
from .._ops import _fifo
from .._ops._set import DpuSetBase
from ..dpu._fifo import check_fifo_geometry
from ..trace import Timeline, chrome_trace
from ._actions import CALLBACK_FLAGS, FIFO_XFER_FLAGS, XFER_FLAGS
from ._replay import outside_event_loop

_in_op: contextvars.ContextVar[bool] = contextvars.ContextVar("aiopim_rec_in_op", default=False)
_in_callback: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiopim_rec_in_callback", default=False
)


class RecordingError(ValueError):
    """The run did something a scenario cannot reproduce."""


class OpRecorder:
    """An ``Emulator.op_log`` that writes down host operations as scenario steps."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        #: per host task: its label and steps (dicts with the scenario keys, plus "_end")
        self.tasks: list[tuple[str, list[dict[str, Any]]]] = []
        self._task_ids: dict[int, int] = {}
        self.roots: list[tuple[str, DpuSetBase]] = []
        self.programs: dict[str, DpuProgram] = {}
        self.problems: list[str] = []
        #: FIFO links seen by pushes: id -> (scenario name, link, retry settings written)
        self.links: dict[int, tuple[str, _fifo.FifoLink, tuple[int, int]]] = {}
        #: completed loads: (virtual time, DPUs as (rank, index))
        self.loads: list[tuple[int, list[tuple[int, int]]]] = []
        self._task = 0

    # -- OpLog ---------------------------------------
    async def run(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run the operation, writing it down unless it is nested in another one."""
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
        self._task = idx
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
        elif op == "load":
            self.loads.append((emu.now_ps, [(d.rank.index, d.index) for d in args[0].dpu_list]))
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
            step["async"] = not args[1]
        elif op == "push_xfer":
            _, to_dpu, symbol, offset, length, mode = args
            step["op"] = "copy_to" if to_dpu else "copy_from"
            self._xfer(step, symbol, offset, length, mode.flags)
            members = dset.dpu_list
            has = [
                i
                for i, d in enumerate(members)
                if _ops.prepared_buffers(d.rank).get(d.index) is not None
            ]
            if len(has) != len(members):
                step["dpus"] = has
        elif op == "broadcast_to":
            _, symbol, offset, _data, length, mode = args
            step["op"] = "copy_to"
            step["broadcast"] = True
            self._xfer(step, symbol, offset, length, mode.flags)
        elif op == "copy_from":
            _, symbol, offset, _dst, length = args
            step["op"] = "dpu_copy_from"
            step["symbol"] = _symbol_name(symbol)
            step["bytes"] = length
            if offset:
                step["offset"] = offset
        elif op == "callback":
            _, fn, cb_args, mode = args
            _flag_keys(step, mode.flags, CALLBACK_FLAGS)
            times: list[int] = []
            results: list[int] = []
            step["_times"], step["_results"] = times, results
            return (dset, self._wrap_callback(fn, times, results), cb_args, mode)
        elif op == "fifo_push_xfer":
            self._fifo_xfer(step, dset, args[1], args[2].flags)
        else:
            self.problems.append(f"the operation {op!r} cannot be recorded yet")
        return args

    # -- FIFOs ---------------------------------------
    def _fifo_xfer(
        self, step: dict[str, Any], dset: DpuSetBase, link: _fifo.FifoLink, flags: int
    ) -> None:
        name = self._link_name(link)
        if name is None:
            return
        target = {k: v for k, v in step.items() if k not in ("op", "at")}
        for k in target:
            del step[k]
        step["fifo"] = name
        step.update(target)
        members = dset.dpu_list
        try:
            bufs = [link.rank_fifo(d.rank).matrix.get(d.index) for d in members]
        except DpuError as exc:  # freed link: the push fails the same way in the replay
            self.problems.append(f"a push on FIFO {link.name!r} cannot be described: {exc}")
            return
        has = [i for i, b in enumerate(bufs) if b is not None]
        if link.is_input:
            step["op"] = "fifo_push"
            try:
                words = [_words(link, b) if b is not None else 0 for b in bufs]
            except (ValueError, TypeError, DpuError) as exc:
                self.problems.append(f"a buffer of FIFO {link.name!r} cannot be read: {exc}")
                return
            if len(has) == len(members) and all(w == words[0] for w in words):
                step["value"] = words[0]
            else:
                step["values"] = words
            self._retry_keys(step, dset, link)
        else:
            step["op"] = "fifo_drain"
        if len(has) != len(members) and not (step["op"] == "fifo_push" and "value" in step):
            step["dpus"] = has
        if not _flag_keys(step, flags, FIFO_XFER_FLAGS):
            self.problems.append(f"FIFO transfer flags {flags:#x} have unknown bits")

    def _link_name(self, link: _fifo.FifoLink) -> str | None:
        """The scenario name of ``link``; writes its ``fifo_link`` step on first use."""
        known = self.links.get(id(link))
        if known is not None:
            return known[0]
        names = {n for n, _, _ in self.links.values()}
        name = link.name
        k = 1
        while name in names:
            k += 1
            name = f"{link.name}_{k}"
        ranks = sorted((link.rank_fifos or {}).keys())
        target = self._target_of_ranks(ranks)
        if target is None:
            self.problems.append(
                f"the link to FIFO {link.name!r} covers ranks {ranks}, which is no allocated set "
                "or rank seen by the recorder"
            )
            return None
        now = self.emulator.now_ps
        step: dict[str, Any] = {"op": "fifo_link", "at": now, "_end": now, **target}
        step["fifo"] = link.name
        step["direction"] = "input" if link.is_input else "output"
        if name != link.name:
            step["name"] = name
        self.tasks[self._task][1].append(step)
        defaults = (timing.FIFO_PUSH_MAX_RETRIES, timing.FIFO_TIME_FOR_RETRY_US)
        self.links[id(link)] = (name, link, defaults)
        return name

    def _retry_keys(self, step: dict[str, Any], dset: DpuSetBase, link: _fifo.FifoLink) -> None:
        name, _, written = self.links[id(link)]
        settings = {
            (rf.max_retries, rf.time_for_retry_us)
            for rf in (link.rank_fifo(r) for r in dset.rank_list)
        }
        if len(settings) != 1:
            self.problems.append(
                f"the ranks of one push on FIFO {link.name!r} have different retry settings"
            )
            return
        (current,) = settings
        if current[0] != written[0]:
            step["max_retries"] = current[0]
        if current[1] != written[1]:
            step["time_for_retry_us"] = current[1]
        self.links[id(link)] = (name, link, current)

    def _target_of_ranks(self, ranks: list[int]) -> dict[str, Any] | None:
        for name, root in reversed(self.roots):
            idx = [r.index for r in root.rank_list]
            if idx == ranks:
                return _set_key(name)
            if len(ranks) == 1 and ranks[0] in idx:
                return {**_set_key(name), "rank": idx.index(ranks[0])}
        return None

    def _xfer(
        self, step: dict[str, Any], symbol: Any, offset: int, length: int, flags: int
    ) -> None:
        step["symbol"] = _symbol_name(symbol)
        step["bytes"] = length
        if offset:
            step["offset"] = offset
        if not _flag_keys(step, flags, XFER_FLAGS):
            self.problems.append(f"transfer flags {flags:#x} have unknown bits")

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
        cfg = self.emulator.config
        head: dict[str, Any] = {"name": name}
        if description:
            head["description"] = description
        doc: dict[str, Any] = {
            "scenario": head,
            "machine": {
                "ranks": cfg.nr_ranks,
                "dpus_per_rank": cfg.nr_dpus_per_rank,
                "chip": cfg.chip,
            },
        }
        programs = {pname: self._program(pname, prog) for pname, prog in self.programs.items()}
        if programs:
            doc["programs"] = dict(sorted(programs.items()))
        tasks: list[dict[str, Any]] = []
        last_end = 0
        for i, (label, steps) in enumerate(self.tasks):
            task: dict[str, Any] = {"name": "main" if i == 0 else f"task{i}"}
            if label != task["name"]:
                task["label"] = label
            rows = []
            prev_end = 0
            for step in steps:
                rows.append(self._step(step, prev_end))
                prev_end = step["_end"]
                last_end = max(last_end, prev_end)
            if i == 0 and end_ps > last_end:
                rows.append({"op": "sleep", "at": end_ps})
            task["steps"] = rows
            tasks.append(task)
        doc["tasks"] = tasks
        doc["expect"] = {"time": end_ps}
        return write_toml(doc, "# Recorded by aiopim: replay with `aiopim replay THIS_FILE`.")

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

    def _program(self, name: str, prog: DpuProgram) -> dict[str, Any]:
        fifos = _fifo_decls(prog)
        skip = {"CLOCKS_PER_SEC", DPU_MRAM_HEAP_POINTER_NAME}
        for fifo_name in fifos:
            skip |= {fifo_name, f"__{fifo_name}_data"}
        symbols: dict[str, str] = {}
        for sym in prog.symbols().values():
            if sym.name in skip:
                continue
            if sym.space is MemorySpace.IRAM:
                raise RecordingError(f"program {name!r}: IRAM symbol {sym.name!r} not supported")
            symbols[sym.name] = f"{sym.space.value.lower()}:{sym.size}"
        # the recorded kernel declares the FIFOs again, which writes their structs at load
        image = sum(len(im.data) for im in prog.images()) - sum(f["size"] for f in fifos.values())
        runs: dict[str, list[int]] = {}
        spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
        rec = self.emulator.recorder
        assert rec is not None
        events = rec.iter_events()
        for t, kind, f in events:
            if kind != "dpu_run" or f["program"] != name:
                continue
            if f["fault"] is not None:
                raise RecordingError(
                    f"a DPU running {name!r} stopped in fault ({f['fault']}); faults cannot be "
                    "recorded yet"
                )
            dname = self.emulator.rank(f["rank"]).dpus[f["dpu"]].name
            runs.setdefault(dname, []).append(t - f["start"])
            spans.setdefault((f["rank"], f["dpu"]), []).append((f["start"], t))
        pointers = self._pointer_writes(fifos, spans, events) if fifos else {}
        table: dict[str, Any] = {"kernel": "recorded", "tasklets": 1}
        if image:
            table["image_bytes"] = image
        table["symbols"] = symbols
        if fifos:
            table["fifos"] = {
                f: {k: v for k, v in d.items() if k != "size"} for f, d in sorted(fifos.items())
            }
        runs_table: dict[str, Any] = {}
        if runs:
            common, _ = Counter(tuple(v) for v in runs.values()).most_common(1)[0]
            runs_table["all"] = list(common)
            for dname in sorted(runs, key=_dpu_order):
                if tuple(runs[dname]) != common:
                    runs_table[dname] = runs[dname]
        table["runs"] = runs_table
        if pointers:
            for writes in pointers.values():
                for launch in writes:
                    launch.sort(key=lambda w: (w[0], w[1]))
            every = {d: pointers.get(d, [[] for _ in v]) for d, v in runs.items()}
            usual = Counter(repr(v) for v in every.values()).most_common(1)[0][0]
            ptr_table: dict[str, Any] = {}
            for dname in sorted(every, key=_dpu_order):
                if repr(every[dname]) == usual:
                    ptr_table.setdefault("all", every[dname])
            for dname in sorted(every, key=_dpu_order):
                if repr(every[dname]) != usual:
                    ptr_table[dname] = every[dname]
            table["pointers"] = ptr_table
        return table

    def _pointer_writes(
        self,
        fifos: dict[str, dict[str, Any]],
        spans: dict[tuple[int, int], list[tuple[int, int]]],
        events: list[tuple[int, str, dict[str, Any]]],
    ) -> dict[str, list[list[list[Any]]]]:
        """Per DPU and launch: ``[offset ps, fifo, value]`` writes of the DPU-owned pointers.

        The host reads the pointer pairs at known instants (``fifo_ptrs`` events). The replay
        must show it the same DPU-owned pointer (input ``read_ptr``, output ``write_ptr``) at
        each read, so the recorded kernel writes the value read just before the read (1 ps),
        or when its run ended if it stopped earlier.
        """
        timeline: dict[tuple[int, int, str], list[tuple[int, int, int]]] = {}
        for t, dpus in self.loads:  # a load resets the pointers to 0 (kind 0 sorts first)
            for rank, dpu in dpus:
                for fifo in fifos:
                    timeline.setdefault((rank, dpu, fifo), []).append((t, 0, 0))
        for t, kind, f in events:
            if kind != "fifo_ptrs" or not f["read"] or f["fifo"] not in fifos:
                continue
            side = f["rd"] if f["input"] else f["wr"]
            for dpu, value in zip(f["dpus"], side, strict=True):
                timeline.setdefault((f["rank"], dpu, f["fifo"]), []).append((t, 1, value))
        out: dict[str, list[list[list[Any]]]] = {}
        for (rank, dpu, fifo), items in sorted(timeline.items()):
            runs = spans.get((rank, dpu), [])
            dname = self.emulator.rank(rank).dpus[dpu].name
            current, bound = 0, -1
            for t, phase, value in sorted(items):
                if phase == 0:
                    current, bound = 0, t
                    continue
                if value != current:
                    k = max((i for i, (s, _) in enumerate(runs) if s < t), default=None)
                    when = -1 if k is None else min(t - 1, runs[k][1])
                    if k is None or when <= bound or when < runs[k][0] or value < current:
                        self.problems.append(
                            f"the {fifo!r} pointer of DPU {dname} changed to {value} before "
                            f"{timing.format_ps(t)} outside a run the recording can reproduce"
                        )
                        break
                    per_run = out.setdefault(dname, [[] for _ in runs])
                    per_run[k].append([when - runs[k][0], fifo, value])
                    current = value
                bound = t
        return out


def _fifo_decls(prog: DpuProgram) -> dict[str, dict[str, Any]]:
    """The WRAM FIFOs of ``prog``: host struct ``X`` (input or output size) next to ``__X_data``."""
    syms = prog.symbols()
    images: dict[int, MemoryImage] = {im.address: im for im in prog.images()}
    out: dict[str, dict[str, Any]] = {}
    for sym in syms.values():
        data = syms.get(f"__{sym.name}_data")
        im = images.get(sym.address)
        if (
            data is None
            or sym.space is not MemorySpace.WRAM
            or sym.size not in (INPUT_STRUCT_SIZE, OUTPUT_STRUCT_SIZE)
            or im is None
            or len(im.data) != sym.size
        ):
            continue
        raw = np.frombuffer(im.data, dtype=np.uint8)
        ptr_size = int(raw[PTR_SIZE : PTR_SIZE + 4].view(np.uint32)[0])
        data_size = int(raw[DATA_SIZE : DATA_SIZE + 4].view(np.uint32)[0])
        try:
            check_fifo_geometry(sym.name, ptr_size, data_size)
        except ValueError:
            continue
        out[sym.name] = {
            "direction": "output" if sym.size == OUTPUT_STRUCT_SIZE else "input",
            "ptr_size": ptr_size,
            "data_size": data_size,
            "size": sym.size,
        }
    return out


def _words(link: _fifo.FifoLink, buf: Any) -> int | list[int]:
    """The 64-bit words of the element in ``buf`` (an integer when only word 0 is set)."""
    view = _ops.host_view(buf, link.data_size, writable=False, who="the FIFO buffer")
    words = [int(w) for w in np.frombuffer(bytes(view[: link.data_size]), dtype=np.uint64)]
    if not any(words[1:]):
        return words[0]
    return words


def _flag_keys(step: dict[str, Any], flags: int, table: tuple[tuple[str, int], ...]) -> bool:
    """Set the step keys of the bits of ``flags``; False if ``flags`` has other bits."""
    known = 0
    for key, bit in table:
        known |= bit
        if flags & bit:
            step[key] = True
    return not flags & ~known


def _dpu_order(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in name.split("."))


def _set_key(name: str) -> dict[str, Any]:
    return {} if name == "dpus" else {"set": name}


def _symbol_name(symbol: str | Symbol) -> str:
    return symbol.name if isinstance(symbol, Symbol) else str(symbol)


#: tables written as ``[section]`` headers (every other table is written inline)
_SUBTABLES = ("runs", "pointers")


def _literal(v: Any) -> str:
    """A TOML value on one line: scalars by tomli_w, arrays and tables inline."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_literal(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if isinstance(v, bool | int | str):
        return tomli_w.dumps({"v": v})[len("v = ") : -1]
    raise TypeError(f"cannot write {type(v).__name__} {v!r} to a scenario")


def _key(k: str) -> str:
    return tomli_w.dumps({k: 0})[: -len(" = 0\n")]


def write_toml(doc: dict[str, Any], comment: str = "") -> str:
    """A scenario document as TOML: one line per key (``[[tasks]]`` steps one per line).

    Every key and value is written by tomli_w; the layout is aiopim's. The text is parsed
    back and compared with ``doc``, so a recording is always replayable as written.
    """
    out = [comment] if comment else []

    def table(header: str, t: dict[str, Any]) -> None:
        if out and out[-1] != comment:
            out.append("")
        out.append(header)
        subs = []
        for k, v in t.items():
            if isinstance(v, dict) and k in _SUBTABLES:
                subs.append((k, v))
            elif k == "steps" and isinstance(v, list):
                out.append("steps = [")
                out.extend(f"  {_literal(step)}," for step in v)
                out.append("]")
            else:
                out.append(f"{_key(k)} = {_literal(v)}")
        for k, v in subs:
            out.append(f"{header[:-1]}.{_key(k)}]")
            out.extend(f"{_key(kk)} = {_literal(vv)}" for kk, vv in v.items())

    for section, value in doc.items():
        if section == "programs":
            for name, prog in value.items():
                table(f"[programs.{_key(name)}]", prog)
        elif section == "tasks":
            for task in value:
                table("[[tasks]]", task)
        else:
            table(f"[{_key(section)}]", value)
    text = "\n".join(out) + "\n"
    if tomllib.loads(text) != _plain(doc):
        raise AssertionError("the scenario writer does not round-trip; please report this bug")
    return text


def _plain(v: Any) -> Any:
    """``v`` as tomllib gives it back (tuples become lists)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


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
    time_limit: float | None = None,
    progress: bool | None = False,
) -> Recording:
    """Run ``main(*args)`` as ``aiopim.run`` would and write it down as a scenario."""
    emu = Emulator(machine, seed=seed, record=True)
    log = OpRecorder(emu)
    emu.op_log = log
    result = outside_event_loop(
        lambda: emu.run(main, *args, backend=backend, time_limit=time_limit, progress=progress)
    )
    emu.op_log = None
    still = [d.name for r in emu.machine.ranks() for d in r.dpus if d.running]
    if still:
        log.problems.append(
            f"DPU(s) {format_dpu_list(still)} were still running at the end; sync before returning"
        )
    return Recording(result, emu, log.scenario(name, description, emu.now_ps), name)
