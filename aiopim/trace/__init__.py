"""Timelines of emulated runs: Chrome trace JSON, Gantt plots, text summaries.

>>> emu = aiopim.Emulator(record=True)                 # doctest: +SKIP
>>> emu.run(main)                                      # doctest: +SKIP
>>> tl = Timeline.from_emulator(emu)                   # doctest: +SKIP
>>> write_chrome_trace(tl, "out.json"); print(summarize(tl).text())   # doctest: +SKIP
"""

from .._machine._recorder import Recorder, host_task
from ._chrome import chrome_events, chrome_trace, write_chrome_trace
from ._fifo import fifo_track, fill_counter  # also registers the WRAM FIFO event renderers
from ._gantt import COLOURS, gantt, plot_timelines, save_gantt
from ._summary import FifoStats, PathStep, RankStats, Summary, critical_path, summarize
from ._timeline import (
    JOB_CATEGORIES,
    DpuRun,
    EventRenderer,
    HostWait,
    Instant,
    JobRecord,
    Slice,
    Timeline,
    register_event_kind,
)

__all__ = [
    "COLOURS",
    "JOB_CATEGORIES",
    "DpuRun",
    "EventRenderer",
    "FifoStats",
    "HostWait",
    "Instant",
    "JobRecord",
    "PathStep",
    "RankStats",
    "Recorder",
    "Slice",
    "Summary",
    "Timeline",
    "chrome_events",
    "chrome_trace",
    "critical_path",
    "fifo_track",
    "fill_counter",
    "gantt",
    "host_task",
    "plot_timelines",
    "register_event_kind",
    "save_gantt",
    "summarize",
    "write_chrome_trace",
]
