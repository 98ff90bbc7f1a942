"""Hand-encoded DPU binaries launched through the host API on the interpreter engine.

Every program runs on both anyio backends and on both versions of the interpreter loop (pure
Python and the compiled extension); results, faults and virtual times must be identical.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from isa_programs import Asm, elf, u32

import aiopim
from aiopim import DpuError, timing
from aiopim.elf import ElfProgram
from aiopim.isa import _runner, set_engine
from aiopim.sdk import DpuErrorCode

V1B = timing.V1B
Layout = dict[str, tuple[int, int, str]]


@pytest.fixture(params=[False, True], ids=["python", "jit"])
def jit(request: pytest.FixtureRequest) -> Iterator[bool]:
    set_engine("compiled" if request.param else "python")
    yield bool(request.param)
    set_engine(None)


def build(make: Callable[[Layout], Asm], **kw: Any) -> tuple[ElfProgram, Layout]:
    """Two passes: the data layout does not depend on the code."""
    _, lay = elf(Asm(), **kw)
    return elf(make(lay), **kw)


class Run:
    """What one launch left: symbols read back, fault, run time, DPU."""

    def __init__(
        self,
        prog: ElfProgram,
        backend: str,
        reads: dict[str, tuple[Any, int]],
        *,
        log: bool = False,
        chip: str = "v1B",
    ) -> None:
        self.values: dict[str, np.ndarray] = {}
        self.error: DpuError | None = None

        async def main() -> None:
            dpus = await aiopim.DpuSet.alloc(1)
            await dpus.load(prog)
            self.dpu = dpus.dpu_list[0]
            try:
                await dpus.launch()
            except DpuError as exc:
                self.error = exc
            for name, (dtype, count) in reads.items():
                self.values[name] = (await dpus.copy_from(name, dtype, count))[0]
            self.log = dpus.log() if log else None

        aiopim.run(main, backend=backend, machine=aiopim.MachineConfig(chip=chip))
        self.fault = self.dpu.fault
        self.run_ps = self.dpu.last_run_ps


def boot_chain(a: Asm, n: int, table: int) -> None:
    """The SDK bootstrap's shape: thread t < n-1 boots t+1; each loads its stack entry."""
    a("add:zrici", ra="id", imm=0, cc="nz", pc="chain")  # threads != 0 skip the init
    a("nop:")  # thread 0's runtime initialisation would be here
    a.label("chain")
    a("sub:zrici", ra="id", imm=n - 1, cc="geu", pc="stacks")
    a("boot:rici", ra="id", imm=1, cc="nz", pc="chain")  # never taken: the target is stopped
    a.label("stacks")
    a("ld:erri", endian="little", dc="d22", ra="id8", off=table)


def stack_table(n: int, base: int = 0x2000, size: int = 0x100) -> bytes:
    # entry t: word +0 -> r23 (unused), word +4 -> r22 (the stack pointer)
    return b"".join(u32(0xDEAD0000 + t, base + t * size) for t in range(n))


# ---- boot chain, stack table ---------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 16])
def test_boot_chain_starts_every_thread_with_its_stack(n: int, backend: str, jit: bool) -> None:
    def make(lay: Layout) -> Asm:
        a = Asm()
        boot_chain(a, n, lay["stack_table"][0])
        a("sw:erir", endian="little", ra="id4", off=lay["seen"][0], rb="r22")
        a("stop:ci", cc="true", pc="end")
        a.label("end", function=True)
        a("fault:i", imm=99)  # never reached: stopped threads stay stopped
        return a

    prog, _ = build(
        make,
        nr_tasklets=n,
        host_vars={"stack_table": stack_table(16), "seen": bytes(64)},
    )
    r = Run(prog, backend, {"seen": (np.uint32, 16)})
    assert r.fault is None
    expected = [0x2000 + t * 0x100 if t < n else 0 for t in range(16)]
    assert r.values["seen"].tolist() == expected


# ---- mutex ---------------------------------------------------------------------------------------
def _counter_program(n: int, k: int, locked: bool) -> ElfProgram:
    def make(lay: Layout) -> Asm:
        counter = lay["counter"][0]
        a = Asm()
        boot_chain(a, n, lay["stack_table"][0])
        a("add:rri", rc="r0", ra="zero", imm=k)
        a.label("loop")
        if locked:
            a.label("lock")
            a("acquire:rici", ra="zero", imm=201, cc="nz", pc="lock")
        a("lw:erri", endian="little", rc="r1", ra="zero", off=counter)
        a("add:rri", rc="r1", ra="r1", imm=1)
        a("sw:erir", endian="little", ra="zero", off=counter, rb="r1")
        if locked:
            a("release:rici", ra="zero", imm=201, cc="nz", pc="next")
            a.label("next")
        a("add:rrici", rc="r0", ra="r0", imm=-1, cc="nz", pc="loop")
        a("stop:ci", cc="false", pc=0)
        return a

    prog, _ = build(
        make, nr_tasklets=n, host_vars={"stack_table": stack_table(n), "counter": bytes(8)}
    )
    return prog


def test_mutex_protects_a_shared_counter(backend: str, jit: bool) -> None:
    n, k = 12, 20
    r = Run(_counter_program(n, k, True), backend, {"counter": (np.uint32, 1)})
    assert r.fault is None and int(r.values["counter"][0]) == n * k
    # without the lock, interleaved read-modify-writes lose increments
    r = Run(_counter_program(n, k, False), backend, {"counter": (np.uint32, 1)})
    assert int(r.values["counter"][0]) < n * k


# ---- barrier: stop / resume with a WRAM wait queue -----------------------------------------------
def test_barrier_with_stop_resume_and_a_wait_queue(backend: str, jit: bool) -> None:
    n = 6

    def make(lay: Layout) -> Asm:
        count, queue, out = lay["count"][0], lay["queue"][0], lay["out"][0]
        a = Asm()
        boot_chain(a, n, lay["stack_table"][0])
        a("add:rri", rc="r3", ra="id", imm=0)
        a("lsl:rri", rc="r6", ra="id", shift=5)  # work before the barrier: id * 32 ...
        a.label("spin")
        a("add:rrici", rc="r6", ra="r6", imm=-1, cc="pl", pc="spin")  # ... iterations
        a.label("lock")
        a("acquire:rici", ra="zero", imm=210, cc="nz", pc="lock")
        a("lw:erri", endian="little", rc="r1", ra="zero", off=count)
        a("add:rri", rc="r1", ra="r1", imm=1)
        a("sw:erir", endian="little", ra="zero", off=count, rb="r1")
        a("sub:zrici", ra="r1", imm=n, cc="z", pc="last")
        a("lsl:rri", rc="r2", ra="r1", shift=2)
        a("sw:erir", endian="little", ra="r2", off=queue - 4, rb="r3")  # queue[count-1] = id
        a("release:rici", ra="zero", imm=210, cc="nz", pc="sleep")
        a.label("sleep")
        a("stop:ci", cc="true", pc="after")
        a.label("last", function=True)
        a("release:rici", ra="zero", imm=210, cc="nz", pc="wake")
        a.label("wake")
        a("add:rri", rc="r4", ra="zero", imm=0)
        a.label("wake_loop")
        a("lw:erri", endian="little", rc="r5", ra="r4", off=queue)
        a.label("resume")
        a("resume:rici", ra="r5", imm=0, cc="nz", pc="resume")  # until it has stopped
        a("add:rri", rc="r4", ra="r4", imm=4)
        a("sub:zrici", ra="r4", imm=4 * (n - 1), cc="ltu", pc="wake_loop")
        a.label("after")
        a("lw:erri", endian="little", rc="r1", ra="zero", off=count)
        a("sw:erir", endian="little", ra="id4", off=out, rb="r1")
        a("stop:ci", cc="false", pc=0)
        return a

    prog, _ = build(
        make,
        nr_tasklets=n,
        host_vars={
            "stack_table": stack_table(n),
            "count": bytes(8),
            "queue": bytes(4 * n),
            "out": bytes(4 * n),
        },
    )
    r = Run(prog, backend, {"out": (np.uint32, n), "queue": (np.uint32, n)})
    assert r.fault is None
    assert r.values["out"].tolist() == [n] * n  # nobody left the barrier early
    assert sorted(r.values["queue"].tolist()[: n - 1]) == list(range(n - 1))


# ---- bump allocator that faults when full --------------------------------------------------------
def test_bump_allocator_faults_with_code_1_when_full(backend: str, jit: bool) -> None:
    n, heap, chunk = 4, 0x3000, 0x40

    def make(lay: Layout) -> Asm:
        ptr, got = lay["heap_ptr"][0], lay["got"][0]
        a = Asm()
        boot_chain(a, n, lay["stack_table"][0])
        a.label("again")
        a("call:rri", rc="r23", ra="zero", off="mem_alloc")
        a("add:rri", rc="r2", ra="r0", imm=-heap & 0xFFFFFFFF)
        a("lsr:rri", rc="r2", ra="r2", shift=4)  # slot = (p - heap) / 16: one word per chunk
        a("sw:erir", endian="little", ra="r2", off=got, rb="r3")  # got[slot] = id + 1
        a("call:zri", ra="zero", off="again")
        a.label("mem_alloc", function=True)
        a("add:rri", rc="r3", ra="id", imm=1)
        a.label("lock")
        a("acquire:rici", ra="zero", imm=220, cc="nz", pc="lock")
        a("lw:erri", endian="little", rc="r0", ra="zero", off=ptr)
        a("add:rri", rc="r1", ra="r0", imm=chunk)
        a("add:rri", rc="r4", ra="zero", imm=heap + 8 * chunk)
        a("sub:zrrci", ra="r1", rb="r4", cc="gtu", pc="full")
        a("sw:erir", endian="little", ra="zero", off=ptr, rb="r1")
        a("release:rici", ra="zero", imm=220, cc="nz", pc="ret")
        a.label("ret")
        a("call:zri", ra="r23", off=0)
        a.label("full")
        a("fault:i", imm=1)
        return a

    prog, _ = build(
        make,
        nr_tasklets=n,
        host_vars={"stack_table": stack_table(n), "heap_ptr": u32(heap, 0), "got": bytes(128)},
    )
    r = Run(prog, backend, {"got": (np.uint32, 32), "heap_ptr": (np.uint32, 1)})
    assert r.error is not None and r.error.code == DpuErrorCode.DPU_ERR_DPU_FAULT
    assert r.fault is not None and r.fault.code == 1
    assert "fault 1 (heap full)" in r.fault.reason and "(mem_alloc+" in r.fault.reason
    assert r.fault.reason.endswith("; instruction fault 1")
    assert int(r.values["heap_ptr"][0]) == heap + 8 * chunk
    slots = r.values["got"].tolist()
    # chunk i is recorded in word i by the thread that got it (one still in flight per thread
    # may miss its record when the DPU stops)
    assert all(v in range(n + 1) for v in slots[:8]) and not any(slots[8:])
    assert sum(1 for v in slots[:8] if v) >= 8 - (n - 1)


# ---- DMA -----------------------------------------------------------------------------------------
def test_mram_dma_round_trip(backend: str, jit: bool) -> None:
    words = 64

    def make(lay: Layout) -> Asm:
        src = lay["src"][0] & ~0x08000000
        dst = lay["dst"][0] & ~0x08000000
        buf = lay["buf"][0]
        a = Asm()
        a("add:rri", rc="r0", ra="zero", imm=buf | ((4 * words // 8 - 1) << 24))
        a("add:rri", rc="r1", ra="zero", imm=src)
        a("ldma:rri", ra="r0", rb="r1", immDma=0)
        a("add:rri", rc="r2", ra="zero", imm=0)
        a.label("loop")
        a("lw:erri", endian="little", rc="r3", ra="r2", off=buf)
        a("add:rri", rc="r3", ra="r3", imm=1000)
        a("sw:erir", endian="little", ra="r2", off=buf, rb="r3")
        a("add:rri", rc="r2", ra="r2", imm=4)
        a("sub:zrici", ra="r2", imm=4 * words, cc="ltu", pc="loop")
        a("add:rri", rc="r1", ra="zero", imm=dst)
        a("sdma:rri", ra="r0", rb="r1", immDma=0)
        a("stop:ci", cc="false", pc=0)
        return a

    src = np.arange(words, dtype=np.uint32) * 7
    prog, _ = build(
        make,
        host_vars={"buf": bytes(4 * words)},
        mram_vars={"src": src.tobytes(), "dst": bytes(4 * words)},
    )
    r = Run(prog, backend, {"dst": (np.uint32, words)})
    assert r.fault is None
    assert r.values["dst"].tolist() == (src + 1000).tolist()


def test_dma_latency_is_exact() -> None:
    def make(lay: Layout) -> Asm:
        a = Asm()
        a("ldma:rri", ra="r0", rb="r1", immDma=127)  # 1024 bytes at cycle 0
        a("stop:ci", cc="false", pc=0)
        return a

    prog, _ = build(make)
    r = Run(prog, "asyncio", {})
    _, latency = timing.dma_cycles(1024, write=False)
    due = int(np.ceil(latency))
    assert r.run_ps == V1B.cycles_to_ps(due + timing.REVOLVER_CYCLES)


def test_dma_outside_memory_is_a_dma_fault(backend: str, jit: bool) -> None:
    a = Asm()
    a("add:rri", rc="r0", ra="zero", imm=0xFFF8)  # WRAM 0xFFF8 + 8 > 63488 bytes
    a("ldma:rri", ra="r0", rb="r1", immDma=0)
    a("stop:ci", cc="false", pc=0)
    r = Run(elf(a)[0], backend, {})
    assert r.fault is not None and "DMA fault" in r.fault.reason and r.fault.code is None


# ---- exact virtual time --------------------------------------------------------------------------
def _straight(n: int, body: int) -> ElfProgram:
    """Thread 0 boots threads 1..n-1 (each thread runs the same n-1 boots), then ``body``
    instructions and a stop."""
    a = Asm()
    for t in range(1, n):
        a("boot:rici", ra="zero", imm=t, cc="false", pc=0)
    for _ in range(body):
        a("add:rri", rc="r0", ra="r0", imm=1)
    a("stop:ci", cc="false", pc=0)
    return elf(a, nr_tasklets=n)[0]


def test_one_thread_takes_eleven_cycles_per_instruction(backend: str, jit: bool) -> None:
    r = Run(_straight(1, 9), backend, {})
    assert r.run_ps == V1B.cycles_to_ps(11 * 10)
    assert r.dpu.runner is not None and r.dpu.runner.instructions == 10  # type: ignore[attr-defined]
    # v1A: 350 MHz, a cycle is not a whole number of picoseconds
    a = Asm()
    for _ in range(12):
        a("nop:")
    a("stop:ci", cc="false", pc=0)
    r = Run(elf(a, chip="v1A")[0], backend, {}, chip="v1A")
    assert r.run_ps == timing.V1A.cycles_to_ps(11 * 13) and r.fault is None


@pytest.mark.parametrize(("n", "per_instruction"), [(16, 16), (11, 11), (5, 11), (2, 11)])
def test_issue_rate_is_one_per_cycle_from_eleven_threads(
    n: int, per_instruction: int, jit: bool
) -> None:
    # each extra instruction of every thread costs max(n, 11) cycles once all threads run
    t1 = Run(_straight(n, 50), "asyncio", {}).run_ps
    t2 = Run(_straight(n, 150), "asyncio", {}).run_ps
    assert t2 - t1 == V1B.cycles_to_ps(100 * per_instruction)


# ---- malformed programs --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda a: a.raw((1 << 48) - 1), "undecodable word"),
        (lambda a: a("nop:")("nop:"), "PC 2 is outside the loaded program (2 instructions)"),
        (lambda a: a("call:zri", ra="zero", off=500), "PC 500 is outside"),
        (lambda a: a("boot:rici", ra="zero", imm=20, cc="false", pc=0), "thread 20 does not"),
        (lambda a: a("lw:erri", endian="little", rc="r0", ra="zero", off=2), "memory fault"),
        (lambda a: a("hash:rrr", rc="r0", ra="r1", rb="r2"), "unimplemented instruction"),
    ],
)
def test_malformed_programs_fault_the_dpu(
    make: Callable[[Asm], Any], needle: str, backend: str
) -> None:
    a = Asm()
    a.label("entry", function=True)
    make(a)
    r = Run(elf(a)[0], backend, {})
    assert r.error is not None and r.error.code == DpuErrorCode.DPU_ERR_DPU_FAULT
    assert r.fault is not None and needle in r.fault.reason
    assert r.fault.reason.startswith(f"DPU {r.dpu.name} thread 0 at PC ")
    assert ("(entry" in r.fault.reason) == ("outside" not in needle)


def _with_field(word: int, signature: str, field: str, value: int) -> int:
    from aiopim.isa import _tables as T
    from aiopim.isa._codec import FIELD_NAMES, signature_index

    sig = signature_index(signature)
    for f in T.SIG_FIELDS[sig]:
        if FIELD_NAMES[f[0]] != field:
            continue
        for word_lsb, field_lsb, width in f[3]:
            mask = ((1 << width) - 1) << word_lsb
            word = (word & ~mask) | (((value >> field_lsb) & ((1 << width) - 1)) << word_lsb)
    return word


@pytest.mark.parametrize(
    ("signature", "fields", "field", "value", "needle"),
    [
        ("add:rrrci", {"rc": 0, "ra": 1, "rb": 2, "cc": 3, "pc": 0}, "cc", 17, "condition code"),
        ("ld:erri", {"endian": 0, "dc": 0, "ra": 1, "off": 0}, "dc", 1, "odd register pair"),
    ],
)
def test_illegal_condition_code_and_odd_pair_fault(
    signature: str, fields: dict[str, int], field: str, value: int, needle: str
) -> None:
    from aiopim.isa._codec import DecodeStatus, Instruction, decode, encode

    word = _with_field(encode(Instruction.make(signature, **fields)), signature, field, value)
    decoded = decode(word)
    assert decoded is not None and decoded.status != DecodeStatus.OK
    r = Run(elf(Asm().raw(word))[0], "asyncio", {})
    assert r.fault is not None and needle in r.fault.reason


# ---- printf log ----------------------------------------------------------------------------------
def test_dpu_log_read_shows_the_binarys_own_printf_output(backend: str, jit: bool) -> None:
    # the SDK's log record of printf("%d items", 42): format section, then values and texts
    message = b"%d%s\0" + (42).to_bytes(4, "little") + b" items\0"
    message += bytes(-len(message) % 8)

    def make(lay: Layout) -> Asm:
        cache, state = lay["cache"][0], lay["__stdout_buffer_state"][0]
        a = Asm()
        a("add:rri", rc="r0", ra="zero", imm=cache | ((len(message) // 8 - 1) << 24))
        a("add:rri", rc="r1", ra="zero", imm=lay["__stdout_buffer"][0] & ~0x08000000)
        a("sdma:rri", ra="r0", rb="r1", immDma=0)
        a("sw:erii", endian="little", ra="zero", off=state, imm=len(message))
        a("stop:ci", cc="false", pc=0)
        return a

    prog, _ = build(
        make,
        host_vars={"cache": message},
        wram_vars={"__stdout_buffer_state": bytes(8)},
    )
    r = Run(prog, backend, {}, log=True)
    assert r.fault is None and r.log is not None and r.log.endswith("42 items")


# ---- trace, model precedence ---------------------------------------------------------------------
def test_bounded_instruction_trace() -> None:
    _runner.IsaRunner.trace_length = 4
    try:
        r = Run(_straight(1, 6), "asyncio", {})
    finally:
        _runner.IsaRunner.trace_length = 0
    trace = r.dpu.runner.trace  # type: ignore[attr-defined]
    assert trace is not None and len(trace) == 4
    assert [e[2] for e in trace] == [3, 4, 5, 6]
    assert [e[0] for e in trace] == [33, 44, 55, 66]
    assert trace[-1][3] == "stop"  # as the disassembler prints it


def test_a_bound_model_still_wins_over_the_interpreter() -> None:
    prog = elf(Asm()("fault:i", imm=5))[0]
    ran: list[int] = []

    async def model(t: aiopim.Tasklet) -> None:
        ran.append(t.me())

    prog.bind(model)
    r = Run(prog, "asyncio", {})
    assert r.fault is None and ran == [0]


# ---- host writes during a run see the DPUs exactly at their time ---------------------------------
def test_parallel_host_write_is_seen_at_its_exact_time(backend: str, jit: bool) -> None:
    def make(lay: Layout) -> Asm:
        flag, out = lay["flag"][0], lay["out"][0]
        a = Asm()
        a("add:rri", rc="r2", ra="zero", imm=0)  # cycle 0
        a.label("poll")
        a("lw:erri", endian="little", rc="r1", ra="zero", off=flag)  # cycle 11 + 33k
        a("add:rri", rc="r2", ra="r2", imm=1)
        a("add:zrici", ra="r1", imm=0, cc="z", pc="poll")
        a("sw:erir", endian="little", ra="zero", off=out, rb="r2")
        a("stop:ci", cc="false", pc=0)
        return a

    prog, _ = build(make, host_vars={"flag": bytes(8), "out": bytes(8)})
    seen: dict[str, Any] = {}

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(2)
        await dpus.load(prog)
        await dpus.launch(wait=False)
        await anyio.sleep(1e-5)
        await dpus.copy_to("flag", np.array([1, 0], np.uint32), parallel=True)
        seen["write"] = round(aiopim.now() * 1e12)
        await dpus.sync()
        seen["out"] = (await dpus.copy_from("out", np.uint32, 1))[:, 0].tolist()
        seen["boot"] = [d.boot_time for d in dpus.dpu_list]
        seen["faults"] = dpus.faults

    aiopim.run(main, backend=backend)
    assert seen["faults"] == [None, None]
    boot = seen["boot"][0]
    k = 0
    while boot + V1B.cycles_to_ps(11 + 33 * k) < seen["write"]:
        k += 1
    assert seen["out"] == [k + 1, k + 1]


def test_other_dpus_stop_where_the_host_can_first_react_to_a_fault(backend: str) -> None:
    def make(lay: Layout) -> Asm:
        mode, flag, count = lay["mode"][0], lay["flag"][0], lay["count"][0]
        a = Asm()
        a("lw:erri", endian="little", rc="r1", ra="zero", off=mode)  # cycle 0
        a("add:zrici", ra="r1", imm=0, cc="z", pc="count")  # cycle 11
        a.label("spin")
        a("add:rrici", rc="r1", ra="r1", imm=-1, cc="nz", pc="spin")
        a("fault:i", imm=7)
        a.label("count")
        a("add:rri", rc="r2", ra="r2", imm=1)  # cycle 22 + 44k
        a("sw:erir", endian="little", ra="zero", off=count, rb="r2")  # cycle 33 + 44k
        a("lw:erri", endian="little", rc="r3", ra="zero", off=flag)
        a("add:zrici", ra="r3", imm=0, cc="z", pc="count")
        a("stop:ci", cc="false", pc=0)
        return a

    prog, _ = build(make, host_vars={"mode": bytes(8), "flag": bytes(8), "count": bytes(8)})
    seen: dict[str, Any] = {}

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(2)
        await dpus.load(prog)
        await dpus[0].copy_to("mode", np.array([40, 0], np.uint32))
        with pytest.raises(DpuError):
            await dpus.launch()  # DPU 0 faults; the host learns it a polling latency later
        seen["reacted"] = round(aiopim.now() * 1e12)
        counts = await dpus.copy_from("count", np.uint32, 1, parallel=True)
        seen["read"] = round(aiopim.now() * 1e12)
        seen["count"] = int(counts[1, 0])
        await dpus.copy_to("flag", np.array([1, 0], np.uint32), parallel=True)
        await dpus.sync()
        seen["boot"] = dpus.dpu_list[1].boot_time
        seen["faults"] = [f is not None for f in dpus.faults]
        seen["fault_time"] = dpus.faults[0].time_ps  # type: ignore[union-attr]

    aiopim.run(main, backend=backend)
    assert seen["faults"] == [True, False]
    assert seen["reacted"] == seen["fault_time"] + timing.COMPLETION_POLL_LATENCY_PS
    k = 0  # stores of DPU 1 issued before the parallel read
    while seen["boot"] + V1B.cycles_to_ps(33 + 44 * k) < seen["read"]:
        k += 1
    assert seen["count"] == k


def test_max_run_cycles_stops_a_binary_that_spins_forever(backend: str) -> None:
    a = Asm()
    a.label("lock")
    a("acquire:rici", ra="zero", imm=3, cc="true", pc="lock")  # spins forever
    a("nop:")
    _runner.IsaRunner.max_run_cycles = 5000
    try:
        r = Run(elf(a)[0], backend, {})
    finally:
        _runner.IsaRunner.max_run_cycles = None
    assert r.fault is not None and "still running after 5000 cycles" in r.fault.reason
    assert r.run_ps == V1B.cycles_to_ps(5000)


def ldmai_overlay_program(after: int, before: int | None = None) -> ElfProgram:
    """A program that loads 4 instructions from MRAM (``ldmai``) over IRAM rows 4-7 and jumps
    there; they store ``after`` to ``out``. With ``before``, the program's own rows 4-7 store
    that value instead (what runs if the overlay is missed)."""

    def store(value: int, out: int) -> Asm:
        o = Asm()
        o("add:rri", rc="r5", ra="zero", imm=value)
        o("sw:erir", endian="little", ra="zero", off=out, rb="r5")
        o("stop:ci", cc="false", pc=0)
        o("nop:")
        return o

    def make(lay: Layout) -> Asm:
        a = Asm()
        a("add:rri", rc="r0", ra="zero", imm=8 * 4 | (3 << 24))  # IRAM byte 32, 4 words
        a("add:rri", rc="r1", ra="zero", imm=lay["overlay"][0] & ~0x08000000)
        a("ldmai:rri", ra="r0", rb="r1", immDma=0)
        a("call:zri", ra="zero", off=4)  # jump into the overlay
        if before is not None:
            for signature, fields in store(before, lay["out"][0]).items:
                a(signature, **fields)
        return a

    host, mram = {"out": bytes(8)}, {"overlay": bytes(32)}
    _, lay = build(make, host_vars=host, mram_vars=mram)
    prog, _ = build(make, host_vars=host, mram_vars={"overlay": store(after, lay["out"][0]).text()})
    return prog


def test_ldmai_loads_and_runs_new_instructions(backend: str, jit: bool) -> None:
    prog = ldmai_overlay_program(77)
    r = Run(prog, backend, {"out": (np.uint32, 1)})
    assert r.fault is None and int(r.values["out"][0]) == 77


def test_a_launch_runs_what_the_iram_holds() -> None:
    a = Asm()
    a("add:rri", rc="r0", ra="zero", imm=5)
    a("sw:erir", endian="little", ra="zero", off=0, rb="r0")
    a("stop:ci", cc="false", pc=0)
    prog = elf(a)[0]
    patched = Asm()("add:rri", rc="r0", ra="zero", imm=6).text()
    seen: list[int] = []

    async def main() -> None:
        dpus = await aiopim.DpuSet.alloc(1)
        await dpus.load(prog)
        dpu = dpus.dpu_list[0]
        await dpus.launch()
        seen.append(int(dpu.wram[:4].view(np.uint32)[0]))
        dpu.iram[:8] = np.frombuffer(patched, np.uint8)  # as an ldmai of a previous run would
        await dpus.launch()
        seen.append(int(dpu.wram[:4].view(np.uint32)[0]))

    aiopim.run(main)
    assert seen == [5, 6]


def test_dma_engine_serialises_requests_of_two_threads(backend: str, jit: bool) -> None:
    a = Asm()
    a("boot:rici", ra="zero", imm=1, cc="false", pc=0)  # thread 0 at cycle 0, thread 1 at 1
    a("ldma:rri", ra="r0", rb="r1", immDma=255)  # 2048 bytes: cycles 11 and 12
    a("stop:ci", cc="false", pc=0)
    r = Run(elf(a, nr_tasklets=2)[0], backend, {})
    busy, latency = timing.dma_cycles(2048, write=False)
    done0 = 11 + latency  # the engine is free: starts at once
    start1 = max(12, 11 + busy)  # waits for the engine to have moved the first 2048 bytes
    done1 = start1 + latency
    assert r.fault is None
    assert r.run_ps == V1B.cycles_to_ps(max(done0, done1) + timing.REVOLVER_CYCLES)
    runner = r.dpu.runner
    assert runner.dma_requests == 2 and runner.dma_bytes == 4096  # type: ignore[union-attr]


def test_the_decoded_binary_is_shared_and_runs_are_deterministic_under_exploration() -> None:
    prog = _counter_program(8, 10, True)

    async def main() -> tuple[list[int], int, bool]:
        dpus = await aiopim.DpuSet.alloc(3)
        await dpus.load(prog)
        await dpus.launch()
        counts = (await dpus.copy_from("counter", np.uint32, 1))[:, 0].tolist()
        codes = [d.runner.code for d in dpus.dpu_list]  # type: ignore[union-attr]
        shared = all(c is codes[0] for c in codes)
        return counts, round(aiopim.now() * 1e12), shared

    first = aiopim.run(main, explore=True, seed=11)
    assert first[0] == [80, 80, 80] and first[2]
    assert aiopim.run(main, explore=True, seed=11) == first
    assert aiopim.run(main, backend="trio", explore=True, seed=11) == first


def test_finished_emulators_are_freed() -> None:
    """Nothing module-level keeps a finished run's kernel (and its DPUs) alive."""
    import gc

    from aiopim._runtime._kernel import Kernel

    gc.collect()
    before = sum(isinstance(o, Kernel) for o in gc.get_objects())
    for _ in range(3):
        assert Run(_counter_program(4, 10, True), "asyncio", {}).fault is None
    gc.collect()
    assert sum(isinstance(o, Kernel) for o in gc.get_objects()) <= before
