"""Execution of single instructions, per family. Expected values are worked out by hand from
the instruction-set description (carry = carry out, conditions before flags, pairs with the
even register high, little-endian WRAM...), not from the implementation."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pytest
from isa_helpers import random_instruction
from isa_reference import (
    EV_DMA_FAULT,
    EV_EXTERNAL,
    EV_FAULT,
    EV_MEMORY_FAULT,
    EV_OK,
    EV_THREAD_FAULT,
    EV_UNIMPLEMENTED,
    execute,
    execute_system,
    new_state,
)

from aiopim.isa import Instruction, assemble_program, decode_program, encode
from aiopim.isa import _tables as T

M32 = 0xFFFFFFFF


@dataclass
class Cpu:
    """One DPU's flat state and a helper running one line of assembly at ``pc``."""

    tid: int = 0
    regs: np.ndarray = field(init=False)
    pcs: np.ndarray = field(init=False)
    zf: np.ndarray = field(init=False)
    cf: np.ndarray = field(init=False)
    wram: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.regs, self.pcs, self.zf, self.cf, self.wram = new_state(16, 4096)

    def set(self, **regs: int) -> Cpu:
        for name, value in regs.items():
            self.regs[self.tid, int(name[1:])] = value & M32
        return self

    def r(self, n: int) -> int:
        return int(self.regs[self.tid, n])

    @property
    def pc(self) -> int:
        return int(self.pcs[self.tid])

    def run(self, line: str, pc: int = 0) -> int:
        word = assemble_program(line).text[0]
        prog = decode_program(np.array([word]))
        self.pcs[self.tid] = pc
        return execute(
            int(prog.sig[0]),
            prog.values[0],
            self.tid,
            self.regs,
            self.pcs,
            self.zf,
            self.cf,
            self.wram,
        )


# ---- add / sub families and their flags ---------------------------------------------------
def test_add_carry_zero_and_next_pc() -> None:
    cpu = Cpu().set(r1=0xFFFFFFFF, r2=1)
    assert cpu.run("add r0, r1, r2", pc=5) == EV_OK
    assert cpu.r(0) == 0 and cpu.zf[0] == 1 and cpu.cf[0] == 1 and cpu.pc == 6
    cpu.set(r1=2)
    cpu.run("add r0, r1, r2")
    assert cpu.r(0) == 3 and cpu.zf[0] == 0 and cpu.cf[0] == 0


def test_addc_chains_a_64_bit_addition() -> None:
    cpu = Cpu().set(r1=0xFFFFFFFF, r2=0x00000001, r3=0x1, r4=0x2)  # lo: r1 + r3, hi: r2 + r4
    cpu.run("add r5, r1, r3")
    cpu.run("addc r6, r2, r4")
    assert (cpu.r(6) << 32 | cpu.r(5)) == 0x1_FFFFFFFF + 0x2_00000001


def test_conditional_jump_evaluates_the_result() -> None:
    cpu = Cpu().set(r1=-5 & M32)
    cpu.run("add r0, r1, 5, z, 9", pc=2)
    assert cpu.r(0) == 0 and cpu.pc == 9 and cpu.zf[0] == 1
    cpu.set(r1=1)
    cpu.run("add r0, r1, 5, z, 9", pc=2)
    assert cpu.r(0) == 6 and cpu.pc == 3


def test_sub_borrow_conditions() -> None:
    cpu = Cpu().set(r1=3, r2=5)
    cpu.run("jltu r1, r2, 7")
    assert cpu.pc == 7 and cpu.cf[0] == 0  # borrow: carry out 0
    cpu.set(r1=5, r2=3)
    cpu.run("jltu r1, r2, 7")
    assert cpu.pc == 1 and cpu.cf[0] == 1
    cpu.run("jgeu r1, r2, 7")
    assert cpu.pc == 7
    cpu.set(r1=5, r2=5)
    cpu.run("jleu r1, r2, 7")
    assert cpu.pc == 7
    cpu.run("jgtu r1, r2, 7")
    assert cpu.pc == 1


@pytest.mark.parametrize(
    ("a", "b", "lts"),
    [(-1, 1, True), (1, -1, False), (0x80000000, 1, True), (0x7FFFFFFF, -1, False), (4, 4, False)],
)
def test_signed_compare_uses_overflow(a: int, b: int, lts: bool) -> None:
    cpu = Cpu().set(r1=a, r2=b)
    cpu.run("jlts r1, r2, 7")
    assert (cpu.pc == 7) == lts
    cpu.run("jges r1, r2, 7")
    assert (cpu.pc == 7) == (not lts)


@pytest.mark.parametrize(
    ("a", "b"),
    [(0x1_00000000, 0x0_FFFFFFFF), (5, 5), (0x2_00000000, 0x2_00000001), (1 << 40, 1 << 40)],
)
def test_64_bit_unsigned_compare_with_sub_subc(a: int, b: int) -> None:
    cpu = Cpu().set(r0=a & M32, r1=a >> 32, r2=b & M32, r3=b >> 32)
    cpu.run("sub zero, r0, r2")
    cpu.run("subc zero, r1, r3, xgtu, 9")
    assert (cpu.pc == 9) == (a > b)
    cpu.run("sub zero, r0, r2")
    cpu.run("subc zero, r1, r3, xleu, 9")
    assert (cpu.pc == 9) == (a <= b)
    cpu.run("sub zero, r0, r2")
    cpu.run("subc zero, r1, r3, xz, 9")
    assert (cpu.pc == 9) == (a == b)


def test_reverse_and_immediate_first_subtractions() -> None:
    cpu = Cpu().set(r1=10, r2=3)
    cpu.run("rsub r0, r1, r2")  # rb - ra
    assert cpu.r(0) == (3 - 10) & M32
    cpu.run("sub r0, 100, r2")  # imm - ra
    assert cpu.r(0) == 97
    cpu.run("neg r4, r1")
    assert cpu.r(4) == (-10) & M32


def test_nc_conditions_detect_a_carry_into_bit_k() -> None:
    cpu = Cpu().set(r0=24)
    cpu.run("add r0, r0, 8, nc5, 9")  # 24 + 8 = 32 carries into bit 5
    assert cpu.pc == 1 and cpu.r(0) == 32
    cpu.set(r0=0)
    cpu.run("add r0, r0, 8, nc5, 9")
    assert cpu.pc == 9


def test_set_form_writes_0_or_1_and_flags_from_the_result() -> None:
    cpu = Cpu().set(r1=7)
    cpu.run("sub r0, r1, 7, z")
    assert cpu.r(0) == 1 and cpu.zf[0] == 1
    cpu.run("sub r0, r1, 8, z")
    assert cpu.r(0) == 0 and cpu.zf[0] == 0
    cpu.run("and r0, r1, 8, z")
    assert cpu.r(0) == 1


def test_false_form_writes_result_and_flags_but_never_jumps() -> None:
    cpu = Cpu().set(r1=-2)
    cpu.run("add r0, r1, 2, false", pc=3)
    assert cpu.r(0) == 0 and cpu.zf[0] == 1 and cpu.cf[0] == 1 and cpu.pc == 4


def test_pair_destinations_extend_to_64_bits() -> None:
    cpu = Cpu().set(r4=0x80000000, r5=0)
    cpu.run("add.s d2, r4, r5")
    assert (cpu.r(2), cpu.r(3)) == (0xFFFFFFFF, 0x80000000)
    cpu.run("add.u d2, r4, r5")
    assert (cpu.r(2), cpu.r(3)) == (0, 0x80000000)
    cpu.run("move.s d6, -1")
    assert (cpu.r(6), cpu.r(7)) == (M32, M32)
    cpu.set(r4=3)
    cpu.run("sub.u d8, r4, 3, z")  # set form: the 64-bit 0/1
    assert (cpu.r(8), cpu.r(9)) == (0, 1)


def test_zero_destination_keeps_registers() -> None:
    cpu = Cpu().set(r1=4, r0=77)
    cpu.run("add zero, r1, -4, z, 6")
    assert cpu.r(0) == 77 and cpu.pc == 6 and cpu.zf[0] == 1


# ---- logic, shifts, counts, extensions, multiplies ------------------------------------------
@pytest.mark.parametrize(
    ("line", "a", "b", "expected"),
    [
        ("and r0, r1, r2", 0b1100, 0b1010, 0b1000),
        ("or r0, r1, r2", 0b1100, 0b1010, 0b1110),
        ("xor r0, r1, r2", 0b1100, 0b1010, 0b0110),
        ("nand r0, r1, r2", 0b1100, 0b1010, ~0b1000 & M32),
        ("nor r0, r1, r2", 0b1100, 0b1010, ~0b1110 & M32),
        ("nxor r0, r1, r2", 0b1100, 0b1010, ~0b0110 & M32),
        ("andn r0, r1, r2", 0b1100, 0b1010, 0b0010),
        ("orn r0, r1, r2", 0b1100, 0b1010, (~0b1100 | 0b1010) & M32),
        ("lsl r0, r1, r2", 0x80000001, 4, 0x10),
        ("lsl r0, r1, r2", 1, 33, 2),  # only bits 4..0 of the amount
        ("lsr r0, r1, r2", 0x80000000, 4, 0x08000000),
        ("asr r0, r1, r2", 0x80000000, 4, 0xF8000000),
        ("rol r0, r1, r2", 0x80000001, 4, 0x18),
        ("ror r0, r1, r2", 0x80000001, 4, 0x18000000),
        ("lsl1 r0, r1, r2", 1, 4, 0x1F),
        ("lsr1 r0, r1, r2", 0x80, 4, 0xF0000008),
        ("lslx r0, r1, r2", 0xF0000000, 4, 0xF),
        ("lslx r0, r1, r2", 0xF0000000, 0, 0),
        ("lsrx r0, r1, r2", 0xF, 4, 0xF0000000),
        ("lsl1x r0, r1, r2", 0xF0000000, 0, M32),
        ("lsl1x r0, r1, r2", 0x40000000, 4, 0xFFFFFFF4),
        ("lsr1x r0, r1, r2", 0x2, 4, 0x2FFFFFFF),
        ("cmpb4 r0, r1, r2", 0x11223344, 0x11FF3300, 0x01000100),
        ("mul_sl_sl r0, r1, r2", 0xFF, 0x02, (-2) & M32),
        ("mul_ul_ul r0, r1, r2", 0xFF, 0x02, 0x1FE),
        ("mul_uh_ul r0, r1, r2", 0x0300, 0x05, 15),
        ("mul_sh_sl r0, r1, r2", 0xFE00, 0x03, (-6) & M32),
        ("mul_ul_uh r0, r1, r2", 0x07, 0x0400, 28),
    ],
)
def test_two_source_operations(line: str, a: int, b: int, expected: int) -> None:
    cpu = Cpu().set(r1=a, r2=b)
    cpu.cf[0] = 1
    assert cpu.run(line) == EV_OK
    assert cpu.r(0) == expected
    assert cpu.zf[0] == int(expected == 0)
    assert cpu.cf[0] == 1  # logic and shifts leave CF alone


@pytest.mark.parametrize(
    ("line", "a", "expected"),
    [
        ("clz r0, r1", 1, 31),
        ("clz r0, r1", 0, 32),
        ("clo r0, r1", 0xF0000000, 4),
        ("cls r0, r1", 0xF0000000, 4),
        ("cls r0, r1", 0x00FFFFFF, 8),
        ("cao r0, r1", 0xFF00FF00, 16),
        ("extsb r0, r1", 0x180, 0xFFFFFF80),
        ("extsh r0, r1", 0x18000, 0xFFFF8000),
        ("extub r0, r1", 0x1FF, 0xFF),
        ("extuh r0, r1", 0x1FFFF, 0xFFFF),
    ],
)
def test_one_source_operations(line: str, a: int, expected: int) -> None:
    cpu = Cpu().set(r1=a)
    cpu.run(line)
    assert cpu.r(0) == expected


def test_count_max_and_shift_sh32_and_multiply_large() -> None:
    cpu = Cpu().set(r1=0, r2=32)
    cpu.run("clz r0, r1, max, 5")
    assert cpu.pc == 5
    cpu.run("lsl r0, r1, r2, sh32, 5")  # bit 5 of the amount
    assert cpu.pc == 5
    cpu.set(r1=0x10, r2=0x10)
    cpu.run("mul_ul_ul r0, r1, r2, large, 5")
    assert cpu.pc == 5 and cpu.r(0) == 256


def test_shift_add_family() -> None:
    cpu = Cpu().set(r1=100, r2=3)
    cpu.run("lsl_add r0, r1, r2, 2")
    assert cpu.r(0) == 112 and cpu.zf[0] == 0
    cpu.run("lsl_sub r0, r1, r2, 2")
    assert cpu.r(0) == 88
    cpu.run("lsr_add r0, r1, r2, 1")
    assert cpu.r(0) == 101
    cpu.set(r2=0)
    cpu.run("lsl_add r0, r1, r2, 2")
    assert cpu.r(0) == 100 and cpu.zf[0] == 1  # ZF from the shifted value, not the sum


# ---- loads and stores -----------------------------------------------------------------------
def test_stores_and_loads_little_endian() -> None:
    cpu = Cpu().set(r1=0x80, r2=0x11223384)
    cpu.run("sw r1, 0, r2")
    assert bytes(cpu.wram[0x80:0x84]) == bytes([0x84, 0x33, 0x22, 0x11])
    cpu.run("lw r3, r1, 0")
    assert cpu.r(3) == 0x11223384
    cpu.run("lbs r3, r1, 0")
    assert cpu.r(3) == 0xFFFFFF84
    cpu.run("lbu r3, r1, 0")
    assert cpu.r(3) == 0x84
    cpu.run("lhs r3, r1, 2")
    assert cpu.r(3) == 0x1122
    cpu.run("lw !big, r3, r1, 0")
    assert cpu.r(3) == 0x84332211
    cpu.run("lbs.s d4, r1, 0")
    assert (cpu.r(4), cpu.r(5)) == (M32, 0xFFFFFF84)


def test_64_bit_accesses_keep_the_odd_register_at_the_lower_address() -> None:
    cpu = Cpu().set(r1=0x100, r6=0xAAAA0001, r7=0xBBBB0002)
    cpu.run("sd r1, 8, d6")
    assert bytes(cpu.wram[0x108:0x110]) == (0xBBBB0002).to_bytes(4, "little") + (
        0xAAAA0001
    ).to_bytes(4, "little")
    cpu.run("ld d22, r1, 8")
    assert (cpu.r(22), cpu.r(23)) == (0xAAAA0001, 0xBBBB0002)


def test_immediate_and_id_stores() -> None:
    cpu = Cpu(tid=3).set(r1=0x40)
    cpu.run("sd r1, 0, -1")  # s16 sign-extended to 64 bits
    assert bytes(cpu.wram[0x40:0x48]) == b"\xff" * 8
    cpu.run("sb_id r1, 8, 0x10")
    assert cpu.wram[0x48] == 0x13
    cpu.run("sh r1, 16, -2")
    assert bytes(cpu.wram[0x50:0x52]) == b"\xfe\xff"


def test_misaligned_or_outside_wram_is_a_memory_fault() -> None:
    cpu = Cpu().set(r1=2, r2=7)
    assert cpu.run("lw r0, r1, 0", pc=4) == EV_MEMORY_FAULT
    assert cpu.r(0) == 0 and cpu.pc == 4
    assert cpu.run("sw r1, 4096, r2") == EV_MEMORY_FAULT
    assert cpu.run("sb r1, -4, r2") == EV_MEMORY_FAULT  # wraps to 0xFFFFFFFE


# ---- pairs, calls, steps ------------------------------------------------------------------
def test_movd_swapd() -> None:
    cpu = Cpu().set(r2=1, r3=2)
    cpu.run("movd d4, d2")
    assert (cpu.r(4), cpu.r(5)) == (1, 2)
    cpu.run("swapd d4, d2")
    assert (cpu.r(4), cpu.r(5)) == (2, 1)


def test_call_and_return() -> None:
    cpu = Cpu()
    cpu.run("call r23, 40", pc=7)
    assert cpu.r(23) == 8 and cpu.pc == 40
    cpu.run("jump r23", pc=41)
    assert cpu.pc == 8
    cpu.set(r2=3, r3=4)
    cpu.run("call r23, r2, r3", pc=1)
    assert cpu.pc == 7 and cpu.r(23) == 2


def test_mul_step_sequence_multiplies() -> None:
    a, b = 1234, 56789
    cpu = Cpu().set(r0=b, r1=0, r2=a)  # d0 = (multiplier, accumulator), ra = multiplicand
    for n in range(32):
        cpu.run(f"mul_step d0, r2, d0, {n}, z, 99")
        if cpu.pc == 99:
            break
    assert cpu.r(1) == (a * b) & M32 and cpu.r(0) == 0


def test_div_step_sequence_divides() -> None:
    cpu = Cpu().set(r0=0, r1=100, r2=7)  # d0 = (quotient, dividend), ra = divisor
    for n in range(28, -1, -1):
        cpu.run(f"div_step d0, r2, d0, {n}")
    assert (cpu.r(0), cpu.r(1)) == (14, 2)


# ---- what the scheduler does ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "event"),
    [
        ("boot id, 1", EV_EXTERNAL),
        ("stop true, 0", EV_EXTERNAL),
        ("acquire r0, 3, nz, 0", EV_EXTERNAL),
        ("ldma r0, r1, 0", EV_EXTERNAL),
        ("fault 2", EV_EXTERNAL),
        ("time r0", EV_EXTERNAL),
        ("hash r0, r1, r2", EV_UNIMPLEMENTED),
        ("nop", EV_OK),
    ],
)
def test_events(line: str, event: int) -> None:
    cpu = Cpu().set(r0=5, r1=6)
    before = cpu.regs.copy()
    assert cpu.run(line, pc=3) == event
    assert (cpu.regs == before).all()
    assert cpu.pc == (4 if event == EV_OK else 3)


def test_every_signature_executes_or_reports() -> None:
    rng = random.Random(11)
    cpu = Cpu()
    words = [encode(random_instruction(sig, rng)) for sig in range(len(T.SIG_KEYWORD))]
    prog = decode_program(np.array(words, np.uint64))
    seen = set()
    for i in range(len(words)):
        cpu.regs[0] = [rng.getrandbits(32) for _ in range(24)]
        cpu.pcs[0] = 10
        ev = execute(
            int(prog.sig[i]), prog.values[i], 0, cpu.regs, cpu.pcs, cpu.zf, cpu.cf, cpu.wram
        )
        seen.add(ev)
        assert ev in (EV_OK, EV_EXTERNAL, EV_MEMORY_FAULT, EV_UNIMPLEMENTED)
        if ev != EV_OK:
            assert cpu.pc == 10
        assert cpu.zf[0] in (0, 1) and cpu.cf[0] in (0, 1)
    assert seen == {EV_OK, EV_EXTERNAL, EV_MEMORY_FAULT, EV_UNIMPLEMENTED}
    assert Instruction.make("nop:").keyword == "nop"


def test_safe_register_arithmetic() -> None:
    cpu = Cpu(tid=2).set(r1=0x0010_0100)
    assert cpu.run("adds r0, r1, 4", pc=3) == EV_OK
    assert cpu.r(0) == 0x0010_0104 and cpu.pc == 4
    cpu.set(r1=0xFFFE)
    assert cpu.run("adds r0, r1, 4", pc=3) == EV_MEMORY_FAULT
    assert cpu.r(0) == (0x1_0002 & 0xFFFFFF) | (2 << 25) and cpu.pc == 3
    cpu.set(r1=0x2, r2=4)
    assert cpu.run("subs r0, r1, r2") == EV_MEMORY_FAULT  # below address 0


def test_safe_register_loads_and_stores_check_the_limit() -> None:
    cpu = Cpu().set(r1=(0x200 << 16) | 0x100, r2=0xABCD)
    assert cpu.run("sws r1, 4, r2") == EV_OK
    assert cpu.run("lws r0, r1, 4") == EV_OK and cpu.r(0) == 0xABCD
    cpu.set(r1=(0x108 << 16) | 0x100)
    assert cpu.run("lws r3, r1, 4", pc=6) == EV_MEMORY_FAULT  # 0x104 + 4 reaches the limit
    assert cpu.r(3) == 0xABCD and cpu.pc == 6  # the access happened, then the fault
    cpu.set(r1=(0x101 << 16) | 0x100)
    assert cpu.run("sbs r1, 0, 5") == EV_OK and cpu.wram[0x100] == 5  # bytes: no size term


# ---- instructions acting on the whole DPU -----------------------------------------------------
@dataclass
class Dpu(Cpu):
    mram: np.ndarray = field(init=False)
    atomic: np.ndarray = field(init=False)
    running: np.ndarray = field(init=False)
    counter: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.mram = np.zeros(1 << 16, np.uint8)
        self.atomic = np.zeros(256, np.uint8)
        self.running = np.zeros(16, np.uint8)
        self.running[self.tid] = 1
        self.counter = np.zeros(2, np.int64)

    def system(self, line: str, pc: int = 0) -> int:
        word = assemble_program(line).text[0]
        prog = decode_program(np.array([word]))
        self.pcs[self.tid] = pc
        assert self.run(line, pc) == EV_EXTERNAL  # execute leaves these to the scheduler
        return execute_system(
            int(prog.sig[0]),
            prog.values[0],
            self.tid,
            self.regs,
            self.pcs,
            self.zf,
            self.wram,
            self.mram,
            self.atomic,
            self.running,
            self.counter,
        )


def test_acquire_and_release_atomic_bits() -> None:
    dpu = Dpu().set(r0=0x0103)  # bit index (0x01 ^ 0x03) = 2
    assert dpu.system("acquire r0, 0, nz, 9", pc=4) == EV_OK
    assert dpu.atomic[2] == 1 and dpu.zf[0] == 1 and dpu.pc == 5  # acquired: falls through
    dpu.system("acquire r0, 0, nz, 9", pc=4)
    assert dpu.pc == 9 and dpu.zf[0] == 0  # taken: spin
    dpu.system("release r0, 0, nz, 5", pc=4)
    assert dpu.atomic[2] == 0 and dpu.pc == 5


def test_boot_resume_stop_and_run_bits() -> None:
    dpu = Dpu()
    dpu.pcs[1] = 33
    assert dpu.system("boot id, 1", pc=2) == EV_OK
    assert dpu.running[1] == 1 and dpu.pcs[1] == 0 and dpu.zf[0] == 1 and dpu.pc == 3
    dpu.system("boot id, 1, nz, 2", pc=2)  # already running: x = 1, retry
    assert dpu.pc == 2 and dpu.zf[0] == 0
    dpu.pcs[3] = 17
    dpu.set(r5=3)
    dpu.system("resume r5, 0")
    assert dpu.running[3] == 1 and dpu.pcs[3] == 17
    dpu.system("read_run r5, 0, nz, 8")
    assert dpu.pc == 8
    dpu.system("clr_run r5, 0, z, 8")
    assert dpu.running[3] == 0 and dpu.pc == 1
    assert dpu.system("boot id, 20") == EV_THREAD_FAULT
    dpu.system("stop true, 7", pc=3)
    assert dpu.running[0] == 0 and dpu.pc == 7
    dpu.running[0] = 1
    dpu.system("stop", pc=3)
    assert dpu.running[0] == 0 and dpu.pc == 4


def test_dma_between_wram_and_mram() -> None:
    dpu = Dpu().set(r0=(1 << 24) | 0x100, r1=0x2000)  # top byte 1: 16 bytes
    dpu.wram[0x100:0x110] = np.arange(16, dtype=np.uint8)
    assert dpu.system("sdma r0, r1, 0") == EV_OK
    assert dpu.mram[0x2000:0x2010].tolist() == list(range(16)) and dpu.mram[0x2010] == 0
    dpu.set(r0=0x203, r1=0x2005)  # low three bits dropped, 8 * (1 + 1) bytes
    assert dpu.system("ldma r0, r1, 1") == EV_OK
    assert dpu.wram[0x200:0x210].tolist() == list(range(16))
    dpu.set(r1=0xFFF8)
    assert dpu.system("ldma r0, r1, 1") == EV_DMA_FAULT


def test_fault_and_performance_counter() -> None:
    dpu = Dpu()
    assert dpu.system("fault 5", pc=6) == EV_FAULT and dpu.pc == 6
    dpu.counter[0] = 0x1234567
    dpu.system("time r0")
    assert dpu.r(0) == 0x123456
    dpu.set(r2=3)  # mode 1 (cycles), reset
    dpu.system("time_cfg r1, r2")
    assert dpu.r(1) == 0x123456 and dpu.counter.tolist() == [0, 1]
