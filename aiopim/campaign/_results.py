"""A campaign's results: one record per run, always in run-id order."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import timing
from ._run import TABLE_KEYS
from ._store import CAMPAIGN_FILE, RESULTS_FILE, read_records

#: table columns of aiopim's figures: (record key, heading)
FIGURE_COLUMNS = (
    ("virtual_time_ps", "virtual time"),
    ("cpu_dpu_ps", "CPU->DPU"),
    ("dpu_kernel_ps", "DPU kernel"),
    ("inter_dpu_ps", "inter-DPU"),
    ("dpu_cpu_ps", "DPU->CPU"),
)


def format_ps(ps: int | None) -> str:
    """A virtual duration as :func:`aiopim.timing.format_ps` prints it; ``-`` for none."""
    return "-" if ps is None else timing.format_ps(ps)


class Results:
    """The records of a campaign's runs, by run id (see ``docs/campaigns.md`` for the keys)."""

    def __init__(self, name: str, records: dict[int, dict[str, Any]], total: int | None = None):
        self.name = name
        self.records = dict(sorted(records.items()))
        #: runs the campaign has (finished or not)
        self.total = len(records) if total is None else total

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Results:
        """The results stored in a campaign directory (the last line of a run wins)."""
        records = {r["run"]: r for r in read_records(Path(directory) / RESULTS_FILE)}
        try:
            about = json.loads((Path(directory) / CAMPAIGN_FILE).read_text(encoding="utf-8"))
            name = str(about["name"])
        except (OSError, ValueError, KeyError, TypeError):
            name = Path(directory).name
        return cls(name, records)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records.values())

    def __getitem__(self, run: int) -> dict[str, Any]:
        return self.records[run]

    @property
    def failures(self) -> list[dict[str, Any]]:
        """Records of the runs that failed, in run-id order."""
        return [r for r in self if r["status"] != "ok"]

    @property
    def complete(self) -> bool:
        """True when every run of the campaign has a record."""
        return len(self.records) == self.total

    def table(self) -> list[dict[str, Any]]:
        """The records without what depends on where and when they ran (``wall_s``): equal for
        a serial, a multi-process and a Dask run of the same campaign."""
        return [{k: r.get(k) for k in TABLE_KEYS} for r in self]

    def rows(self) -> list[dict[str, Any]]:
        """Flat rows: ``run``, each parameter, ``run_seed``, ``status``, the figures, ``result``
        (or its keys as ``result.<key>`` when it is a dict), ``error`` and ``wall_s``."""
        out = []
        for r in self:
            row: dict[str, Any] = {"run": r["run"], **r["params"], "run_seed": r["seed"]}
            row["status"] = r["status"]
            for key, _ in FIGURE_COLUMNS:
                row[key] = r.get(key)
            row["instructions"] = r.get("instructions")
            row["digest"] = r.get("digest")
            result = r.get("result")
            if isinstance(result, dict):
                row.update({f"result.{k}": v for k, v in result.items()})
            else:
                row["result"] = result
            row["error"] = r.get("error")
            row["wall_s"] = r.get("wall_s")
            out.append(row)
        return out

    def to_pandas(self) -> Any:
        """The :meth:`rows` as a pandas ``DataFrame`` indexed by run (pandas is not a
        dependency of aiopim: install it to use this)."""
        try:  # not a dependency of aiopim
            pd: Any = importlib.import_module("pandas")
        except ImportError:
            raise ImportError(
                "Results.to_pandas() needs pandas, which aiopim does not install: pip install "
                "pandas (or read the rows with Results.rows())"
            ) from None
        return pd.DataFrame(self.rows()).set_index("run")

    def text(self) -> str:
        """The results table, then one line per failed run (deterministic)."""
        varying = _varying_params(self)
        head = ["run", *varying, "status", *(h for _, h in FIGURE_COLUMNS), "instructions"]
        head.append("digest")
        body = []
        for r in self:
            cells = [str(r["run"]), *(_cell(r["params"].get(k)) for k in varying), r["status"]]
            cells += [format_ps(r.get(key)) for key, _ in FIGURE_COLUMNS]
            n = r.get("instructions")
            cells += ["-" if n is None else f"{n:,}", (r.get("digest") or "-")[:12]]
            body.append(cells)
        lines = _columns([head, *body])
        fixed = {k: v for k, v in _first_params(self).items() if k not in varying}
        if fixed:
            shown = ", ".join(f"{k}={_cell(v)}" for k, v in fixed.items())
            lines.append(f"same in every run: {shown}")
        done = f"{len(self)}/{self.total} runs" if not self.complete else f"{len(self)} runs"
        lines.append(f"{self.name}: {done}, {len(self.failures)} failed")
        lines.extend(f"  {r['label']}: {_first_line(r.get('error'))}" for r in self.failures)
        return "\n".join(lines) + "\n"


def _first_params(results: Results) -> dict[str, Any]:
    return dict(next(iter(results)).get("params", {})) if len(results) else {}


def _varying_params(results: Results) -> list[str]:
    """Parameter names whose value is not the same in every run, in first-seen order."""
    names: dict[str, None] = {}
    for r in results:
        names.update(dict.fromkeys(r["params"]))
    first = _first_params(results)
    missing = object()  # a run without the parameter differs from one with it
    return [
        n
        for n in names
        if any(r["params"].get(n, missing) != first.get(n, missing) for r in results)
    ]


def _cell(value: Any) -> str:
    text = str(value) if not isinstance(value, str) else value
    return text if len(text) <= 24 else text[:21] + "..."


def _first_line(text: str | None) -> str:
    return (text or "failed").strip().splitlines()[0] if (text or "").strip() else "failed"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells aligned in columns (text left, the rest right)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs]
        out.append("  ".join(cells).rstrip())
    return out
