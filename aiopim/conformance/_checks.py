"""The check kinds of a DPU log: ``lines``, ``text``, ``match`` and ``mutex_chain``.

Every check takes the log as ``dpu_log_read`` prints it without its ``=== DPU#… ===`` header
and returns None when it holds, else what is wrong, in words.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

#: reads a text file of the binary's directory by name (``lines_file``, ``pieces_file``)
ReadText = Callable[[str], str]

#: check kinds, each with the keys it accepts besides ``kind``
KINDS: dict[str, tuple[str, ...]] = {
    "lines": ("lines", "lines_file", "order"),
    "text": ("text", "pieces", "pieces_file", "order"),
    "match": ("pattern", "after", "all", "count", "min_count", "max_count", "groups"),
    "mutex_chain": ("pattern", "first"),
}

#: rules on the values of a named group of a ``match`` pattern
GROUP_RULES = ("min", "max", "equals", "unique", "once_each", "sequence", "equals_group", "plus")

_SHOWN = 3  # items listed in a message before "and N more"


def split_lines(text: str) -> tuple[list[str], bool]:
    """The lines of ``text`` and whether its last line ends with a newline (True if empty)."""
    if not text:
        return [], True
    lines = text.split("\n")
    if lines[-1] == "":
        return lines[:-1], True
    return lines, False


def _short(s: str, limit: int = 60) -> str:
    return repr(s if len(s) <= limit else s[: limit - 3] + "...")


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(_short(s) for s in items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _lines_of_file(read: ReadText, name: str) -> list[str]:
    return split_lines(read(name))[0]


def _as_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return int(text, 0)


# ================================================================================================
# lines: the log is these lines (in order, or in any order)
# ================================================================================================
@dataclass(frozen=True)
class LinesCheck:
    """The log's lines are ``lines`` (or the lines of ``lines_file``), each ending with a
    newline; ``order`` is ``exact`` or ``any``."""

    kind: ClassVar[str] = "lines"
    lines: tuple[str, ...] | None = None
    lines_file: str | None = None
    order: str = "exact"

    def failure(self, text: str, read: ReadText) -> str | None:
        """What is wrong with the log ``text``, or None."""
        expected = list(self.lines) if self.lines is not None else []
        if self.lines_file is not None:
            expected = _lines_of_file(read, self.lines_file)
        got, terminated = split_lines(text)
        if self.order == "any":
            missing = list((Counter(expected) - Counter(got)).elements())
            extra = list((Counter(got) - Counter(expected)).elements())
            problems = []
            if missing:
                problems.append(f"missing {len(missing)} line(s): {_listing(missing)}")
            if extra:
                problems.append(f"{len(extra)} unexpected line(s): {_listing(extra)}")
            if problems:
                return "; ".join(problems)
        else:
            for i, (g, e) in enumerate(zip(got, expected, strict=False), 1):
                if g != e:
                    return f"line {i} is {_short(g)}, expected {_short(e)}"
            if len(got) > len(expected):
                return (
                    f"the log has {_lines(len(got))}, expected {len(expected)}; "
                    f"line {len(expected) + 1} is {_short(got[len(expected)])}"
                )
            if len(got) < len(expected):
                return (
                    f"the log has {_lines(len(got))}, expected {len(expected)}; "
                    f"line {len(got) + 1} should be {_short(expected[len(got)])}"
                )
        if not terminated:
            return f"the last line {_short(got[-1])} does not end with a newline"
        return None


# ================================================================================================
# text: the log is this text, or the concatenation of these pieces
# ================================================================================================
def _fits(text: str, pieces: Sequence[str]) -> tuple[bool, int]:
    """Whether ``text`` is the concatenation of ``pieces`` in some order, and the furthest
    offset a concatenation of some of them reached."""
    distinct = sorted(set(pieces))
    counts = Counter(pieces)
    left = [counts[p] for p in distinct]
    failed: set[tuple[int, tuple[int, ...]]] = set()
    furthest = 0

    def search(pos: int) -> bool:
        nonlocal furthest
        furthest = max(furthest, pos)
        if not any(left):
            return pos == len(text)
        key = (pos, tuple(left))
        if key in failed:
            return False
        for k, piece in enumerate(distinct):
            if left[k] and text.startswith(piece, pos):
                left[k] -= 1
                found = search(pos + len(piece))
                left[k] += 1
                if found:
                    return True
        failed.add(key)
        return False

    return search(0), furthest


@dataclass(frozen=True)
class TextCheck:
    """The log is exactly ``text``, or the concatenation of ``pieces`` (or of the lines of
    ``pieces_file``, without their newlines) in ``order`` ``exact`` or ``any``."""

    kind: ClassVar[str] = "text"
    text: str | None = None
    pieces: tuple[str, ...] | None = None
    pieces_file: str | None = None
    order: str = "exact"

    def failure(self, text: str, read: ReadText) -> str | None:
        """What is wrong with the log ``text``, or None."""
        if self.text is not None:
            expected = self.text
            if text == expected:
                return None
            at = next(
                (i for i, (a, b) in enumerate(zip(text, expected, strict=False)) if a != b),
                min(len(text), len(expected)),
            )
            return (
                f"the log differs from the expected text at character {at}: "
                f"{_short(text[at : at + 40])} instead of {_short(expected[at : at + 40])}"
            )
        pieces = list(self.pieces) if self.pieces is not None else []
        if self.pieces_file is not None:
            pieces = _lines_of_file(read, self.pieces_file)
        if self.order == "exact":
            ok, furthest = text == "".join(pieces), 0
        else:
            ok, furthest = _fits(text, pieces)
        if ok:
            return None
        order = "in this order" if self.order == "exact" else "in any order"
        where = (
            ""
            if self.order == "exact"
            else (f"; no remaining piece fits at character {furthest}: {_short(text[furthest:])}")
        )
        return f"the log is not the concatenation of the {len(pieces)} pieces {order}{where}"


# ================================================================================================
# match: lines matching a pattern, how many, and rules on what the groups captured
# ================================================================================================
@dataclass(frozen=True)
class GroupRule:
    """Rules on the values one named group captured, over the matching lines in log order."""

    min: int | None = None
    max: int | None = None
    equals: int | str | None = None
    unique: bool = False
    once_each: tuple[int, int] | None = None  # the values are lo..hi, each once, any order
    sequence: tuple[int, int] | None = None  # the values are lo, lo + 1, ..., hi in order
    equals_group: str | None = None  # on each line, the value of that group plus ``plus``
    plus: int = 0

    @property
    def numeric(self) -> bool:
        """Whether the rules compare the values as integers."""
        bounds = (self.min, self.max, self.once_each, self.sequence, self.equals_group)
        return isinstance(self.equals, int) or any(v is not None for v in bounds)


@dataclass(frozen=True)
class MatchCheck:
    """Lines matching ``pattern`` (whole lines), among all lines or those after the one line
    equal to ``after``: ``all`` of them if asked, ``count`` of them (or between ``min_count``
    and ``max_count``), and ``groups`` rules on the named groups' values."""

    kind: ClassVar[str] = "match"
    pattern: str
    after: str | None = None
    all: bool = False
    count: int | None = None
    min_count: int | None = None
    max_count: int | None = None
    groups: dict[str, GroupRule] = field(default_factory=dict)

    def failure(self, text: str, read: ReadText) -> str | None:
        """What is wrong with the log ``text``, or None."""
        lines, _ = split_lines(text)
        first = 0
        if self.after is not None:
            at = [i for i, line in enumerate(lines) if line == self.after]
            if len(at) != 1:
                found = "no line" if not at else f"{len(at)} lines"
                return f"{found} {_short(self.after)} in the log, expected one"
            first = at[0] + 1
        regex = re.compile(self.pattern)
        matches: list[tuple[int, re.Match[str]]] = []
        for n, line in enumerate(lines[first:], first + 1):
            m = regex.fullmatch(line)
            if m is not None:
                matches.append((n, m))
            elif self.all:
                scope = "" if self.after is None else f" after {_short(self.after)}"
                return f"line {n} {_short(line)}{scope} does not match {self.pattern!r}"
        n = len(matches)
        if self.count is not None and n != self.count:
            return f"lines matching {self.pattern!r}: {n}, expected {self.count}"
        if self.min_count is not None and n < self.min_count:
            return f"lines matching {self.pattern!r}: {n}, expected at least {self.min_count}"
        if self.max_count is not None and n > self.max_count:
            return f"lines matching {self.pattern!r}: {n}, expected at most {self.max_count}"
        for name, rule in self.groups.items():
            problem = _group_failure(name, rule, matches)
            if problem is not None:
                return f"group {name}: {problem}"
        return None


def _group_failure(
    name: str, rule: GroupRule, matches: list[tuple[int, re.Match[str]]]
) -> str | None:
    raw: list[tuple[int, str]] = []
    for n, m in matches:
        value = m.group(name)
        if value is None:
            return f"nothing captured on line {n}"
        raw.append((n, value))
    if isinstance(rule.equals, str):
        for n, value in raw:
            if value != rule.equals:
                return f"{value!r} on line {n}, expected {rule.equals!r}"
    values: list[tuple[int, int]] = []
    if rule.numeric:
        for n, value in raw:
            try:
                values.append((n, _as_int(value)))
            except ValueError:
                return f"{value!r} on line {n} is not an integer"
    for n, v in values:
        if rule.min is not None and v < rule.min:
            return f"{v} on line {n} is less than {rule.min}"
        if rule.max is not None and v > rule.max:
            return f"{v} on line {n} is more than {rule.max}"
        if isinstance(rule.equals, int) and v != rule.equals:
            return f"{v} on line {n}, expected {rule.equals}"
    if rule.equals_group is not None:
        for (n, v), (_, m) in zip(values, matches, strict=True):
            other = m.group(rule.equals_group)
            try:
                want = _as_int(other) + rule.plus if other is not None else None
            except ValueError:
                return f"group {rule.equals_group} = {other!r} on line {n} is not an integer"
            if v != want:
                plus = f" + {rule.plus}" if rule.plus else ""
                return f"{v} on line {n}, expected {rule.equals_group}{plus} = {want}"
    if rule.unique:
        seen: dict[str, int] = {}
        for n, value in raw:
            if value in seen:
                return f"{value!r} on lines {seen[value]} and {n}, expected each value once"
            seen[value] = n
    if rule.once_each is not None:
        lo, hi = rule.once_each
        counts = Counter(v for _, v in values)
        missing = [str(k) for k in range(lo, hi + 1) if counts[k] == 0]
        twice = sorted(str(k) for k, c in counts.items() if c > 1)
        outside = sorted(str(k) for k in counts if not lo <= k <= hi)
        if missing or twice or outside:
            parts = [
                f"{what} {', '.join(items[:8])}{' ...' if len(items) > 8 else ''}"
                for what, items in (("missing", missing), ("repeated", twice), ("outside", outside))
                if items
            ]
            return f"expected {lo}..{hi} each once; " + "; ".join(parts)
    if rule.sequence is not None:
        lo, hi = rule.sequence
        for k, (n, v) in enumerate(values):
            if v != lo + k:
                return f"{v} on line {n}, expected {lo + k} (the values run {lo}..{hi} in order)"
        if len(values) != hi - lo + 1:
            return f"the values stop at {lo + len(values) - 1}, expected {lo}..{hi} in order"
    return None


# ================================================================================================
# mutex_chain: each line shows the value the line before left (mutex_example)
# ================================================================================================
@dataclass(frozen=True)
class MutexChainCheck:
    """Over the lines matching ``pattern`` (named groups ``T``, the tasklet, and ``V``, the
    value it read), the first ``V`` is ``first`` and every later ``V`` is ``1 << T'`` where
    ``T'`` is the tasklet of the line before: each tasklet saw what the previous one wrote
    under the mutex."""

    kind: ClassVar[str] = "mutex_chain"
    pattern: str
    first: int

    def failure(self, text: str, read: ReadText) -> str | None:
        """What is wrong with the log ``text``, or None."""
        lines, _ = split_lines(text)
        regex = re.compile(self.pattern)
        chain: list[tuple[int, int, int]] = []  # (line, tasklet, value)
        for n, line in enumerate(lines, 1):
            m = regex.fullmatch(line)
            if m is None:
                continue
            try:
                chain.append((n, _as_int(m.group("T")), _as_int(m.group("V"))))
            except (TypeError, ValueError):
                return f"line {n} {_short(line)}: T and V must be integers"
        if not chain:
            return f"no line matches {self.pattern!r}"
        n, _, v = chain[0]
        if v != self.first:
            return f"the first value (line {n}) is {v}, expected {self.first}"
        for (_, t_before, _), (n, _, v) in itertools.pairwise(chain):
            if not 0 <= t_before < 64 or v != 1 << t_before:
                want = f"1 << {t_before} = {1 << t_before}" if 0 <= t_before < 64 else "1 << T'"
                return (
                    f"line {n}: V = {v}, expected {want} (what tasklet {t_before}, "
                    "the line before, wrote)"
                )
        return None


LogCheck = LinesCheck | TextCheck | MatchCheck | MutexChainCheck
