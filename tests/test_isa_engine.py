"""The compiled engine and the same source run as plain Python are the same code.

Random programs of random legal instructions (any signature, random operands) run on both
paths from the same random state; registers, flags, PCs, thread states, WRAM, atomic bits,
counters and the stop reason must be identical. Also: the generated ``_interp.pxd`` matches the
constants, runs cut into chunks equal one run, the engine is chosen as documented, and
transfers into MRAM never written are served inside the loop after the first.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isa_programs import Asm, Machine, random_instruction

from aiopim.isa import _tables as T
from aiopim.isa._codec import Instruction, encode

#: every signature but hash (unimplemented: it only faults)
SIGS = [s for s in range(len(T.SIG_KEYWORD)) if T.SIG_KEYWORD[s].split(".")[0] != "hash"]


@st.composite
def instruction_words(draw: st.DrawFn, length: int = 24) -> int:
    return random_instruction(draw, draw(st.sampled_from(SIGS)), length)


@st.composite
def programs(draw: st.DrawFn) -> list[int]:
    """1-40 random instructions, then a stop."""
    n = draw(st.integers(1, 40))
    words = [draw(instruction_words(n)) for _ in range(n)]
    return [*words, encode(Instruction.make("stop:ci", cc=0, pc=0))]


def _state(m: Machine) -> list[np.ndarray]:
    return [m.regs, m.th, m.dv, m.atomic, m.wram, m.dma]


def _twins(
    words: list[int], seed: int, small: bool, jits: tuple[bool, bool] = (True, True)
) -> list[Machine]:
    """Two machines (compiled: ``jit``) holding ``words``, in the same random state."""
    asm = Asm()
    for w in words:
        asm.raw(w)
    rng = np.random.default_rng(seed)
    machines = [Machine(asm, threads=16, jit=jit) for jit in jits]
    # small register values make loads, stores and boots succeed more often
    high = 1 << 8 if small else 1 << 32
    regs = rng.integers(0, high, size=(16, 24), dtype=np.int64)
    wram = rng.integers(0, 256, size=65536, dtype=np.uint8)
    for m in machines:
        m.regs[:, :24] = regs
        m.wram[:] = wram
        m.th[0, 3] = seed & 1
        m.th[0, 4] = (seed >> 1) & 1
    return machines


def _assert_same(machines: list[Machine]) -> None:
    for a, b in zip(_state(machines[0]), _state(machines[1]), strict=True):
        assert np.array_equal(a, b)


def _loops_agree(words: list[int], seed: int, small: bool) -> None:
    machines = _twins(words, seed, small, jits=(False, True))
    reasons = [m.run(cycles=4000, steps=300) for m in machines]
    assert reasons[0] == reasons[1]
    _assert_same(machines)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=programs(), seed=st.integers(0, 2**32 - 1), small=st.booleans())
def test_compiled_and_python_loops_agree(words: list[int], seed: int, small: bool) -> None:
    _loops_agree(words, seed, small)


@pytest.mark.long
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=programs(), seed=st.integers(0, 2**32 - 1), small=st.booleans())
def test_compiled_and_python_loops_agree_long(words: list[int], seed: int, small: bool) -> None:
    _loops_agree(words, seed, small)


def test_the_pxd_declares_the_constants_values() -> None:
    """``_interp.pxd`` is what ``python -m aiopim.isa._pxd`` writes for today's constants."""
    from aiopim.isa import _pxd

    assert _pxd.TARGET.read_text() == _pxd.render(), "run: python -m aiopim.isa._pxd"


def test_the_compiled_engine_is_built() -> None:
    """The package's build compiled the engine (the README's install does)."""
    from aiopim.isa import _engine, _interp

    assert _engine.compiled_available()
    assert _interp.__file__.endswith(".so")
    assert _engine.engine("python").compiled is False


def test_the_engine_is_chosen_by_environment_and_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiopim.isa import _engine, set_engine

    monkeypatch.setenv("AIOPIM_ISA_ENGINE", "python")
    assert _engine.engine_name() == "python"
    monkeypatch.setenv("AIOPIM_ISA_ENGINE", "compiled")
    assert _engine.engine_name() == "compiled"
    set_engine("python")
    try:
        assert _engine.engine_name() == "python"
    finally:
        set_engine(None)
    monkeypatch.setenv("AIOPIM_ISA_ENGINE", "numba")
    with pytest.raises(ValueError, match="AIOPIM_ISA_ENGINE='numba' is not an engine"):
        _engine.engine_name()
    with pytest.raises(ValueError, match="unknown engine 'jit'"):
        set_engine("jit")


def test_a_missing_extension_falls_back_to_python_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aiopim.isa import _engine

    monkeypatch.setattr(_engine, "compiled_available", lambda: False)
    monkeypatch.setattr(_engine, "_told", False)
    monkeypatch.delenv("AIOPIM_ISA_ENGINE", raising=False)
    assert _engine.engine_name() == "python"
    assert _engine.engine_name() == "python"
    err = capsys.readouterr().err
    assert err.count("compiled instruction-set engine is not built") == 1
    assert "pip install -e" in err


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=programs(), seed=st.integers(0, 2**32 - 1), chunk=st.integers(1, 40))
def test_a_run_cut_into_chunks_is_one_run(words: list[int], seed: int, chunk: int) -> None:
    """Stopping at an instruction bound and going on issues exactly what one run issues."""
    machines = _twins(words, seed, small=True)
    whole = machines[0].run(cycles=4000, steps=300)
    done = 0
    while True:
        reason = machines[1].run(cycles=4000, steps=min(chunk, 300 - done))
        done = int(machines[1].dv[machines[1].I.D_INSTR])
        if reason != machines[1].I.R_STEP or done >= 300:
            break
    assert reason == whole
    _assert_same(machines)


ZERO_STORES = """
        .text
        .globl main
main:
        move r0, 0
        move r1, 0
        move r2, 512
loop:
        sdma r0, r1, 0
        add r1, r1, 8
        add r2, r2, -1, nz, loop
        stop
"""


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_zeros_stored_into_mram_never_written_are_served_in_the_loop(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``sdma`` of zeros into MRAM never written makes the page private: Python serves the
    first transfer into it, the loop every later one (512 transfers, one page)."""
    import aiopim
    from aiopim.elf import load_elf
    from aiopim.isa import _runner, assemble_program, set_engine

    served: list[int] = []
    python_dma = _runner.IsaScheduler.python_dma

    def counting(self: _runner.IsaScheduler, r: _runner.IsaRunner) -> None:
        served.append(r.dpu.index)
        python_dma(self, r)

    monkeypatch.setattr(_runner.IsaScheduler, "python_dma", counting)
    program = load_elf(assemble_program(ZERO_STORES).elf)

    async def main() -> int:
        dpus = await aiopim.DpuSet.alloc(nr_dpus=4)
        await dpus.load(program)
        await dpus.launch()
        runner = dpus.dpu_list[0].runner
        assert isinstance(runner, _runner.IsaRunner)
        assert runner.dma_requests == 512
        return int(runner.dpu.mram.resident_bytes)

    set_engine(engine)
    try:
        resident = aiopim.run(main)
    finally:
        set_engine(None)
    assert resident == 1 << 16  # the page was made private
    assert len(served) == 4  # one per DPU: its first transfer into the page


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=programs(), seed=st.integers(0, 2**32 - 1), small=st.booleans())
def test_fast_rows_issue_what_the_general_path_issues(
    words: list[int], seed: int, small: bool
) -> None:
    """The one shortcut of the loop (rows of a fast kind issued from their packed words)
    changes nothing: the same random programs with it off and on."""
    from aiopim.isa import _interp

    machines = _twins(words, seed, small)
    reasons = []
    for fast, m in zip((False, True), machines, strict=True):
        _interp.set_fast_rows(fast)
        try:
            reasons.append(m.run(cycles=4000, steps=300))
        finally:
            _interp.set_fast_rows(True)
    assert reasons[0] == reasons[1]
    _assert_same(machines)
