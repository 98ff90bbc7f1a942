"""PrIM's microbenchmark kernels as DPU assembly, run on aiopim's instruction-set interpreter.

Each builder returns the assembly text of one kernel written the way UPMEM's compiler lays out
PrIM's C code (``Microbenchmarks/*/dpu/task.c``): the SDK bootstrap and boot chain, a
``barrier_wait`` built on an atomic bit and ``stop``/``resume``, ``perfcounter_get`` as the
``time`` instruction, PrIM's ``timer_stop`` (which reads the counter twice and removes the cost
of one read), the MRAM block loop with ``ldma``/``sdma``, and the per-element loops whose lengths
``aiopim.timing`` derives (6 instructions for ``x[i] += s`` on int32, 7 on int64 …).
Multiplication and division call runtime routines built here from the instruction set:
``__mulsi3`` (``mul_step``, the smaller operand as multiplier, early exit), ``__divsi3``
(``div_step`` entered by a computed jump at the divisor's ``clz``), ``__muldi3`` (16-bit partial
products from the ``mul_?l_?h`` byte multiplies) and ``__divdi3`` (the 32-bit ``div_step`` path
when both magnitudes fit 32 bits, else a 64-step shift-and-subtract loop).
:func:`program` assembles a text into an ``ElfProgram`` the host programs of ``prim_common``
load like the Python kernels.

The ``__host`` symbols are the same as the Python kernels': ``DPU_INPUT_ARGUMENTS`` (input size
in bytes, kernel) and ``DPU_RESULTS`` (one uint64 cycle count per tasklet); the arrays live in
the MRAM heap (``__sys_used_mram_end``), A then B (then the output).
"""

from __future__ import annotations

import numpy as np
from arithmetic_throughput import PRIM_ELEMENTS, TYPES, apply
from mram_latency import TRANSFERS
from prim_common import PRIM_CHIP, frequency_hz, run_kernel, run_on_one_dpu
from prim_stream import ELEMENTS, TWO_INPUTS, bytes_per_element, reference

import aiopim
from aiopim.isa import assemble

BLOCK_BYTES = 1024  # BL=10, as PrIM's run.sh

#: instructions of each per-element loop below, per element (what the tests derive times from);
#: MUL and DIV int32 call ``__mulsi3`` / ``__divsi3``, whose length depends on the operands
#: (:func:`mulsi3_instructions`, :func:`divsi3_instructions`)
ARITH_LOOP = {("add", "int32"): 6, ("sub", "int32"): 6, ("add", "int64"): 7, ("sub", "int64"): 7}
#: the loop around a runtime call: lw, move (scalar), call, sw, two adds, jltu
CALL_LOOP = 7
#: operations with an assembly kernel
ARITH_KERNELS = (
    *ARITH_LOOP,
    ("mul", "int32"),
    ("div", "int32"),
    ("mul", "int64"),
    ("div", "int64"),
)
#: the int64 loop around ``__muldi3``: ld, move, move, call, sd, two adds, jltu
CALL_LOOP_64 = 8


def mulsi3_instructions(a: int, b: int) -> int:
    """Instructions ``__mulsi3`` issues for unsigned 32-bit ``a * b``: the smaller operand is the
    multiplier, one ``mul_step`` per bit of it (at least one)."""
    small = min(a, b)
    return (5 if a <= b else 7) + max(1, small.bit_length())


def divsi3_instructions(n: int, d: int) -> int:
    """Instructions ``__divsi3`` issues for ``n / d`` (d != 0): sign handling, ``clz`` and the
    computed jump, then one ``div_step`` per shift from clz(|d|) down to 0."""
    neg = int(n < 0) + int(d < 0)
    clz = 32 - abs(d).bit_length()
    return 13 + neg + clz + int((n < 0) != (d < 0))


_PROLOGUE = """\
        .set NR_TASKLETS, {nr_tasklets}
        .set STACK_SIZE_DEFAULT, 64

// ---- bootstrap (IRAM index 0) ----------------------------------------------------------------
        .text
        .globl __bootstrap
__bootstrap:
        jnz id, __sys_start_thread
        move r0, 255
__sys_release_atomics:
        release r0, 0, nz, .+1
        add r0, r0, -1, pl, __sys_release_atomics
__sys_start_thread:
        jeq id, NR_TASKLETS - 1, __sys_stack_setup
        boot id, 1
__sys_stack_setup:
        ld d22, id8, __sys_thread_stack_table_ptr
        call r23, main
__sys_end:
        stop true, __sys_end

// ---- barrier_wait(my_barrier): link r23, clobbers r18-r21 -----------------------------------
barrier_wait:
        acquire zero, barrier_lock, nz, barrier_wait
        lw r18, zero, barrier_count
        add r18, r18, 1
        jeq r18, NR_TASKLETS, __barrier_last
        sw zero, barrier_count, r18
        move r19, id
        sb r18, barrier_queue - 1, r19
        release zero, barrier_lock, nz, .+1
        stop true, __barrier_resumed
__barrier_resumed:
        jump r23
__barrier_last:
        sw zero, barrier_count, 0
        move r19, 0
__barrier_wake:
        jeq r19, NR_TASKLETS - 1, __barrier_done
        lbu r20, r19, barrier_queue
__barrier_resume:
        resume r20, 0, nz, __barrier_resume
        add r19, r19, 1
        jump __barrier_wake
__barrier_done:
        release zero, barrier_lock, nz, .+1
        jump r23
"""

_MULSI3 = (
    """\
// ---- __mulsi3: r18 = r18 * r19 (32-bit); link r23, clobbers r19, r20 -------------------------
__mulsi3:
        move r20, r19
        jgeu r19, r18, __mulsi3_go            // the smaller operand is the multiplier
        move r20, r18
        move r18, r19
__mulsi3_go:
        move r19, 0
"""
    + "".join(f"        mul_step d18, r20, d18, {n}, z, __mulsi3_done\n" for n in range(32))
    + """\
__mulsi3_done:
        move r18, r19
        jump r23
"""
)

_DIVSI3 = (
    """\
// ---- __divsi3: r18 = r18 / r19 (signed 32-bit, truncating); link r23; clobbers r13, r19-r21 --
__divsi3:
        xor r21, r18, r19                     // the quotient's sign in bit 31
        jges r18, 0, .+2
        sub r18, zero, r18
        jges r19, 0, .+2
        sub r19, zero, r19
        jz r19, __divsi3_by_zero
        move r20, r19                         // divisor
        clz r13, r20
        move r19, r18                         // (quotient, remainder) = (0, dividend)
        move r18, 0
        sub r13, __divsi3_steps + 31, r13     // enter at the step shifting by clz(divisor)
        jump r13
__divsi3_steps:
"""
    + "".join(f"        div_step d18, r20, d18, {k}\n" for k in range(31, -1, -1))
    + """\
        jges r21, 0, __divsi3_done
        sub r18, zero, r18
__divsi3_done:
        jump r23
__divsi3_by_zero:
        fault 2                               // the runtime's division-by-zero fault
"""
)


def _mul16(dst: str, x: str, y: str) -> str:
    """dst = (x & 0xFFFF) * (y & 0xFFFF) from four byte products; clobbers r15."""
    return f"""\
        mul_ul_ul {dst}, {x}, {y}
        mul_uh_ul r15, {x}, {y}
        lsl_add {dst}, {dst}, r15, 8
        mul_ul_uh r15, {x}, {y}
        lsl_add {dst}, {dst}, r15, 8
        mul_uh_uh r15, {x}, {y}
        lsl_add {dst}, {dst}, r15, 16
"""


def _low32(dst: str, x: str, y: str) -> str:
    """dst = (x * y) mod 2^32 from 16-bit products; clobbers r0, r1, r15."""
    return (
        _mul16(dst, x, y)
        + f"        lsr r0, {x}, 16\n"
        + _mul16("r1", "r0", y)
        + f"        lsl_add {dst}, {dst}, r1, 16\n        lsr r0, {y}, 16\n"
        + _mul16("r1", x, "r0")
        + f"        lsl_add {dst}, {dst}, r1, 16\n"
    )


#: ``__muldi3`` on PrIM's operands (both high words 0): saves (4), cross-term tests (3),
#: 32 x 32 -> 64 product (2 shifts, four 7-instruction 16-bit products, 9 to combine),
#: restores (4), return (1)
MULDI3_LOW_INSTRUCTIONS = 4 + 3 + 2 + 4 * 7 + 9 + 4 + 1
#: each non-zero high word adds one 32-bit cross product (25) and its add
MULDI3_CROSS_INSTRUCTIONS = 26

_MULDI3 = (
    """\
// ---- __muldi3: d18 = d18 * d20 (64-bit); link r23; clobbers r20, r21; saves d0 d2 d12 d14 ---
// lo(a) * lo(b) in full from 16-bit halves (each from four mul_?l_?h byte products), plus the
// low words of hi(a) * lo(b) and lo(a) * hi(b) into the high word (skipped when zero)
__muldi3:
        sd r22, 0, d0
        sd r22, 8, d2
        sd r22, 16, d12
        sd r22, 24, d14
        move r2, 0                            // cross terms
        jz r18, __muldi3_no_ah
"""
    + _low32("r3", "r18", "r21")
    + """\
        add r2, r2, r3
__muldi3_no_ah:
        jz r20, __muldi3_no_bh
"""
    + _low32("r3", "r19", "r20")
    + """\
        add r2, r2, r3
__muldi3_no_bh:
        lsr r0, r19, 16
        lsr r1, r21, 16
"""
    + _mul16("r3", "r0", "r1")  # a1 * b1
    + _mul16("r12", "r19", "r1")  # a0 * b1
    + _mul16("r13", "r0", "r21")  # a1 * b0
    + _mul16("r20", "r19", "r21")  # a0 * b0
    + """\
        add r12, r12, r13                     // middle terms, carry into bit 32
        addc r13, zero, 0
        lsl r15, r12, 16
        add r19, r20, r15                     // low word
        addc r3, r3, 0
        lsr r15, r12, 16
        add r3, r3, r15
        lsl_add r3, r3, r13, 16
        add r18, r3, r2                       // high word, plus the cross terms
        ld d0, r22, 0
        ld d2, r22, 8
        ld d12, r22, 16
        ld d14, r22, 24
        jump r23
"""
)

_DIVDI3 = (
    """\
// ---- __divdi3: d18 = d18 / d20 (signed 64-bit, truncating); link r23; clobbers r20, r21;
// saves d0 d2 d12. Both magnitudes below 2^32: the 32-bit div_step sequence (computed entry);
// otherwise a 64-step shift-and-subtract loop, the quotient shifting into the dividend's place.
__divdi3:
        sd r22, 0, d0
        sd r22, 8, d2
        sd r22, 16, d12
        xor r13, r18, r20                     // the quotient's sign in bit 31
        jges r18, 0, __divdi3_n_pos
        sub r19, zero, r19
        subc r18, zero, r18
__divdi3_n_pos:
        jges r20, 0, __divdi3_d_pos
        sub r21, zero, r21
        subc r20, zero, r20
__divdi3_d_pos:
        or r0, r20, r21
        jz r0, __divdi3_by_zero
        or r0, r18, r20
        jnz r0, __divdi3_long
        clz r12, r21
        sub r12, __divdi3_steps + 31, r12
        jump r12
__divdi3_steps:
"""
    + "".join(f"        div_step d18, r21, d18, {k}\n" for k in range(31, -1, -1))
    + """\
        move r19, r18                         // (0, quotient)
        move r18, 0
        jump __divdi3_sign
__divdi3_long:
        move r0, 0                            // remainder
        move r1, 0
        move r12, 64
__divdi3_loop:
        add r19, r19, r19                     // (remainder, dividend) <<= 1
        addc r18, r18, r18
        addc r1, r1, r1
        addc r0, r0, r0
        sub r3, r1, r21
        subc r2, r0, r20, ltu, __divdi3_next  // remainder < divisor: quotient bit 0
        move r1, r3
        move r0, r2
        or r19, r19, 1
__divdi3_next:
        add r12, r12, -1, nz, __divdi3_loop
__divdi3_sign:
        jges r13, 0, __divdi3_done
        sub r19, zero, r19
        subc r18, zero, r18
__divdi3_done:
        ld d0, r22, 0
        ld d2, r22, 8
        ld d12, r22, 16
        jump r23
__divdi3_by_zero:
        fault 2
"""
)

_EPILOGUE = """\
        .data
        .balign 8
barrier_count:
        .word 0
barrier_queue:
        .zero NR_TASKLETS
        .balign 8
{buffers}
        .section .data.__sys_host
        .balign 8
        .globl DPU_INPUT_ARGUMENTS
DPU_INPUT_ARGUMENTS:
        .word 0
        .word 0
        .size DPU_INPUT_ARGUMENTS, 8
        .globl DPU_RESULTS
DPU_RESULTS:
        .zero NR_TASKLETS * 8
        .size DPU_RESULTS, NR_TASKLETS * 8

        .atomic
barrier_lock:
        .byte 0
"""

# timer_start: start = perfcounter_get()           -> r14
_TIMER_START = "        time r14                        // timer_start\n"
# timer_stop: end, end2; cycles += ((end - start) - (end2 - end)) << 4, into d16 (r17 low)
_TIMER_STOP = """\
        time r15                        // timer_stop: end
        time r13                        //             end2
        sub r13, r13, r15
        sub r15, r15, r14
        sub r15, r15, r13
        lsl r15, r15, 4
        add r17, r17, r15               // result->cycles += ...
        addc r16, r16, 0
"""


def _log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def _main_head(block: int) -> str:
    """mem_reset, the first barrier, the block loop's registers.

    r0 size, r1 tid * block, r2 A + tid * block, r3 B + tid * block, r5 loop offset, d16 cycles.
    """
    return f"""\
main:
        add r22, r22, 16                      // frame: return address, output base
        sw r22, -8, r23
        call r23, barrier_wait
        lw r0, zero, DPU_INPUT_ARGUMENTS      // input size in bytes
        move r1, id
        lsl r1, r1, {_log2(block)}
        add r2, r1, __sys_used_mram_end       // mram_base_addr_A
        add r3, r2, r0                        // mram_base_addr_B
        move r16, 0
        move r17, 0
        move r5, 0
"""


def _store_cycles() -> str:
    return """\
        sd id8, DPU_RESULTS, d16
        lw r23, r22, -8
        add r22, r22, -16
        move r0, 0                            // return 0
        jump r23
"""


def mram_latency(block: int, write: bool, nr_tasklets: int = 1) -> str:
    """MRAM-Latency: copy A to B in ``block``-byte DMAs, timing the reads (or the writes)."""
    imm = block // 8 - 1
    if write:
        body = (
            f"        ldma r4, r6, {imm}\n"
            + _TIMER_START
            + f"        sdma r4, r7, {imm}\n"
            + _TIMER_STOP
        )
    else:
        body = (
            _TIMER_START
            + f"        ldma r4, r6, {imm}\n"
            + _TIMER_STOP
            + f"        sdma r4, r7, {imm}\n"
        )
    text = _PROLOGUE.format(nr_tasklets=nr_tasklets)
    text += _main_head(block)
    text += f"""\
        add r4, r1, cache                     // this tasklet's WRAM cache
__loop:
        jgeu r5, r0, __done
        add r6, r2, r5
        add r7, r3, r5
{body}        add r5, r5, {block} * NR_TASKLETS
        jump __loop
__done:
"""
    text += _store_cycles()
    text += _EPILOGUE.format(buffers=f"cache:\n        .zero NR_TASKLETS * {block}\n")
    return text


def _arith_loop(op: str, type_name: str) -> str:
    """``cache[i] op= scalar`` over one block: r4 element pointer, r8 index, scalar in r11
    (and r10 high word for int64)."""
    if type_name == "int64" and op in ("mul", "div"):
        return f"""\
        move r8, 0
__elem:
        ld d18, r4, 0
        move r20, r10
        move r21, r11
        call r23, __{op}di3
        sd r4, 0, d18
        add r4, r4, 8
        add r8, r8, 1
        jltu r8, {BLOCK_BYTES // 8}, __elem
"""
    if op in ("mul", "div"):
        n = BLOCK_BYTES // 4
        return f"""\
        move r8, 0
__elem:
        lw r18, r4, 0
        move r19, r11
        call r23, __{op}si3
        sw r4, 0, r18
        add r4, r4, 4
        add r8, r8, 1
        jltu r8, {n}, __elem
"""
    if type_name == "int32":
        n = BLOCK_BYTES // 4
        return f"""\
        move r8, 0
__elem:
        lw r12, r4, 0
        {op} r12, r12, r11
        sw r4, 0, r12
        add r4, r4, 4
        add r8, r8, 1
        jltu r8, {n}, __elem
"""
    n = BLOCK_BYTES // 8
    carry = "addc" if op == "add" else "subc"
    return f"""\
        move r8, 0
__elem:
        ld d12, r4, 0
        {op} r13, r13, r11
        {carry} r12, r12, r10
        sd r4, 0, d12
        add r4, r4, 8
        add r8, r8, 1
        jltu r8, {n}, __elem
"""


def arithmetic(op: str, type_name: str, nr_tasklets: int) -> str:
    """Arithmetic-Throughput: ``x[i] op= size / sizeof(T)`` on 1,024-byte blocks, the update
    timed between two barriers."""
    if (op, type_name) not in ARITH_KERNELS:
        raise ValueError(f"no assembly kernel for {op} {type_name}")
    shift = 2 if type_name == "int32" else 3
    text = _PROLOGUE.format(nr_tasklets=nr_tasklets)
    text += _main_head(BLOCK_BYTES)
    text += f"""\
        lsr r11, r0, {shift}                    // scalar = size / sizeof(T)
        move r10, 0
        add r9, r1, cache
__loop:
        jgeu r5, r0, __done
        add r6, r2, r5
        ldma r9, r6, {BLOCK_BYTES // 8 - 1}
        call r23, barrier_wait
{_TIMER_START}        move r4, r9
{_arith_loop(op, type_name)}{_TIMER_STOP}        call r23, barrier_wait
        add r6, r3, r5
        sdma r9, r6, {BLOCK_BYTES // 8 - 1}
        add r5, r5, {BLOCK_BYTES} * NR_TASKLETS
        jump __loop
__done:
"""
    text += _store_cycles()
    text += {
        ("mul", "int32"): _MULSI3,
        ("div", "int32"): _DIVSI3,
        ("mul", "int64"): _MULDI3,
        ("div", "int64"): _DIVDI3,
    }.get((op, type_name), "")
    text += _EPILOGUE.format(buffers=f"cache:\n        .zero NR_TASKLETS * {BLOCK_BYTES}\n")
    return text


#: elements per iteration of the STREAM ADD loop
ADD_UNROLL = 8
#: STREAM kernels with an assembly version
STREAM_KERNELS = ("copy-dma", "copy", "add", "scale", "triad")
_PER_BLOCK = BLOCK_BYTES // 8


def _stream_loop(kernel: str) -> str:
    """The WRAM computation of one block: r9 cache_A, r24… cache_B in r4."""
    if kernel == "copy":
        # b[i] = a[i], unrolled by 3 (ld/sd x3, two pointer adds, index, branch: 10 per 3),
        # then the remaining PER_BLOCK % 3 elements
        full = _PER_BLOCK - _PER_BLOCK % 3
        rest = "".join(
            f"        ld d12, r6, {8 * k}\n        sd r7, {8 * k}, d12\n"
            for k in range(_PER_BLOCK % 3)
        )
        return f"""\
        move r6, r9
        move r7, r4
        move r8, 0
__elem:
        ld d12, r6, 0
        sd r7, 0, d12
        ld d12, r6, 8
        sd r7, 8, d12
        ld d12, r6, 16
        sd r7, 16, d12
        add r6, r6, 24
        add r7, r7, 24
        add r8, r8, 3
        jltu r8, {full}, __elem
{rest}"""
    if kernel == "add":
        # c[i] = a[i] + b[i] (written over cache_B), unrolled by ADD_UNROLL: (ld, ld, add,
        # addc, sd) per element, then two pointer adds and the branch
        body = "".join(
            f"        ld d12, r6, {8 * k}\n        ld d10, r7, {8 * k}\n"
            f"        add r13, r13, r11\n        addc r12, r12, r10\n        sd r7, {8 * k}, d12\n"
            for k in range(ADD_UNROLL)
        )
        return f"""\
        move r6, r9
        move r7, r4
        add r8, r9, {BLOCK_BYTES}
__elem:
{body}        add r6, r6, {8 * ADD_UNROLL}
        add r7, r7, {8 * ADD_UNROLL}
        jltu r6, r8, __elem
"""
    if kernel in ("scale", "triad"):
        # scale: b[i] = s * a[i]; triad: c[i] = a[i] + s * b[i] (written over cache_B); the
        # scalar is in d10, the product from __muldi3
        src, add = ("r6", "") if kernel == "scale" else ("r7", _TRIAD_ADD)
        return f"""\
        move r6, r9
        move r7, r4
        add r8, r9, {BLOCK_BYTES}
__elem:
        ld d18, {src}, 0
        move r20, r10
        move r21, r11
        call r23, __muldi3
{add}        sd r7, 0, d18
        add r6, r6, 8
        add r7, r7, 8
        jltu r6, r8, __elem
"""
    raise ValueError(f"no assembly loop for STREAM {kernel!r}")


_TRIAD_ADD = """\
        ld d12, r6, 0
        add r19, r19, r13
        addc r18, r18, r12
"""


#: instructions of the WRAM computation of one 1,024-byte block of each STREAM kernel
STREAM_BLOCK_INSTRUCTIONS = {
    "copy-dma": 0,
    "copy": 3 + 10 * (_PER_BLOCK // 3) + 2 * (_PER_BLOCK % 3),
    "add": 3 + (5 * ADD_UNROLL + 3) * (_PER_BLOCK // ADD_UNROLL),
    # plus __muldi3 per element (MULDI3_LOW_INSTRUCTIONS when both high words are 0)
    "scale": 3 + 8 * _PER_BLOCK,
    "triad": 3 + 11 * _PER_BLOCK,
}


def stream(kernel: str, mem: str, nr_tasklets: int) -> str:
    """STREAM over MRAM (the whole loop timed) or WRAM (only the computation, between
    barriers); A (and B) read per block, the result written to the output array."""
    if kernel not in STREAM_KERNELS:
        raise ValueError(f"no assembly kernel for STREAM {kernel!r}")
    wram = mem == "WRAM"
    two = kernel in TWO_INPUTS
    imm = BLOCK_BYTES // 8 - 1
    text = _PROLOGUE.format(nr_tasklets=nr_tasklets)
    text += _main_head(BLOCK_BYTES)
    out = "        add r6, r3, r0\n" if two else "        move r6, r3\n"
    text += "" if wram else _TIMER_START
    scalar = "        move r10, 0\n        lsr r11, r0, 3\n" if kernel in ("scale", "triad") else ""
    text += f"""\
        add r9, r1, cache_a
        add r4, r1, {"cache_a" if kernel == "copy-dma" else "cache_b"}
{out}        sw r22, -16, r6                       // mram_base_addr_out
{scalar}__loop:
        jgeu r5, r0, __done
        add r6, r2, r5
        ldma r9, r6, {imm}
"""
    if two:
        text += f"        add r6, r3, r5\n        ldma r4, r6, {imm}\n"
    if kernel != "copy-dma":
        if wram:
            text += "        call r23, barrier_wait\n" + _TIMER_START
        text += _stream_loop(kernel)
        if wram:
            text += _TIMER_STOP + "        call r23, barrier_wait\n"
    text += f"""\
        lw r6, r22, -16
        add r6, r6, r5
        sdma r4, r6, {imm}
        add r5, r5, {BLOCK_BYTES} * NR_TASKLETS
        jump __loop
__done:
"""
    if not wram:
        text += _TIMER_STOP
    text += _store_cycles()
    if kernel in ("scale", "triad"):
        text += _MULDI3
    buffers = f"cache_a:\n        .zero NR_TASKLETS * {BLOCK_BYTES}\n"
    buffers += f"cache_b:\n        .zero NR_TASKLETS * {BLOCK_BYTES}\n"
    text += _EPILOGUE.format(buffers=buffers)
    return text


def program(text: str, name: str, chip: str = "v1A") -> aiopim.ElfProgram:
    """Assemble ``text`` for ``chip`` into a loadable program (no Python model bound)."""
    return aiopim.load_elf(assemble(text, chip), name=name)


# ---- the host programs of the Python ports, loading the assembled kernels instead -------------


async def _mram_host(block: int, write: bool, transfers: int, chip: str) -> tuple[int, bool]:
    a = np.random.default_rng(0).integers(0, 2**31, transfers * block // 8).astype(np.uint64)
    prog = program(mram_latency(block, write), f"mram_latency_{block}", chip)
    cycles, b = await run_kernel(prog, [a])  # type: ignore[arg-type]
    return cycles, bool(np.array_equal(a, b))


def measure_mram(
    block: int, write: bool, chip: str = PRIM_CHIP, transfers: int = TRANSFERS
) -> dict[str, float]:
    """MRAM-Latency of one transfer size on the interpreter: cycles per transfer, MB/s."""
    cycles, correct = run_on_one_dpu(_mram_host, block, write, transfers, chip, chip=chip)
    if not correct:
        raise AssertionError(f"MRAM copy with {block}-byte blocks: B differs from A")
    latency = cycles / transfers
    return {"cycles": latency, "mbps": block * frequency_hz(chip) / latency / 1e6}


async def _arith_host(
    op: str, type_name: str, nr_tasklets: int, nr_elements: int, chip: str = PRIM_CHIP
) -> tuple[int, bool]:
    dt = np.dtype(TYPES[type_name])
    a = np.random.default_rng(0).integers(0, 2**31, nr_elements).astype(dt)
    prog = program(arithmetic(op, type_name, nr_tasklets), f"arith_{op}_{type_name}", chip)
    cycles, b = await run_kernel(prog, [a])  # type: ignore[arg-type]
    expected = a.copy()
    apply(op, expected, dt.type(nr_elements))
    return cycles, bool(np.array_equal(b, expected))


def measure_arith(
    op: str, type_name: str, nr_tasklets: int, nr_elements: int = PRIM_ELEMENTS
) -> dict[str, float]:
    """Arithmetic-Throughput on the interpreter: DPU cycles and MOPS."""
    cycles, correct = run_on_one_dpu(_arith_host, op, type_name, nr_tasklets, nr_elements)
    if not correct:
        raise AssertionError(f"{op} {type_name} with {nr_tasklets} tasklets: wrong results")
    return {"cycles": cycles, "mops": nr_elements * frequency_hz(PRIM_CHIP) / cycles / 1e6}


async def _stream_host(
    kernel: str, mem: str, nr_tasklets: int, nr_elements: int, chip: str = PRIM_CHIP
) -> tuple[int, bool]:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**31, nr_elements).astype(np.uint64)
    b = rng.integers(0, 2**31, nr_elements).astype(np.uint64)
    inputs = [a, b] if kernel in TWO_INPUTS else [a]
    prog = program(stream(kernel, mem, nr_tasklets), f"stream_{kernel}_{mem}", chip)
    cycles, out = await run_kernel(prog, inputs)  # type: ignore[arg-type]
    expected = reference(kernel, a, b, np.uint64(nr_elements))
    return cycles, bool(np.array_equal(out, expected))


def measure_stream(kernel: str, mem: str, nr_tasklets: int, nr_elements: int = ELEMENTS) -> float:
    """STREAM bandwidth in MB/s on the interpreter."""
    cycles, correct = run_on_one_dpu(_stream_host, kernel, mem, nr_tasklets, nr_elements)
    if not correct:
        raise AssertionError(f"STREAM {kernel} ({mem}, {nr_tasklets} tasklets): wrong output")
    return bytes_per_element(kernel) * nr_elements / (cycles / frequency_hz(PRIM_CHIP)) / 1e6
