"""The ``aiopim`` command."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``aiopim`` command."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "symbols":
        from .elf import main_symbols

        return main_symbols(args[1:])
    parser = argparse.ArgumentParser(prog="aiopim", description="UPMEM PIM emulator")
    parser.add_argument("--version", action="version", version=f"aiopim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("symbols", help="print the host-visible symbols of a DPU ELF binary")
    parser.parse_args(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
