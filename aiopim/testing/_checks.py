"""Invariant checkers over recorded runs, and pure checkers over host-side observations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._emulator import BACKENDS, Emulator
from .._errors import PARALLEL_JOB_TYPES, DeadlockError
from .._machine._config import MachineConfig
from ._harness import Execution, new_emulator, recorder_of, replay_hint

T = TypeVar("T")
Event = tuple[int, str, dict[str, Any]]
Source = Emulator | Execution[Any] | Sequence[Event]

_PARALLEL_NAMES = frozenset(t.name for t in PARALLEL_JOB_TYPES)


def _events(source: Source) -> list[Event]:
    if isinstance(source, Execution):
        return source.events
    if isinstance(source, Emulator):
        return recorder_of(source).iter_events()
    return list(source)


def _jobs(source: Source) -> dict[int, list[dict[str, Any]]]:
    """Per rank, rows like ``Recorder.jobs()`` (sorted by queue sequence)."""
    table: dict[tuple[int, int], dict[str, Any]] = {}
    for t, kind, f in _events(source):
        if not kind.startswith("job_"):
            continue
        row = table.setdefault(
            (f["rank"], f["seq"]),
            {"rank": f["rank"], "seq": f["seq"], "type": f["type"], "submit": None,
             "start": None, "end": None, "flushed": False},
        )  # fmt: skip
        if kind == "job_submit":
            row["submit"] = t
        elif kind == "job_start":
            row["start"] = t
        elif kind == "job_end":
            row["end"] = t
        else:
            row["flushed"] = True
    out: dict[int, list[dict[str, Any]]] = {}
    for key in sorted(table):
        out.setdefault(key[0], []).append(table[key])
    return out


# --- rank queues ---------------------------------------------------------------------------------
def assert_no_overtaking(source: Source) -> None:
    """Strict FIFO per rank: a job starts only after every earlier job of its rank ended.

    Flushed jobs (dropped after an asynchronous failure) never start and are skipped.
    """
    for rank, jobs in _jobs(source).items():
        prev: dict[str, Any] | None = None
        pending_before: dict[str, Any] | None = None
        for job in jobs:
            if job["flushed"]:
                continue
            if job["start"] is None:
                pending_before = pending_before or job
                continue
            if pending_before is not None:
                raise AssertionError(
                    f"rank {rank}: job {job['seq']} ({job['type']}) started at {job['start']} "
                    f"although earlier job {pending_before['seq']} ({pending_before['type']}) "
                    "never started"
                )
            if job["submit"] is not None and job["start"] < job["submit"]:
                raise AssertionError(f"rank {rank}: job {job['seq']} started before submission")
            if prev is not None and (prev["end"] is None or job["start"] < prev["end"]):
                raise AssertionError(
                    f"rank {rank}: job {job['seq']} ({job['type']}) started at {job['start']} "
                    f"before job {prev['seq']} ({prev['type']}) ended at {prev['end']}"
                )
            prev = job


def _dpu_runs(events: list[Event]) -> dict[int, list[tuple[int, int, int]]]:
    """Per rank, ``(boot, stop, dpu)`` of every recorded DPU run."""
    runs: dict[int, list[tuple[int, int, int]]] = {}
    for t, kind, f in events:
        if kind == "dpu_run":
            runs.setdefault(f["rank"], []).append((f["start"], t, f["dpu"]))
    return runs


def assert_sync_semantics(source: Source) -> None:
    """Non-parallel jobs never overlap a DPU run of their rank; a SYNC starts after every
    earlier job of its rank ended and with the rank's DPUs stopped (sdk-reference.md §3.2-3.3)."""
    events = _events(source)
    assert_no_overtaking(events)
    runs = _dpu_runs(events)
    for rank, jobs in _jobs(events).items():
        for job in jobs:
            if job["start"] is None or job["type"] in _PARALLEL_NAMES:
                continue
            start = job["start"]
            end = job["end"] if job["end"] is not None else start
            for boot, stop, dpu in runs.get(rank, []):
                running_at_start = boot <= start < stop
                overlaps = start < stop and boot < end
                if running_at_start or overlaps:
                    raise AssertionError(
                        f"rank {rank}: non-parallel job {job['seq']} ({job['type']}) "
                        f"[{start}, {end}] overlaps the run of DPU {dpu} [{boot}, {stop}]"
                    )


# --- FIFO conservation ----------------------------------------------------------------------------
@dataclass(frozen=True)
class FifoReport:
    """Outcome of :func:`fifo_conservation`; ``ok`` when nothing is wrong."""

    lost: list[Any] = field(default_factory=list)
    duplicated: list[Any] = field(default_factory=list)
    spurious: list[Any] = field(default_factory=list)
    refused_but_drained: list[Any] = field(default_factory=list)
    reordered: list[tuple[Hashable, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every accepted element came back exactly once (in order, if asked)."""
        return not (
            self.lost
            or self.duplicated
            or self.spurious
            or self.refused_but_drained
            or self.reordered
        )

    def __str__(self) -> str:
        parts = [
            f"{name}: {value!r}"
            for name, value in (
                ("lost (accepted, never drained)", self.lost),
                ("duplicated (drained more often than accepted)", self.duplicated),
                ("spurious (drained, never pushed)", self.spurious),
                ("drained although the push reported failure", self.refused_but_drained),
                ("out of order (channel, first drained index)", self.reordered),
            )
            if value
        ]
        return "; ".join(parts) if parts else "FIFO conservation holds"


def fifo_conservation(
    pushed: Sequence[Hashable],
    accepted: Sequence[bool],
    drained: Iterable[Hashable],
    *,
    channel: Callable[[Any], Hashable] | None = None,
    ordered: bool = True,
) -> FifoReport:
    """Every element pushed comes back exactly once, or is reported as not pushed.

    ``accepted[i]`` says whether the push of ``pushed[i]`` succeeded (False: the host was
    told it was not pushed, e.g. ``DPU_ERR_WRAM_FIFO_FULL``). ``channel(element)`` splits
    elements into independent FIFOs (say, one per DPU); with ``ordered`` each channel must
    drain in push order. Pure function: no emulator needed.
    """
    if len(pushed) != len(accepted):
        raise ValueError(f"{len(pushed)} pushed elements but {len(accepted)} push results")
    key = channel or (lambda _: 0)
    ok_by: dict[Hashable, list[Hashable]] = {}
    refused: Counter[Hashable] = Counter()
    for element, was_accepted in zip(pushed, accepted, strict=True):
        if was_accepted:
            ok_by.setdefault(key(element), []).append(element)
        else:
            refused[element] += 1
    out_by: dict[Hashable, list[Hashable]] = {}
    for element in drained:
        out_by.setdefault(key(element), []).append(element)
    lost: list[Any] = []
    duplicated: list[Any] = []
    spurious: list[Any] = []
    refused_out: list[Any] = []
    reordered: list[tuple[Hashable, int]] = []
    for ch in sorted(set(ok_by) | set(out_by), key=repr):
        want, got = ok_by.get(ch, []), out_by.get(ch, [])
        cw, cg = Counter(want), Counter(got)
        lost.extend((cw - cg).elements())
        for element, extra in (cg - cw).items():
            if cw[element]:
                duplicated.extend([element] * extra)
            elif refused[element]:
                refused_out.extend([element] * extra)
            else:
                spurious.extend([element] * extra)
        if ordered and cw == cg and want != got:
            first = next(i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b)
            reordered.append((ch, first))
    return FifoReport(lost, duplicated, spurious, refused_out, reordered)


def assert_fifo_conservation(
    pushed: Sequence[Hashable],
    accepted: Sequence[bool],
    drained: Iterable[Hashable],
    *,
    channel: Callable[[Any], Hashable] | None = None,
    ordered: bool = True,
) -> None:
    """:func:`fifo_conservation`, raising AssertionError with the report when it fails."""
    report = fifo_conservation(pushed, accepted, drained, channel=channel, ordered=ordered)
    if not report.ok:
        raise AssertionError(f"FIFO conservation violated: {report}")


# --- partial orders ------------------------------------------------------------------------------
class Unordered:
    """A template segment whose items may occur in any order (a multiset)."""

    __slots__ = ("items",)

    def __init__(self, *items: Any) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"Unordered{self.items!r}"


def partial_order_mismatch(seq: Sequence[Any], template: Sequence[Any]) -> str | None:
    """None if ``seq`` matches ``template``, else a description of the first mismatch.

    Template items match one element each; an :class:`Unordered` (or a ``set``) matches
    as many consecutive elements as it holds, in any order.
    """
    i = 0
    for pos, part in enumerate(template):
        if isinstance(part, Unordered | set | frozenset):
            items = list(part.items) if isinstance(part, Unordered) else list(part)
            segment = list(seq[i : i + len(items)])
            remaining = list(items)
            for element in segment:
                if element in remaining:
                    remaining.remove(element)
            if len(segment) < len(items) or remaining:
                return (
                    f"template part {pos} {part!r}: elements {i}..{i + len(items) - 1} are "
                    f"{segment!r}"
                )
            i += len(items)
        else:
            if i >= len(seq):
                return f"template part {pos} {part!r}: the sequence ended"
            if seq[i] != part:
                return f"template part {pos}: expected {part!r} at {i}, found {seq[i]!r}"
            i += 1
    if i != len(seq):
        return f"{len(seq) - i} element(s) left after the template: {list(seq[i:])!r}"
    return None


def assert_partial_order(seq: Sequence[Any], template: Sequence[Any]) -> None:
    """Assert that ``seq`` matches ``template`` (see :func:`partial_order_mismatch`)."""
    problem = partial_order_mismatch(seq, template)
    if problem is not None:
        raise AssertionError(f"sequence does not match the partial order: {problem}\n  {seq!r}")


def project(
    source: Source, *kinds: str, fields: Sequence[str] = ("rank", "type")
) -> list[tuple[Any, ...]]:
    """Recorded events of ``kinds`` (all if none) as ``(kind, field values...)`` tuples."""
    return [
        (kind, *(f.get(name) for name in fields))
        for _, kind, f in _events(source)
        if not kinds or kind in kinds
    ]


# --- determinism and deadlocks ------------------------------------------------------------------
def assert_deterministic(
    main: Callable[..., Awaitable[Any]],
    *args: Any,
    machine: MachineConfig | None = None,
    explore_seed: int | None = None,
    backends: Sequence[str] = BACKENDS,
    repeat: int = 1,
) -> str:
    """Run ``main(*args)`` ``repeat`` times per backend; every trace must be byte-identical.

    Returns the trace. ``main`` must not keep state between runs.
    """
    traces: list[tuple[str, str]] = []
    for backend in backends:
        for _ in range(repeat):
            emu = new_emulator(machine, explore_seed=explore_seed)
            emu.run(main, *args, backend=backend)
            traces.append((backend, recorder_of(emu).to_jsonl()))
    first_backend, first = traces[0]
    for backend, trace in traces[1:]:
        if trace != first:
            a, b = first.splitlines(), trace.splitlines()
            k = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
            where = f"line {k}: {a[k]!r} vs {b[k]!r}" if k is not None else "length differs"
            raise AssertionError(
                f"traces differ between {first_backend} and {backend} "
                f"(explore_seed={explore_seed}): {where}"
            )
    return first


def assert_never_deadlocks(run: Execution[T]) -> T:
    """The run's value; an AssertionError naming the blocked actors (identical states grouped)
    if it deadlocked."""
    dead = run.deadlock
    if dead is not None:
        blocked = "\n  ".join(dead.summary) or "(none named)"
        raise AssertionError(
            f"the host program deadlocked at t={dead.now_ps} ps; blocked:\n  {blocked}\n"
            f"{replay_hint(run.backend, run.explore_seed)}"
        ) from dead
    return run.unwrap()


def assert_deadlocks(run: Execution[Any], *blocked: str) -> DeadlockError:
    """Assert that the run deadlocked and each of ``blocked`` occurs in one blocked line."""
    dead = run.deadlock
    if dead is None:
        raise AssertionError(
            f"expected a deadlock, got {run.error!r}" if run.error else "expected a deadlock"
        )
    for fragment in blocked:
        if not any(fragment in line for line in dead.blocked):
            raise AssertionError(f"no blocked actor matches {fragment!r}: {dead.blocked}")
    return dead
