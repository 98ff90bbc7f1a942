"""The ``aiopim`` command."""

from __future__ import annotations

import argparse

from . import __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``aiopim`` command."""
    parser = argparse.ArgumentParser(prog="aiopim", description="UPMEM PIM emulator")
    parser.add_argument("--version", action="version", version=f"aiopim {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
