"""What the host may touch in a binary, printed: ``format_symbols`` and ``aiopim symbols``."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import (
    Any,
)

from .._errors import DpuError
from ._program import ElfProgram


# ================================================================================================
# inspection and the `aiopim symbols` command
# ================================================================================================
def format_symbols(program: ElfProgram, *, all_symbols: bool = False) -> str:
    """A readelf-like table of the host-visible symbols (every named symbol with
    ``all_symbols``), plus the tasklet count, stack sizes and hardware version."""
    chip = program.chip or "any (no recognised .dpu.attributes)"
    if program.cpu_name is not None and program.cpu_name != program.chip:
        chip += f" [cpu {program.cpu_name!r}]"
    origin = str(program.path) if program.path is not None else "<memory>"
    lines = [
        f"DPU program {program.name!r} ({origin}): ELF32 EM_DPU, entry {program.entry:#010x}",
        f"Hardware version: {chip}",
        f"Tasklets: {program.nr_tasklets} (NR_TASKLETS)",
        f"Stack sizes: {' '.join(str(s) for s in program.stack_sizes) or '-'}",
        f"WRAM heap start: {program.heap_start:#x}",
        "",
    ]

    def order(address: int, name: str, section: str) -> tuple[int, int, Any]:
        # memory symbols by address, then absolute ones by name (STACK_SIZE_TASKLET_2 < _10)
        if section != "ABS":
            return (0, address, name)
        key = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
        return (1, 0, [(isinstance(k, int), k) for k in key])

    if all_symbols:
        syms = sorted(program.all_symbols(), key=lambda s: order(s.address, s.name, s.section))
        lines.append(f"All symbols ({len(syms)}):")
        lines.append(f"  {'Address':<10}  {'Size':>8}  Space  Host  {'Section':<18}  Name")
        for s in syms:
            host = "yes" if s.visible else "no"
            lines.append(
                f"  {s.address:#010x}  {s.size:>8}  {s.space.value:<5}  {host:<4}  "
                f"{s.section:<18}  {s.name}"
            )
    else:
        rows = program.symbol_table()
        visible = program._visible
        rows.sort(key=lambda r: order(r.address, r.name, visible[r.name].section))
        lines.append(f"Host-visible symbols ({len(rows)}):")
        lines.append(f"  {'Address':<10}  {'Size':>8}  Space  {'Section':<18}  Name")
        lines.extend(
            f"  {r.address:#010x}  {r.size:>8}  {r.space.value:<5}  "
            f"{visible[r.name].section:<18}  {r.name}"
            for r in rows
        )
    return "\n".join(lines)


def main_symbols(argv: Sequence[str] | None = None) -> int:
    """``aiopim symbols FILE``: print the symbol table; on a bad file print the SDK error name
    and message to stderr and return 2."""
    parser = argparse.ArgumentParser(
        prog="aiopim symbols",
        description="Print the host-visible symbols of a DPU ELF binary (dpu_get_symbol view).",
    )
    parser.add_argument("file", help="DPU ELF binary")
    parser.add_argument(
        "-a", "--all", action="store_true", help="list every symbol, with its host visibility"
    )
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        program = ElfProgram(args.file)
    except DpuError as err:
        print(f"{err.code.name}: {err.detail}", file=sys.stderr)
        return 2
    print(format_symbols(program, all_symbols=args.all))
    return 0
