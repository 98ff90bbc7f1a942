"""A deterministic mutator of scenario files, for the hardening tests (seeded, no Hypothesis:
the same seed gives the same few hundred cases on every run)."""

from __future__ import annotations

import random
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from aiopim.scenario import ACTIONS

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "scenarios").glob("*.toml"))

HUGE = [
    2**32 - 1,
    2**32,
    2**63,
    2**64 + 1,
    4 * 10**6,
    10**9,
    10**12,
    10**18 + 1,
    10**30,
    -1,
    -(2**63),
    0,
]
SWAPS: list[Any] = [
    "x",
    "",
    True,
    False,
    1.5,
    float("inf"),
    [],
    [1, "a"],
    [[1, 2], [3]],
    {"k": 1},
    {},
    "iota%4294967296",
    "iota%0",
    "1e9us",
    "99999999999999999999s",
    "0.5ps",
    "wram:99999999999",
    "mram:0",
    "DPU_ERR_NOPE",
    "\u00e9\U0001f600",
]
KINDS = (
    "swap",
    "huge",
    "delete",
    "unknown",
    "nest",
    "duplicate",
    "op",
    "utf8",
    "truncate",
    "deep_text",
)
OPS = sorted(ACTIONS)  # every registered action


@dataclass(frozen=True)
class Case:
    """One mutated scenario: where it came from, what was changed, its bytes."""

    origin: str
    mutation: str
    data: bytes


def _paths(doc: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        path, v = stack.pop()
        if path:
            out.append(path)
        if isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in enumerate(v))
    out.sort(key=repr)
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path[:-1]:
        doc = doc[p]
    return doc


def _mutate_doc(rng: random.Random, doc: dict[str, Any], kind: str) -> str:
    paths = _paths(doc)
    path = rng.choice(paths)
    parent, last = _parent(doc, path), path[-1]
    if kind == "swap":
        new = rng.choice(SWAPS)
        parent[last] = new
        return f"{path} = {new!r}"
    if kind == "huge":
        numeric = [p for p in paths if isinstance(_parent(doc, p)[p[-1]], int)] or paths
        path = rng.choice(numeric)
        parent, last = _parent(doc, path), path[-1]
        new = rng.choice(HUGE)
        parent[last] = new
        return f"{path} = {new}"
    if kind == "delete":
        del parent[last]
        return f"delete {path}"
    if kind == "unknown":
        tables = [p for p in paths if isinstance(_parent(doc, p)[p[-1]], dict)] or [()]
        where = rng.choice(tables)
        target = _parent(doc, (*where, None)) if where else doc
        target["zzz_unknown"] = 1
        return f"unknown key in {where}"
    if kind == "nest":
        depth = rng.choice((3, 20, 40))
        v = parent[last]
        for _ in range(depth):
            v = [v]
        parent[last] = v
        return f"{path} nested {depth} deep"
    if kind == "duplicate":
        lists = [p for p in paths if isinstance(_parent(doc, p)[p[-1]], list)] or [path]
        path = rng.choice(lists)
        v = _parent(doc, path)[path[-1]]
        if isinstance(v, list) and v:
            v.append(v[rng.randrange(len(v))])
        return f"duplicate in {path}"
    # "op": another action for a step
    steps = [p for p in paths if p[-1] == "op"] or [path]
    path = rng.choice(steps)
    new = rng.choice(OPS)
    _parent(doc, path)[path[-1]] = new
    return f"{path} = {new!r}"


def mutate(rng: random.Random, source: Path) -> Case:
    """One random mutation of the scenario file ``source``."""
    text = source.read_text(encoding="utf-8")
    kind = rng.choice(KINDS)
    raw = text.encode()
    if kind == "utf8":
        at = rng.randrange(len(raw))
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])
        return Case(source.name, f"invalid UTF-8 at byte {at}", raw[:at] + bad + raw[at:])
    if kind == "truncate":
        at = rng.randrange(len(raw))
        return Case(source.name, f"truncated at byte {at}", raw[:at])
    if kind == "deep_text":
        depth = rng.choice((33, 100, 1000, 5000))
        deep = "[" * depth + "1" + "]" * depth
        return Case(source.name, f"array {depth} deep", (text + f"\nzz = {deep}\n").encode())
    doc = tomllib.loads(text)
    done = [f"{kind}: {_mutate_doc(rng, doc, kind)}"]
    for _ in range(rng.choice((0, 0, 1, 2))):  # sometimes more than one change
        more = rng.choice(KINDS[:7])
        done.append(f"{more}: {_mutate_doc(rng, doc, more)}")
    return Case(source.name, "; ".join(done), tomli_w.dumps(doc).encode())


def cases(seed: int, count: int) -> Iterator[Case]:
    """``count`` mutations of the shipped scenarios, the same for the same seed."""
    rng = random.Random(seed)
    for i in range(count):
        yield mutate(rng, SHIPPED[i % len(SHIPPED)])
