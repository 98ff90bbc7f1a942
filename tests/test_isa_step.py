"""A program's own compiled fast step (``aiopim/isa/_specialize.py``) issues exactly what the
generic fast step (``_interp.thread_slots``) issues: instruction by instruction from random
states, inside windows, under speculation, across an ``ldmai`` that rewrites its rows, and on
the key-sum example. Compiling a step takes seconds the first time on a machine (then numba's
disk cache has it), so the programs here are few and fixed."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest
import test_isa_windows as W
from hypothesis import given, settings
from hypothesis import strategies as st
from isa_programs import Machine
from test_isa_run import Run, ldmai_overlay_program
from test_isa_speculation import PROGRAM as SPECULATION_PROGRAM
from test_isa_speculation import _run as speculation_run

import aiopim
from aiopim.isa import _interp as I
from aiopim.isa import _runner, _specialize, assemble, assemble_program, text_words
from aiopim.isa._codec import decode_program
from aiopim.isa._semantics import compile_program

ROOT = Path(__file__).resolve().parent.parent

#: every fast kind and jump, their breaks (a load out of WRAM or misaligned, an acquire of a
#: free bit, rows the fast step does not run) and PCs out of the program
ALL_FAST_FORMS = """
L0:     add r0, r1, r2
        sub r3, r4, r9
        addc r5, r5, r6
        subc r7, r8, r9
        and r10, r11, 0xff0
        or r12, r13, r14
        xor r15, r16, r17
        lsl r18, r19, r20
        lsr r1, r2, 3
        lsr r2, r3, r21
        add r4, r4, 1, z, L0
        sub r5, r6, r7, nz, L2
        jltu r1, r2, L0
        jgeu r3, 100, L2
        jz r4, L3
        jnz r5, L2
        jeq r6, r7, L3
        lw r6, r7, 16
        ld d8, r10, 8
        call r23, L2
L2:     jump r23
        acquire zero, 5, nz, L2
        move r11, 12
        add r9, r9, -1, nz, L0
L3:     sw zero, 0, r1
        lbu r2, r3, 1
        lsl r0, r0, 1
        jump r22
"""


#: short loops whose straight runs the step runs inline (``_specialize._fused``), with loads
#: and an acquire that may stop it in the middle of a run, and jumps into the middle of one
FUSED_RUNS = """
L0:     lw r6, r7, 16
        add r1, r1, r6
        ld d8, r10, 8
        acquire zero, 5, z, .+1
        addc r2, r2, r9
L1:     xor r3, r3, r1
        jltu r3, r4, L0
        lsl r5, r5, 1
        acquire zero, 6, nz, L1
        lw r11, r12, 4
        sub r13, r13, r5
        add r14, r14, 1, nz, L1
        call r23, L0
"""


def _code(text: str) -> np.ndarray:
    words = text_words(assemble_program(text).elf)
    return compile_program(decode_program(np.array(words, np.uint64)))


I.jit_dispatcher()  # registers thread_slots and call_step with numba


@numba.njit
def _generic(
    code: Any, regs: Any, th: Any, wram: Any, atomic: Any, t: int, cs: int, fe: int, per: int
) -> Any:
    return I.thread_slots(code, regs, th, wram, atomic, t, cs, fe, per)


@numba.njit
def _specialized(
    step: int,
    regs: Any,
    th: Any,
    wram: Any,
    atomic: Any,
    dv: Any,
    t: int,
    cs: int,
    fe: int,
    per: int,
) -> Any:
    n = I.call_step(step, regs, wram, atomic, th, dv, t, cs, fe, per)
    return dv[I.D_STEP_OUT], n, dv[I.D_STEP_OUT + 1]


@pytest.fixture(scope="module", params=["all forms", "fused runs"])
def program_step(request: pytest.FixtureRequest) -> tuple[np.ndarray, int]:
    code = _code({"all forms": ALL_FAST_FORMS, "fused runs": FUSED_RUNS}[request.param])
    return code, _specialize.step_address(code)


def test_straight_runs_of_short_loops_are_fused() -> None:
    """The step of FUSED_RUNS runs each straight run of its loops in one branch, from the run's
    first row to its jump, or to the next jump target, and, when that jump is taken to the
    first row of another run, that run too; other rows have a branch of their own."""
    source = _specialize.step_source(_code(FUSED_RUNS))
    assert source is not None
    # row -> its branch (the dispatch's tests, not the deeper ones before an inlined run)
    branches: dict[int, str] = {}
    row = -1
    for line in source.splitlines():
        if match := re.match(r" {8}(?:el)?if pc == (\d+):", line):
            row = int(match.group(1))
            branches[row] = ""
        elif row >= 0:
            branches[row] += line + "\n"
    runs = {pc: [int(x.split()[0]) for x in b.split("lastpc = ")[1:]] for pc, b in branches.items()}
    fused = {0: [0, 1, 2, 3, 4], 5: [5, 6, 0, 1, 2, 3, 4], 7: [7, 8, 5, 6], 9: [9, 10, 11, 5, 6]}
    assert runs == {pc: fused.get(pc, [pc]) for pc in range(13)}
    assert branches[0].count("if cs >= fe:") == 4
    assert branches[5].count("if cs >= fe:") == 1 + 1 + 4


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    t=st.integers(0, 3),
    pc=st.integers(-2, 30),
    slots=st.integers(0, 300),
    per=st.sampled_from([1, 11, 16]),
)
def test_compiled_step_issues_what_thread_slots_issues(
    program_step: tuple[np.ndarray, int], seed: int, t: int, pc: int, slots: int, per: int
) -> None:
    code, step = program_step
    assert step != 0
    rng = np.random.default_rng(seed)
    regs = np.zeros((4, 32), np.int64)
    small = 8 * rng.integers(0, 4096, size=(4, 24))  # aligned WRAM addresses
    wide = rng.integers(0, 1 << 32, size=(4, 24))
    regs[:, :24] = np.where(rng.integers(0, 3, size=(4, 24)) == 0, wide, small)
    regs[:, 24:] = I.fresh_state(4, 0, 0)[0][:, 24:]
    th = np.zeros((4, I.NTH), np.int64)
    th[:, I.T_PC] = pc
    th[:, I.T_ZF] = rng.integers(0, 2, size=4)
    th[:, I.T_CF] = rng.integers(0, 2, size=4)
    wram = rng.integers(0, 256, size=65536, dtype=np.uint8)
    atomic = rng.integers(0, 2, size=256).astype(np.uint8)
    cs = int(rng.integers(0, 1000))
    fe = cs + slots * per
    states = [(regs.copy(), th.copy()) for _ in range(2)]
    dv = np.zeros(I.ND, np.int64)
    got = _specialized(step, states[1][0], states[1][1], wram, atomic, dv, t, cs, fe, per)
    want = _generic(code, states[0][0], states[0][1], wram, atomic, t, cs, fe, per)
    assert tuple(int(v) for v in got) == tuple(int(v) for v in want)
    assert np.array_equal(states[0][0], states[1][0])
    assert np.array_equal(states[0][1], states[1][1])


@pytest.mark.parametrize("program", ["spin", "compute16"])
def test_windows_with_the_compiled_step(program: str) -> None:
    text = {"spin": W.SPIN_LOCK, "compute16": W.COMPUTE.format(last=15)}[program]
    asm = W._program(text)
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
    windowed.dv[I.D_STEP] = _specialize.step_address(windowed.code)
    assert windowed.dv[I.D_STEP] != 0
    assert W._compare(windowed, stepped, 1 << 40, 200_000, 4000) == I.R_END


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_speculation_with_the_compiled_step(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = aiopim.load_elf(assemble(SPECULATION_PROGRAM, "v1B"), name="speculation")
    iterations = [[150, 20, 450, 60], [1 << 20] * 4]
    _runner.set_jit(True)
    try:
        monkeypatch.setenv("AIOPIM_ISA_STEP", "0")
        generic, _ = speculation_run(binary, iterations, backend, speculate=True)
        monkeypatch.setenv("AIOPIM_ISA_STEP", "1")
        specialized, _ = speculation_run(binary, iterations, backend, speculate=True)
    finally:
        _runner.set_jit(None)
    assert _runner.decoded_binary(binary).step  # it ran with its own step
    assert specialized == generic
    assert generic["counts"][:4] == [[n] * 4 for n in iterations[0]]


def test_an_ldmai_over_compiled_rows_drops_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The overlay rewrites rows the program's step was compiled from: the DPU must run the
    new rows (77), not the step's copy of the old ones (11)."""
    prog = ldmai_overlay_program(77, before=11)
    monkeypatch.setenv("AIOPIM_ISA_STEP", "1")
    _runner.set_jit(True)
    try:
        r = Run(prog, "trio", {"out": (np.uint32, 1)})
    finally:
        _runner.set_jit(None)
    assert _runner.decoded_binary(prog).step
    assert r.fault is None and int(r.values["out"][0]) == 77


def test_the_step_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A binary gets its step at once when it is compiled already, else after a rank's worth of
    starts; ``AIOPIM_ISA_STEP=0`` never gives one."""
    # a machine where this step was never compiled: an empty step cache, in and out of process
    monkeypatch.setenv("AIOPIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_specialize, "_STEPS", {})

    def binary() -> _runner.DecodedBinary:
        return _runner.decoded_binary(aiopim.load_elf(assemble(SPECULATION_PROGRAM, "v1B")))

    first = binary()
    monkeypatch.setenv("AIOPIM_ISA_STEP", "0")
    assert _runner.compiled_step(first) == 0 and first.starts == 0
    monkeypatch.setenv("AIOPIM_ISA_STEP", "auto")
    got = [_runner.compiled_step(first) for _ in range(_runner.STEP_AFTER_STARTS)]
    assert got[:-1] == [0] * (_runner.STEP_AFTER_STARTS - 1)
    assert got[-1] == first.step == _specialize.step_address(first.code) != 0
    # compiled in this process: the next binary of the same code has it at its first start
    assert _runner.compiled_step(binary()) == first.step
    # compiled into numba's cache by an earlier process: loaded at the first start
    monkeypatch.setattr(_specialize, "_STEPS", {})
    again = binary()
    assert _runner.compiled_step(again) != 0 and again.starts == 1
    # ... of that cache directory only: another one would have to compile it
    monkeypatch.setattr(_specialize, "_STEPS", {})
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(tmp_path / "elsewhere"))
    assert _runner.compiled_step(binary()) == 0
    # a program with more fast rows than a step holds, and no loop, keeps the generic one
    big = "\n".join(f"add r{i % 20}, r{i % 7}, {i}" for i in range(_specialize.MAX_ROWS + 1))
    assert _specialize.step_source(_code(big + "\n")) is None


def _straight(n: int, seed: int) -> str:
    lines = (f"        xor r{6 + (i + seed) % 10}, r{6 + i % 9}, {i + seed}\n" for i in range(n))
    return "".join(lines)


#: more fast rows than a step holds: an outer loop too long for it around an inner loop
LARGE = (
    """
        jeq id, 15, go
        boot id, 1
go:     move r1, 0
outer:
"""
    + _straight(70, 1)
    + """        move r2, 0
inner:  add r3, r3, r2
        xor r4, r4, r3
        lsl r5, r4, 1
        add r2, r2, 1
        jltu r2, 40, inner
"""
    + _straight(70, 2)
    + """        add r1, r1, 1
        jltu r1, 3, outer
        sw id4, 0, r5
        stop
"""
)


def test_a_loop_closed_by_a_jump_is_a_loop() -> None:
    text = "top:\n" + _straight(4, 0) + "        jump top\n" + _straight(_specialize.MAX_ROWS, 3)
    assert _specialize.step_rows(_code(text)) == [0, 1, 2, 3, 4]


def test_a_large_program_holds_its_loops_and_runs_the_rest_generically() -> None:
    asm = W._program(LARGE)
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    code = windowed.code
    fast = [pc for pc in range(len(code)) if code[pc, I.C_FW0] != 0]
    assert len(fast) > _specialize.MAX_ROWS
    inner = list(range(74, 79))  # add r3 ... jltu r2, 40, inner
    assert _specialize.step_rows(code) == inner
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
    windowed.dv[I.D_STEP] = _specialize.step_address(code)
    assert windowed.dv[I.D_STEP] != 0
    assert W._compare(windowed, stepped, 1 << 40, 400_000, 4000) == I.R_END
    outer = 70 + 1 + 5 * 40 + 70 + 2
    assert int(windowed.dv[I.D_INSTR]) == 16 * (3 + 3 * outer + 2) - 1  # the last boots none


def _keysum(monkeypatch: pytest.MonkeyPatch, mode: str) -> dict[str, Any]:
    path = ROOT / "examples" / "wram_fifo_keysum.py"
    spec = importlib.util.spec_from_file_location("wram_fifo_keysum_step", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)
    monkeypatch.setenv("AIOPIM_ISA_STEP", mode)
    seen: dict[str, Any] = {}

    async def main() -> None:
        seen.update(await example.host(1, 0, 16, "all", 0, kernel="isa"))
        runners = [d.runner for d in aiopim.current_emulator().rank(0).dpus]
        seen["steps"] = {int(r.dv[I.D_STEP]) for r in runners if isinstance(r, _runner.IsaRunner)}

    _runner.set_jit(True)
    try:
        aiopim.run(main, backend="trio")
    finally:
        _runner.set_jit(None)
    return seen


def test_the_keysum_runs_the_same_with_its_compiled_step(monkeypatch: pytest.MonkeyPatch) -> None:
    generic = _keysum(monkeypatch, "0")
    auto = _keysum(monkeypatch, "auto")
    assert generic.pop("steps") == {0}
    steps = auto.pop("steps")
    assert len(steps) == 1 and 0 not in steps  # all 64 DPUs, the first 63 too
    assert auto == generic
    assert generic["complete"] and not generic["wrong"]
