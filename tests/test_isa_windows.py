"""Thread-major windows of the interpreter loop issue exactly what cycle-by-cycle issue does.

The loop runs the ready threads of a DPU one after the other inside a window (see
``aiopim/isa/_interp.py``). A run with at most one instruction per call never opens a window,
so it is the cycle-by-cycle reference: from the same random state, random programs (mostly
the instructions windows run, plus stores, atomics, thread control, faults) on 1-16 ready
threads must leave identical registers, flags, PCs, thread states, issue times, WRAM, atomic
bits, counters and stop reason after the same number of instructions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from isa_programs import Asm, Machine, random_instruction

from aiopim.isa import _interp as I
from aiopim.isa import _tables as T
from aiopim.isa import assemble_program, text_words

#: what windows run on the fast path or through the general step, and what ends them
_WINDOW_FAMILIES = {"add", "sub", "addc", "subc", "and", "or", "xor", "lsl", "lsr", "lw", "ld"}
_WINDOW_FAMILIES |= {"lbu", "lhs", "call", "move", "cmpb4", "asr", "rol", "acquire", "resume"}
_OTHER_FAMILIES = {"sw", "sb", "sd", "release", "stop", "boot", "clr_run", "read_run", "time"}
_OTHER_FAMILIES |= {"mul_ul_ul", "lsl_add", "extsb", "sats", "nop", "fault"}


def _sigs(families: set[str]) -> list[int]:
    return [
        s
        for s in range(len(T.SIG_KEYWORD))
        if T.MNEMONICS[T.SIG_FAMILY[s]] in families and T.SIG_KEYWORD[s].split(".")[0] != "hash"
    ]


WINDOW_SIGS = _sigs(_WINDOW_FAMILIES)
OTHER_SIGS = _sigs(_OTHER_FAMILIES)


@st.composite
def instruction(draw: st.DrawFn, length: int) -> int:
    pool = WINDOW_SIGS if draw(st.integers(0, 9)) < 8 else OTHER_SIGS
    return random_instruction(draw, draw(st.sampled_from(pool)), length)


@st.composite
def programs(draw: st.DrawFn) -> list[int]:
    n = draw(st.integers(2, 30))
    return [draw(instruction(n)) for _ in range(n)]


def _state(m: Machine) -> list[np.ndarray]:
    dv = m.dv.copy()
    # the windows' own bookkeeping, and the program's compiled step (see test_isa_step.py)
    dv[[I.D_ROUNDS, I.D_AGAIN, I.D_WNF, I.D_CUTTER, I.D_STEP, I.D_STEP_OUT, I.D_STEP_OUT + 1]] = 0
    return [m.regs, m.th, dv, m.atomic, m.wram, m.dma]


def _machines(asm: Asm, seed: int, threads: int, ready: int) -> list[Machine]:
    rng = np.random.default_rng(seed)
    machines = [Machine(asm, threads=threads, jit=True) for _ in range(2)]
    regs = rng.integers(0, 1 << 8, size=(threads, 24), dtype=np.int64)
    wram = rng.integers(0, 256, size=65536, dtype=np.uint8)
    atomic = (rng.integers(0, 2, size=256) * rng.integers(0, 2)).astype(np.uint8)
    pcs = rng.integers(0, len(asm), size=threads)
    # next-issue cycles: mostly within one revolver period, sometimes far ahead (the window must
    # then not assume an issue pattern it has not seen)
    start = rng.integers(0, 12 if seed % 4 else 64, size=threads)
    for m in machines:
        m.regs[:, :24] = regs
        m.wram[:] = wram
        m.atomic[:] = atomic
        m.th[:, I.T_PC] = pcs
        m.th[:, I.T_NEXT] = start
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[:ready, I.T_RUN] = I.RUN_READY
    return machines


def _compare(
    windowed: Machine, stepped: Machine, cycles: int, steps: int, chunk: int | None = None
) -> int:
    """Run ``windowed`` (in calls of ``chunk`` cycles: windows go on across calls) and
    ``stepped`` (one instruction per call) to the same bounds; their states must agree."""
    bound = chunk or cycles
    start = int(windowed.dv[I.D_INSTR])
    while True:
        left = steps - (int(windowed.dv[I.D_INSTR]) - start)
        reason = windowed.run(cycles=min(bound, cycles), steps=left)
        if reason != I.R_LIMIT or bound >= cycles:
            break
        bound += chunk or cycles
    ref = I.R_STEP
    for _ in range(steps):
        ref = stepped.run(cycles=cycles, steps=1)
        if ref != I.R_STEP:
            break
    assert reason == ref
    for a, b in zip(_state(windowed), _state(stepped), strict=True):
        assert np.array_equal(a, b)
    return reason


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=programs(),
    seed=st.integers(0, 2**32 - 1),
    ready=st.integers(1, 16),
    cycles=st.integers(50, 6000),
    chunk=st.sampled_from([None, 7, 40, 333]),
)
def test_windows_issue_what_cycle_by_cycle_issue_does(
    words: list[int], seed: int, ready: int, cycles: int, chunk: int | None
) -> None:
    asm = Asm()
    for w in words:
        asm.raw(w)
    windowed, stepped = _machines(asm, seed, 16, ready)
    # room for a whole window of 16 threads (16 * WINDOW_ROUNDS slots) under the bound
    _compare(windowed, stepped, cycles, 5000, chunk)


@st.composite
def shared_memory_programs(draw: st.DrawFn) -> str:
    """Loops of loads, stores and atomic operations on a few shared words (through ``zero``,
    a per-thread base ``id4``/``id8`` and computed bases r6/r7), so that threads of one window
    often touch the same bytes in both orders."""
    n = draw(st.integers(3, 24))
    lines = []
    for i in range(n):
        r = f"r{draw(st.integers(0, 5))}"
        d = f"d{2 * draw(st.integers(0, 2))}"
        target = f"L{draw(st.integers(0, n))}"
        base = draw(st.sampled_from(["zero", "id4", "r6", "r7"]))
        base8 = draw(st.sampled_from(["zero", "id8", "r6", "r7"]))
        off4, off8 = 4 * draw(st.integers(0, 7)), 8 * draw(st.integers(0, 3))
        byte, bit = draw(st.integers(0, 31)), draw(st.integers(0, 3))
        lines.append(
            f"L{i}: "
            + draw(
                st.sampled_from(
                    [
                        f"add {r}, {r}, {draw(st.integers(-3, 9))}",
                        f"xor {r}, {r}, r{draw(st.integers(0, 5))}",
                        f"and r{6 + draw(st.integers(0, 1))}, {r}, 56",
                        f"lw {r}, {base}, {off4}",
                        f"ld {d}, {base8}, {off8}",
                        f"lbu {r}, {base}, {byte}",
                        f"lhu {r}, {base}, {byte & ~1}",
                        f"sw {base}, {off4}, {r}",
                        f"sw {base}, {off4}, {draw(st.integers(-5, 5))}",
                        f"sb {base}, {byte}, {r}",
                        f"sh {base}, {byte & ~1}, {r}",
                        f"sd {base8}, {off8}, {d}",
                        f"sd {base8}, {off8}, {draw(st.integers(-5, 5))}",
                        f"sw_id {base}, {off4}",
                        f"acquire zero, {bit}, nz, {target}",
                        f"acquire zero, {bit}, z, L{i + 1}",
                        f"release zero, {bit}, nz, L{i + 1}",
                        f"jneq {r}, {draw(st.integers(0, 4))}, {target}",
                    ]
                )
            )
        )
    lines.append(f"L{n}: jump L0")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=shared_memory_programs(),
    seed=st.integers(0, 2**32 - 1),
    ready=st.integers(2, 16),
    cycles=st.integers(50, 4000),
    chunk=st.sampled_from([None, 9, 100]),
)
# two cases Hypothesis found while the deferred spinners were written: threads spinning on a
# lock nobody releases, deferred; the instruction bound then comes near (the pattern left in the
# rows must not be reused), and a load that is not a fast row ends a too-short pass
@example(
    text="".join(f"L{i}: add r0, r0, 0\n" for i in range(4))
    + "L4: acquire zero, 0, nz, L4\nL5: add r0, r0, 0\nL6: add r0, r0, 0\nL7: jump L0\n",
    seed=0,
    ready=6,
    cycles=2885,
    chunk=None,
)
@example(
    text="L0: lbu r0, zero, 0\nL1: acquire zero, 0, nz, L1\nL2: add r0, r0, 0\nL3: jump L0\n",
    seed=0,
    ready=7,
    cycles=66,
    chunk=9,
)
def test_windows_order_shared_accesses_as_cycle_by_cycle_issue(
    text: str, seed: int, ready: int, cycles: int, chunk: int | None
) -> None:
    """Stores, loads and atomic operations of different threads on the same bytes: every
    thread must read, and leave in WRAM and the atomic bits, what issue order gives."""
    asm = _program(text)
    windowed, stepped = _machines(asm, seed, 16, ready)
    rng = np.random.default_rng(seed)
    bases = 8 * rng.integers(0, 8, size=(16, 2))
    for m in (windowed, stepped):
        m.regs[:, 6:8] = bases  # aligned computed bases (the random registers rarely are)
    _compare(windowed, stepped, cycles, 3000, chunk)


def _program(text: str) -> Asm:
    asm = Asm()
    for w in text_words(assemble_program(text).elf):
        asm.raw(w)
    return asm


#: 16 threads take a spin lock on atomic bit 0 in turn, add to a shared counter and store it
SPIN_LOCK = """
        jeq id, 15, work
        boot id, 1
work:   move r2, 0
        move r3, id
again:  acquire zero, 0, nz, again
        lw r1, zero, 64
        add r1, r1, r3
        add r1, r1, 1
        sw zero, 64, r1
        release zero, 0, nz, .+1
        add r2, r2, 1
        jltu r2, 20, again
        stop
"""

#: a compute loop with no shared state (windows run it whole)
COMPUTE = """
        jeq id, {last}, go
        boot id, 1
go:     move r1, 0
        move r2, 7
        move r4, 0
loop:   add r1, r1, r2
        xor r2, r2, r1
        lsl r3, r1, 3
        add r4, r4, 1
        jltu r4, 300, loop
        stop
"""


@pytest.mark.parametrize("program", ["spin", "compute16", "compute5", "compute1"])
def test_programs_run_the_same_in_windows_and_step_by_step(program: str) -> None:
    text = {
        "spin": SPIN_LOCK,
        "compute16": COMPUTE.format(last=15),
        "compute5": COMPUTE.format(last=4),
        "compute1": COMPUTE.format(last=0),
    }[program]
    asm = _program(text)
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
    assert _compare(windowed, stepped, 1 << 40, 200_000, 4000) == I.R_END
    if program == "spin":
        # every thread added id + 1 twenty times under the lock
        assert int(windowed.wram[64:68].view(np.uint32)[0]) == 20 * sum(range(1, 17))
    else:
        threads = {"compute16": 16, "compute5": 5, "compute1": 1}[program]
        loop = 3 + 5 * 300 + 1  # the moves, the loop, the stop
        boot = 2  # jeq + boot on all but the last thread, jeq only on the last
        assert int(windowed.dv[I.D_INSTR]) == threads * (loop + boot) - 1
        if threads == 1:  # one thread issues once every 11 cycles
            assert int(windowed.dv[I.D_LAST]) == 11 * (loop + 1 - 1)


#: thread 0 holds the lock through a long loop while the others spin on it, then each takes it
#: in turn
HELD_LOCK = """
        jeq id, 15, start
        boot id, 1
start:  jnz id, wait
        acquire zero, 0, z, .+1
        move r1, 0
hold:   add r1, r1, 1
        jltu r1, 400, hold
        release zero, 0, nz, .+1
        stop
wait:   acquire zero, 0, nz, wait
        lw r2, zero, 64
        move r4, id
        add r2, r2, r4
        sw zero, 64, r2
        release zero, 0, nz, .+1
        stop
"""


@pytest.mark.parametrize("chunk", [None, 50, 333])
def test_threads_spinning_on_a_held_lock_are_counted_not_run(chunk: int | None) -> None:
    """Threads spinning on a held lock, deferred while it stays held (their slots counted only
    when the loop stops or the pattern changes), issue the same slots, with the same flags and
    next issues, as when run cycle by cycle, and their registers stay."""
    asm = _program(HELD_LOCK)
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
        m.regs[:, 3] = 7
    # part way: thread 0 still holds the lock, the others have spun for many windows
    _compare(windowed, stepped, 4000, 100_000, chunk)
    # deferred up to where the loop stopped, then counted
    assert (windowed.scratch[1:16, I.SCR_FROM] == windowed.dv[I.D_CYCLE]).all()
    assert (windowed.th[1:16, I.T_PC] == windowed.th[1, I.T_PC]).all()
    assert (windowed.regs[1:16, 3] == 7).all()
    assert _compare(windowed, stepped, 1 << 40, 100_000, chunk) == I.R_END
    assert int(windowed.wram[64:68].view(np.uint32)[0]) == sum(range(1, 16))


#: ``{n}`` threads meet at a barrier ``{rounds}`` times, after loops of different lengths: the
#: barrier of ``examples/isa/keysum.S`` (a lock, a count, a queue of waiters that ``stop`` until
#: the last one ``resume``\ s them), so that threads spin on the lock while others hold it, hand
#: it over, stop and are resumed
BARRIER = """
        jeq id, {last}, start
        boot id, 1
start:  move r5, 0
round:  move r1, id
        lsl r1, r1, {shift}
        add r1, r1, {extra}
work:   add r1, r1, -1, nz, work
        call r23, barrier
        add r5, r5, 1
        jltu r5, {rounds}, round
        stop
barrier:
        acquire zero, 0, nz, barrier
        lw r8, zero, 0
        add r8, r8, 1
        jeq r8, {n}, last
        sw zero, 0, r8
        move r9, id
        sb r8, 7, r9
        release zero, 0, nz, .+1
        stop true, resumed
resumed:
        jump r23
last:   sw zero, 0, 0
        move r9, 0
wake:   jeq r9, {last}, done
        lbu r10, r9, 8
again:  resume r10, 0, nz, again
        add r9, r9, 1
        jump wake
done:   release zero, 0, nz, .+1
        jump r23
"""


@pytest.mark.parametrize("chunk", [None, 37, 500])
@pytest.mark.parametrize("threads", [4, 10, 11, 12, 13, 16])
def test_barriers_issue_what_cycle_by_cycle_issue_does(threads: int, chunk: int | None) -> None:
    """Barriers on 4-16 threads (fewer or more ready threads than a revolver period, the
    pattern growing and shrinking across it as threads stop and are resumed): the loop with
    its windows and deferred spinners leaves, at several points and at the end, the state that
    issuing cycle by cycle does."""
    rounds = 4
    asm = _program(BARRIER.format(n=threads, last=threads - 1, rounds=rounds, shift=1, extra=3))
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
    stops = [_compare(windowed, stepped, bound, 100_000, chunk) for bound in (260, 700, 1500, 2600)]
    assert stops[:2] == [I.R_LIMIT, I.R_LIMIT] and set(stops) <= {I.R_LIMIT, I.R_END}
    assert _compare(windowed, stepped, 1 << 40, 100_000, chunk) == I.R_END
    assert int(windowed.wram[0:4].view(np.uint32)[0]) == 0
    assert (windowed.regs[:threads, 5] == rounds).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    threads=st.integers(3, 16),
    shift=st.integers(0, 3),
    extra=st.integers(1, 40),
    bounds=st.lists(st.integers(20, 3000), min_size=1, max_size=4),
    chunk=st.sampled_from([None, 9, 61]),
)
def test_barriers_of_any_shape_issue_what_cycle_by_cycle_issue_does(
    threads: int, shift: int, extra: int, bounds: list[int], chunk: int | None
) -> None:
    """The barrier program with other thread counts and loop lengths (threads arriving together
    or far apart, resumed threads landing on cycles others issue at or not), compared at other
    points."""
    asm = _program(BARRIER.format(n=threads, last=threads - 1, rounds=3, shift=shift, extra=extra))
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[0, I.T_RUN] = I.RUN_READY
    for bound in sorted(bounds):
        if _compare(windowed, stepped, bound, 100_000, chunk) != I.R_LIMIT:
            break
    assert _compare(windowed, stepped, 1 << 40, 100_000, chunk) == I.R_END
    assert (windowed.regs[:threads, 5] == 3).all()


def _issues(nexts: list[int], c0: int, cycles: int) -> list[tuple[int, int]]:
    """The issue rule on ready-list positions (round-robin after the last issuer, a thread at
    most once every REVOLVER_CYCLES): (cycle, position) of every issue in ``cycles`` cycles."""
    nx, pos, out = list(nexts), -1, []
    for y in range(c0, c0 + cycles):
        n = len(nx)
        pick = next((p % n for p in range(pos + 1, pos + 1 + n) if nx[p % n] <= y), None)
        if pick is not None:
            nx[pick], pos = y + I.REVOLVER_CYCLES, pick
            out.append((y, pick))
    return out


def _steady(nexts: list[int], c0: int) -> bool:
    """Every thread issues once per period and every period repeats the first (six checked)."""
    per = max(len(nexts), I.REVOLVER_CYCLES)
    issues = _issues(nexts, c0, 6 * per)
    first = [(y - c0, p) for y, p in issues if y < c0 + per]
    return len(first) == len(nexts) and all(
        [(y - c0 - k * per, p) for y, p in issues if c0 + k * per <= y < c0 + (k + 1) * per]
        == first
        for k in range(1, 6)
    )


def _both_kinds(
    rng: np.random.Generator,
    draw: Callable[[np.random.Generator], list[int]],
    kind: Callable[[list[int]], bool | None],
    each: int = 12,
) -> Iterator[list[int]]:
    """Ready lists (next-issue cycles) from ``draw`` until ``each`` of both kinds were yielded
    (``kind`` None: not a case of the test)."""
    found = {True: 0, False: 0}
    for _ in range(20_000):
        nexts = draw(rng)
        k = kind(nexts)
        if k is None or found[k] >= each:
            continue
        found[k] += 1
        yield nexts
        if min(found.values()) >= each:
            return
    raise AssertionError(f"too few cases of one kind: {found}")


def _compare_from_ready_list(nexts: list[int], c0: int) -> None:
    """Threads 0..n-1 ready at the compute loop's moves at cycle ``c0`` with next issues
    ``nexts`` (the ready list starts after thread 15): windows against cycle-by-cycle issue."""
    asm = _program(COMPUTE.format(last=0).replace("jeq id, 0, go\n        boot id, 1\n", ""))
    n = len(nexts)
    windowed, stepped = (Machine(asm, threads=16, jit=True) for _ in range(2))
    for m in (windowed, stepped):
        m.th[:, I.T_RUN] = I.RUN_STOPPED
        m.th[:n, I.T_RUN] = I.RUN_READY
        m.th[:n, I.T_PC] = 2  # the loop's moves
        m.th[:n, I.T_NEXT] = nexts
        m.dv[I.D_RR] = 15
        m.dv[I.D_CYCLE] = c0
    # no instruction bound: a window needs room for all its slots (n * 256 > 3000)
    _compare(windowed, stepped, c0 + 400, 100_000)


def test_steady_issue_is_recognised_exactly() -> None:
    """States of 12-16 ready threads whose first period has no idle cycle but that are not in
    round-robin order: some are steady, some issue a thread twice in the first period, some
    repeat the first period differently. Windows must open exactly when the issue rule is
    periodic (else they would run threads at wrong cycles)."""
    c0 = 40

    def draw(rng: np.random.Generator) -> list[int]:
        n = int(rng.integers(12, 17))
        return [c0 + int(v) for v in rng.integers(-14, 16, size=n)]

    def steady(nexts: list[int]) -> bool | None:
        n = len(nexts)
        full = len(_issues(nexts, c0, n)) == n  # no idle cycle in the first period
        if not full or all(nexts[p] <= c0 + p for p in range(n)):
            return None  # only the cases that need more than the round-robin test
        return _steady(nexts, c0)

    for nexts in _both_kinds(np.random.default_rng(7), draw, steady):
        _compare_from_ready_list(nexts, c0)


def test_few_ready_threads_issue_where_their_next_issues_fall() -> None:
    """Up to 11 ready threads (one revolver period) not in round-robin turn: when each becomes
    ready at a cycle of its own within the period, the window takes those cycles as the
    pattern without simulating the issue rule; when two share a cycle (or one is ready only
    after the period) it must simulate. Both kinds, against cycle-by-cycle issue."""
    c0 = 40

    def draw(rng: np.random.Generator) -> list[int]:
        n = int(rng.integers(1, I.REVOLVER_CYCLES + 1))
        return [c0 + int(v) for v in rng.integers(-3, I.REVOLVER_CYCLES + 2, size=n)]

    def own_cycles(nexts: list[int]) -> bool | None:
        if all(x <= c0 + p for p, x in enumerate(nexts)):
            return None  # in round-robin turn: neither path
        at = [max(x, c0) - c0 for x in nexts]
        own = len(set(at)) == len(nexts) and max(at) < I.REVOLVER_CYCLES
        if own:  # each issues where it becomes ready
            issues = _issues(nexts, c0, I.REVOLVER_CYCLES)
            assert sorted(y - c0 for y, _ in issues) == sorted(at)
        return own

    for nexts in _both_kinds(np.random.default_rng(11), draw, own_cycles):
        _compare_from_ready_list(nexts, c0)


@given(st.integers(1, (1 << 32) - 1))
def test_low_bit_is_the_index_of_the_lowest_set_bit(mask: int) -> None:
    """The ready-thread mask's bit scan (a De Bruijn table) against Python's bit arithmetic."""
    assert I.low_bit(mask) == (mask & -mask).bit_length() - 1


@pytest.mark.parametrize("compiled", [False, True])
def test_copy_row_copies_the_words_asked_and_no_other(compiled: bool) -> None:
    """The windows' register and thread-state snapshots (``_interp.copy_row``): one
    ``memcpy`` in the compiled loop, a loop in pure Python; both copy the same words."""
    import numba

    copy = I.copy_row
    if compiled:
        I.jit_dispatcher()  # gives copy_row its compiled body

        @numba.njit
        def copy(dst, di, dcol, src, si, scol, n):  # type: ignore[no-untyped-def]
            I.copy_row(dst, di, dcol, src, si, scol, n)

    src = np.arange(4 * 40, dtype=np.int64).reshape(4, 40)
    dst = np.full((3, 45), -1, np.int64)
    copy(dst, 2, 7, src, 1, 30, 5)
    copy(dst, 0, 0, src, 3, 0, 24)
    want = np.full((3, 45), -1, np.int64)
    want[2, 7:12] = src[1, 30:35]
    want[0, :24] = src[3, :24]
    assert np.array_equal(dst, want)
