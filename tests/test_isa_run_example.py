"""The example program, assembled, loaded and run instruction by instruction with the
per-instruction semantics and a minimal round-robin scheduler written here (boot, stop,
acquire, release, sdma): the bootstrap, the boot chain, the stack table and main work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from isa_reference import (
    COND_NAME,
    EV_EXTERNAL,
    EV_FAULT,
    EV_ILLEGAL,
    EV_MEMORY_FAULT,
    EV_OK,
    EV_STEP_LIMIT,
    EV_THREAD_FAULT,
    EV_UNIMPLEMENTED,
    condition,
    execute,
    new_state,
    run_threads,
)

from aiopim._machine._dpulog import decode_log
from aiopim.elf import load_elf
from aiopim.isa import FIELD_NAMES, assemble, decode_program, text_words
from aiopim.isa import _tables as T

HELLO = Path(__file__).resolve().parent.parent / "examples" / "isa" / "hello.S"
F = {name: i for i, name in enumerate(FIELD_NAMES)}
M32 = 0xFFFFFFFF


def _reg(regs: np.ndarray, tid: int, code: int) -> int:
    consts = {24: 0, 25: 1, 26: M32, 27: 0x80000000}
    if code < 24:
        return int(regs[tid, code])
    return consts[code] if code in consts else tid << (code - 28)


def run_program(elf: bytes, max_steps: int = 20000) -> tuple[np.ndarray, bytearray, int]:
    """Run until every thread stopped; returns (WRAM, MRAM prefix, steps)."""
    prog = load_elf(elf)
    words = text_words(elf)
    dec = decode_program(np.array(words, np.uint64))
    threads = 16
    regs, pcs, zf, cf, wram = new_state(threads, 63488)
    mram = bytearray(1 << 21)
    for image in prog.images():
        if image.address & 0x80000000:
            continue
        if image.address & 0x08000000:
            off = image.address & ~0x08000000
            mram[off : off + len(image.data)] = bytes(image.data)
        else:
            wram[image.address : image.address + len(image.data)] = np.frombuffer(
                bytes(image.data), np.uint8
            )
    running = [False] * threads
    running[0] = True  # the launch starts thread 0 at PC 0
    atomic = [0] * 256
    steps = 0
    while any(running):
        for t in range(threads):
            if not running[t]:
                continue
            steps += 1
            assert steps < max_steps, "the program does not terminate"
            pc = int(pcs[t])
            sig, v = int(dec.sig[pc]), dec.values[pc]
            assert sig >= 0 and dec.status[pc] == 0
            ev = execute(sig, v, t, regs, pcs, zf, cf, wram)
            if ev == EV_OK:
                continue
            assert ev == EV_EXTERNAL
            op = T.MNEMONICS[T.SIG_FAMILY[sig]]
            cmap = next((o[8] for o in T.SIG_OPERANDS[sig] if o[1] == T.KIND_COND), -1)

            def jump(x: int, t: int = t, pc: int = pc, v: np.ndarray = v, cmap: int = cmap) -> None:
                name = int(COND_NAME[cmap, int(v[F["cc"]])]) if cmap >= 0 else -1
                src = _reg(regs, t, int(v[F["ra"]]))
                taken = name >= 0 and condition(name, x, src, int(zf[t]), 0, 0, 0, 0)
                pcs[t] = int(v[F["pc"]]) if taken else pc + 1

            if op in ("boot", "acquire", "release"):
                a = (_reg(regs, t, int(v[F["ra"]])) + int(v[F["imm"]])) & 0xFFFF
                index = ((a >> 8) ^ a) & 0xFF
                if op == "boot":
                    x = 1 if running[index] else 0
                    if not x:
                        running[index], pcs[index] = True, 0
                else:
                    x = atomic[index]
                    atomic[index] = 1 if op == "acquire" else 0
                jump(x)
                zf[t] = 1 if x == 0 else 0
            elif op == "stop":
                jump(1)
                running[t] = False
            elif op == "sdma":
                ra = _reg(regs, t, int(v[F["ra"]]))
                rb = _reg(regs, t, int(v[F["rb"]]))
                n = 8 * (1 + ((int(v[F["immDma"]]) + (ra >> 24)) & 0xFF))
                w, m = ra & 0x00FFFFF8, rb & 0xFFFFFFF8
                mram[m : m + n] = bytes(wram[w : w + n])
                pcs[t] = pc + 1
            else:
                raise AssertionError(f"unexpected {op}")
    return wram, mram, steps


def test_hello_runs_on_the_instruction_semantics() -> None:
    elf = assemble(HELLO.read_text(), "v1B")
    prog = load_elf(elf)
    wram, mram, steps = run_program(elf)
    counter = prog.symbol("counter").address
    assert int(wram[counter : counter + 4].view(np.uint32)[0]) == 1 + 2 + 3 + 4
    message = prog.symbol("message").address & ~0x08000000
    assert bytes(mram[message : message + 16]) == b"hello, world!\n\0\0"
    # each tasklet's frame was on its own stack: the return address it saved is the
    # instruction after `call r23, main` (the stop), at the base of its stack
    stop_pc = (prog.symbol("__sys_end").address - 0x80000000) // 8
    for i in range(4):
        base = prog.symbol(f"__sys_stack_thread_{i}").address
        assert int(wram[base : base + 4].view(np.uint32)[0]) == stop_pc
    assert 100 < steps < 2000


def test_hello_runs_on_execute_and_execute_system() -> None:
    """The same run with the package's own system-instruction semantics: the scheduler left
    to write is the loop below (plus, later, virtual time)."""
    from isa_reference import execute_system

    elf = assemble(HELLO.read_text(), "v1A")
    prog = load_elf(elf)
    dec = decode_program(np.array(text_words(elf), np.uint64))
    regs, pcs, zf, cf, wram = new_state(24, 65536)
    mram = np.zeros(1 << 21, np.uint8)
    for image in prog.images():
        if not image.address & 0x80000000 and not image.address & 0x08000000:
            wram[image.address : image.address + len(image.data)] = np.frombuffer(
                bytes(image.data), np.uint8
            )
    atomic = np.zeros(256, np.uint8)
    running = np.zeros(24, np.uint8)
    running[0] = 1
    counter = np.zeros(2, np.int64)
    steps = 0
    while running.any():
        for t in np.nonzero(running)[0].tolist():
            pc = int(pcs[t])
            sig, row = int(dec.sig[pc]), dec.values[pc]
            ev = execute(sig, row, t, regs, pcs, zf, cf, wram)
            if ev == EV_EXTERNAL:
                ev = execute_system(
                    sig, row, t, regs, pcs, zf, wram, mram, atomic, running, counter
                )
            assert ev == EV_OK
            steps += 1
            counter[0] += 1
        assert steps < 20000
    counter_addr = prog.symbol("counter").address
    assert int(wram[counter_addr : counter_addr + 4].view(np.uint32)[0]) == 10
    message = prog.symbol("message").address & ~0x08000000
    assert bytes(mram[message : message + 14]) == b"hello, world!\n"
    assert atomic.sum() == 0  # the mutex was released


def _load(elf: bytes, threads: int) -> tuple[Any, ...]:
    prog = load_elf(elf)
    dec = decode_program(np.array(text_words(elf), np.uint64))
    regs, pcs, zf, cf, wram = new_state(threads, 65536)
    mram = np.zeros(1 << 21, np.uint8)
    for image in prog.images():
        if not image.address & 0x80000000 and not image.address & 0x08000000:
            data = np.frombuffer(bytes(image.data), np.uint8)
            wram[image.address : image.address + len(data)] = data
    running = np.zeros(threads, np.uint8)
    running[0] = 1
    state = (regs, pcs, zf, cf, wram, mram, np.zeros(256, np.uint8), running)
    return prog, (dec.sig, dec.status, dec.values, *state, np.zeros(2, np.int64))


def test_run_threads_runs_the_example() -> None:
    prog, args = _load(assemble(HELLO.read_text(), "v1B"), 16)
    event, thread, steps = run_threads(*args, 100_000)
    assert (event, thread) == (EV_OK, -1) and steps == int(args[-1][0]) > 100
    wram, mram = args[7], args[8]
    counter = prog.symbol("counter").address
    assert int(wram[counter : counter + 4].view(np.uint32)[0]) == 10
    message = prog.symbol("message").address & ~0x08000000
    assert bytes(mram[message : message + 14]) == b"hello, world!\n"
    # the printf-like log: four encoded messages flushed by DMA to __stdout_buffer
    state = prog.symbol("__stdout_buffer_state").address
    write_ptr, wrapped = (int(x) for x in wram[state : state + 8].view(np.uint32))
    assert (write_ptr, wrapped) == (4 * 40, 0)
    log_at = prog.symbol("__stdout_buffer").address & ~0x08000000
    lines = decode_log(bytes(mram[log_at : log_at + write_ptr])).splitlines()
    assert sorted(lines) == [f"hello from tasklet {t}" for t in range(4)]


@pytest.mark.parametrize(
    ("body", "event", "thread"),
    [
        ("jnz id, later\n boot id, 1\n fault 7\nlater: stop", EV_FAULT, 0),
        ("jnz id, later\n boot id, 1\n stop\nlater: lw r0, zero, 2", EV_MEMORY_FAULT, 1),
        ("loop: jump loop", EV_STEP_LIMIT, 0),
        ("jump 50", EV_ILLEGAL, 0),
        ("hash r0, r1, r2", EV_UNIMPLEMENTED, 0),
        ("boot id, 20", EV_THREAD_FAULT, 0),
    ],
)
def test_run_threads_stops_on_the_first_event(body: str, event: int, thread: int) -> None:
    _prog, args = _load(assemble(body), 16)
    got, tid, _steps = run_threads(*args, 1000)
    assert (got, tid) == (event, thread)


def test_keysum_kernel_runs_on_the_reference() -> None:
    """examples/isa/keysum.S (the key-sum DPU program in assembly: FIFO loop, 16 threads,
    barrier with stop/resume, DMA, 64-bit sums, reduction) on a FIFO filled beforehand."""
    path = HELLO.parent / "keysum.S"
    prog, args = _load(assemble(path.read_text(), "v1B"), 16)
    wram, mram = args[7], args[8]
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 64, 4096).astype(np.uint32)
    values = rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)
    for name, array in (("keys", keys), ("values", values)):
        off = prog.symbol(name).address & ~0x08000000
        mram[off : off + array.nbytes] = array.view(np.uint8)

    def at(name: str) -> int:
        return int(prog.symbol(name).address)

    pushed = [3, 7, 63, 0, 3, 41]
    for i, key in enumerate(pushed):
        slot = at("__input_fifo_data") + 8 * i
        wram[slot : slot + 8] = np.array([key, 0], np.uint32).view(np.uint8)
    wram[at("input_fifo") + 8 : at("input_fifo") + 16] = np.array([len(pushed)], np.uint64).view(
        np.uint8
    )
    wram[at("active") : at("active") + 8] = 0  # the host has stopped the loop: drain and return
    event, _thread, _steps = run_threads(*args, 5_000_000)
    assert event == EV_OK
    u64 = lambda a: int(wram[a : a + 8].view(np.uint64)[0])  # noqa: E731
    assert u64(at("input_fifo")) == len(pushed)  # every input popped
    assert u64(at("output_fifo") + 8) == len(pushed)  # one output per input
    out = wram[at("__output_fifo_data") :][: 16 * len(pushed)].view(np.uint64).reshape(-1, 2)
    expected = [[k, int(values[keys == k].astype(np.uint64).sum())] for k in pushed]
    assert out.tolist() == expected
