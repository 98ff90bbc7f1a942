"""Fuzz worker: build bad DPU binaries and run them, one JSON line per case on stdout.

Run by ``tests/test_isa_fuzz.py`` in child processes, so that a crash of the interpreter (a
signal) kills the child and not the test run. Usable by hand to reproduce a case::

    python tests/isa_fuzz_worker.py --engine compiled words:0:17
    python tests/isa_fuzz_worker.py --engine python mutate:0:0-99 --save /tmp/cases

A case is ``GENERATOR:SEED:INDEX`` (``FIRST-LAST`` for a range); everything about it (program,
chip, DPUs, threads, MRAM contents, guard) follows from that key alone.

* ``words``: a prologue (a boot chain starting 1-4 threads, the 24 registers loaded with edge
  values: addresses at and beyond the ends of WRAM, IRAM and MRAM, DMA sizes, thread ids,
  sign bits) then random 48-bit words mixed with valid encodings of random instructions,
  weighted towards loads and stores, DMA, atomic bits, thread control, jumps and calls; some
  programs start with DMA transfers and WRAM accesses that end exactly at the end of WRAM, IRAM
  or MRAM (these must not fault) and one that ends a little beyond it.
* ``mutate``: ``examples/isa/*.S`` assembled by aiopim's assembler, then bits and words of its
  ``.text`` flipped or replaced, or bits, bytes and lengths of the whole ELF file changed.

Each case runs on 1-4 DPUs (now and then 32-40, the batch on two threads), under one of two
guards: ``cycles`` (``IsaRunner.max_run_cycles``: a run still going after that many cycles
stops in fault; such runs go one DPU at a time) or ``horizon`` (an asynchronous launch, run by
the batched loop, that the host stops watching after a virtual time, the DPUs still running
then stopped). The worker prints ``{"start": key}`` before a case and its record after it,
so that the last ``start`` without a record names the case that killed the process.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import hashlib
import json
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "isa"
#: how a child picks the interpreter's path
ENGINE_ENV = {
    "compiled": {"AIOPIM_ISA_ENGINE": "compiled"},
    "python": {"AIOPIM_ISA_ENGINE": "python"},
}
GENERATORS = ("words", "mutate")
#: cycle guards and host horizons (virtual seconds after the launch) a case draws from
CAPS = (1_500, 8_000, 30_000)
HORIZONS = (4e-6, 20e-6, 75e-6)
MRAM_SIZE = 64 << 20


# ================================================================================================
# cases
# ================================================================================================
@dataclass
class Case:
    """One fuzz case: an ELF, where and how to run it."""

    key: str
    chip: str
    elf: bytes
    nr_dpus: int
    guard: str  # "cycles" or "horizon"
    limit: float  # cycles for "cycles", virtual seconds for "horizon"
    backend: str
    #: threads the batched loop may use (``AIOPIM_ISA_THREADS``)
    workers: int = 1
    #: MRAM writes before the launch: (dpu or -1 for a broadcast, MRAM offset, bytes)
    mram: list[tuple[int, int, bytes]] = field(default_factory=list)
    #: whether the ELF must load (False for whole-file mutations)
    must_load: bool = True
    #: PCs of accesses that end exactly at the end of a memory: they must not fault
    fits: list[int] = field(default_factory=list)
    note: str = ""


def parse_keys(spec: str) -> list[str]:
    """``words:0:5`` or ``words:0:0-99`` as a list of case keys."""
    gen, seed, rng = spec.split(":")
    if gen not in GENERATORS:
        raise ValueError(f"unknown generator {gen!r} (one of {GENERATORS})")
    first, _, last = rng.partition("-")
    return [f"{gen}:{int(seed)}:{i}" for i in range(int(first), int(last or first) + 1)]


def make_case(key: str) -> Case:
    """The case named ``key`` (deterministic)."""
    gen = key.split(":")[0]
    rng = random.Random(key)
    return _words_case(key, rng) if gen == "words" else _mutate_case(key, rng)


def _run_setup(rng: random.Random) -> dict[str, Any]:
    guard = rng.choice(("cycles", "horizon"))
    wide = rng.random() < 0.03  # enough DPUs for the batch to run on two threads
    return {
        "nr_dpus": rng.choice((32, 33, 40)) if wide else rng.choice((1, 2, 3, 4)),
        "workers": 2 if wide else 1,
        "guard": guard,
        "limit": rng.choice(CAPS) if guard == "cycles" else rng.choice(HORIZONS),
        "backend": rng.choice(("asyncio", "trio")),
    }


# ---- random instruction words -------------------------------------------------------------------
@cache
def _categories() -> dict[str, list[int]]:
    """Signature indexes by what they touch."""
    from aiopim.isa import _tables as T

    mem = {"lbs", "lbu", "lhs", "lhu", "lw", "ld", "sb", "sh", "sw", "sd"}
    mem |= {k + "_id" for k in ("sb", "sh", "sw", "sd")}
    cats: dict[str, list[int]] = {
        "mem": [],
        "dma": [],
        "atomic": [],
        "thread": [],
        "jump": [],
        "other": [],
    }
    for sig, kw in enumerate(T.SIG_KEYWORD):
        base = kw.split(".")[0]
        if base in mem:
            cats["mem"].append(sig)
        elif base in ("ldma", "sdma", "ldmai"):
            cats["dma"].append(sig)
        elif base in ("acquire", "release"):
            cats["atomic"].append(sig)
        elif base in ("boot", "resume", "stop", "clr_run", "read_run", "fault", "time_cfg"):
            cats["thread"].append(sig)
        elif base == "call" or any(op[1] == T.KIND_PC for op in T.SIG_OPERANDS[sig]):
            cats["jump"].append(sig)
        else:
            cats["other"].append(sig)
    return cats


_WEIGHTS = {"mem": 30, "dma": 16, "atomic": 8, "thread": 10, "jump": 16, "other": 20}


def _edge_values(chip: str, rng: random.Random) -> list[int]:
    """Register values at and around the ends of the chip's memories."""
    from aiopim.isa import _tables as T

    threads, iram_words, wram, _, _ = T.CHIPS[chip]
    iram = iram_words * 8
    out = [0, 1, 4, 7, 8, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000]
    out += [0xFFFFFFFF, 0xFFFFFFF8, 0xFFFFFFFC, 0x08000000, 0x80000000 | iram - 8]
    for end in (wram, iram, MRAM_SIZE):
        out += [end - 2048, end - 2040, end - 16, end - 8, end - 4, end - 1, end, end + 8]
    out += [threads - 1, threads, 23, 24, 255, 256, 0xFF00, 0x1FF00]
    out += [0xFF000000 | (wram - 8), 0x01000000, 0x7F000000 | (iram - 8)]  # ra >> 24: DMA size
    out += [rng.randrange(0, wram, 8), rng.randrange(0, MRAM_SIZE, 8), rng.getrandbits(32)]
    return [v & 0xFFFFFFFF for v in out]


def _random_word(rng: random.Random) -> int:
    """A random 48-bit word; now and then bits above 47 set too (an undecodable word)."""
    return rng.getrandbits(64) if rng.random() < 0.05 else rng.getrandbits(48)


def _valid_word(
    rng: random.Random,
    size: int,
    tame: float = 0.0,
    regs: dict[str, list[int]] | None = None,
    avoid: range = range(0),
) -> int:
    """A valid encoding of a random instruction, jump targets mostly inside ``size`` words but
    not in ``avoid``; with probability ``tame``, operands that often do not fault (base
    registers holding WRAM or IRAM addresses from ``regs``, small offsets and DMA sizes,
    existing thread ids), so that programs get further."""

    def target(end: int) -> int:
        pc = rng.randrange(end)
        return pc if pc not in avoid else avoid.stop

    from isa_helpers import random_instruction

    from aiopim.isa import EncodeError, Instruction, encode, signature_index
    from aiopim.isa import _tables as T

    cats = _categories()
    cat = rng.choices(list(_WEIGHTS), list(_WEIGHTS.values()))[0]
    sig = rng.choice(cats[cat])
    while avoid and T.SIG_KEYWORD[sig] == "ldmai":  # it could rewrite the code in ``avoid``
        sig = rng.choice(cats[cat])
    ins = random_instruction(sig, rng)
    values = ins.values()
    if "pc" in values and rng.random() < 0.75:  # a target in the program, or just beyond
        values["pc"] = target(size + 4)
    if rng.random() < tame:
        wram_regs = (regs or {}).get("wram") or [24]
        if cat == "mem" and "off" in values:
            values["off"] = rng.choice((0, 0, 8, 16, -8, 8 * rng.randrange(-16, 16)))
            safe = any(op[0] == "sa" for op in T.SIG_OPERANDS[sig])
            values["ra"] = rng.choice((regs or {}).get("safe") or [24] if safe else wram_regs)
        if cat == "thread" and "imm" in values and ins.keyword != "fault":
            values["ra"] = rng.choice((24, 28))  # zero or id
            values["imm"] = rng.randrange(-1, 5)
        if "immDma" in values:
            values["immDma"] = rng.randrange(4)
            iram_regs = (regs or {}).get("iram") or [24]
            values["ra"] = rng.choice(iram_regs if ins.keyword == "ldmai" else wram_regs)
            values["rb"] = rng.choice(wram_regs)  # a WRAM address is an MRAM address too
    with contextlib.suppress(EncodeError):  # a field the signature fixes: keep the random one
        ins = Instruction.make(sig, **values)
    if cat == "jump" and rng.random() < 0.15:  # a call and a return through r23
        if rng.random() < 0.5:
            ins = Instruction.make(signature_index("call:rri"), rc=23, ra=24, off=target(size))
        else:
            ins = Instruction.make(signature_index("call:zri"), ra=23, off=0)
    return encode(ins)


def _words_case(key: str, rng: random.Random) -> Case:
    from isa_programs import Asm

    from aiopim.isa import _tables as T
    from aiopim.isa.elfwriter import sample_dpu_elf

    chip = "v1B" if rng.random() < 0.8 else "v1A"
    threads = rng.randint(1, 4)
    style = rng.choices(("raw", "mixed", "valid", "edge"), (1, 3, 4, 2))[0]
    raw_share = {"raw": 1.0, "mixed": 0.05, "valid": 0.0, "edge": 0.0}[style]
    tame = rng.choice((0.0, 0.5, 0.9))
    wram = T.CHIPS[chip][2]
    a = Asm()
    a.label("chain")  # the SDK bootstrap's boot chain: thread t boots t + 1
    a("sub:zrici", ra="id", imm=threads - 1, cc="geu", pc="regs")
    a("boot:rici", ra="id", imm=1, cc="nz", pc="chain")
    a.label("regs")
    edges = _edge_values(chip, rng)
    regs: dict[str, list[int]] = {"wram": [], "iram": [], "safe": []}
    for r in range(24):
        x = rng.random()
        if x < 0.5 * tame:
            value = rng.randrange(0, wram - 64, 8)  # a WRAM address
            regs["wram"].append(r)
        elif x < 0.6 * tame:
            value = rng.randrange(0, T.CHIPS[chip][1] * 8 - 64, 8)  # an IRAM address
            regs["iram"].append(r)
        elif x < 0.7 * tame:
            value = 0xFFFF0000 | rng.randrange(0, 0x8000, 8)  # a safe register: limit, address
            regs["safe"].append(r)
        elif x < 0.85:
            value = rng.choice(edges)
        else:
            value = rng.getrandbits(32)
        a("or:rri", rc=r, ra="zero", imm=value)
    words = a.words()
    body = rng.randint(1, 48)
    iram_words = T.CHIPS[chip][1]
    fill = rng.random() < 0.05  # a program filling the IRAM to (nearly) its end
    size = iram_words - rng.randint(0, 2) if fill else len(words) + body + 1
    fits: list[int] = []
    avoid = range(0)  # no jump lands between an edge access and the moves before it
    if style == "edge":
        edge, fits = _edge_accesses(rng, chip)
        fits = [len(words) + i for i in fits]
        avoid = range(len(words) + 1, len(words) + len(edge))
        words += edge
        size = max(size, len(words) + 1)
    while len(words) < size:
        if len(words) == size - 1 and rng.random() < 0.6:
            words.append(_stop())
        elif rng.random() < raw_share:
            words.append(_random_word(rng))
        else:
            words.append(_valid_word(rng, size, tame, regs, avoid))
    text = b"".join(w.to_bytes(8, "little") for w in words)
    host = {"blob": rng.randbytes(rng.choice((8, 64, 512)))}
    elf, _ = sample_dpu_elf(
        nr_tasklets=threads, text=text, host_vars=host, chip=chip, stack_size=256
    )
    setup = _run_setup(rng)
    mram: list[tuple[int, int, bytes]] = []
    for _ in range(rng.choice((0, 0, 1, 2, 3))):
        size_b = rng.choice((8, 64, 2048, 4096))
        where = rng.choice(
            (
                0,
                0xFFF8,
                0x10000 - size_b,
                MRAM_SIZE - size_b,
                MRAM_SIZE - 65536,
                rng.randrange(0, MRAM_SIZE - size_b, 8),
            )
        )
        data = bytes(size_b) if rng.random() < 0.3 else rng.randbytes(size_b)
        dpu = -1 if rng.random() < 0.5 else rng.randrange(setup["nr_dpus"])
        mram.append((dpu, where, data))
    note = f"{style} program of {len(words)} words, {threads} threads on {chip}, tame {tame}"
    return Case(key, chip, elf, mram=mram, note=note, fits=fits, **setup)


#: WRAM loads and stores of each size for the edge programs
_ACCESSES = {
    1: ("lbu:erri", "lbs:erri", "sb:erir"),
    2: ("lhu:erri", "lhs:erri", "sh:erir"),
    4: ("lw:erri", "sw:erir"),
    8: ("ld:erri", "sd:erir"),
}


def _edge_accesses(rng: random.Random, chip: str) -> tuple[list[int], list[int]]:
    """Accesses that end exactly at the end of WRAM, IRAM or MRAM (which must work), then one
    that may end a little beyond it (a fault): DMA of every size, the size also taken from the
    top byte of the WRAM address register, and WRAM loads and stores of 1 to 8 bytes. The words
    and the indexes of the accesses that fit."""
    from aiopim.isa import Instruction, encode, signature_index
    from aiopim.isa import _tables as T

    _, iram_words, wram, _, _ = T.CHIPS[chip]
    ends = {"ldma": wram, "sdma": wram, "ldmai": iram_words * 8}

    def ins(signature: str, **values: int) -> int:
        return encode(Instruction.make(signature_index(signature), **values))

    def move(reg: int, value: int) -> int:
        return ins("or:rri", rc=reg, ra=24, imm=value & 0xFFFFFFFF)

    out: list[int] = []
    fits: list[int] = []
    n = rng.randint(1, 6)
    for i in range(n):
        beyond = i == n - 1 and rng.random() < 0.7
        step = rng.choice((1, 8, 16, 2048)) if beyond else 0
        if rng.random() < 0.6:  # DMA: WRAM/IRAM in ra, MRAM in rb
            op = rng.choice(tuple(ends))
            k = rng.randrange(256)
            top = rng.randrange(256) if rng.random() < 0.4 else 0
            nbytes = 8 * (1 + k)
            near = ends[op] if rng.random() < 0.5 else MRAM_SIZE
            # away from the end, in the upper half: an ldmai must not rewrite this code
            local = ends[op] - nbytes if near != MRAM_SIZE else ends[op] // 2 + 8 * k % 0x100
            remote = MRAM_SIZE - nbytes if near == MRAM_SIZE else rng.randrange(0, 0x10000, 8)
            if near == MRAM_SIZE:
                remote += step
            else:
                local += step
            out += [move(0, top << 24 | local & 0xFFFFFF), move(1, remote)]
            if not beyond:
                fits.append(len(out))
            out.append(ins(f"{op}:rri", ra=0, rb=1, immDma=(k - top) & 0xFF))
        else:  # a WRAM access ending at the end of WRAM
            size = rng.choice(tuple(_ACCESSES))
            signature = rng.choice(_ACCESSES[size])
            off = rng.choice((0, 0, 8, -8, 0x7FF8))
            address = wram - size + (rng.choice((size, 8)) if beyond else 0)
            out += [move(0, address - off), move(2, rng.getrandbits(32))]
            operands = {"endian": rng.randrange(2), "ra": 0, "off": off}
            if signature.startswith("s"):
                operands["db" if size == 8 else "rb"] = 2
            else:
                operands["dc" if size == 8 else "rc"] = 4
            if not beyond:
                fits.append(len(out))
            out.append(ins(signature, **operands))
    return out, fits


def _stop() -> int:
    from aiopim.isa import Instruction, encode, signature_index

    return encode(Instruction.make(signature_index("stop:ci"), cc=0, pc=0))


# ---- mutated examples ---------------------------------------------------------------------------
@cache
def _examples() -> list[tuple[str, str, bytes, int, int]]:
    """(name, chip, ELF, .text file offset, .text size) of every example variant."""
    from aiopim.elf import load_elf
    from aiopim.isa import assemble

    out = []
    for path in sorted(EXAMPLES.glob("*.S")):
        source = path.read_text()
        for chip in ("v1B", "v1A"):
            for tasklets in (1, 4, 16):
                text = source.replace(".set NR_TASKLETS,", f".set NR_TASKLETS, {tasklets} //", 1)
                elf = assemble(text, chip=chip, source=str(path))
                sec = next(s for s in load_elf(elf).sections() if s.name == ".text")
                out.append((f"{path.stem}/{tasklets}", chip, elf, sec.offset, sec.size))
    return out


def _mutate_case(key: str, rng: random.Random) -> Case:
    from aiopim.isa import FIELD_NAMES, decode, encode
    from aiopim.isa._codec import Instruction

    name, chip, elf, off, size = rng.choice(_examples())
    data = bytearray(elf)
    kind = rng.choices(("text-bits", "text-words", "file"), (4, 2, 3))[0]
    n = size // 8
    edits = []
    if kind == "text-bits":
        for _ in range(rng.randint(1, 8)):
            w = rng.randrange(n)
            bit = rng.randrange(48) if rng.random() < 0.95 else rng.randrange(64)
            data[off + 8 * w + bit // 8] ^= 1 << (bit % 8)
            edits.append(f"w{w}^b{bit}")
    elif kind == "text-words":
        for _ in range(rng.randint(1, 4)):
            w = rng.randrange(n)
            old = int.from_bytes(data[off + 8 * w : off + 8 * w + 8], "little")
            how = rng.randrange(4)
            if how == 0:
                new = _random_word(rng)
            elif how == 1:
                new = _valid_word(rng, n)
            elif how == 2:
                v = off + 8 * rng.randrange(n)
                new = int.from_bytes(data[v : v + 8], "little")
            else:  # the same instruction, another jump target or immediate
                ins = decode(old)
                new = old
                if ins is not None:
                    fields = list(ins.fields)
                    f = FIELD_NAMES.index(rng.choice(("pc", "imm", "off")))
                    fields[f] = rng.getrandbits(16)
                    try:
                        new = encode(Instruction(ins.sig, tuple(fields)))
                    except ValueError:  # EncodeError: not a field of this instruction
                        new = old
            data[off + 8 * w : off + 8 * w + 8] = new.to_bytes(8, "little")
            edits.append(f"w{w}={new:#x}")
    else:
        for _ in range(rng.choice((1, 1, 2, 3, 4, 8, 16))):
            r = rng.random()
            if r < 0.03 and len(data) > 1:
                del data[rng.randrange(len(data)) :]
                edits.append(f"truncated to {len(data)}")
                continue
            # the ELF header, the section headers at e_shoff, anywhere
            shoff = int.from_bytes(elf[0x20:0x24], "little")
            if r < 0.13:
                pos = rng.randrange(52)
            elif r < 0.33 and shoff < len(data):
                pos = rng.randrange(shoff, len(data))
            else:
                pos = rng.randrange(len(data)) if data else 0
            if pos >= len(data):
                continue
            how = rng.randrange(3)
            if how == 0:
                data[pos] ^= 1 << rng.randrange(8)
            else:
                data[pos] = rng.choice((0, 0xFF, rng.getrandbits(8)))
            edits.append(f"@{pos}={data[pos]:#x}")
    setup = _run_setup(rng)
    note = f"{name} {chip} {kind}: {' '.join(edits)}"
    return Case(key, chip, bytes(data), must_load=kind != "file", note=note, **setup)


# ================================================================================================
# running
# ================================================================================================
def _digest(data: Any) -> str:
    return hashlib.sha1(bytes(data)).hexdigest()[:16]


def _array_digest(runner: Any, name: str) -> str | None:
    import numpy as np

    value = getattr(runner, name, None)
    return None if value is None else _digest(np.ascontiguousarray(value, np.int64).tobytes())


def _mram_digest(dpu: Any) -> str:
    """The MRAM's non-zero pages (zero pages and unwritten ones read the same)."""
    h = hashlib.sha1()
    for index, page in sorted(dpu.mram.pages.items()):
        page = bytes(page)
        if page.count(0) != len(page):
            h.update(index.to_bytes(8, "little") + page)
    return h.hexdigest()[:16]


def _dpu_state(dpu: Any) -> dict[str, Any]:
    fault = dpu.fault
    if fault is not None:
        state = "guard" if "max_run_cycles" in fault.reason else "fault"
    else:
        state = "running" if dpu.running else "end"
    runner = dpu.runner
    out: dict[str, Any] = {"state": state}
    if fault is not None:
        out.update(
            reason=fault.reason, code=fault.code, tasklet=fault.tasklet, time_ps=fault.time_ps
        )
    out.update(
        run_ps=dpu.last_run_ps if state != "running" else None,
        cycles=getattr(runner, "cycles", None),
        instructions=getattr(runner, "instructions", None),
        wram=_digest(dpu.wram),
        regs=_array_digest(runner, "regs"),
        atomic=_array_digest(runner, "atomic"),
        mram=_mram_digest(dpu),
    )
    return out


def run_case(case: Case) -> dict[str, Any]:
    """Run ``case``; its record (what happened, and the state it left)."""
    import anyio

    import aiopim
    from aiopim import DpuError
    from aiopim._machine._program import MRAM_BIT, Symbol
    from aiopim.elf import load_elf
    from aiopim.isa import IsaRunner

    rec: dict[str, Any] = {
        "key": case.key,
        "note": case.note,
        "guard": case.guard,
        "must_load": case.must_load,
        "fits": case.fits,
    }
    phase = "load_elf"
    try:
        try:
            program = load_elf(case.elf, name=case.key)
        except DpuError as exc:
            return rec | {"outcome": "load_error", "phase": phase, "error": exc.code.name}
        IsaRunner.max_run_cycles = int(case.limit) if case.guard == "cycles" else None
        os.environ["AIOPIM_ISA_THREADS"] = str(case.workers)

        async def host() -> dict[str, Any]:
            nonlocal phase
            out: dict[str, Any] = {}
            phase = "alloc"
            dpus = await aiopim.DpuSet.alloc(case.nr_dpus)
            phase = "load"
            try:
                await dpus.load(program)
            except DpuError as exc:
                return {"outcome": "load_error", "phase": phase, "error": exc.code.name}
            phase = "mram"
            whole_mram = Symbol("mram", MRAM_BIT, MRAM_SIZE)
            for dpu, where, data in case.mram:
                target = dpus if dpu < 0 else dpus.dpus[dpu]
                await target.copy_to(whole_mram, data, offset=where)
            phase = "launch"
            launch: str | None = None
            if case.guard == "cycles":
                try:
                    await dpus.launch()
                except DpuError as exc:
                    launch = exc.code.name
            else:
                start = aiopim.now() * 1e12
                await dpus.launch(wait=False)
                for _ in range(10_000):  # the horizon counts from the boot
                    if all(d.boot_time > start for d in dpus.dpu_list):
                        break
                    await anyio.sleep(1e-6)
                await anyio.sleep(case.limit)
                if not any(d.running for d in dpus.dpu_list):
                    try:
                        await dpus.sync()
                    except DpuError as exc:
                        launch = exc.code.name
            phase = "state"
            out["outcome"] = "run"
            out["launch"] = launch
            out["dpus"] = [_dpu_state(d) for d in dpus.dpu_list]
            for d in dpus.dpu_list:
                # on trio, the emulation would otherwise go on after the host returns, until
                # every DPU stops: forever for a DPU that spins
                if d.running:
                    d.stop_in_fault("the fuzz host stopped watching", None, None)
            if program.log_buffer() is not None and out["dpus"][0]["state"] != "running":
                phase = "log"
                try:
                    out["log"] = _digest(dpus.dpus[0].log().encode())
                except DpuError as exc:
                    out["log"] = exc.code.name
            out["now_ps"] = round(aiopim.now() * 1e12)
            return out

        machine = aiopim.MachineConfig(chip=case.chip)
        return rec | aiopim.run(host, backend=case.backend, machine=machine)
    except Exception as exc:  # anything else is a finding: the parent fails on it
        tb = traceback.format_exception(exc)
        return rec | {
            "outcome": "exception",
            "phase": phase,
            "error": f"{type(exc).__name__}: {exc}"[:500],
            "traceback": "".join(tb[-6:])[-3000:],
        }


def engine_in_use() -> str:
    """The interpreter path runs started now use."""
    from aiopim.isa import _engine

    return str(_engine.engine_name())


# ================================================================================================
# command line
# ================================================================================================
def main(argv: list[str] | None = None) -> int:
    """Run the cases named on the command line; one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="GENERATOR:SEED:INDEX or GENERATOR:SEED:A-B")
    parser.add_argument("--engine", choices=sorted(ENGINE_ENV), help="interpreter path")
    parser.add_argument("--save", type=Path, help="write each case's ELF into this directory")
    parser.add_argument(
        "--watchdog",
        type=float,
        default=900.0,
        help="seconds a case may take before the worker dumps its stack and exits (a hang)",
    )
    args = parser.parse_args(argv)
    if args.engine:
        os.environ.update(ENGINE_ENV[args.engine])
    faulthandler.enable()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    keys = [k for spec in args.cases for k in parse_keys(spec)]
    out = sys.stdout
    print(json.dumps({"engine": engine_in_use()}), file=out, flush=True)
    for key in keys:
        print(json.dumps({"start": key}), file=out, flush=True)
        case = make_case(key)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / (key.replace(":", "_") + ".dpu")).write_bytes(case.elf)
        cpu = time.process_time()
        faulthandler.dump_traceback_later(args.watchdog, exit=True)
        rec = run_case(case)
        faulthandler.cancel_dump_traceback_later()
        rec["cpu_ms"] = round((time.process_time() - cpu) * 1000)
        print(json.dumps(rec), file=out, flush=True)
    print(json.dumps({"done": len(keys)}), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
