"""Line numbers of keys in TOML source (tomllib gives values, not positions).

:func:`locate` scans text that tomllib already accepted and maps every key path — table
headers, ``key = value`` lines, array elements and keys of inline tables — to the line where
it is written. Paths use ``str`` for keys and ``int`` for array / array-of-tables indices,
like the parsed document: ``("tasks", 0, "steps", 2, "bytes")``.
"""

from __future__ import annotations

import contextlib
import json
import re

Path = tuple[str | int, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]*")
_WS = re.compile(r"(?:[ \t\r]|#[^\n]*)*")
_WS_NL = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
_SCALAR = re.compile(r"[^,\]}\n#]*")
_BASIC = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_LITERAL = re.compile(r"'([^'\n]*)'")
_ML_BASIC = re.compile(r'"""((?:[^"\\]|\\.|"(?!""))*)("{3,5})', re.S)
_ML_LITERAL = re.compile(r"'''(.*?)('{3,5})", re.S)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.lines: dict[Path, int] = {}
        #: how many times each array-of-tables path was opened
        self.aot: dict[Path, int] = {}

    # -- low level ---------------------------------------
    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def advance(self, n: int = 1) -> None:
        end = min(self.i + n, len(self.s))
        self.line += self.s.count("\n", self.i, end)
        self.i += n

    def skip_to(self, end: int) -> None:
        """Move to index ``end``, counting the lines passed."""
        self.advance(end - self.i)

    def skip_ws(self, newlines: bool) -> None:
        m = (_WS_NL if newlines else _WS).match(self.s, self.i)
        if m is not None:
            self.skip_to(m.end())

    def string(self) -> str:
        s = self.s
        if s.startswith('"""', self.i) or s.startswith("'''", self.i):
            m = (_ML_BASIC if s[self.i] == '"' else _ML_LITERAL).match(s, self.i)
            if m is None:
                raise ValueError(f"unterminated string at line {self.line}")
            self.skip_to(m.end())
            return m.group(1) + m.group(2)[3:]  # up to two quotes may end the content
        q = s[self.i]
        m = (_BASIC if q == '"' else _LITERAL).match(s, self.i)
        if m is None:
            raise ValueError(f"unterminated string at line {self.line}")
        text = m.group(1)
        self.skip_to(m.end())
        if q == '"' and "\\" in text:
            with contextlib.suppress(ValueError):
                text = json.loads(f'"{text}"')
        return text

    def key(self) -> list[str]:
        """A dotted key."""
        parts = []
        while True:
            self.skip_ws(False)
            c = self.peek()
            if c in ('"', "'"):
                parts.append(self.string())
            else:
                m = _BARE.match(self.s, self.i)
                end = self.i if m is None else m.end()
                parts.append(self.s[self.i : end])
                self.i = end
            self.skip_ws(False)
            if self.peek() == ".":
                self.advance()
                continue
            return parts

    # -- structure ---------------------------------------
    def document(self) -> None:
        table: Path = ()
        while True:
            self.skip_ws(True)
            c = self.peek()
            if not c:
                return
            if c == "[":
                table = self.header()
            else:
                self.keyval(table)

    def header(self) -> Path:
        line = self.line
        double = self.s.startswith("[[", self.i)
        self.advance(2 if double else 1)
        parts = self.key()
        self.advance(2 if double else 1)
        path = self.resolve(parts)
        if double:
            n = self.aot.get(path, 0)
            self.aot[path] = n + 1
            path = (*path, n)
        self.lines.setdefault(path, line)
        return path

    def resolve(self, parts: list[str]) -> Path:
        """Insert the current index after every array-of-tables prefix."""
        path: Path = ()
        for k, p in enumerate(parts):
            path = (*path, p)
            n = self.aot.get(path)
            if n is not None and k < len(parts) - 1:
                path = (*path, n - 1)
        return path

    def keyval(self, table: Path) -> None:
        line = self.line
        parts = self.key()
        path = (*table, *parts)
        self.lines.setdefault(path, line)
        self.advance()  # '='
        self.skip_ws(False)
        self.value(path)

    def value(self, path: Path) -> None:
        c = self.peek()
        if c in ('"', "'"):
            self.string()
        elif c == "[":
            self.array(path)
        elif c == "{":
            self.inline_table(path)
        else:
            m = _SCALAR.match(self.s, self.i)
            if m is not None:
                self.i = m.end()

    def array(self, path: Path) -> None:
        self.advance()  # '['
        n = 0
        while True:
            self.skip_ws(True)
            if self.peek() == "]":
                self.advance()
                return
            self.lines.setdefault((*path, n), self.line)
            before = self.i
            self.value((*path, n))
            n += 1
            self.skip_ws(True)
            if self.peek() == ",":
                self.advance()
            elif self.i == before or not self.peek():  # not TOML this scanner understands
                raise ValueError(f"cannot follow the array at line {self.line}")

    def inline_table(self, path: Path) -> None:
        self.advance()  # '{'
        while True:
            self.skip_ws(True)
            if self.peek() == "}":
                self.advance()
                return
            if not self.peek():
                raise ValueError("unterminated inline table")
            self.keyval(path)
            self.skip_ws(True)
            if self.peek() == ",":
                self.advance()


def locate(text: str) -> dict[Path, int]:
    """Map every key path of a valid TOML document to its (1-based) line."""
    sc = _Scanner(text)
    sc.document()
    return sc.lines


def line_of(lines: dict[Path, int], path: Path) -> int | None:
    """Line of ``path``, or of its closest written ancestor."""
    p = path
    while p:
        if p in lines:
            return lines[p]
        p = p[:-1]
    return None
