"""The progress display shared by every long-running entry point (built on ``rich.progress``).

It draws on a terminal stream (standard error by default) only: never on standard output, never
in a trace, and nothing at all when disabled or when the stream is not a terminal.
"""

from __future__ import annotations

import argparse
import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.file_proxy import FileProxy
from rich.progress import (
    BarColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as _RichProgress
from rich.table import Column
from rich.text import Text

from .timing import format_ps

__all__ = ["Progress", "add_progress_options", "progress_enabled", "virtual_time"]

#: seconds between two updates passed to the display (the display redraws 4 times a second)
UPDATE_INTERVAL = 0.05
#: characters of the bar itself
BAR_WIDTH = 24
#: characters of the description at most
DESCRIPTION_WIDTH = 24


def progress_enabled(flag: bool | None, stream: TextIO | None = None) -> bool:
    """Whether to show a progress display: ``flag`` if given, else whether ``stream`` (default:
    the current ``sys.stderr``) is a terminal."""
    if flag is not None:
        return flag
    return _isatty(sys.stderr if stream is None else stream)


def add_progress_options(ap: argparse.ArgumentParser) -> None:
    """``--progress``, ``--no-progress`` / ``--quiet`` (default: shown on a terminal)."""
    group = ap.add_mutually_exclusive_group()
    group.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show a progress display on stderr (default: only when stderr is a terminal)",
    )
    group.add_argument(
        "--no-progress",
        "--quiet",
        dest="progress",
        action="store_false",
        help="show no progress display",
    )


def _isatty(stream: TextIO | None) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def virtual_time(ps: float) -> str:
    """A virtual time as :func:`aiopim.timing.format_ps` prints it, without trailing zeros
    (``12.5 ms``, ``3 us``, ``0 s``): the progress line redraws often."""
    number, unit = format_ps(round(ps)).rsplit(" ", 1)
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def _time_column() -> Column:
    return Column(no_wrap=True, min_width=len("0:00:00"))


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.3g}"


class _CountColumn(ProgressColumn):
    """``done/total unit`` (or ``done unit`` when the total is unknown)."""

    def __init__(self, unit: str) -> None:
        super().__init__(table_column=Column(no_wrap=True))
        self.unit = unit

    def render(self, task: Task) -> Text:
        count = _number(task.completed)
        if task.total is not None:
            count += f"/{_number(task.total)}"
        return Text(f"{count} {self.unit}".rstrip())


class _FieldsColumn(ProgressColumn):
    """The fields of :meth:`Progress.update`, as ``name value`` pairs."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True))

    def render(self, task: Task) -> Text:
        shown = task.fields.get("shown", {})
        return Text(", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown.items()))


class Progress:
    """A one-line progress display: description, bar, count, fields, wall time elapsed and
    (when ``total`` is known) the time remaining.

    ``enabled=None`` shows it only if ``stream`` (default: the current ``sys.stderr``) is a
    terminal. Updates are cheap (another thread may make them): they reach the display at most
    every :data:`UPDATE_INTERVAL` seconds, and the last one on exit. While it is shown, what the
    program prints on the same screen (standard error, and standard output when it is a terminal
    too) is printed above it rather than through it.
    """

    def __init__(
        self,
        description: str,
        *,
        total: float | None = None,
        unit: str = "",
        enabled: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        stream = sys.stderr if stream is None else stream
        self.enabled = progress_enabled(enabled, stream)
        self._last = 0.0
        self._pending: tuple[float, dict[str, str]] | None = None
        self._rich: _RichProgress | None = None
        if not self.enabled:
            return
        # on a narrow terminal a long description is cut, never the counts, fields or times
        name = Column(no_wrap=True, overflow="ellipsis", max_width=DESCRIPTION_WIDTH)
        columns: list[ProgressColumn] = [
            TextColumn("{task.description}", table_column=name),
            BarColumn(bar_width=BAR_WIDTH),
        ]
        if unit or total is not None:
            columns.append(_CountColumn(unit))
        columns += [_FieldsColumn(), TimeElapsedColumn(table_column=_time_column())]
        if total is not None:
            columns.append(TimeRemainingColumn(table_column=_time_column()))
        console = Console(file=stream, force_terminal=True, force_jupyter=False, highlight=False)
        on_screen = _isatty(stream) and _isatty(sys.stdout)
        self._rich = _RichProgress(
            *columns,
            console=console,
            refresh_per_second=4,
            redirect_stdout=on_screen,
            redirect_stderr=stream is sys.stderr,
        )
        self._task = self._rich.add_task(description, total=total, shown={})

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._rich is not None:
            self._flush()
            # a partial line printed meanwhile waits in rich's stand-in for the stream
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, FileProxy):
                    stream.flush()
            self._rich.stop()

    def update(self, done: float, **fields: str) -> None:
        """Record progress: ``done`` units, and ``fields`` shown after the bar."""
        if self._rich is None:
            return
        self._pending = (done, fields)
        now = time.monotonic()
        if now - self._last >= UPDATE_INTERVAL:
            self._last = now
            self._flush()

    def _flush(self) -> None:
        if self._rich is None or self._pending is None:
            return
        done, fields = self._pending
        self._pending = None
        self._rich.update(self._task, completed=done, shown=fields)
