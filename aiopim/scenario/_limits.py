"""Limits of scenario files, checked before a replay starts (documented in docs/timelines.md).

A scenario is untrusted data: whatever its values, loading it must end quickly with either a
valid :class:`Scenario` or a :class:`ScenarioError`, and a valid scenario must replay in bounded
time and memory. The limits below are generous for real schedules; the work estimate is an
upper bound of the emulated operations a replay performs (repeats unrolled).
"""

from __future__ import annotations

import re
import reprlib
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from .. import timing
from ._locate import Path, locate

if TYPE_CHECKING:
    from ._spec import ProgramSpec, Scenario, Step

#: largest scenario file read
MAX_FILE_BYTES = 4 << 20
#: deepest nesting of arrays and inline tables (a repeat inside a repeat adds two)
MAX_NESTING = 32
#: ranks of the emulated machine (a full UPMEM server: 40 ranks of 64 DPUs)
MAX_RANKS = 40
#: steps a replay executes, each iteration of a repeat counted as one more step (a ``repeat``'s
#: ``times`` included)
MAX_STEPS = 1_000_000
#: estimated emulated operations of a whole replay (see :func:`estimate_work`)
MAX_WORK = 5_000_000
#: bytes per DPU of one transfer, and end of its range (``offset + bytes``): the MRAM size
MAX_XFER_BYTES = 64 << 20
#: host memory one step allocates (``bytes`` times the DPUs it addresses)
MAX_HOST_BYTES = 256 << 20
#: emulated DPU memory a replay can fill (program images and transfers, over all DPUs)
MAX_DPU_BYTES = 1 << 30
#: ``max_retries`` of a FIFO push (the SDK's default is 1000)
MAX_RETRIES = 100_000
#: ``time_for_retry_us`` of a FIFO push (a 32-bit value in the SDK)
MAX_RETRY_US = (1 << 32) - 1
#: any duration or virtual time (10^18 ps = 10^6 s, about 11.6 days)
MAX_TIME_PS = 10**18
#: ``N`` of ``fill = "iota%N"`` (the words are 32-bit)
MAX_IOTA_MOD = (1 << 32) - 1
#: most elements a WRAM FIFO holds (``ptr_size`` <= 10)
MAX_FIFO_ELEMENTS = 1 << 10


@dataclass(frozen=True)
class Limits:
    """The limits a larger scenario may need raised; the others follow the hardware (ranks,
    MRAM size, FIFO geometry) or the file format (nesting).

    Each field is a keyword of :func:`~aiopim.scenario.load_scenario` and
    :func:`~aiopim.scenario.parse_scenario` and a flag of ``aiopim replay`` (``max_work`` is
    ``--max-work``). A refusal names both, with the value the scenario needs.
    """

    #: bytes of the scenario file
    max_file_bytes: int = MAX_FILE_BYTES
    #: steps executed, repeats unrolled (this also bounds a ``repeat``'s ``times``)
    max_steps: int = MAX_STEPS
    #: estimated emulated operations (:func:`estimate_work`)
    max_work: int = MAX_WORK
    #: host buffer bytes of one step
    max_host_bytes: int = MAX_HOST_BYTES
    #: emulated DPU memory the replay can fill, in bytes
    max_dpu_bytes: int = MAX_DPU_BYTES

    def __post_init__(self) -> None:
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")

    @staticmethod
    def flag(name: str) -> str:
        """The ``aiopim replay`` flag of limit ``name`` (``--max-work``)."""
        return "--" + name.replace("_", "-")

    @staticmethod
    def how_to_raise(name: str, needed: int) -> str:
        """The sentence a refusal ends with: the flag and the keyword, with ``needed``."""
        return (
            f"Raise the limit to replay it: `aiopim replay {Limits.flag(name)} {needed}`, or "
            f"load_scenario(..., {name}={needed}) in Python"
        )


#: the fields of :class:`Limits`, in order
LIMIT_NAMES = tuple(f.name for f in fields(Limits))

_short = reprlib.Repr()
_short.maxlevel = 3
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = _short.maxdict = _short.maxtuple = 6
_short.maxlong = 40


def show(value: Any) -> str:
    """A short ``repr`` of a value read from a file (bounded in length and depth)."""
    return _short.repr(value)


#: what the nesting scan looks at: strings and comments (skipped whole), brackets, braces
_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"{3,5}'  # multi-line basic string (up to two quotes inside the end)
    r"|'''.*?'{3,5}"  # multi-line literal string
    r'|"(?:[^"\\\n]|\\.)*"'  # basic string
    r"|'[^'\n]*'"  # literal string
    r"|#[^\n]*"  # comment
    r"|[\[\]{}]",
    re.S,
)


def nesting_problem(text: str) -> tuple[int, str] | None:
    """``(line, message)`` where arrays or inline tables nest deeper than :data:`MAX_NESTING`.

    Runs before the TOML parser (whose recursion a deep document would exhaust); strings and
    comments are skipped, table headers (``[a]``, ``[[a]]`` at the start of a line) are not
    nesting. Malformed TOML is left to the parser.
    """
    depth = 0
    pos = 0
    while (m := _TOKENS.search(text, pos)) is not None:
        c, pos = m.group(), m.end()
        if c == "[" and depth == 0:
            start = text.rfind("\n", 0, m.start()) + 1
            if not text[start : m.start()].strip():  # a table header: skip its line
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end
                continue
        if c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, m.start()) + 1
                return line, f"arrays and inline tables nest deeper than {MAX_NESTING} levels"
        elif c in "]}":
            depth = max(0, depth - 1)
    return None


class TomlError(ValueError):
    """Text that is not a TOML document this project reads: what is wrong, and the line."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def load_toml(text: str) -> tuple[dict[str, Any], dict[Path, int]]:
    """Parse a data file: the document and the line of each key path (empty where positions
    cannot be found). Raises :class:`TomlError` for nesting deeper than :data:`MAX_NESTING`
    (checked before the parser, whose recursion it would exhaust) and for invalid TOML."""
    deep = nesting_problem(text)
    if deep is not None:
        raise TomlError(deep[1], deep[0])
    try:
        doc = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of more than 4300 digits
        m = re.search(r"line (\d+)", str(exc))
        line = int(m.group(1)) if m else None
        if line is None and "end of document" in str(exc):
            line = text.count("\n") + 1
        raise TomlError(f"not valid TOML: {exc}", line) from None
    try:
        lines = locate(text)
    except (IndexError, ValueError, RecursionError):  # positions are a help, not a must
        lines = {}
    return doc, lines


def too_deep(doc: Any) -> Path | None:
    """The key path of a value nested deeper than :data:`MAX_NESTING` in a parsed document
    (tables, arrays of tables and dotted keys count too), or None."""
    stack: list[Path] = [()]
    while stack:
        path = stack.pop()
        if len(path) > MAX_NESTING:
            return path
        value = doc
        for p in path:
            value = value[p]
        if isinstance(value, dict):
            stack.extend((*path, k) for k in value)
        elif isinstance(value, list):
            stack.extend((*path, i) for i in range(len(value)))
    return None


# ================================================================================================
# cost of kernels
# ================================================================================================
@dataclass(frozen=True)
class KernelCost:
    """Upper bounds of the emulated operations of a DPU program, per DPU.

    ``launch``: one run started by ``launch``; ``element``: one FIFO element the program
    consumes (charged to every ``fifo_push``).
    """

    launch: int
    element: int = 0


def default_cost(spec: ProgramSpec) -> KernelCost:
    """For kernels registered without a cost: a few operations per tasklet and element."""
    return KernelCost(4 * spec.tasklets, 4 * spec.tasklets)


KernelCostFn = Callable[["ProgramSpec"], KernelCost]


@dataclass(frozen=True)
class ActionCost:
    """Upper bounds of one execution of a registered action, for the limits.

    ``work``: emulated operations (:data:`MAX_WORK`); ``host_bytes``: host buffers the step
    allocates (:data:`MAX_HOST_BYTES`); ``dpus``: DPUs the step allocates and ``writes``:
    ``(region, end)`` when it writes bytes ``[0, end)`` of a named DPU memory region on each DPU
    it reaches (both for :data:`MAX_DPU_BYTES`).
    """

    work: int = 1
    host_bytes: int = 0
    dpus: int = 0
    writes: tuple[str, int] | None = None


#: an action's cost from its validated parameters and the heaviest program's :class:`KernelCost`
ActionCostFn = Callable[[dict[str, Any], KernelCost], ActionCost]


# ================================================================================================
# the work estimate
# ================================================================================================
class _Bounds:
    """What the estimate needs to know about the whole scenario."""

    def __init__(self, sc: Scenario, cost: Callable[[ProgramSpec], KernelCost]) -> None:
        m = sc.machine
        self.per_rank = m.nr_dpus_per_rank
        self.total = m.nr_ranks * m.nr_dpus_per_rank
        costs = [cost(p) for p in sc.programs.values()] or [KernelCost(0, 0)]
        self.launch = max(c.launch for c in costs)
        self.element = max(c.element for c in costs)
        retries = [timing.FIFO_PUSH_MAX_RETRIES]
        self.sets: dict[str, int] = {}
        for s in sc.iter_steps():
            p = s.params
            if p.get("max_retries") is not None:
                retries.append(p["max_retries"])
            if s.op == "alloc":
                n = self.total
                if p.get("ranks") is not None:
                    n = min(self.total, p["ranks"] * self.per_rank)
                elif p.get("dpus") is not None:
                    n = min(self.total, p["dpus"])
                self.sets[p["set"]] = max(self.sets.get(p["set"], 0), n)
        self.retries = max(retries)
        from ._spec import ACTIONS  # the registry (its module imports this one)

        heaviest = KernelCost(self.launch, self.element)
        #: what each step whose action declares a cost needs, by step identity
        self.declared: dict[int, ActionCost] = {}
        #: DPUs allocated by such steps, each repeat iteration counted
        self.action_dpus = 0
        for s, times in _counted(sc):
            kind = ACTIONS.get(s.op)
            if kind is not None and kind.cost is not None:
                c = self.declared[id(s)] = kind.cost(s.params, heaviest)
                self.action_dpus += c.dpus * times

    def dpus(self, step: Step) -> int:
        """Most DPUs the step can address."""
        p = step.params
        if p.get("dpu") is not None:
            return 1
        n = self.sets.get(p.get("set", "dpus"), self.total)
        if p.get("rank") is not None:
            return min(n, self.per_rank)
        return n

    def ranks(self, step: Step) -> int:
        """Most ranks the step can address."""
        return -(-self.dpus(step) // self.per_rank)


def _counted(sc: Scenario) -> Iterator[tuple[Step, int]]:
    """Every step with the number of times it runs (the product of its enclosing repeats)."""
    stack = [(s, 1) for t in reversed(sc.tasks) for s in reversed(t.steps)]
    while stack:
        s, times = stack.pop()
        yield s, times
        if s.op == "repeat":
            inner = times * int(s.params["times"])
            stack.extend((x, inner) for x in reversed(s.body))


def _step_work(step: Step, b: _Bounds) -> int:
    """Operations of one execution of ``step`` (a repeat: all its iterations)."""
    op, p = step.op, step.params
    if op == "repeat":
        return 1 + int(p["times"]) * (1 + sum(_step_work(s, b) for s in step.body))
    declared = b.declared.get(id(step))
    if declared is not None:
        return declared.work
    if op == "alloc":
        return 1 + b.sets[p["set"]]
    if "set" not in p:  # host-only actions: work, sleep, signal, wait
        return 1
    dpus = b.dpus(step)
    if op == "launch":
        return 1 + dpus * (1 + b.launch)
    if op == "fifo_push":
        # a retry re-reads the pointers of every DPU of a rank: about ten operations' time
        return 1 + dpus * (1 + b.element) + b.ranks(step) * b.retries * 10
    if op == "fifo_drain":  # collecting into a stream keeps every element: 4 per element
        return 1 + dpus * (1 + (4 * MAX_FIFO_ELEMENTS if p.get("into") is not None else 0))
    return 1 + dpus


def estimate_work(sc: Scenario, cost: Callable[[ProgramSpec], KernelCost]) -> list[int]:
    """Upper bound of the emulated operations of each task (for :data:`MAX_WORK`).

    Counts one per step and per DPU a step addresses; a launch costs its DPUs times the
    heaviest program's :class:`KernelCost`; a FIFO push adds its retries (the largest
    ``max_retries`` of the scenario, on every rank) and the elements' processing; a drain into
    a stream buffer reads up to a full ring per DPU.
    """
    b = _Bounds(sc, cost)
    return [sum(_step_work(s, b) for s in t.steps) for t in sc.tasks]


def step_work(sc: Scenario, cost: Callable[[ProgramSpec], KernelCost], step: Step) -> int:
    """The estimate of one top-level step (to name the heaviest one in an error)."""
    return _step_work(step, _Bounds(sc, cost))


def steps_of(step: Step) -> int:
    """Steps executed by one execution of ``step``, each repeat iteration counted."""
    if step.op == "repeat":
        return 1 + int(step.params["times"]) * (1 + sum(steps_of(s) for s in step.body))
    return 1


def _no_cost(spec: ProgramSpec) -> KernelCost:
    return KernelCost(0)


def host_bytes(sc: Scenario, paths: dict[int, Path]) -> Iterator[tuple[Step, Path, int]]:
    """Host buffer bytes each transfer step allocates (for :data:`MAX_HOST_BYTES`)."""
    b = _Bounds(sc, _no_cost)
    for s in sc.iter_steps():
        declared = b.declared.get(id(s))
        if declared is not None:
            if declared.host_bytes:
                yield s, paths[id(s)], declared.host_bytes
        elif s.op == "copy_from":
            yield s, paths[id(s)], int(s.params["bytes"]) * b.dpus(s)
        elif s.op in ("copy_to", "dpu_copy_from"):
            yield s, paths[id(s)], int(s.params["bytes"])


def dpu_bytes(sc: Scenario, paths: dict[int, Path]) -> tuple[Path, int] | None:
    """``(path of the largest contributor, bytes)``: an upper bound of the emulated DPU memory
    a replay fills, for :data:`MAX_DPU_BYTES` (pages never written cost nothing)."""
    b = _Bounds(sc, _no_cost)
    dpus = min(b.total, sum(b.sets.values()) + b.action_dpus)
    extents: dict[str, tuple[int, Path]] = {}
    for s in sc.iter_steps():
        declared = b.declared.get(id(s))
        written: tuple[str, int] | None = None
        if declared is not None:
            written = declared.writes
        elif s.op == "copy_to":
            written = s.params["symbol"], int(s.params["offset"]) + int(s.params["bytes"])
        if written is not None:
            region, end = written
            if end > extents.get(region, (-1, ()))[0]:
                extents[region] = (end, paths[id(s)])
    for name, spec in sc.programs.items():
        image = spec.params.get("image_bytes")
        if isinstance(image, int) and image > 0:
            extents[f"programs.{name}"] = (image, ("programs", name, "image_bytes"))
    if not extents or not dpus:
        return None
    per_dpu = min(sum(e for e, _ in extents.values()), MAX_XFER_BYTES + (1 << 17))
    _, path = max(extents.values(), key=lambda x: x[0])
    return path, per_dpu * dpus
