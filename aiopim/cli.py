"""The ``aiopim`` command: ``symbols``, ``replay``, ``record``, ``asm`` and ``disasm``."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from typing import TextIO

from . import __version__
from .elf import main_symbols


class ProgressBar:
    """A one-line progress bar on a terminal stream, redrawn at most every ``interval`` s."""

    def __init__(self, stream: TextIO, *, interval: float = 0.1, width: int = 30) -> None:
        self.stream = stream
        self.interval = interval
        self.width = width
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int, virtual_ps: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {done}/{total} steps, virtual {virtual_ps / 1e6:.3f} us")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the line if anything was drawn."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


def _replay(argv: list[str]) -> int:
    from .scenario import ScenarioError, load_scenario, replay
    from .trace import save_gantt, write_chrome_trace

    ap = argparse.ArgumentParser(
        prog="aiopim replay",
        description="Replay a scenario file in virtual time; export its timeline.",
    )
    ap.add_argument("scenario", help="a scenario TOML file (see docs/timelines.md)")
    ap.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace (Perfetto)")
    ap.add_argument("--gantt", metavar="OUT.png", help="write a Gantt plot (needs matplotlib)")
    ap.add_argument("--lanes", choices=["rank", "dpu"], default="rank", help="Gantt lanes")
    ap.add_argument("--no-dpu-tracks", action="store_true", help="no per-DPU trace tracks")
    ap.add_argument("--summary", action="store_true", help="print busy/idle, overlap, path")
    ap.add_argument("--no-check", action="store_true", help="do not check [expect]")
    ap.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (it registers kernels or actions); repeatable",
    )
    bar_group = ap.add_mutually_exclusive_group()
    bar_group.add_argument("--progress", action="store_true", default=None)
    bar_group.add_argument("--no-progress", dest="progress", action="store_false")
    opts = ap.parse_args(argv)
    for module in opts.modules:
        importlib.import_module(module)
    show = sys.stderr.isatty() if opts.progress is None else opts.progress
    bar = ProgressBar(sys.stderr) if show else None
    try:
        sc = load_scenario(opts.scenario)
        try:
            result = replay(
                sc, backend=opts.backend, seed=opts.seed, progress=bar, check=not opts.no_check
            )
        finally:
            if bar is not None:
                bar.close()
    except ScenarioError as exc:
        print(f"aiopim replay: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"aiopim replay: {exc}", file=sys.stderr)
        return 2
    tl = result.timeline
    if opts.trace:
        write_chrome_trace(
            tl, opts.trace, per_dpu=not opts.no_dpu_tracks, metadata={"scenario": sc.name}
        )
    if opts.gantt:
        save_gantt(tl, opts.gantt, lanes=opts.lanes, title=sc.name)
    print(f"{sc.name}: replayed on {opts.backend}, virtual time {result.end_ps} ps")
    if opts.summary:
        sys.stdout.write(result.summary().text())
    return 0


def _record(argv: list[str]) -> int:
    from ._core._machine import MachineConfig
    from .scenario import record
    from .scenario._record import RecordingError

    ap = argparse.ArgumentParser(
        prog="aiopim record",
        description="Run a host program (an async function taking no arguments) and write a "
        "scenario file whose replay produces the same trace.",
    )
    ap.add_argument("program", metavar="MODULE:FUNCTION", help="e.g. mypkg.host:main")
    ap.add_argument("output", metavar="OUT.toml")
    ap.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ranks", type=int, default=40)
    ap.add_argument("--dpus-per-rank", type=int, default=64)
    ap.add_argument("--chip", default="v1B")
    ap.add_argument("--name", default=None, help="scenario name (default: MODULE:FUNCTION)")
    ap.add_argument("--trace", metavar="OUT.json", help="also write the run's Chrome trace")
    opts = ap.parse_args(argv)
    module, _, func = opts.program.partition(":")
    if not module or not func:
        print("aiopim record: give the program as MODULE:FUNCTION", file=sys.stderr)
        return 2
    main = getattr(importlib.import_module(module), func)
    machine = MachineConfig(opts.ranks, opts.dpus_per_rank, opts.chip)
    name = opts.name or opts.program
    try:
        rec = record(main, machine=machine, backend=opts.backend, seed=opts.seed, name=name)
    except RecordingError as exc:
        print(f"aiopim record: {exc}", file=sys.stderr)
        return 1
    rec.write(opts.output)
    if opts.trace:
        with open(opts.trace, "w", encoding="utf-8", newline="\n") as f:
            f.write(rec.chrome_trace())
    print(f"{name}: recorded to {opts.output}, virtual time {rec.emulator.now_ps} ps")
    return 0


def _asm(argv: list[str]) -> int:
    from .isa._disasm import main_asm

    return main_asm(argv)


def _disasm(argv: list[str]) -> int:
    from .isa._disasm import main_disasm

    return main_disasm(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``aiopim`` command."""
    args = sys.argv[1:] if argv is None else list(argv)
    commands = {"symbols": main_symbols, "replay": _replay, "record": _record}
    commands |= {"asm": _asm, "disasm": _disasm}
    if args and args[0] in commands:
        return commands[args[0]](args[1:])
    parser = argparse.ArgumentParser(prog="aiopim", description="UPMEM PIM emulator")
    parser.add_argument("--version", action="version", version=f"aiopim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("symbols", help="print the host-visible symbols of a DPU ELF binary")
    sub.add_parser("replay", help="replay a scenario file; export trace, Gantt, summary")
    sub.add_parser("record", help="record a host program's run as a scenario file")
    sub.add_parser("asm", help="assemble DPU assembly into a DPU ELF binary")
    sub.add_parser("disasm", help="disassemble the .text of a DPU ELF binary")
    parser.parse_args(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
