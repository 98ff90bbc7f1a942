"""Running binaries against their expectations: one binary, a directory, the report table."""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np

from .. import timing
from .._emulator import current_emulator, run
from .._errors import DeadlockError, DpuError
from .._files import InputFileError, read_input_file
from .._machine._config import MachineConfig
from ..isa import set_engine
from ..sdk import (
    DPU_SYNCHRONOUS,
    DpuSet,
    dpu_alloc,
    dpu_copy_from,
    dpu_copy_to,
    dpu_foreach,
    dpu_launch,
    dpu_load,
    dpu_log_read,
)
from ._inputs import dtype_size
from ._spec import Expectation, load_expectation

#: the engines ``--engine`` selects: the pure-Python interpreter or the compiled one
ENGINES = ("python", "compiled")

#: the file suffix of binaries a directory is expected to describe
BINARY_SUFFIX = ".dpu"

_LIMIT = 256 << 20  # the largest text or data file an expectation may name (as dpu_load)


@dataclass(frozen=True)
class ConformanceResult:
    """The outcome of one binary: PASS or FAIL, the virtual time its host steps took, and why
    it failed (every problem found, in order)."""

    name: str
    passed: bool
    virtual_ps: int | None
    problems: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """The problems in one line ("" for a pass)."""
        return "; ".join(self.problems)


def use_engine(engine: str | None) -> None:
    """Select the instruction-set engine (``python`` or ``compiled``; None: back to
    ``AIOPIM_ISA_ENGINE``) of the runs that start afterwards."""
    if engine is not None and engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    set_engine(engine)


def shipped_expectations() -> Path | None:
    """The directory of aiopim's own expectations for UPMEM's SDK samples
    (``tests/conformance`` of the source tree), if this installation has it."""
    here = Path(__file__).resolve().parent.parent.parent / "tests" / "conformance"
    return here if here.is_dir() and any(here.glob("*.toml")) else None


def expectation_dir(binary_dir: str | os.PathLike[str], expect: str | None = None) -> Path:
    """Where the expectations of ``binary_dir`` are: ``expect`` if given, else ``binary_dir``
    if it holds ``*.toml`` files, else :func:`shipped_expectations`."""
    if expect is not None:
        return Path(expect)
    own = Path(binary_dir)
    if any(own.glob("*.toml")):
        return own
    shipped = shipped_expectations()
    if shipped is None:
        raise FileNotFoundError(
            f"{os.fspath(binary_dir)} holds no expectation files (*.toml) and this aiopim has "
            "none of its own: give them with --expect DIR (see docs/conformance.md)"
        )
    return shipped


def load_expectations(expect_dir: str | os.PathLike[str]) -> list[Expectation]:
    """Every ``*.toml`` of ``expect_dir``, validated, by name."""
    files = sorted(Path(expect_dir).glob("*.toml"))
    if not files:
        raise FileNotFoundError(f"{os.fspath(expect_dir)} holds no expectation files (*.toml)")
    return [load_expectation(f) for f in files]


# ================================================================================================
# one binary
# ================================================================================================
class _Binary:
    """The files of one binary's directory, read safely."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / name

    def read_bytes(self, name: str) -> bytes:
        return read_input_file(self.path(name), limit=_LIMIT, what="data file")

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")


def _log_text(dpu: DpuSet) -> str:
    out = io.StringIO()
    dpu_log_read(dpu, out)
    return out.getvalue().partition("\n")[2]  # after the "=== DPU#0x... ===" header


def _fault_note(dpus: DpuSet) -> str:
    faults = [f for f in dpus.faults if f is not None]
    return f" ({faults[0].reason})" if faults else ""


async def _host(exp: Expectation, files: _Binary, problems: list[str]) -> None:
    """The host steps: allocate, load, write the inputs, launch, then check."""
    dpus = await dpu_alloc(exp.nr_dpus, "")
    try:
        program = await dpu_load(dpus, str(files.path(exp.binary)))
    except DpuError as exc:
        problems.append(f"dpu_load: {exc}")
        return
    if exp.nr_tasklets is not None and program.nr_tasklets != exp.nr_tasklets:
        problems.append(f"NR_TASKLETS is {program.nr_tasklets}, expected {exp.nr_tasklets}")
    for k, step in enumerate(exp.copy_to):
        try:
            data = step.data.build(files.read_bytes)
        except (OSError, ValueError) as exc:
            problems.append(f"copy_to[{k}] data: {exc}")
            return
        length = data.nbytes if step.length is None else step.length
        if length > data.nbytes:
            problems.append(f"copy_to[{k}]: length {length} is more than the {data.nbytes} bytes")
            return
        try:
            await dpu_copy_to(dpus, step.symbol, step.offset, data, length)
        except DpuError as exc:
            problems.append(f"copy_to[{k}]: {exc}")
            return
    error: DpuError | None = None
    limit: AbstractContextManager[object] = nullcontext()
    if exp.timeout_ps is not None:
        limit = anyio.fail_after(exp.timeout_ps / timing.PS_PER_S)
    try:
        with limit:
            await dpu_launch(dpus, DPU_SYNCHRONOUS)
    except DpuError as exc:
        error = exc
    except TimeoutError:
        problems.append(f"launch: not done after {_time(exp.timeout_ps)} of virtual time")
        return
    if exp.launch_error is None and error is not None:
        problems.append(f"launch: failed with {error.code.name}, expected ok{_fault_note(dpus)}")
    elif exp.launch_error is not None and error is None:
        problems.append(f"launch: succeeded, expected {exp.launch_error.name}")
    elif exp.launch_error is not None and error is not None:
        if error.code is not exp.launch_error:
            problems.append(
                f"launch: failed with {error.code.name}, expected "
                f"{exp.launch_error.name}{_fault_note(dpus)}"
            )
        elif exp.fault is not None:
            codes = {"none" if f is None else str(f.code) for f in dpus.faults}
            if codes != {str(exp.fault)}:
                shown = ", ".join(sorted(codes))
                problems.append(
                    f"launch: fault code {shown}, expected {exp.fault}{_fault_note(dpus)}"
                )
    for dpu, i in dpu_foreach(dpus):
        where = f"DPU {i}: " if exp.nr_dpus > 1 else ""
        if exp.log:
            try:
                text = _log_text(dpu)
            except DpuError as exc:
                problems.append(f"{where}dpu_log_read: {exc}")
            else:
                for k, check in enumerate(exp.log):
                    try:
                        problem = check.failure(text, files.read_text)
                    except (OSError, UnicodeDecodeError) as exc:
                        problem = str(exc)
                    if problem is not None:
                        problems.append(f"{where}log[{k}] {check.kind}: {problem}")
        for k, sym in enumerate(exp.symbols):
            size = len(sym.values) * dtype_size(sym.dtype)
            got = np.zeros(len(sym.values), np.dtype(sym.dtype).newbyteorder("<"))
            try:
                await dpu_copy_from(dpu, sym.symbol, sym.offset, got, size)
            except DpuError as exc:
                problems.append(f"{where}symbol[{k}] {sym.symbol}: {exc}")
                continue
            if [int(v) for v in got] != list(sym.values):
                bad = next(j for j, v in enumerate(got) if int(v) != sym.values[j])
                problems.append(
                    f"{where}symbol[{k}] {sym.symbol}: element {bad} is {int(got[bad])}, "
                    f"expected {sym.values[bad]}"
                )


def run_expectation(
    exp: Expectation, binary_dir: str | os.PathLike[str], *, backend: str = "asyncio"
) -> ConformanceResult:
    """Run ``exp``'s binary of ``binary_dir`` on ``backend`` and check it."""
    files = _Binary(Path(binary_dir))
    if not files.path(exp.binary).is_file():
        return ConformanceResult(
            exp.name, False, None, (f"no binary {os.fspath(files.path(exp.binary))}",)
        )
    problems: list[str] = []
    end_ps: list[int] = []

    async def host() -> None:
        try:
            await _host(exp, files, problems)
        finally:
            end_ps.append(current_emulator().now_ps)

    machine = MachineConfig(nr_ranks=math.ceil(exp.nr_dpus / 64), chip=exp.chip)
    try:
        run(host, machine=machine, backend=backend)
    except DpuError as exc:
        problems.append(str(exc))
    except DeadlockError as exc:
        problems.append(f"deadlock: {exc}")
    except InputFileError as exc:
        problems.append(str(exc))
    except Exception as exc:  # an engine failure must not hide the other binaries' results
        problems.append(f"raised {type(exc).__name__}: {exc}")
    return ConformanceResult(exp.name, not problems, end_ps[0] if end_ps else None, tuple(problems))


def run_conformance(
    binary_dir: str | os.PathLike[str],
    expectations: list[Expectation],
    *,
    backend: str = "asyncio",
) -> Iterator[ConformanceResult]:
    """Run every expectation against ``binary_dir``, then fail every binary of it
    (``*.dpu``) that no expectation describes; results as they come."""
    for exp in expectations:
        yield run_expectation(exp, binary_dir, backend=backend)
    described = {os.path.normpath(exp.binary) for exp in expectations}
    for path in sorted(Path(binary_dir).glob(f"*{BINARY_SUFFIX}")):
        if path.name not in described:
            yield ConformanceResult(
                path.stem, False, None,
                (f"no expectations: write {path.stem}.toml (see docs/conformance.md)",),
            )  # fmt: skip


# ================================================================================================
# the report
# ================================================================================================
def _time(ps: int | None) -> str:
    if ps is None:
        return "-"
    for unit, scale in (("s", timing.PS_PER_S), ("ms", 10**9), ("us", 10**6)):
        if ps >= scale:
            return f"{ps / scale:.3f} {unit}"
    return f"{ps / 10**6:.3f} us"


class Table:
    """The report: a header, one row per binary, then ``conformance K/N``."""

    def __init__(self, names: list[str]) -> None:
        self.width = max([len("binary"), *(len(n) for n in names)])
        self.results: list[ConformanceResult] = []

    def header(self) -> str:
        """The column titles."""
        return f"{'binary':<{self.width}}  result  {'virtual time':>14}  reason"

    def row(self, result: ConformanceResult) -> str:
        """One binary's line (the result is counted)."""
        self.results.append(result)
        self.width = max(self.width, len(result.name))
        verdict = "PASS" if result.passed else "FAIL"
        line = f"{result.name:<{self.width}}  {verdict:<6}  {_time(result.virtual_ps):>14}"
        return f"{line}  {result.reason}".rstrip()

    def footer(self) -> str:
        """``conformance K/N``."""
        passed = sum(r.passed for r in self.results)
        return f"conformance {passed}/{len(self.results)}"


def format_table(results: list[ConformanceResult]) -> str:
    """The whole report of ``results``."""
    table = Table([r.name for r in results])
    rows = [table.row(r) for r in results]
    return "\n".join([table.header(), *rows, table.footer()]) + "\n"
