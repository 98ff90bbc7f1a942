"""A campaign's results directory: ``campaign.json`` (what it is) and ``results.jsonl`` (one
JSON line per finished run, appended as runs finish, in the order they finish).

A rerun reads the lines back and skips every run whose line matches its definition (the
line's ``key``). A line cut short by a crash is dropped and its run runs again.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, Any

from ._spec import CampaignError, RunSpec

CAMPAIGN_FILE = "campaign.json"
RESULTS_FILE = "results.jsonl"
#: seconds between two ``fsync`` of the results file (every line is flushed at once)
SYNC_INTERVAL = 1.0


def read_records(path: Path) -> list[dict[str, Any]]:
    """The complete records of a results file, in file order (a torn last line is left out)."""
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # the last line was cut short: that run did not finish
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("run"), int):
                out.append(record)
    return out


class Store:
    """The results directory of one campaign, opened for appending."""

    def __init__(self, directory: str | os.PathLike[str], name: str, program: str) -> None:
        self.directory = Path(directory)
        self.results = self.directory / RESULTS_FILE
        self._file: IO[str] | None = None
        self._synced = time.monotonic()
        about = self.directory / CAMPAIGN_FILE
        if about.exists():
            try:
                known = json.loads(about.read_text(encoding="utf-8"))
            except ValueError:
                known = {}
            if (known.get("name"), known.get("program")) != (name, program):
                raise CampaignError(
                    f"{self.directory} holds the results of another campaign "
                    f"({known.get('name')!r}, program {known.get('program')!r}); give another "
                    "directory or remove it"
                )
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            about.write_text(
                json.dumps({"name": name, "program": program}, indent=1) + "\n", encoding="utf-8"
            )

    def finished(self, specs: list[RunSpec]) -> dict[int, dict[str, Any]]:
        """Records of the runs of ``specs`` already in the directory (the last line of a run
        wins); lines of runs defined differently now are ignored."""
        keys = {s.index: s.key() for s in specs}
        out: dict[int, dict[str, Any]] = {}
        for record in read_records(self.results):
            if keys.get(record["run"]) == record.get("key"):
                out[record["run"]] = record
        return out

    def append(self, line: str) -> None:
        """Add one record (flushed now, synced to disk at least every second)."""
        if self._file is None:
            self._drop_torn_line()
            self._file = self.results.open("a", encoding="utf-8")
        self._file.write(line + "\n")
        self._file.flush()
        if time.monotonic() - self._synced >= SYNC_INTERVAL:
            os.fsync(self._file.fileno())
            self._synced = time.monotonic()

    def _drop_torn_line(self) -> None:
        if not self.results.exists():
            return
        data = self.results.read_bytes()
        if data and not data.endswith(b"\n"):
            with self.results.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def close(self) -> None:
        """Sync and close the results file."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
