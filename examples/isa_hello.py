"""Run a DPU binary built from assembly and print its log: the hello world of DPU binaries.

    aiopim asm examples/isa/hello.S -o hello.dpu && aiopim disasm hello.dpu
    python examples/isa_hello.py                  # assembles examples/isa/hello.S itself
    python examples/isa_hello.py hello.dpu --backend trio

The binary runs on aiopim's instruction-set interpreter (no Python model is bound): four
tasklets add to a ``__host`` counter under an atomic-bit mutex and print into the DPU log, which
``dpu_log_read`` decodes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import aiopim
from aiopim.isa import assemble
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    dpu_alloc,
    dpu_copy_from,
    dpu_free,
    dpu_launch,
    dpu_load,
    dpu_load_from_memory,
    dpu_log_read,
)

HELLO_S = Path(__file__).resolve().parent / "isa" / "hello.S"


async def host(binary: str | None) -> None:
    dpus = await dpu_alloc(1)
    if binary is None:
        await dpu_load_from_memory(dpus, assemble(HELLO_S.read_text()), name="hello")
    else:
        await dpu_load(dpus, binary)
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    dpu = dpus.dpus[0]
    dpu_log_read(dpu, sys.stdout)
    counter = np.zeros(1, np.uint32)
    await dpu_copy_from(dpu, "counter", 0, counter, 4)
    print(f"counter = {int(counter[0])} (1 + 2 + 3 + 4)")
    print(f"virtual time {aiopim.now() * 1e6:.3f} us")
    await dpu_free(dpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", nargs="?", help="a DPU ELF (default: assemble hello.S)")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    aiopim.run(host, opts.binary, backend=opts.backend, progress=opts.progress)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
