"""The numba-compiled loop and the pure-Python loop are the same code: same results.

Random programs of random legal instructions (any signature, random operands) run on both
versions from the same random state; registers, flags, PCs, thread states, WRAM, atomic bits,
counters and the stop reason must be identical. The compiled loop is built once per session
(and cached on disk by numba).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=programs(),
    seed=st.integers(0, 2**32 - 1),
    small=st.booleans(),
)
def test_compiled_and_python_loops_agree(words: list[int], seed: int, small: bool) -> None:
    asm = Asm()
    for w in words:
        asm.raw(w)
    rng = np.random.default_rng(seed)
    machines = [Machine(asm, threads=16, jit=jit) for jit in (False, True)]
    # small register values make loads, stores and boots succeed more often
    high = 1 << 8 if small else 1 << 32
    regs = rng.integers(0, high, size=(16, 24), dtype=np.int64)
    wram = rng.integers(0, 256, size=65536, dtype=np.uint8)
    for m in machines:
        m.regs[:, :24] = regs
        m.wram[:] = wram
        m.th[0, 3] = seed & 1
        m.th[0, 4] = (seed >> 1) & 1
    reasons = [m.run(cycles=4000, steps=300) for m in machines]
    assert reasons[0] == reasons[1]
    for a, b in zip(_state(machines[0]), _state(machines[1]), strict=True):
        assert np.array_equal(a, b)


def test_a_changed_loop_source_drops_the_cached_machine_code(tmp_path: Path) -> None:
    """The batch and the loop compile ``_interp.py`` and ``_specialize.py`` into themselves:
    when the sources' hash differs from the cache's marker, both modules' cached code goes."""
    from aiopim.isa import _jitptr

    stale = [
        tmp_path / "_jitptr.run_dpus_at-164.py311.nbi",
        tmp_path / "_interp.run-597.py311.1.nbc",
    ]
    other = tmp_path / "_other.f-1.py311.nbi"
    for f in [*stale, other]:
        f.write_bytes(b"old")
    marker = tmp_path / "_jitptr.sources-sha256"
    marker.write_text("a hash of older sources")
    _jitptr._drop_stale_cache(tmp_path)
    assert [f.exists() for f in stale] == [False, False]
    assert other.exists()
    stamp = marker.read_text()
    assert len(stamp) == 64 and stamp != "a hash of older sources"
    # the same sources again: the cache stays
    stale[0].write_bytes(b"new")
    _jitptr._drop_stale_cache(tmp_path)
    assert stale[0].exists() and marker.read_text() == stamp
