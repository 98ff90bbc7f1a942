"""Kelonia's character counter: count the 'a's of a text with one DPU, then with N DPUs, then
ask N actors for every vowel.

The DPU program is the one of UPMEM's Kelonia introduction, as a Python kernel: 16 tasklets,
each reading the document length and the character from the system mailbox, counting the
character in 256-byte blocks of MRAM distributed as a rake (tasklet X takes blocks X, X + 16,
X + 32, ...), comparing four bytes at a time, and posting its counter in its own mailbox. Its
contract with the host is ``examples/charcount.didl``; the host uses the module ``aiopim didl``
generates from it (``--interface PATH``, or generated into a temporary directory).

The host side is Kelonia's: a device description (interface + program), an assembly built by
the foundry, and workers per DPU and task. With N DPUs, every DPU is driven by its own anyio
task in a producer/consumer loop: take the next block from a data provider, copy it to the
DPU, count, add the DPU's total to a shared result.

The actor variant keeps the DPUs running: each holds a part of the text in MRAM, takes
``countCharacters`` messages (document length, character) from its input FIFO and answers with
its 16 counters in its output FIFO. The host sends every actor one message per vowel and adds
the replies as they come. Every total is checked against Python's own count.

    aiopim didl examples/charcount.didl -o build/charcount_interface.py
    python examples/kelonia_charcount.py --interface build/charcount_interface.py --backend trio
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import numpy as np

import aiopim
from aiopim.kelonia import (
    PYTHON,
    ActorDpuAssemblyLine,
    BasicDpuAssemblyLine,
    DpuBackend,
    DpuDeviceDescription,
    DpuFoundry,
    generate_file,
)

DIDL = Path(__file__).resolve().parent / "charcount.didl"
NR_TASKLETS = 16
BLOCK = 256
#: Instructions per 4-byte word of the counting loop: lw, cmpb4, cao, add to the result, and
#: the loop's add and branch (the loop body of the C program, instruction by instruction).
WORD_INSTRUCTIONS = 6
CHAR = ord("a")
#: the characters the actors are asked for
VOWELS = b"aeiou"


async def count_rake(t: aiopim.Tasklet, document_len: int, character: int, cache: int) -> int:
    """This tasklet's count of ``character`` in MRAM ``[0, document_len)``: blocks X, X + 16, ...
    read into its 256-byte WRAM ``cache``."""
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
    return result


def charcount_program() -> aiopim.Program:
    """The DPU program, with the run-time configuration of the original script:
    ``tasklet add 0..15 medium charcount 1`` and ``sysmbox 2``. Without printf (``stdio``), the
    program keeps no MRAM for itself, so the document can sit at MRAM 0 as in the article."""
    prog = aiopim.Program("charcount", nr_tasklets=NR_TASKLETS, stdio=False)
    prog.mailboxes(sysmbox=2, mbox=1)
    caches = prog.wram("caches", np.uint8, NR_TASKLETS * BLOCK)  # one dma_alloc(256) each

    @prog.main
    async def charcount(t: aiopim.Tasklet) -> None:
        host_request = t.sys_mbox_recv()
        document_len = int(host_request[0])
        character = int(host_request[1]) & 0xFF
        cache = prog.address_of(caches) + t.me() * BLOCK
        t.mbox_send(await count_rake(t, document_len, character, cache))

    return prog


def charcount_actor_program() -> aiopim.Program:
    """The same count as an actor: a ``countCharacters`` message is an input-FIFO element of
    the two words the system mailbox would hold, the reply an output-FIFO element of the 16
    counters the tasklet mailboxes would hold. Every tasklet counts its rake for each message,
    then tasklet 0 pushes the reply; the loop ends when the host clears ``active``."""
    prog = aiopim.Program("charcount_actor", nr_tasklets=NR_TASKLETS, stdio=False)
    active = prog.host("active", np.uint64, 1, init=[1])
    inbox = prog.input_fifo("inbox", 3, 8)  # 8 messages of 2 words
    outbox = prog.output_fifo("outbox", 3, 4 * NR_TASKLETS)  # 8 replies of 16 words
    counted = prog.barrier("counted")
    caches = prog.wram("caches", np.uint8, NR_TASKLETS * BLOCK)
    counters = prog.wram("counters", np.uint32, NR_TASKLETS)

    async def count(t: aiopim.Tasklet, message: np.ndarray) -> None:
        document_len, character = (int(w) for w in message.view(np.uint32)[:2])
        cache = prog.address_of(caches) + t.me() * BLOCK
        t.view(counters)[t.me()] = await count_rake(t, document_len, character & 0xFF, cache)

    async def reply(t: aiopim.Tasklet, message: np.ndarray, out: np.ndarray) -> None:
        out.view(np.uint32)[:] = t.view(counters)
        t.compute(2 * NR_TASKLETS)

    @prog.main
    async def charcount_actor(t: aiopim.Tasklet) -> None:
        await t.process_inputs_all_tasklets(inbox, outbox, count, reply, counted, active)

    return prog


def generated_interface(path: Path | None) -> ModuleType:
    """The module ``aiopim didl`` generated from the DIDL at ``path``; for None, the module
    generated into a temporary directory (nothing is written beside the example)."""
    if path is None:
        with tempfile.TemporaryDirectory() as tmp:
            return generated_interface(generate_file(DIDL, Path(tmp) / "charcount_interface.py"))
    spec = importlib.util.spec_from_file_location("charcount_interface", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # before it runs: its dataclasses look themselves up
    spec.loader.exec_module(module)
    return module


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


async def count_with_actors(fleet: Any, task: Any, text: bytes, characters: bytes) -> str:
    """Give each actor a part of ``text``, ask every actor for every character, add the replies
    as they come; ``"a 67214, e ..."``. The k-th reply of an actor answers its k-th message."""
    parts = np.array_split(np.frombuffer(text, np.uint8), fleet.nr_dpus)
    for actor, part in enumerate(parts):
        await fleet.worker(actor, task.memory_copy).copy_to_device(0, part)
    await fleet.start()
    for character in characters:
        for actor, part in enumerate(parts):
            await fleet.send(actor, (len(part), character))
    totals = dict.fromkeys(characters, 0)
    async for reply in fleet.replies():
        totals[characters[reply.index]] += int(np.sum(reply.value))
    await fleet.stop()
    return ", ".join(f"{chr(c)} {n}" for c, n in totals.items())


async def run_counts(
    device: DpuDeviceDescription,
    small: bytes,
    large: bytes,
    nr_dpus: int,
    block_size: int,
    actors: DpuDeviceDescription | None = None,
) -> list[str]:
    """Both counts on ``device``, then the vowels on ``actors`` (if given); the lines to print
    (with virtual times on the emulator)."""
    foundry = DpuFoundry.targeting(PYTHON)
    task: Any = device.interface.Task
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
    t2 = aiopim.now() if emulated else 0.0
    times = f"virtual time: one DPU {t1 - t0:.6f} s, {nr_dpus} DPUs {t2 - t1:.6f} s"
    if actors is not None:
        fleet_line = ActorDpuAssemblyLine.using_dpus(nr_dpus, actors, task.count_characters)
        async with await foundry.build(fleet_line) as fleet:
            found_each = await count_with_actors(fleet, task, large, VOWELS)
        python = ", ".join(f"{chr(c)} {large.count(bytes([c]))}" for c in VOWELS)
        lines.append(f"{nr_dpus} actors: {found_each} in {len(large)} bytes (Python: {python})")
        times += f", {nr_dpus} actors {aiopim.now() - t2:.6f} s" if emulated else ""
    if emulated:
        lines.append(times)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    ap.add_argument("--dpus", type=int, default=8, help="DPUs of the second count and actors")
    ap.add_argument("--small", type=int, default=100_000, help="bytes of the one-DPU text")
    ap.add_argument("--large", type=int, default=1 << 21, help="bytes of the N-DPU text")
    ap.add_argument("--block", type=int, default=64 << 10, help="bytes per provider block")
    ap.add_argument(
        "--interface",
        type=Path,
        metavar="PATH",
        help="the module generated by `aiopim didl examples/charcount.didl -o PATH` "
        "(default: generated into a temporary directory)",
    )
    ap.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = ap.parse_args(argv)
    interface = generated_interface(opts.interface).Charcount.instance()
    device = DpuDeviceDescription(interface, charcount_program())
    actors = DpuDeviceDescription(interface, charcount_actor_program())
    small, large = sample_text(opts.small, 1), sample_text(opts.large, 2)
    # One DPU per rank, so that every DPU has its own job queue and the N DPUs overlap.
    machine = aiopim.MachineConfig(nr_ranks=opts.dpus, nr_dpus_per_rank=1)
    emulator = aiopim.Emulator(machine)

    async def host() -> list[str]:
        return await run_counts(device, small, large, opts.dpus, opts.block, actors)

    lines = emulator.run(host, backend=opts.backend, progress=opts.progress)
    print("\n".join(lines))
    ok = all(_matches(line) for line in lines[:3])
    return 0 if ok else 1


def _matches(line: str) -> bool:
    """``found (Python: expected)`` with the two equal."""
    found = line.split(": ", 1)[1].split(" in ")[0].removesuffix(" 'a's")
    return found == line.rsplit("(Python: ", 1)[1].rstrip(")")


if __name__ == "__main__":
    raise SystemExit(main())
