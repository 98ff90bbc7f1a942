"""Kelonia's character counter: count the 'a's of a text with one DPU, then with N DPUs.

The DPU program is the one of UPMEM's Kelonia introduction, as a Python kernel: 16 tasklets,
each reading the document length and the character from the system mailbox, counting the
character in 256-byte blocks of MRAM distributed as a rake (tasklet X takes blocks X, X + 16,
X + 32, ...), comparing four bytes at a time, and posting its counter in its own mailbox. Its
contract with the host is ``examples/charcount.didl``.

The host side is Kelonia's: a device description (interface + program), an assembly built by
the foundry, and workers per DPU and task. With N DPUs, every DPU is driven by its own anyio
task in a producer/consumer loop: take the next block from a data provider, copy it to the
DPU, count, add the DPU's total to a shared result. Both totals are checked against Python's
own count.

    python examples/kelonia_charcount.py --backend trio --dpus 8
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio
import numpy as np

import aiopim
from aiopim.kelonia import (
    PYTHON,
    BasicDpuAssemblyLine,
    DpuBackend,
    DpuDeviceDescription,
    DpuFoundry,
    load_interface,
)

DIDL = Path(__file__).resolve().parent / "charcount.didl"
NR_TASKLETS = 16
BLOCK = 256
#: Instructions per 4-byte word of the counting loop: lw, cmpb4, cao, add to the result, and
#: the loop's add and branch (the loop body of the C program, instruction by instruction).
WORD_INSTRUCTIONS = 6
CHAR = ord("a")


def charcount_program() -> aiopim.Program:
    """The DPU program, with the run-time configuration of the original script:
    ``tasklet add 0..15 medium charcount 1`` and ``sysmbox 2``."""
    prog = aiopim.Program("charcount", nr_tasklets=NR_TASKLETS, stdio=False)
    prog.mailboxes(sysmbox=2, mbox=1)
    caches = prog.wram("caches", np.uint8, NR_TASKLETS * BLOCK)  # one dma_alloc(256) each

    @prog.main
    async def charcount(t: aiopim.Tasklet) -> None:
        host_request = t.sys_mbox_recv()
        document_len = int(host_request[0])
        character = int(host_request[1]) & 0xFF
        cache = prog.address_of(caches) + t.me() * BLOCK
        result = 0
        my_block_address = t.me() << 8
        while my_block_address < document_len:
            await t.mram_read(my_block_address, cache, BLOCK)
            # The C loop compares every byte of the last block; stopping at the document's end
            # keeps the count exact whatever an earlier, longer document left in MRAM.
            block = t.view(cache, np.uint8, BLOCK)[: document_len - my_block_address]
            result += int(np.count_nonzero(block == character))
            t.compute(BLOCK // 4 * WORD_INSTRUCTIONS)
            my_block_address += NR_TASKLETS << 8
        t.mbox_send(result)

    return prog


def sample_text(size: int, seed: int = 0) -> bytes:
    """A deterministic text of lowercase words."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ", np.uint8)
    return bytes(letters[rng.integers(0, len(letters), size)])


class DataProvider:
    """Hands out consecutive blocks of a text (None when it is all given out)."""

    def __init__(self, text: bytes, block_size: int) -> None:
        self._text = text
        self._block = block_size
        self._next = 0

    def get_more_data(self) -> bytes | None:
        if self._next >= len(self._text):
            return None
        chunk = self._text[self._next : self._next + self._block]
        self._next += self._block
        return chunk


class CountResult:
    """The shared total (anyio tasks of one event loop: ``add`` needs no lock)."""

    def __init__(self) -> None:
        self.value = 0

    def add(self, n: int) -> None:
        self.value += n


async def count_with_one_dpu(assembly: Any, task: Any, text: bytes) -> int:
    """Copy the text to the DPU's MRAM, count, sum the 16 tasklet counters."""
    worker = assembly.worker(task.count_characters)
    copy_worker = assembly.worker(task.memory_copy)
    await copy_worker.copy_to_device(0, text)
    counters = await worker.count_characters(len(text), CHAR)
    return int(np.sum(counters))


async def counter_task(
    dpu_number: int, provider: DataProvider, result: CountResult, assembly: Any, task: Any
) -> None:
    """Drive one DPU until the provider runs dry."""
    worker = assembly.worker(dpu_number, task.count_characters)
    copy_worker = assembly.worker(dpu_number, task.memory_copy)
    while (block := provider.get_more_data()) is not None:
        await copy_worker.copy_to_device(0, block)
        counters = await worker.count_characters(len(block), CHAR)
        result.add(int(np.sum(counters)))


async def count_with_multiple_dpus(assembly: Any, task: Any, provider: DataProvider) -> int:
    """One task per DPU, all sharing the provider and the result."""
    result = CountResult()
    async with anyio.create_task_group() as tg:
        for dpu_number in range(assembly.nr_dpus):
            tg.start_soon(counter_task, dpu_number, provider, result, assembly, task)
    return result.value


async def run_counts(
    device: DpuDeviceDescription, small: bytes, large: bytes, nr_dpus: int, block_size: int
) -> list[str]:
    """Both counts on ``device``; the lines to print (with virtual times on the emulator)."""
    foundry = DpuFoundry.targeting(PYTHON)
    task = device.interface.Task
    emulated = device.backend is DpuBackend.EMULATED
    lines = []
    t0 = aiopim.now() if emulated else 0.0
    async with await foundry.build(BasicDpuAssemblyLine.using_dpu(device)) as assembly:
        found = await count_with_one_dpu(assembly, task, small)
    lines.append(f"one DPU: {found} 'a's in {len(small)} bytes (Python: {small.count(b'a')})")
    t1 = aiopim.now() if emulated else 0.0
    line = BasicDpuAssemblyLine.using_dpus(nr_dpus, device)
    async with await foundry.build(line) as assembly:
        found = await count_with_multiple_dpus(assembly, task, DataProvider(large, block_size))
    lines.append(
        f"{nr_dpus} DPUs: {found} 'a's in {len(large)} bytes (Python: {large.count(b'a')})"
    )
    if emulated:
        t2 = aiopim.now()
        lines.append(f"virtual time: one DPU {t1 - t0:.6f} s, {nr_dpus} DPUs {t2 - t1:.6f} s")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    ap.add_argument("--dpus", type=int, default=8, help="DPUs of the second count")
    ap.add_argument("--small", type=int, default=100_000, help="bytes of the one-DPU text")
    ap.add_argument("--large", type=int, default=1 << 21, help="bytes of the N-DPU text")
    ap.add_argument("--block", type=int, default=64 << 10, help="bytes per provider block")
    ap.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = ap.parse_args()
    device = DpuDeviceDescription(load_interface(DIDL), charcount_program())
    small, large = sample_text(opts.small, 1), sample_text(opts.large, 2)
    # One DPU per rank, so that every DPU has its own job queue and the N DPUs overlap.
    machine = aiopim.MachineConfig(nr_ranks=opts.dpus, nr_dpus_per_rank=1)
    emulator = aiopim.Emulator(machine)

    async def host() -> list[str]:
        return await run_counts(device, small, large, opts.dpus, opts.block)

    lines = emulator.run(host, backend=opts.backend, progress=opts.progress)
    print("\n".join(lines))
    ok = all(_matches(line) for line in lines[:2])
    return 0 if ok else 1


def _matches(line: str) -> bool:
    found = int(line.split(": ", 1)[1].split()[0])
    return found == int(line.rsplit("Python: ", 1)[1].rstrip(")"))


if __name__ == "__main__":
    raise SystemExit(main())
