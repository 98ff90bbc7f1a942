"""The ``aiopim`` command: ``symbols``, ``replay``, ``record``, ``didl``, ``asm``, ``disasm`` and
``conformance``."""

from __future__ import annotations

import argparse
import errno
import importlib
import inspect
import math
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable
from types import ModuleType

from . import DeadlockError, DpuError, TimeLimitError, __version__
from ._progress import Progress, add_progress_options, virtual_time
from .elf import main_symbols
from .timing import format_ps

# ================================================================================================
# errors: one clear line on stderr and an exit status; tracebacks only with --debug or for bugs
# ================================================================================================
#: exit statuses
EXIT_FAILED = 1  # the scenario, the program or the run failed (invalid, deadlock, DPU error)
EXIT_INPUT = 2  # a file or module cannot be used (missing, not a regular file, import error)
EXIT_BUG = 3  # an error inside aiopim itself
EXIT_INTERRUPTED = 130

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_DIRS = tuple(
    os.path.abspath(d)
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (d := sysconfig.get_paths().get(key))
)


class CommandError(Exception):
    """A user-facing failure of a command: ``str()`` is the whole message."""

    def __init__(self, message: str, status: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.status = status


def _inside(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def _user_frame(exc: BaseException, user_dirs: tuple[str, ...]) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback in the user's code, if any.

    User code is a module given on the command line (its package directory) or any file that is
    neither part of aiopim nor of the installed libraries.
    """
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        if _inside(path, (_PACKAGE_DIR,)):
            continue
        if _inside(path, user_dirs) or not (
            _inside(path, _LIBRARY_DIRS) or frame.filename.startswith("<")
        ):
            found = frame
    return found


def _describe(exc: BaseException) -> tuple[str, int] | None:
    """Message and exit status of the errors aiopim reports without a traceback."""
    from ._files import InputFileError
    from .scenario import ScenarioError
    from .scenario._record import RecordingError

    if isinstance(exc, CommandError):
        return str(exc), exc.status
    if isinstance(exc, ScenarioError):
        unreadable = isinstance(exc.__cause__, InputFileError)
        return str(exc), EXIT_INPUT if unreadable else EXIT_FAILED
    if isinstance(exc, RecordingError | DeadlockError | TimeLimitError):
        return str(exc), EXIT_FAILED
    if isinstance(exc, DpuError):
        return f"the run failed with {exc}", EXIT_FAILED
    if isinstance(exc, OSError):  # input files, and output files that cannot be written
        return file_error(exc), EXIT_INPUT
    return None


def file_error(exc: OSError) -> str:
    """``path: reason`` of a file that cannot be read or written (every file error names it)."""
    if exc.filename is None:  # e.g. InputFileError, whose text starts with the path
        return exc.strerror or str(exc)
    names = os.fsdecode(exc.filename)
    if exc.filename2 is not None:
        names += f" -> {os.fsdecode(exc.filename2)}"
    return f"{names}: {exc.strerror or exc}"


def _check_output(path: str | None) -> None:
    """Fail before a long run, naming ``path``, if it cannot be an output file (a directory,
    a missing or read-only directory); other write errors name it when they happen."""
    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if not os.access(parent, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)


def _report(prog: str, exc: BaseException, debug: bool, user_dirs: tuple[str, ...]) -> int:
    """Print ``exc`` for a user and return the exit status."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # a task group's wrapping of one error
    known = _describe(exc)
    if known is not None:
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        print(f"{prog}: {known[0]}", file=sys.stderr)
        return known[1]
    frame = _user_frame(exc, user_dirs)
    if frame is not None:  # the user's program or module raised
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        hint = "" if debug else " (run with --debug for the traceback)"
        print(
            f"{prog}: the program raised {type(exc).__name__}: {exc}\n"
            f"  at {frame.filename}:{frame.lineno}, in {frame.name}{hint}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    traceback.print_exception(exc, file=sys.stderr)
    print(
        f"{prog}: internal error ({type(exc).__name__}). This is a bug in aiopim {__version__}: "
        "please report it with the command you ran and the traceback above.",
        file=sys.stderr,
    )
    return EXIT_BUG


def _import(module: str, what: str) -> ModuleType:
    """Import a module named on the command line (the current directory comes first)."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name) and (module + ".").startswith(exc.name + "."):
            raise CommandError(
                f"cannot import {what} {module!r}: no module named {exc.name!r}", EXIT_INPUT
            ) from exc
        raise


def _module_dir(mod: ModuleType) -> str | None:
    path: str | None = getattr(mod, "__file__", None)
    if not path:
        return None
    top = sys.modules.get(mod.__name__.partition(".")[0], mod)
    top_file: str = getattr(top, "__file__", None) or path
    return os.path.dirname(os.path.abspath(top_file))


def _run_guarded(prog: str, fn: Callable[[list[str], list[str]], int], argv: list[str]) -> int:
    """Run a subcommand; turn exceptions into one message and an exit status."""
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    user_dirs: list[str] = []
    try:
        return fn(argv, user_dirs)
    except KeyboardInterrupt as exc:
        notes = "".join(f"\n{note}" for note in getattr(exc, "__notes__", ()))
        print(f"{prog}: interrupted{notes}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit:
        raise
    except BaseException as exc:  # every error becomes a message (BaseExceptionGroup too)
        return _report(prog, exc, debug, tuple(user_dirs))


# ================================================================================================
# commands
# ================================================================================================
def _replay(argv: list[str], user_dirs: list[str]) -> int:
    from .scenario import load_scenario, replay
    from .scenario._limits import LIMIT_NAMES
    from .trace import save_gantt, write_chrome_trace

    ap = argparse.ArgumentParser(
        prog="aiopim replay",
        description="Replay a scenario file in virtual time; export its timeline.",
    )
    ap.add_argument("scenario", help="a scenario TOML file (see docs/timelines.md)")
    _backend_seed_options(ap)
    ap.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace (Perfetto)")
    ap.add_argument("--gantt", metavar="OUT.png", help="write a Gantt plot (needs matplotlib)")
    ap.add_argument("--lanes", choices=["rank", "dpu"], default="rank", help="Gantt lanes")
    ap.add_argument("--no-dpu-tracks", action="store_true", help="no per-DPU trace tracks")
    ap.add_argument("--summary", action="store_true", help="print busy/idle, overlap, path")
    ap.add_argument("--no-check", action="store_true", help="do not check [expect]")
    _time_limit_option(ap)
    ap.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (it registers kernels or actions); repeatable",
    )
    ap.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    add_progress_options(ap)
    _limit_options(ap)
    opts = ap.parse_args(argv)
    for module in opts.modules:
        mod = _import(module, "module")
        if (d := _module_dir(mod)) is not None:
            user_dirs.append(d)
    sc = load_scenario(opts.scenario, **{name: getattr(opts, name) for name in LIMIT_NAMES})
    _check_output(opts.trace)
    _check_output(opts.gantt)
    with Progress(
        f"replay {os.path.basename(opts.scenario)}",
        total=sc.total_steps(),
        unit="steps",
        enabled=opts.progress,
    ) as bar:
        result = replay(
            sc,
            backend=opts.backend,
            seed=opts.seed,
            progress=lambda done, _, ps: bar.update(done, virtual_time=virtual_time(ps)),
            check=not opts.no_check,
            time_limit=opts.time_limit,
        )
    tl = result.timeline
    if opts.trace:
        write_chrome_trace(
            tl, opts.trace, per_dpu=not opts.no_dpu_tracks, metadata={"scenario": sc.name}
        )
    if opts.gantt:
        save_gantt(tl, opts.gantt, lanes=opts.lanes, title=sc.name)
    print(f"{sc.name}: replayed on {opts.backend}, virtual time {format_ps(result.end_ps)}")
    for line in result.expected_errors():
        print(line)
    if opts.summary:
        sys.stdout.write(result.summary().text())
    return 0


def _record(argv: list[str], user_dirs: list[str]) -> int:
    from . import MachineConfig
    from .scenario import ScenarioError, parse_scenario, record
    from .scenario._limits import MAX_RANKS
    from .sdk import MAX_NR_DPUS_PER_RANK

    ap = argparse.ArgumentParser(
        prog="aiopim record",
        description="Run a host program (an async function taking no arguments) and write a "
        "scenario file whose replay produces the same trace.",
    )
    ap.add_argument("program", metavar="MODULE:FUNCTION", help="e.g. mypkg.host:main")
    ap.add_argument("output", metavar="OUT.toml", help="the scenario file to write")
    _backend_seed_options(ap)
    ap.add_argument(
        "--ranks", type=int, default=MAX_RANKS, help=f"ranks of the machine, 1..{MAX_RANKS}"
    )
    ap.add_argument(
        "--dpus-per-rank", type=int, default=MAX_NR_DPUS_PER_RANK, help="DPUs of each rank, 1..64"
    )
    ap.add_argument(
        "--chip", default="v1B", help="DPU chip version: v1A or v1B (default: %(default)s)"
    )
    ap.add_argument("--name", default=None, help="scenario name (default: MODULE:FUNCTION)")
    ap.add_argument("--trace", metavar="OUT.json", help="also write the run's Chrome trace")
    _time_limit_option(ap)
    ap.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    add_progress_options(ap)
    opts = ap.parse_args(argv)
    module, _, func = opts.program.partition(":")
    if not module or not func:
        raise CommandError("give the program as MODULE:FUNCTION", EXIT_INPUT)
    if not 1 <= opts.ranks <= MAX_RANKS:
        raise CommandError(f"--ranks must be between 1 and {MAX_RANKS}", EXIT_INPUT)
    try:
        machine = MachineConfig(opts.ranks, opts.dpus_per_rank, opts.chip)
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_INPUT) from None
    _check_output(opts.output)
    _check_output(opts.trace)
    mod = _import(module, "the program's module")
    if (d := _module_dir(mod)) is not None:
        user_dirs.append(d)
    main = getattr(mod, func, None)
    if main is None:
        raise CommandError(f"module {module!r} has no function {func!r}", EXIT_INPUT)
    if not inspect.iscoroutinefunction(main):
        raise CommandError(
            f"{opts.program} is not an async function (write it as `async def {func}():`)",
            EXIT_INPUT,
        )
    name = opts.name or opts.program
    rec = record(
        main,
        machine=machine,
        backend=opts.backend,
        seed=opts.seed,
        name=name,
        time_limit=opts.time_limit,
        progress=opts.progress,
    )
    rec.write(opts.output)
    if opts.trace:
        with open(opts.trace, "w", encoding="utf-8", newline="\n") as f:
            f.write(rec.chrome_trace())
    print(f"{name}: recorded to {opts.output}, virtual time {format_ps(rec.emulator.now_ps)}")
    try:  # a long program's scenario may need a replay limit raised: say which, and how
        parse_scenario(rec.scenario_text, opts.output)
    except ScenarioError as exc:
        print(f"aiopim record: note: {exc}", file=sys.stderr)
    return 0


def _backend_seed_options(ap: argparse.ArgumentParser) -> None:
    """``--backend`` and ``--seed``."""
    ap.add_argument(
        "--backend",
        choices=["asyncio", "trio"],
        default="asyncio",
        help="event loop of the host program (the trace is the same); default: %(default)s",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the emulator's random draws, e.g. Memclave keys (default: %(default)s)",
    )


def _limit_options(ap: argparse.ArgumentParser) -> None:
    """``--max-work N`` and the other limits of :class:`aiopim.scenario.Limits`."""
    from .scenario import Limits
    from .scenario._limits import LIMIT_NAMES

    def count(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"give a positive integer, not {text!r}")
        return value

    defaults = Limits()
    what = {
        "max_file_bytes": "bytes of the scenario file",
        "max_steps": "steps the replay runs, repeats unrolled",
        "max_work": "emulated operations the replay may do (the work estimate)",
        "max_host_bytes": "bytes of host buffers one step allocates",
        "max_dpu_bytes": "bytes of emulated DPU memory the replay may fill",
    }
    group = ap.add_argument_group(
        "limits", "raise a limit a larger scenario needs (a refusal names the flag and value)"
    )
    for name in LIMIT_NAMES:
        group.add_argument(
            Limits.flag(name),
            dest=name,
            type=count,
            default=getattr(defaults, name),
            metavar="N",
            help=f"{what[name]} (default: %(default)s)",
        )


def _time_limit_option(ap: argparse.ArgumentParser) -> None:
    """``--time-limit SECONDS``: the virtual time a run may take."""

    def seconds(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(
                f"give a positive number of seconds of virtual time, not {text!r}"
            )
        return value

    ap.add_argument(
        "--time-limit",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="stop the run after SECONDS of virtual time, naming the DPUs still running",
    )


def _didl(argv: list[str], user_dirs: list[str]) -> int:
    from .kelonia import DidlError, DpuFoundryError, generate_file, generate_package

    ap = argparse.ArgumentParser(
        prog="aiopim didl",
        description="Generate the typed Python module of a DIDL interface (Kelonia's dpugeni).",
    )
    ap.add_argument("didl", nargs="?", help="a DIDL file")
    ap.add_argument("-o", "--output", metavar="OUT.py", help="default: <stem>_interface.py")
    ap.add_argument("--package", metavar="DIR", help="generate every <DIR>/dpu/*.didl instead")
    opts = ap.parse_args(argv)
    if (opts.didl is None) == (opts.package is None):
        print("aiopim didl: give a DIDL file or --package DIR", file=sys.stderr)
        return 2
    try:
        if opts.package is not None:
            outs = generate_package(opts.package)
        else:
            outs = [generate_file(opts.didl, opts.output)]
    except DidlError as exc:
        print(f"aiopim didl: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"aiopim didl: {file_error(exc)}", file=sys.stderr)
        return 2
    except DpuFoundryError as exc:
        print(f"aiopim didl: {exc}", file=sys.stderr)
        return 2
    for out in outs:
        print(f"wrote {out}")
    return 0


def _symbols(argv: list[str], user_dirs: list[str]) -> int:
    return main_symbols(argv)


def _asm(argv: list[str], user_dirs: list[str]) -> int:
    from .isa._disasm import main_asm

    return main_asm(argv)


def _disasm(argv: list[str], user_dirs: list[str]) -> int:
    from .isa._disasm import main_disasm

    return main_disasm(argv)


def _conformance(argv: list[str], user_dirs: list[str]) -> int:
    from .conformance import (
        ENGINES,
        ExpectationError,
        Table,
        expectation_dir,
        load_expectations,
        run_conformance,
        use_engine,
    )

    ap = argparse.ArgumentParser(
        prog="aiopim conformance",
        description="Run every DPU binary of a directory against its expectations (one TOML "
        "file per binary, see docs/conformance.md); print a table ending `conformance K/N`.",
    )
    ap.add_argument("directory", metavar="DIR", help="the binaries (and the files they name)")
    ap.add_argument(
        "--expect",
        metavar="DIR2",
        help="the expectation files (default: DIR's *.toml, else aiopim's own)",
    )
    ap.add_argument(
        "--backend",
        choices=["asyncio", "trio"],
        default="asyncio",
        help="event loop of the runs (the results are the same); default: %(default)s",
    )
    ap.add_argument(
        "--engine",
        choices=list(ENGINES),
        help="instruction-set engine: pure Python or compiled (default: the environment's)",
    )
    add_progress_options(ap)
    opts = ap.parse_args(argv)
    if not os.path.isdir(opts.directory):
        raise CommandError(f"{opts.directory}: not a directory of binaries", EXIT_INPUT)
    if opts.engine is not None:
        use_engine(opts.engine)
    try:
        expectations = load_expectations(expectation_dir(opts.directory, opts.expect))
    except ExpectationError as exc:
        raise CommandError(str(exc), EXIT_INPUT) from None
    except FileNotFoundError as exc:
        raise CommandError(str(exc), EXIT_INPUT) from None
    binaries = [os.path.splitext(f)[0] for f in os.listdir(opts.directory) if f.endswith(".dpu")]
    table = Table([e.name for e in expectations] + binaries)
    described = {os.path.normpath(e.binary) for e in expectations}
    total = len(expectations) + sum(b + ".dpu" not in described for b in binaries)
    print(table.header(), flush=True)
    with Progress("conformance", total=total, unit="binaries", enabled=opts.progress) as bar:
        for done, result in enumerate(
            run_conformance(opts.directory, expectations, backend=opts.backend), 1
        ):
            print(table.row(result), flush=True)
            failed = sum(not r.passed for r in table.results)
            bar.update(done, failed=str(failed))
    print(table.footer())
    return 0 if all(r.passed for r in table.results) else EXIT_FAILED


def _sweep(argv: list[str], user_dirs: list[str]) -> int:
    from .campaign._cli import main_sweep

    return main_sweep(argv, user_dirs)


def _explore(argv: list[str], user_dirs: list[str]) -> int:
    from .campaign._cli import main_explore

    return main_explore(argv, user_dirs)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``aiopim`` command."""
    args = sys.argv[1:] if argv is None else list(argv)
    commands = {"symbols": _symbols, "replay": _replay, "record": _record, "didl": _didl}
    commands |= {"asm": _asm, "disasm": _disasm}
    commands["conformance"] = _conformance
    commands |= {"sweep": _sweep, "explore": _explore}
    if args and args[0] in commands:
        return _run_guarded(f"aiopim {args[0]}", commands[args[0]], args[1:])
    parser = argparse.ArgumentParser(prog="aiopim", description="UPMEM PIM emulator")
    parser.add_argument("--version", action="version", version=f"aiopim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("symbols", help="print the host-visible symbols of a DPU ELF binary")
    sub.add_parser("replay", help="replay a scenario file; export trace, Gantt, summary")
    sub.add_parser("record", help="record a host program's run as a scenario file")
    sub.add_parser("didl", help="generate the Python module of a Kelonia DIDL interface")
    sub.add_parser("asm", help="assemble DPU assembly into a DPU ELF binary")
    sub.add_parser("disasm", help="disassemble the .text of a DPU ELF binary")
    sub.add_parser("conformance", help="run DPU binaries against expectations kept as data")
    sub.add_parser("sweep", help="run a campaign file on cores or a Dask cluster; table, plot")
    sub.add_parser("explore", help="explore a host program's schedules, fanned out; shrink")
    parser.parse_args(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
