"""Where the compiled interpreter's time goes, by function and by source line (Linux ``perf``).

    python benchmarks/profile_isa_loop.py [--ranks N] [--threads N] [--lines N]

Runs the assembled key-sum (``examples/wram_fifo_keysum.py --kernel isa``) under ``perf record``
and attributes the samples that fall in numba's compiled code to its functions (the loop
``_interp.run``, the program's own fast step, the batch's helpers) and, inside the loop, to
the source lines of ``aiopim/isa/_interp.py``. The line table comes from a build with numba's
debug information (``NUMBA_DEBUGINFO=1``, bounds checks off) in a temporary numba cache, so the
first run compiles for about a minute; that build runs the loop about 15 % slower than the
normal one, and the step about four times as slow, so read shares inside ``run``, not absolute
times. ``--release`` profiles the normal build instead (no debug information, so no line
table): the shares of the loop, the step and the helpers as they are in real runs.
Needs ``perf`` (with ``perf_event_paranoid`` <= 2), ``addr2line`` and ``objdump`` (binutils).
Last line: ``profile_isa_loop samples=<samples in the loop>`` (with ``--release``, the samples in
numba's compiled code).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(ranks: int, out: Path) -> None:
    """Under perf: run the key-sum, then write numba's object code and a perf symbol map."""
    from elftools.elf.elffile import ELFFile

    sys.path.insert(0, str(ROOT / "examples"))
    import wram_fifo_keysum as example

    from aiopim.isa import _interp, _jitptr, _specialize

    _interp.get_run(True)
    args = ["--ranks", str(ranks), "--kernel", "isa", "--backend", "trio"]
    for _ in range(2):  # the first run also compiles
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            example.main(args)
        print(f"key-sum run: {time.perf_counter() - start:.2f} s wall", file=sys.stderr)
    libraries = []
    for dispatcher in (_jitptr.run_dpus_at, _jitptr.run_dpus_parallel, _interp.jit_dispatcher()):
        libraries += [cres.library for cres in dispatcher.overloads.values()]
    libraries += [m.step._library for _, m in _specialize._STEPS.values() if m is not None]
    symbols = []
    for i, library in enumerate(libraries):
        path = out / f"lib{i}.o"
        path.write_bytes(library._get_compiled_object())
        with path.open("rb") as f:
            table = ELFFile(f).get_section_by_name(".symtab")
            for s in table.iter_symbols():
                if s["st_info"]["type"] == "STT_FUNC" and s["st_size"] > 0:
                    address = library.get_pointer_to_function(s.name)
                    if address:
                        symbols.append((address, s["st_size"], s.name, str(path), s["st_value"]))
    (out / "symbols.json").write_text(json.dumps(symbols))
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:  # perf's map of JIT code
        f.writelines(f"{a:x} {size:x} {name}\n" for a, size, name, _, _ in symbols)


def short(name: str) -> str:
    for key, label in (("_interp3run", "loop (_interp.run)"), ("aiopim_isa_step", "fast step")):
        if key in name:
            return label + (" C wrapper" if name.startswith("cfunc.") else "")
    match = re.search(r"(\d+)([A-Za-z_]\w*?)B\d", name)
    return match.group(2) if match else name[:40]


def report(out: Path, top: int, lines: bool) -> int:
    symbols = json.loads((out / "symbols.json").read_text())
    script = subprocess.run(
        ["perf", "script", "-i", str(out / "perf.data"), "-F", "ip,sym"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_symbol: collections.Counter[str] = collections.Counter()
    ips: collections.Counter[int] = collections.Counter()
    known = {name for _, _, name, _, _ in symbols}
    for line in script.splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2 and parts[1] in known:
            by_symbol[short(parts[1])] += 1
            ips[int(parts[0], 16)] += 1
    total = sum(by_symbol.values())
    print(f"samples in numba's compiled code: {total}")
    for name, n in by_symbol.most_common(12):
        print(f"  {100 * n / total:5.1f} %  {name}")
    if not lines:
        return total
    # the loop's own object (not a batch that links it in): its symbol at offset 0 in its file
    loop = [s for s in symbols if s[2].startswith("_ZN6aiopim3isa7_interp3run")]
    address, size, _, path, offset = min(loop, key=lambda s: (s[4] != 0, s[3]))
    disassembly = subprocess.run(
        ["objdump", "-d", f"--start-address={offset}", f"--stop-address={offset + size}", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    addresses = [int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):", disassembly, re.M)]
    located = subprocess.run(
        ["addr2line", "-a", "-e", path, *map(hex, addresses)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    line_of: dict[int, int | None] = {}
    current = None
    for at, where in zip(located[::2], located[1::2], strict=True):
        file, _, number = where.rpartition(":")
        number = number.split()[0]
        if file.endswith("_interp.py") and number.isdigit():
            current = int(number)  # instructions without a line take the previous one's
        line_of[int(at, 16)] = current
    by_line: collections.Counter[int | None] = collections.Counter()
    for ip, n in ips.items():
        if address <= ip < address + size:
            by_line[line_of.get(ip - address + offset)] += n
    in_loop = sum(by_line.values())
    source = (ROOT / "aiopim" / "isa" / "_interp.py").read_text().splitlines()
    print(f"\nsamples in the loop: {in_loop}; its hottest lines of aiopim/isa/_interp.py:")
    for number, n in by_line.most_common(top):
        text = source[number - 1].strip()[:80] if number else "(no line)"
        print(f"  {100 * n / in_loop:5.1f} %  {number or '':>5}  {text}")
    return in_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="interpreter threads")
    parser.add_argument("--lines", type=int, default=30, help="hottest lines shown")
    parser.add_argument(
        "--release",
        action="store_true",
        help="the normal build: shares by function only, no line table",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.ranks, Path(args.child))
        return
    missing = [tool for tool in ("perf", "addr2line", "objdump") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"profile_isa_loop needs {', '.join(missing)} (Linux perf, binutils)")
    with tempfile.TemporaryDirectory(prefix="aiopim-profile-") as tmp:
        out = Path(tmp)
        env = dict(
            os.environ,
            NUMBA_DEBUGINFO="0" if args.release else "1",
            NUMBA_BOUNDSCHECK="0",
            NUMBA_CACHE_DIR=str(out / "numba"),
            AIOPIM_CACHE_DIR=str(out / "aiopim"),
            AIOPIM_ISA_THREADS=str(args.threads),
        )
        command = [sys.executable, __file__, "--ranks", str(args.ranks), "--child", tmp]
        record = ["perf", "record", "-F", "2000", "-o", str(out / "perf.data"), "--"]
        subprocess.run(record + command, env=env, check=True, stdout=subprocess.DEVNULL)
        samples = report(out, args.lines, not args.release)
    print(f"profile_isa_loop samples={samples}")


if __name__ == "__main__":
    main()
