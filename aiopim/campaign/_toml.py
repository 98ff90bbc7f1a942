"""Campaign files: a campaign described as TOML data (``aiopim sweep FILE.toml``).

Errors name the file, the line and the key, as scenario files' errors do; a problem of one run
(an unknown parameter, say) names the run and the line of the parameter.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._emulator import BACKENDS
from .._files import InputFileError, read_input_file
from ..scenario import _limits as L
from ..scenario._locate import line_of
from ._spec import MACHINE_KEYS, Campaign, CampaignError, RunSpec, grid, sample

#: largest campaign file read
MAX_FILE_BYTES = 1 << 20
#: most runs a campaign file describes
MAX_RUNS = 1_000_000

_SECTIONS = ("campaign", "machine", "params", "grid", "sample", "runs")
_CAMPAIGN_KEYS = ("name", "description", "program", "path", "seed", "backend", "time_limit")

Key = tuple[str | int, ...]


class CampaignFileError(CampaignError):
    """A campaign file is invalid: ``FILE:LINE: key: message``."""

    def __init__(self, source: str, line: int | None, key: str, message: str) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")
        self.source, self.line, self.key = source, line, key


class _Reader:
    def __init__(self, source: str, text: str) -> None:
        self.source = source
        try:
            self.doc, self.lines = L.load_toml(text)
        except L.TomlError as exc:
            raise CampaignFileError(source, exc.line, "", str(exc)) from None

    def error(self, key: Key, message: str) -> CampaignFileError:
        name = ".".join(f"[{k}]" if isinstance(k, int) else k for k in key).replace(".[", "[")
        return CampaignFileError(self.source, line_of(self.lines, key), name, message)

    def table(self, key: Key, value: Any, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {L.show(value)}")
        for name in value:
            if allowed is not None and name not in allowed:
                raise self.error((*key, name), f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def typed(self, key: Key, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
            raise self.error(key, f"expected {what}, got {L.show(value)}")
        return value

    def axes(self, key: Key, table: dict[str, Any]) -> dict[str, list[Any]]:
        for name, values in table.items():
            if not isinstance(values, list) or not values:
                got = L.show(values)
                raise self.error((*key, name), f"expected a non-empty list of values, got {got}")
        return table

    def runs(self) -> list[dict[str, Any]]:
        doc = self.doc
        given = [s for s in ("grid", "sample", "runs") if s in doc]
        if len(given) > 1:
            both = " and ".join(given)
            raise self.error((given[1],), f"give one of [grid], [sample] and [[runs]], not {both}")
        if "grid" in doc:
            axes = self.axes(("grid",), self.table(("grid",), doc["grid"]))
            runs = grid(**axes) if axes else [{}]
        elif "sample" in doc:
            table = dict(self.table(("sample",), doc["sample"]))
            n = self.typed(("sample", "n"), table.pop("n", None), int, "a number of runs (n)")
            seed = self.typed(("sample", "seed"), table.pop("seed", 0), int, "an integer seed")
            if not 1 <= n <= MAX_RUNS:
                raise self.error(("sample", "n"), f"must be between 1 and {MAX_RUNS}")
            runs = sample(n, seed, **self.axes(("sample",), table))
        elif "runs" in doc:
            listed = doc["runs"]
            if not isinstance(listed, list) or not listed:
                raise self.error(("runs",), "expected [[runs]] tables")
            runs = [self.table(("runs", i), r) for i, r in enumerate(listed)]
        else:
            runs = [{}]
        if len(runs) > MAX_RUNS:
            raise self.error((given[0],), f"{len(runs)} runs, more than the limit of {MAX_RUNS}")
        return runs

    def campaign(self) -> Campaign:
        doc = self.doc
        for name in doc:
            if name not in _SECTIONS:
                raise self.error((name,), f"unknown section (allowed: {', '.join(_SECTIONS)})")
        if "campaign" not in doc:
            raise self.error((), "a campaign file needs a [campaign] table (name, program)")
        head = self.table(("campaign",), doc["campaign"], _CAMPAIGN_KEYS)
        for required in ("name", "program"):
            if required not in head:
                line = line_of(self.lines, ("campaign",))
                message = f"[campaign] needs the key {required!r}"
                raise CampaignFileError(self.source, line, "", message)
        get = head.get
        name = self.typed(("campaign", "name"), get("name"), str, "a string")
        program = self.typed(("campaign", "program"), get("program"), str, "a string")
        seed = self.typed(("campaign", "seed"), get("seed", 0), int, "an integer")
        backend = self.typed(("campaign", "backend"), get("backend", "asyncio"), str, "a string")
        if backend not in BACKENDS:
            raise self.error(("campaign", "backend"), f"must be one of {', '.join(BACKENDS)}")
        limit = get("time_limit")
        if limit is not None:
            self.typed(("campaign", "time_limit"), limit, (int, float), "seconds of virtual time")
            if not limit > 0:
                raise self.error(("campaign", "time_limit"), "must be a positive number")
        path = self.typed(("campaign", "path"), get("path", ["."]), list, "a list of directories")
        base = Path(self.source).resolve().parent
        machine = self.table(("machine",), doc.get("machine", {}), tuple(MACHINE_KEYS))
        return Campaign(
            name,
            _relative_program(program, base),
            runs=self.runs(),
            params=self.table(("params",), doc.get("params", {})),
            seed=seed,
            machine=machine or None,
            backend=backend,
            time_limit=None if limit is None else float(limit),
            path=[str(base / str(p)) for p in path],
        )

    def param_line(self, error: CampaignError, spec: RunSpec | None) -> CampaignFileError:
        """``error`` (of a run) with the file and the line that sets its parameter."""
        where: list[Key] = []
        if error.section is not None:
            where.append(
                ("campaign", "program") if error.section == "program" else (error.section,)
            )
        if error.param is not None:
            if spec is not None and "runs" in self.doc:
                where.append(("runs", spec.index, error.param))
            where += [(s, error.param) for s in ("grid", "sample", "params")]
        line = next((self.lines[k] for k in where if k in self.lines), None)
        return CampaignFileError(self.source, line, "", str(error))


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _relative_program(program: str, base: Path) -> str:
    """File programs (``x.py:f``, ``x.toml``) are relative to the campaign file."""
    if program.endswith(".toml"):
        return str(base / program)
    target, sep, func = program.rpartition(":")
    if sep and target.endswith(".py"):
        return f"{base / target}:{func}"
    return program


def load_campaign(path: str | os.PathLike[str]) -> Campaign:
    """Read and check a campaign file: every run's program and parameters are usable, or a
    :class:`CampaignFileError` says what to fix and where."""
    source = os.fspath(path)
    try:
        data = read_input_file(path, limit=MAX_FILE_BYTES, what="campaign file")
        text = data.decode("utf-8")
    except InputFileError as exc:
        raise CampaignFileError(source, None, "", exc.message) from exc
    except UnicodeDecodeError as exc:
        raise CampaignFileError(source, None, "", f"not valid UTF-8 ({exc.reason})") from None
    reader = _Reader(source, text)
    campaign = reader.campaign()
    try:
        campaign.check()
    except CampaignFileError:
        raise
    except CampaignError as exc:
        specs = _specs_or_none(campaign)
        spec = next((s for s in specs if str(exc).startswith(s.label + ":")), None)
        raise reader.param_line(exc, spec) from None
    return campaign


def _specs_or_none(campaign: Campaign) -> list[RunSpec]:
    try:
        return campaign.specs()
    except CampaignError:
        return []
