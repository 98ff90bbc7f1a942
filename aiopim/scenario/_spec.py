"""Scenario files: parse TOML, validate against the registered actions and kernels.

A scenario is data only. Host actions and DPU kernels are looked up by name in registries
(:func:`register_action`, :func:`register_kernel`), so new kinds (FIFO pushes, streaming
kernels) plug in without touching the parser. Every validation error names the file, the
line and the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .. import timing
from .._errors import DpuError, DpuErrorCode
from .._files import InputFileError, format_size, read_input_file
from .._machine._config import MachineConfig
from . import _limits as L
from ._limits import ActionCostFn, KernelCost, KernelCostFn, show
from ._locate import Path, line_of

if TYPE_CHECKING:
    from .._machine._program import DpuProgram
    from ._replay import ReplayContext


class ScenarioError(ValueError):
    """A scenario file is invalid, or its replay did not meet its expectations."""

    def __init__(self, message: str, *, source: str = "", line: int | None = None, key: str = ""):
        self.source = source
        self.line = line
        self.key = key
        self.message = message
        where = source or "<scenario>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


# ================================================================================================
# parameter types
# ================================================================================================
_UNITS = {"ps": 1, "ns": 1_000, "us": 1_000_000, "ms": 1_000_000_000, "s": timing.PS_PER_S}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ps|ns|us|ms|s)\s*$")


def parse_duration(value: Any) -> int:
    """An integer of picoseconds, or a string such as ``"12.5us"`` (ps, ns, us, ms, s)."""
    ps: int | Decimal | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        ps = value
    elif isinstance(value, str) and len(value) <= 64:
        m = _DURATION.match(value)
        if m:
            ps = Decimal(m.group(1)) * _UNITS[m.group(2)]
            if ps != ps.to_integral_value():
                raise ValueError(f"{value!r} is not a whole number of picoseconds")
    if ps is None:
        raise ValueError(
            f"expected a duration: integer picoseconds or a string like '10us' "
            f"(units ps, ns, us, ms, s), got {show(value)}"
        )
    if ps > L.MAX_TIME_PS:
        raise ValueError(f"{show(value)} is longer than the limit of {L.MAX_TIME_PS} ps (10^6 s)")
    return int(ps)


_IOTA_MOD = re.compile(r"^\s*iota\s*%\s*([0-9]+)\s*$")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_type(kind: str, v: Any) -> Any:
    """Validate ``v`` against parameter type ``kind``; returns the converted value."""
    if kind == "int":
        if not _is_int(v):
            raise ValueError(f"expected an integer, got {show(v)}")
        return v
    if kind == "count":
        if not _is_int(v) or v < 0:
            raise ValueError(f"expected an integer >= 0, got {show(v)}")
        return v
    if kind == "bool":
        if not isinstance(v, bool):
            raise ValueError(f"expected true or false, got {show(v)}")
        return v
    if kind == "str":
        if not isinstance(v, str) or not v:
            raise ValueError(f"expected a non-empty string, got {show(v)}")
        return v
    if kind == "text":
        if not isinstance(v, str):
            raise ValueError(f"expected a string, got {show(v)}")
        return v
    if kind == "duration":
        return parse_duration(v)
    if kind == "durations":  # one duration, or one per call
        if isinstance(v, list):
            return [parse_duration(x) for x in v]
        return parse_duration(v)
    if kind == "ints":
        if not isinstance(v, list) or not all(_is_int(x) for x in v):
            raise ValueError(f"expected a list of integers, got {show(v)}")
        return v
    if kind == "int_or_ints":
        if isinstance(v, list):
            return _check_type("ints", v)
        return _check_type("int", v)
    if kind == "fill":
        if v == "iota" or _is_int(v):
            return v
        if isinstance(v, str):
            m = _IOTA_MOD.match(v)
            if m and len(m.group(1)) <= 20 and 0 < int(m.group(1)) <= L.MAX_IOTA_MOD:
                return f"iota%{int(m.group(1))}"
        raise ValueError(
            f'expected an integer (every 32-bit word), "iota" or "iota%N" (N > 0), N < 2**32, '
            f"got {show(v)}"
        )
    if kind == "table":
        if not isinstance(v, dict):
            raise ValueError(f"expected a table, got {show(v)}")
        return v
    if kind == "any":
        return v
    raise AssertionError(f"unknown parameter kind {kind}")


@dataclass(frozen=True)
class Param:
    """One key of an action or kernel: its type, whether it is required, its default."""

    kind: str
    required: bool = False
    default: Any = None
    doc: str = ""
    #: largest value allowed (integers; durations are always at most ``MAX_TIME_PS``)
    maximum: int | None = None


# ================================================================================================
# registries
# ================================================================================================
ActionRunner = Callable[["ReplayContext", "Step"], Awaitable[None]]


@dataclass(frozen=True)
class ActionKind:
    """A host action a scenario step can name with ``op``."""

    name: str
    params: dict[str, Param]
    run: ActionRunner
    doc: str = ""
    #: keys of which exactly one must be given (e.g. ``ranks``/``dpus`` of ``alloc``)
    one_of: tuple[str, ...] = ()
    #: check run after the parameters were validated (raise ValueError(key, message))
    check: Callable[[dict[str, Any]], None] | None = None
    #: upper bounds of one execution, for the replay's limits (default: one operation, plus
    #: per DPU for the built-in actions that address a set)
    cost: ActionCostFn | None = None


@dataclass(frozen=True)
class KernelKind:
    """A DPU program a scenario can name with ``kernel``."""

    name: str
    params: dict[str, Param]
    build: Callable[[ProgramSpec], DpuProgram]
    doc: str = ""
    #: upper bound of the program's emulated operations per DPU, for the replay's work limit
    #: (default: a few per tasklet per launch and per FIFO element)
    cost: KernelCostFn | None = None


ACTIONS: dict[str, ActionKind] = {}
KERNELS: dict[str, KernelKind] = {}


def register_action(kind: ActionKind, *, replace: bool = False) -> None:
    """Make ``op = kind.name`` available to scenario steps (extension point: FIFO actions)."""
    if kind.name in ACTIONS and not replace:
        raise ValueError(f"scenario action {kind.name!r} is already registered")
    ACTIONS[kind.name] = kind


def register_kernel(kind: KernelKind, *, replace: bool = False) -> None:
    """Make ``kernel = kind.name`` available to scenario programs."""
    if kind.name in KERNELS and not replace:
        raise ValueError(f"scenario kernel {kind.name!r} is already registered")
    KERNELS[kind.name] = kind


#: keys every step may have, besides the action's own
STEP_KEYS = {
    "op": Param("str", True, doc="the action"),
    "at": Param("duration", doc="do not start before this virtual time"),
    "error": Param("str", doc="the step must fail with this DpuErrorCode name"),
}
#: keys every program may have, besides the kernel's own
PROGRAM_KEYS = {
    "kernel": Param("str", True, doc="built-in or registered kernel name"),
    "tasklets": Param("int", default=16, doc="NR_TASKLETS"),
    "symbols": Param("table", default={}, doc='extra host symbols: name = "wram:BYTES"'),
}


# ================================================================================================
# the parsed scenario
# ================================================================================================
@dataclass
class Step:
    """One host action of a task (``body`` holds the steps of a ``repeat``)."""

    op: str
    params: dict[str, Any]
    at: int | None
    error: str | None
    line: int | None
    key: str
    body: list[Step] = field(default_factory=list)

    def count(self) -> int:
        """Steps executed, repeats unrolled."""
        if self.op == "repeat":
            return 1 + int(self.params["times"]) * sum(s.count() for s in self.body)
        return 1


@dataclass
class TaskSpec:
    """A host task: steps run in order; tasks run concurrently."""

    name: str
    label: str
    steps: list[Step]


@dataclass
class ProgramSpec:
    """A DPU program of the scenario."""

    name: str
    kernel: str
    tasklets: int
    symbols: dict[str, tuple[str, int]]
    params: dict[str, Any]
    line: int | None
    key: str


@dataclass
class DataCheck:
    """An expectation on a host buffer filled by ``copy_from`` or ``fifo_drain``.

    ``count`` and ``sequence`` apply to FIFO streams (``fifo_drain`` buffers): every DPU drained
    ``count`` elements, and element ``i`` of every DPU holds ``first[w] + i * step[w]`` in its
    ``w``-th ``dtype`` word (after sorting the DPU's elements when ``sort`` is true).
    """

    buffer: str
    dtype: str
    equals: list[int] | None
    all: int | None
    sum: int | None
    line: int | None
    key: str
    count: int | None = None
    first: list[int] | None = None
    step: list[int] | None = None
    sort: bool = False


@dataclass
class Expectations:
    """What the replay must produce."""

    time_ps: int | None = None
    time_line: int | None = None
    error: str | None = None
    error_line: int | None = None
    data: list[DataCheck] = field(default_factory=list)


@dataclass
class Scenario:
    """A validated scenario file."""

    name: str
    description: str
    machine: MachineConfig
    programs: dict[str, ProgramSpec]
    tasks: list[TaskSpec]
    expect: Expectations
    source: str = "<string>"

    def total_steps(self) -> int:
        """Steps a replay executes (for progress reports)."""
        return sum(s.count() for t in self.tasks for s in t.steps)

    def iter_steps(self) -> Iterator[Step]:
        """Every step, nested ones included, in file order."""

        def walk(steps: list[Step]) -> Iterator[Step]:
            for s in steps:
                yield s
                yield from walk(s.body)

        for t in self.tasks:
            yield from walk(t.steps)


# ================================================================================================
# loading
# ================================================================================================
def _keyname(path: Path) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + (p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else f'"{p}"')
    return out


class _Loader:
    def __init__(self, text: str, source: str, limits: L.Limits) -> None:
        self.source = source
        self.limits = limits
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limits.max_file_bytes:
            raise ScenarioError(
                f"larger than {format_size(limits.max_file_bytes)}, the limit for a scenario "
                f"file ({size} bytes). {L.Limits.how_to_raise('max_file_bytes', size)}",
                source=source,
            )
        try:
            self.doc, self.lines = L.load_toml(text)
        except L.TomlError as exc:
            raise ScenarioError(str(exc), source=source, line=exc.line) from None
        nested = L.too_deep(self.doc)
        if nested is not None:
            raise ScenarioError(
                f"tables and arrays nest deeper than {L.MAX_NESTING} levels",
                source=source,
                line=min(
                    (n for p, n in self.lines.items() if p[: len(nested)] == nested), default=None
                ),
                key=_keyname(nested[: L.MAX_NESTING + 1]) + "...",
            )
        #: key path of every step and data check (by id), for the cross-reference errors
        self.paths: dict[int, Path] = {}
        self.chip = timing.V1B

    def error(self, path: Path, message: str) -> ScenarioError:
        return ScenarioError(
            message, source=self.source, line=line_of(self.lines, path), key=_keyname(path)
        )

    def table(self, path: Path, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"expected a table, got {show(value)}")
        return value

    def params(
        self, path: Path, table: dict[str, Any], schema: dict[str, Param], what: str
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in table:
            if key not in schema:
                allowed = ", ".join(sorted(schema))
                raise self.error((*path, key), f"unknown key for {what} (allowed: {allowed})")
        for key, p in schema.items():
            if key in table:
                try:
                    out[key] = _check_type(p.kind, table[key])
                except ValueError as exc:
                    raise self.error((*path, key), str(exc)) from None
                v = out[key]
                if p.maximum is not None and _is_int(v) and v > p.maximum:
                    raise self.error((*path, key), f"{v} is more than the limit of {p.maximum}")
            elif p.required:
                raise self.error(path, f"{what} needs the key {key!r}")
            else:
                out[key] = p.default
        return out

    # -- sections ---------------------------------------
    def load(self) -> Scenario:
        doc = self.doc
        for key in doc:
            if key not in ("scenario", "machine", "programs", "tasks", "expect"):
                raise self.error(
                    (key,), "unknown section (allowed: scenario, machine, programs, tasks, expect)"
                )
        head = self.params(
            ("scenario",),
            self.table(("scenario",), doc.get("scenario", {})),
            {"name": Param("str", True), "description": Param("text", default="")},
            "[scenario]",
        )
        machine = self.machine()
        programs = self.programs()
        tasks = self.tasks()
        expect = self.expectations()
        sc = Scenario(
            head["name"], head["description"], machine, programs, tasks, expect, self.source
        )
        self.cross_check(sc)
        self.check_limits(sc)
        return sc

    def machine(self) -> MachineConfig:
        path: Path = ("machine",)
        p = self.params(
            path,
            self.table(path, self.doc.get("machine", {})),
            {
                "ranks": Param("int", default=1, maximum=L.MAX_RANKS),
                "dpus_per_rank": Param("int", default=64),
                "chip": Param("str", default="v1B"),
            },
            "[machine]",
        )
        try:
            cfg = MachineConfig(p["ranks"], p["dpus_per_rank"], p["chip"])
        except ValueError as exc:
            raise self.error(path, str(exc)) from None
        self.chip = cfg.chip_profile
        return cfg

    def programs(self) -> dict[str, ProgramSpec]:
        out = {}
        progs = self.table(("programs",), self.doc.get("programs", {}))
        for name, raw in progs.items():
            path: Path = ("programs", name)
            table = self.table(path, raw)
            kname = table.get("kernel")
            kind = KERNELS.get(kname) if isinstance(kname, str) else None
            if kind is None or not isinstance(kname, str):
                known = ", ".join(sorted(KERNELS))
                raise self.error(
                    (*path, "kernel"),
                    f"unknown kernel {show(kname)} (built-in or registered: {known}; register "
                    "your own with aiopim.scenario.register_kernel)",
                )
            p = self.params(path, table, {**PROGRAM_KEYS, **kind.params}, f"kernel {kname!r}")
            symbols = {}
            chip = self.chip
            for sym, spec in p["symbols"].items():
                try:
                    symbols[sym] = _parse_symbol(spec, chip)
                except ValueError as exc:
                    raise self.error((*path, "symbols", sym), str(exc)) from None
            tasklets = p.pop("tasklets")
            if not 1 <= tasklets <= 24:
                raise self.error((*path, "tasklets"), "tasklets must be between 1 and 24")
            p.pop("kernel")
            p.pop("symbols")
            spec = ProgramSpec(
                name, kname, tasklets, symbols, p, line_of(self.lines, path), _keyname(path)
            )
            try:
                kind.build(spec)  # the kernel checks its parameters
            except (ValueError, TypeError, OverflowError, DpuError) as exc:
                raise self.error(path, str(exc)) from None
            out[name] = spec
        return out

    def tasks(self) -> list[TaskSpec]:
        raw = self.doc.get("tasks", [])
        if not isinstance(raw, list) or not raw:
            raise self.error(("tasks",), "a scenario needs at least one [[tasks]] table")
        out = []
        names: set[str] = set()
        for i, t in enumerate(raw):
            path: Path = ("tasks", i)
            table = self.table(path, t)
            p = self.params(
                path,
                table,
                {
                    "name": Param("str", True),
                    "label": Param("str"),
                    "steps": Param("any", True),
                },
                "a task",
            )
            if p["name"] in names:
                raise self.error((*path, "name"), f"task name {show(p['name'])} is used twice")
            names.add(p["name"])
            steps = self.steps((*path, "steps"), p["steps"])
            out.append(TaskSpec(p["name"], p["label"] or p["name"], steps))
        return out

    def steps(self, path: Path, raw: Any) -> list[Step]:
        if not isinstance(raw, list):
            raise self.error(path, "expected an array of steps: [ { op = ... }, ... ]")
        return [self.step((*path, i), s) for i, s in enumerate(raw)]

    def step(self, path: Path, raw: Any) -> Step:
        table = self.table(path, raw)
        op = table.get("op")
        kind = ACTIONS.get(op) if isinstance(op, str) else None
        if kind is None or not isinstance(op, str):
            if "op" not in table:
                raise self.error(path, "a step needs the key 'op'")
            known = ", ".join(sorted(ACTIONS))
            raise self.error((*path, "op"), f"unknown action {show(op)} (known: {known})")
        p = self.params(path, table, {**STEP_KEYS, **kind.params}, f"action {op!r}")
        given = [k for k in kind.one_of if k in table]
        if kind.one_of and len(given) != 1:
            raise self.error(path, f"action {op!r} needs exactly one of {', '.join(kind.one_of)}")
        if kind.check is not None:
            try:
                kind.check(p)
            except ValueError as exc:
                key, message = exc.args if len(exc.args) == 2 else ("", str(exc))
                raise self.error((*path, key) if key else path, message) from None
        error = p.pop("error")
        if error is not None and error not in DpuErrorCode.__members__:
            raise self.error((*path, "error"), f"unknown DpuErrorCode name {show(error)}")
        at = p.pop("at")
        p.pop("op")
        body: list[Step] = []
        if op == "repeat":
            body = self.steps((*path, "steps"), p.pop("steps"))
        step = Step(op, p, at, error, line_of(self.lines, path), _keyname(path), body)
        self.paths[id(step)] = path
        return step

    def expectations(self) -> Expectations:
        path: Path = ("expect",)
        raw = self.table(path, self.doc.get("expect", {}))
        p = self.params(
            path,
            raw,
            {
                "time": Param("duration", doc="final virtual time"),
                "error": Param("str", doc="the replay fails with this DpuErrorCode"),
                "data": Param("any", default=[]),
            },
            "[expect]",
        )
        ex = Expectations(p["time"], self.lines.get((*path, "time")))
        if p["error"] is not None:
            if p["error"] not in DpuErrorCode.__members__:
                raise self.error((*path, "error"), f"unknown DpuErrorCode name {show(p['error'])}")
            ex.error, ex.error_line = p["error"], self.lines.get((*path, "error"))
        if not isinstance(p["data"], list):
            raise self.error((*path, "data"), "expected an array of checks")
        for i, d in enumerate(p["data"]):
            dpath: Path = (*path, "data", i)
            c = self.params(
                dpath,
                self.table(dpath, d),
                {
                    "buffer": Param("str", True),
                    "dtype": Param("str", default="uint8"),
                    "equals": Param("ints"),
                    "all": Param("int"),
                    "sum": Param("int"),
                    "count": Param("count", doc="FIFO streams: elements drained per DPU"),
                    "first": Param("ints", doc="FIFO streams: words of element 0"),
                    "step": Param("ints", doc="FIFO streams: word increments per element"),
                    "sort": Param("bool", default=False, doc="sort each DPU's elements first"),
                },
                "a data check",
            )
            if c["dtype"] not in _DTYPES:
                raise self.error((*dpath, "dtype"), f"dtype must be one of {', '.join(_DTYPES)}")
            plain = [k for k in ("equals", "all", "sum") if c[k] is not None]
            stream = c["count"] is not None or c["first"] is not None or c["step"] is not None
            if len(plain) + bool(stream) != 1:
                raise self.error(
                    dpath,
                    "a data check needs exactly one of equals, all, sum, or (for FIFO streams) "
                    "count and/or first + step",
                )
            if (c["first"] is None) != (c["step"] is None):
                raise self.error(dpath, "give first and step together")
            if c["first"] is not None and len(c["first"]) != len(c["step"]):
                raise self.error((*dpath, "step"), "first and step need the same length")
            check = DataCheck(
                c["buffer"],
                c["dtype"],
                c["equals"],
                c["all"],
                c["sum"],
                line_of(self.lines, dpath),
                _keyname(dpath),
                c["count"],
                c["first"],
                c["step"],
                c["sort"],
            )
            self.paths[id(check)] = dpath
            ex.data.append(check)
        return ex

    # -- limits ---------------------------------------
    def check_limits(self, sc: Scenario) -> None:
        """The steps, work and memory a replay needs stay within ``self.limits``; a refusal
        names the flag and keyword that raise the limit."""
        lim = self.limits
        top = [(i, j, s) for i, t in enumerate(sc.tasks) for j, s in enumerate(t.steps)]

        def heaviest(measure: Callable[[Step], int]) -> tuple[Path, str]:
            i, j, s = max(top, key=lambda x: measure(x[2]))
            return ("tasks", i, "steps", j), f"{measure(s)} of them in this step ({s.op})"

        steps = sum(L.steps_of(s) for _, _, s in top)
        if steps > lim.max_steps:
            path, where = heaviest(L.steps_of)
            raise self.error(
                path,
                f"the replay would run {steps} steps (repeats unrolled), more than the limit of "
                f"{lim.max_steps}; {where}. {L.Limits.how_to_raise('max_steps', steps)}",
            )
        work = sum(L.estimate_work(sc, kernel_cost))
        if work > lim.max_work:
            path, where = heaviest(lambda s: L.step_work(sc, kernel_cost, s))
            raise self.error(
                path,
                f"the replay would do about {work} emulated operations (steps times the DPUs "
                f"they address, kernel work, FIFO retries), more than the limit of "
                f"{lim.max_work}; {where}. {L.Limits.how_to_raise('max_work', work)}",
            )
        for step, path, nbytes in L.host_bytes(sc, self.paths):
            if nbytes > lim.max_host_bytes:
                raise self.error(
                    path,
                    f"this {step.op} step would allocate {nbytes} bytes of host buffers, more "
                    f"than the limit of {format_size(lim.max_host_bytes)}. "
                    f"{L.Limits.how_to_raise('max_host_bytes', nbytes)}",
                )
        filled = L.dpu_bytes(sc, self.paths)
        if filled is not None and filled[1] > lim.max_dpu_bytes:
            raise self.error(
                filled[0],
                f"the replay could fill {filled[1]} bytes of emulated DPU memory (the largest "
                f"transfer range of each symbol times the DPUs allocated), more than the limit "
                f"of {format_size(lim.max_dpu_bytes)}. "
                f"{L.Limits.how_to_raise('max_dpu_bytes', filled[1])}",
            )

    # -- references ---------------------------------------
    def cross_check(self, sc: Scenario) -> None:
        sets = {s.params["set"] for s in sc.iter_steps() if s.op == "alloc"}
        signals = {s.params["event"] for s in sc.iter_steps() if s.op == "signal"}
        buffers = {s.params["into"] for s in sc.iter_steps() if s.params.get("into") is not None}
        streams = {s.params["into"] for s in sc.iter_steps() if s.op == "fifo_drain"}
        links: dict[str, str] = {}
        for s in sc.iter_steps():
            if s.op == "fifo_link":
                links[s.params["name"] or s.params["fifo"]] = s.params["direction"]
        for s in sc.iter_steps():
            path = self.paths[id(s)]
            if "set" in s.params and s.op != "alloc" and s.params["set"] not in sets:
                raise self.error(
                    (*path, "set"), f"no alloc step creates the DPU set {s.params['set']!r}"
                )
            if "program" in s.params and s.params["program"] not in sc.programs:
                raise self.error((*path, "program"), f"no [programs.{s.params['program']}] table")
            if s.op == "wait" and s.params["event"] not in signals:
                raise self.error(
                    (*path, "event"), f"no signal step sets the event {s.params['event']!r}"
                )
            if s.op in ("fifo_push", "fifo_drain"):
                link = s.params["fifo"]
                want = "input" if s.op == "fifo_push" else "output"
                if link not in links:
                    raise self.error(
                        (*path, "fifo"),
                        f"no fifo_link step links a FIFO named {link!r} (give name = ... or "
                        "fifo = ... there)",
                    )
                if links[link] != want:
                    raise self.error(
                        (*path, "fifo"),
                        f"{link!r} is linked as an {links[link]} FIFO; {s.op} needs an {want} FIFO",
                    )
        for d in sc.expect.data:
            if d.buffer not in buffers:
                raise self.error(
                    (*self.paths[id(d)], "buffer"),
                    f"no copy_from or fifo_drain step fills a buffer named {d.buffer!r} "
                    "(use into = ...)",
                )
            if (d.count is not None or d.first is not None) and d.buffer not in streams:
                raise self.error(
                    (*self.paths[id(d)], "buffer"),
                    f"count/first/step check FIFO streams; {d.buffer!r} is not filled by a "
                    "fifo_drain step",
                )


_DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64")


def _parse_symbol(spec: Any, chip: timing.ChipProfile) -> tuple[str, int]:
    if isinstance(spec, str) and len(spec) <= 64:
        m = re.fullmatch(r"(wram|mram):([0-9]+)", spec.strip().lower())
        if m:
            space, size = m.group(1), int(m.group(2))
            if size <= 0:
                raise ValueError(f"a symbol size must be positive, got {size}")
            most = chip.wram_size if space == "wram" else chip.mram_size
            if size > most:
                raise ValueError(f"{size} bytes do not fit the {space.upper()} ({most} bytes)")
            return space, size
    raise ValueError(f'expected "wram:BYTES" or "mram:BYTES", got {show(spec)}')


def kernel_cost(spec: ProgramSpec) -> KernelCost:
    """The :class:`KernelCost` of a program of the scenario."""
    fn = KERNELS[spec.kernel].cost
    return fn(spec) if fn is not None else L.default_cost(spec)


def load_scenario(
    path: str | os.PathLike[str],
    *,
    max_file_bytes: int = L.MAX_FILE_BYTES,
    max_steps: int = L.MAX_STEPS,
    max_work: int = L.MAX_WORK,
    max_host_bytes: int = L.MAX_HOST_BYTES,
    max_dpu_bytes: int = L.MAX_DPU_BYTES,
) -> Scenario:
    """Read and validate a scenario file (:class:`ScenarioError` for any problem with it,
    including a path that is not a readable regular file of at most ``max_file_bytes``).

    The keywords raise the limits of :class:`~aiopim.scenario.Limits` for a larger scenario
    (``aiopim replay --max-work N`` and so on); a refusal names the one to raise.
    """
    limits = L.Limits(max_file_bytes, max_steps, max_work, max_host_bytes, max_dpu_bytes)
    source = os.fspath(path)
    try:
        data = read_input_file(path, limit=limits.max_file_bytes, what="scenario file")
    except InputFileError as exc:
        message = exc.message
        if exc.reason == "too_large":
            try:
                size = os.stat(source).st_size
            except OSError:
                size = 0
            if size > limits.max_file_bytes:  # not so for files of /proc, whose size is 0
                message += f" ({size} bytes). {L.Limits.how_to_raise('max_file_bytes', size)}"
        raise ScenarioError(message, source=source) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(
            f"not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})",
            source=source,
            line=line,
        ) from None
    return _Loader(text, source, limits).load()


def parse_scenario(
    text: str,
    source: str = "<string>",
    *,
    max_file_bytes: int = L.MAX_FILE_BYTES,
    max_steps: int = L.MAX_STEPS,
    max_work: int = L.MAX_WORK,
    max_host_bytes: int = L.MAX_HOST_BYTES,
    max_dpu_bytes: int = L.MAX_DPU_BYTES,
) -> Scenario:
    """Validate scenario TOML given as text (the keywords as for :func:`load_scenario`)."""
    limits = L.Limits(max_file_bytes, max_steps, max_work, max_host_bytes, max_dpu_bytes)
    return _Loader(text, source, limits).load()
