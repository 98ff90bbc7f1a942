"""One binary's expectations, read from a TOML file and validated (docs/conformance.md)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from .. import timing
from .._errors import DpuErrorCode
from .._files import InputFileError, read_input_file
from ..scenario._limits import TomlError, load_toml, show
from ..scenario._locate import Path as KeyPath
from ..scenario._locate import line_of
from ..scenario._spec import parse_duration
from ._checks import (
    GROUP_RULES,
    KINDS,
    GroupRule,
    LinesCheck,
    LogCheck,
    MatchCheck,
    MutexChainCheck,
    TextCheck,
)
from ._inputs import DTYPES, MAX_INPUT_BYTES, OPS, SOURCES, InputData, dtype_range, dtype_size

#: the largest expectation file
MAX_FILE_BYTES = 1 << 20

#: the most DPUs a run may allocate (the default machine: 40 ranks of 64)
MAX_NR_DPUS = 40 * 64

_SECTIONS = ("binary", "machine", "copy_to", "launch", "log", "symbol")


class ExpectationError(ValueError):
    """An expectation file is invalid: ``str()`` names the file, line and key, and says what
    to fix."""

    def __init__(self, message: str, *, source: str = "", line: int | None = None, key: str = ""):
        self.source = source
        self.line = line
        self.key = key
        self.message = message
        where = source or "<expectation>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


@dataclass(frozen=True)
class CopyTo:
    """A ``dpu_copy_to`` of generated data to every DPU, after ``dpu_load``."""

    symbol: str
    offset: int
    length: int | None  # None: the data's size in bytes
    data: InputData


@dataclass(frozen=True)
class SymbolCheck:
    """After the launch, ``dpu_copy_from`` of ``values`` (``dtype`` elements) at ``offset`` of
    ``symbol`` reads exactly ``values`` on every DPU."""

    symbol: str
    offset: int
    dtype: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class Expectation:
    """What one binary must do: machine, host steps and expected launch outcome, log and
    symbol values."""

    source: str  # the TOML file
    name: str  # the TOML file's stem, the name in reports
    binary: str  # the binary's file name, relative to the binary directory
    nr_tasklets: int | None
    chip: str
    nr_dpus: int
    copy_to: tuple[CopyTo, ...]
    launch_error: DpuErrorCode | None  # None: the launch succeeds
    fault: int | None  # with DPU_ERR_DPU_FAULT: the fault code every DPU stops with
    timeout_ps: int | None  # virtual time the launch may take
    log: tuple[LogCheck, ...]
    symbols: tuple[SymbolCheck, ...]


def _keyname(path: KeyPath) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + (p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else f'"{p}"')
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Reader:
    """Typed access to the parsed document; every error names the key and its line."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        try:
            self.doc, self.lines = load_toml(text)
        except TomlError as exc:
            raise ExpectationError(str(exc), source=source, line=exc.line) from None

    def error(self, path: KeyPath, message: str) -> ExpectationError:
        return ExpectationError(
            message, source=self.source, line=line_of(self.lines, path), key=_keyname(path)
        )

    def table(self, path: KeyPath, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"expected a table, got {show(value)}")
        for key in value:
            if key not in allowed:
                raise self.error((*path, key), f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def tables(self, path: KeyPath, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(
                path, f"expected an array of tables ([[{path[-1]}]]), got {show(value)}"
            )
        return value

    def int_(self, path: KeyPath, value: Any, lo: int | None = None, hi: int | None = None) -> int:
        if not _is_int(value):
            raise self.error(path, f"expected an integer, got {show(value)}")
        if lo is not None and value < lo:
            raise self.error(path, f"{value} is less than {lo}")
        if hi is not None and value > hi:
            raise self.error(path, f"{value} is more than {hi}")
        return int(value)

    def str_(self, path: KeyPath, value: Any) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"expected a string, got {show(value)}")
        return value

    def bool_(self, path: KeyPath, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"expected true or false, got {show(value)}")
        return value

    def choice(self, path: KeyPath, value: Any, choices: tuple[str, ...]) -> str:
        s = self.str_(path, value)
        if s not in choices:
            raise self.error(path, f"{s!r} is not one of {', '.join(choices)}")
        return s

    def strs(self, path: KeyPath, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.error(path, f"expected an array of strings, got {show(value)}")
        return tuple(self.str_((*path, i), v) for i, v in enumerate(value))

    def ints(self, path: KeyPath, value: Any, lo: int, hi: int) -> tuple[int, ...]:
        if not isinstance(value, list):
            raise self.error(path, f"expected an array of integers, got {show(value)}")
        return tuple(self.int_((*path, i), v, lo, hi) for i, v in enumerate(value))

    def pair(self, path: KeyPath, value: Any) -> tuple[int, int]:
        if not (isinstance(value, list) and len(value) == 2 and all(map(_is_int, value))):
            raise self.error(path, f"expected [first, last] (two integers), got {show(value)}")
        lo, hi = value
        if lo > hi:
            raise self.error(path, f"first {lo} is after last {hi}")
        return int(lo), int(hi)

    def file_name(self, path: KeyPath, value: Any) -> str:
        name = self.str_(path, value)
        if not name or os.path.isabs(name) or ".." in re.split(r"[/\\]", name):
            raise self.error(
                path, f"{name!r} must name a file inside the binary directory (a relative path)"
            )
        return name

    def pattern(self, path: KeyPath, value: Any) -> re.Pattern[str]:
        text = self.str_(path, value)
        try:
            return re.compile(text)
        except re.error as exc:
            raise self.error(path, f"not a valid regular expression: {exc}") from None

    # -- sections ---------------------------------------
    def expectation(self, name: str) -> Expectation:
        doc = self.table((), self.doc, _SECTIONS)
        binary = self.table(("binary",), doc.get("binary", {}), ("file", "nr_tasklets"))
        file = self.file_name(("binary", "file"), binary.get("file", f"{name}.dpu"))
        nr_tasklets = None
        if "nr_tasklets" in binary:
            nr_tasklets = self.int_(("binary", "nr_tasklets"), binary["nr_tasklets"], 1, 24)
        machine = self.table(("machine",), doc.get("machine", {}), ("chip", "nr_dpus"))
        chip = self.choice(("machine", "chip"), machine.get("chip", "v1B"), tuple(timing.CHIPS))
        nr_dpus = self.int_(("machine", "nr_dpus"), machine.get("nr_dpus", 1), 1, MAX_NR_DPUS)
        copies = tuple(
            self.copy((("copy_to", i)), v)
            for i, v in enumerate(self.tables(("copy_to",), doc.get("copy_to", [])))
        )
        launch_error, fault, timeout = self.launch(doc.get("launch", {}))
        log = tuple(
            self.log_check(("log", i), v)
            for i, v in enumerate(self.tables(("log",), doc.get("log", [])))
        )
        symbols = tuple(
            self.symbol_check(("symbol", i), v)
            for i, v in enumerate(self.tables(("symbol",), doc.get("symbol", [])))
        )
        if not (log or symbols or "launch" in doc):
            raise self.error((), "nothing to check: add [launch], [[log]] or [[symbol]]")
        return Expectation(
            self.source, name, file, nr_tasklets, chip, nr_dpus, copies,
            launch_error, fault, timeout, log, symbols,
        )  # fmt: skip

    def launch(self, value: Any) -> tuple[DpuErrorCode | None, int | None, int | None]:
        path: KeyPath = ("launch",)
        launch = self.table(path, value, ("expect", "fault", "timeout"))
        expect = self.str_((*path, "expect"), launch.get("expect", "ok"))
        error: DpuErrorCode | None = None
        if expect != "ok":
            try:
                error = DpuErrorCode[expect]
            except KeyError:
                raise self.error(
                    (*path, "expect"),
                    f'{expect!r} is neither "ok" nor an error code such as "DPU_ERR_DPU_FAULT"',
                ) from None
            if error is DpuErrorCode.DPU_OK:
                raise self.error((*path, "expect"), 'write "ok" for a launch that succeeds')
        fault = None
        if "fault" in launch:
            if error is not DpuErrorCode.DPU_ERR_DPU_FAULT:
                raise self.error(
                    (*path, "fault"), 'a fault code needs expect = "DPU_ERR_DPU_FAULT"'
                )
            fault = self.int_((*path, "fault"), launch["fault"], 0, 0xFFFFFF)
        timeout = None
        if "timeout" in launch:
            try:
                timeout = parse_duration(launch["timeout"])
            except ValueError as exc:
                raise self.error((*path, "timeout"), str(exc)) from None
            if timeout == 0:
                raise self.error((*path, "timeout"), "a launch needs more than 0 ps")
        return error, fault, timeout

    def copy(self, path: KeyPath, value: Any) -> CopyTo:
        t = self.table(path, value, ("symbol", "offset", "length", "data"))
        if "symbol" not in t or "data" not in t:
            raise self.error(path, "[[copy_to]] needs symbol and data")
        symbol = self.str_((*path, "symbol"), t["symbol"])
        offset = self.int_((*path, "offset"), t.get("offset", 0), 0, MAX_INPUT_BYTES)
        length = None
        if "length" in t:
            length = self.int_((*path, "length"), t["length"], 0, MAX_INPUT_BYTES)
        data = self.input_data((*path, "data"), t["data"])
        return CopyTo(symbol, offset, length, data)

    def input_data(self, path: KeyPath, value: Any) -> InputData:
        allowed = (*SOURCES, "count", "dtype", "ops", "astype")
        t = self.table(path, value, allowed)
        given = [s for s in SOURCES if s in t]
        if len(given) != 1:
            raise self.error(path, f"give exactly one of {', '.join(SOURCES)}")
        source = given[0]
        dtype = self.choice((*path, "dtype"), t.get("dtype", "uint8"), DTYPES)
        lo, hi = dtype_range(dtype)
        limit = MAX_INPUT_BYTES // dtype_size(dtype)
        if "count" in t and source != "fill":
            raise self.error((*path, "count"), "count goes with fill (arange gives its own)")
        kw: dict[str, Any] = {}
        if source == "values":
            kw["values"] = self.ints((*path, "values"), t["values"], lo, hi)
        elif source == "arange":
            kw["count"] = self.int_((*path, "arange"), t["arange"], 0, limit)
            if kw["count"] - 1 > hi:
                raise self.error((*path, "arange"), f"{kw['count'] - 1} does not fit {dtype}")
        elif source == "fill":
            kw["fill_value"] = self.int_((*path, "fill"), t["fill"], lo, hi)
            if "count" not in t:
                raise self.error(path, "fill needs count (the number of elements)")
            kw["count"] = self.int_((*path, "count"), t["count"], 0, limit)
        else:
            kw["file"] = self.file_name((*path, "file"), t["file"])
        ops = []
        raw_ops = t.get("ops", [])
        if not isinstance(raw_ops, list):
            raise self.error(
                (*path, "ops"),
                f"expected an array such as [{{ mul = 3 }}, {{ shr = 7 }}], got {show(raw_ops)}",
            )
        bits = 8 * dtype_size(dtype)
        for i, op in enumerate(raw_ops):
            p: KeyPath = (*path, "ops", i)
            if not (isinstance(op, dict) and len(op) == 1):
                raise self.error(p, f"expected one operation such as {{ mul = 3 }}, got {show(op)}")
            ((name, operand),) = op.items()
            if name not in OPS:
                raise self.error((*p, name), f"unknown operation (known: {', '.join(OPS)})")
            if name in ("shl", "shr"):
                operand = self.int_((*p, name), operand, 0, bits - 1)
            else:
                operand = self.int_((*p, name), operand, lo, hi)
            if name == "mod" and operand == 0:
                raise self.error((*p, name), "mod by 0")
            ops.append((name, operand))
        astype = None
        if "astype" in t:
            astype = self.choice((*path, "astype"), t["astype"], DTYPES)
        return InputData(source, dtype, ops=tuple(ops), astype=astype, **kw)

    def log_check(self, path: KeyPath, value: Any) -> LogCheck:
        if not isinstance(value, dict):
            raise self.error(path, f"expected a table, got {show(value)}")
        if "kind" not in value:
            raise self.error(path, f"a log check needs kind ({', '.join(KINDS)})")
        kind = self.choice((*path, "kind"), value["kind"], tuple(KINDS))
        t = self.table(path, value, ("kind", *KINDS[kind]))
        order = self.choice((*path, "order"), t.get("order", "exact"), ("exact", "any"))
        if kind == "lines":
            self.one_of(path, t, ("lines", "lines_file"))
            if "lines" in t:
                return LinesCheck(lines=self.strs((*path, "lines"), t["lines"]), order=order)
            return LinesCheck(
                lines_file=self.file_name((*path, "lines_file"), t["lines_file"]), order=order
            )
        if kind == "text":
            self.one_of(path, t, ("text", "pieces", "pieces_file"))
            if "text" in t:
                if "order" in t:
                    raise self.error((*path, "order"), "order goes with pieces or pieces_file")
                return TextCheck(text=self.str_((*path, "text"), t["text"]))
            if "pieces" in t:
                return TextCheck(pieces=self.strs((*path, "pieces"), t["pieces"]), order=order)
            return TextCheck(
                pieces_file=self.file_name((*path, "pieces_file"), t["pieces_file"]), order=order
            )
        if "pattern" not in t:
            raise self.error(path, f"a {kind} check needs pattern")
        regex = self.pattern((*path, "pattern"), t["pattern"])
        if kind == "mutex_chain":
            if not {"T", "V"} <= set(regex.groupindex):
                raise self.error(
                    (*path, "pattern"),
                    "a mutex_chain pattern needs the named groups T (tasklet) and V (value): "
                    r"(?P<T>\d+) and (?P<V>-?\d+)",
                )
            if "first" not in t:
                raise self.error(path, "a mutex_chain check needs first (the first value read)")
            return MutexChainCheck(regex.pattern, self.int_((*path, "first"), t["first"]))
        counts = {
            k: self.int_((*path, k), t[k], 0) for k in ("count", "min_count", "max_count") if k in t
        }
        if "count" in counts and len(counts) > 1:
            raise self.error((*path, "count"), "give count, or min_count and/or max_count")
        groups: dict[str, GroupRule] = {}
        raw_groups = self.table((*path, "groups"), t.get("groups", {}), tuple(regex.groupindex))
        for group, rules in raw_groups.items():
            groups[group] = self.group_rule((*path, "groups", group), rules, regex)
        return MatchCheck(
            regex.pattern,
            after=self.str_((*path, "after"), t["after"]) if "after" in t else None,
            all=self.bool_((*path, "all"), t.get("all", False)),
            count=counts.get("count"),
            min_count=counts.get("min_count"),
            max_count=counts.get("max_count"),
            groups=groups,
        )

    def one_of(self, path: KeyPath, t: dict[str, Any], keys: tuple[str, ...]) -> None:
        if sum(k in t for k in keys) != 1:
            raise self.error(path, f"give exactly one of {', '.join(keys)}")

    def group_rule(self, path: KeyPath, value: Any, regex: re.Pattern[str]) -> GroupRule:
        t = self.table(path, value, GROUP_RULES)
        kw: dict[str, Any] = {}
        for k in ("min", "max", "plus"):
            if k in t:
                kw[k] = self.int_((*path, k), t[k])
        if "equals" in t:
            if not (_is_int(t["equals"]) or isinstance(t["equals"], str)):
                raise self.error(
                    (*path, "equals"), f"expected an integer or a string, got {show(t['equals'])}"
                )
            kw["equals"] = t["equals"]
        if "unique" in t:
            kw["unique"] = self.bool_((*path, "unique"), t["unique"])
        for k in ("once_each", "sequence"):
            if k in t:
                kw[k] = self.pair((*path, k), t[k])
        if "equals_group" in t:
            other = self.str_((*path, "equals_group"), t["equals_group"])
            if other not in regex.groupindex:
                raise self.error((*path, "equals_group"), f"the pattern has no group {other!r}")
            kw["equals_group"] = other
        elif "plus" in t:
            raise self.error((*path, "plus"), "plus goes with equals_group")
        return GroupRule(**kw)

    def symbol_check(self, path: KeyPath, value: Any) -> SymbolCheck:
        t = self.table(path, value, ("name", "offset", "dtype", "values"))
        if "name" not in t or "values" not in t:
            raise self.error(path, "[[symbol]] needs name and values")
        dtype = self.choice((*path, "dtype"), t.get("dtype", "uint8"), DTYPES)
        lo, hi = dtype_range(dtype)
        values = self.ints((*path, "values"), t["values"], lo, hi)
        if not values:
            raise self.error((*path, "values"), "give at least one value")
        return SymbolCheck(
            self.str_((*path, "name"), t["name"]),
            self.int_((*path, "offset"), t.get("offset", 0), 0, MAX_INPUT_BYTES),
            dtype,
            values,
        )


def parse_expectation(text: str, source: str = "<string>", name: str = "") -> Expectation:
    """Validate expectation TOML given as text; ``name`` defaults to ``source``'s stem."""
    stem = name or os.path.splitext(os.path.basename(source))[0]
    return _Reader(text, source).expectation(stem)


def load_expectation(path: str | os.PathLike[str]) -> Expectation:
    """Read and validate an expectation file (:class:`ExpectationError` for any problem)."""
    source = os.fspath(path)
    try:
        data = read_input_file(path, limit=MAX_FILE_BYTES, what="TOML expectation file")
    except InputFileError as exc:
        raise ExpectationError(exc.message, source=source) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ExpectationError(
            f"not valid UTF-8 (byte {data[exc.start]:#04x})", source=source, line=line
        ) from None
    return parse_expectation(text, source)
