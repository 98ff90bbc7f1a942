"""Kelonia on the emulator: assemblies, workers, ordering, concurrency, errors, mailboxes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import kelonia_charcount as kc
import numpy as np
import pytest
from helpers import script_outputs

import aiopim
from aiopim import DpuErrorCode, timing
from aiopim.kelonia import (
    PYTHON,
    BasicDpuAssemblyLine,
    DidlError,
    DpuDeviceDescription,
    DpuFoundry,
    DpuFoundryError,
    DpuLowLevelError,
    KeloniaInterface,
    load_interface,
    parse_didl,
)

ROOT = Path(__file__).resolve().parent.parent
V1B_CYCLE_PS = timing.V1B.cycles_to_ps(1)


def _emu(ranks: int = 4, per_rank: int = 1) -> aiopim.Emulator:
    return aiopim.Emulator(aiopim.MachineConfig(nr_ranks=ranks, nr_dpus_per_rank=per_rank))


def test_charcount_one_and_many_dpus(backend: str) -> None:
    device = DpuDeviceDescription(load_interface(kc.DIDL), kc.charcount_program())
    small, large = kc.sample_text(5000, 1), kc.sample_text(300_000, 2)
    lines = _emu(4).run(kc.run_counts, device, small, large, 4, 32 << 10, backend=backend)
    assert (
        lines[0] == f"one DPU: {small.count(b'a')} 'a's in 5000 bytes (Python: {small.count(b'a')})"
    )
    assert lines[1].startswith(f"4 DPUs: {large.count(b'a')} 'a's in 300000 bytes")
    assert lines[2].startswith("virtual time: one DPU ")


def _echo_device(log: list[int], nr_tasklets: int = 2) -> DpuDeviceDescription:
    """f(x) posts x + 1 + tasklet in every tasklet's mailbox; x == 13 faults tasklet 1."""
    iface = KeloniaInterface(
        parse_didl(
            f"function echo(x: in u32, y: out u32[{nr_tasklets}]) "
            f"{{ x <- sysmbox[0], y <- mbox[0..{nr_tasklets - 1}][0] }}",
            "echo.didl",
        )
    )
    prog = aiopim.Program("echo", nr_tasklets=nr_tasklets, stdio=False)
    prog.mailboxes(sysmbox=1, mbox=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        x = int(t.sys_mbox_recv()[0])
        if t.me() == 0:
            log.append(x)
        t.compute(1000)
        await t.flush()
        if x == 13 and t.me() == 1:
            t.fault(3, "unlucky")
        t.mbox_send(x + 1 + t.me())

    return DpuDeviceDescription(iface, prog)


def test_calls_on_one_dpu_are_serialised_in_order(backend: str) -> None:
    log: list[int] = []
    device = _echo_device(log)
    results: dict[int, list[int]] = {}

    async def host() -> None:
        line = BasicDpuAssemblyLine.using_dpu(device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            task = device.interface.Task

            async def call(x: int) -> None:
                w = assembly.worker(0, task.echo)  # one worker object per (DPU, task)
                results[x] = (await w.echo(x)).tolist()

            async with anyio.create_task_group() as tg:
                for x in (5, 7, 9):  # each call is made 1 us of virtual time after the last
                    tg.start_soon(call, x)
                    await anyio.sleep(1e-6)

    _emu().run(host, backend=backend)
    assert log == [5, 7, 9]
    assert results == {5: [6, 7], 7: [8, 9], 9: [10, 11]}


def _call_times(per_rank: int, backend: str) -> tuple[float, float]:
    device = _echo_device([])

    async def host() -> tuple[float, float]:
        line = BasicDpuAssemblyLine.using_dpus(2, device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            task = device.interface.Task
            t0 = aiopim.now()
            await assembly.worker(0, task.echo).echo(1)
            one = aiopim.now() - t0
            t0 = aiopim.now()
            async with anyio.create_task_group() as tg:
                for d in range(2):
                    tg.start_soon(assembly.worker(d, task.echo).echo, 1)
            return one, aiopim.now() - t0

    return _emu(2, per_rank).run(host, backend=backend)


def test_dpus_of_different_ranks_overlap_and_one_rank_queues_them(backend: str) -> None:
    one, both = _call_times(1, backend)
    assert both == pytest.approx(one)  # two ranks: the calls run side by side
    one, both = _call_times(2, backend)
    assert both == pytest.approx(2 * one)  # one rank: its job queue orders the two calls


def test_a_dpu_fault_names_the_dpu_and_the_task_and_the_dpu_recovers(backend: str) -> None:
    device = _echo_device([])

    async def host() -> tuple[DpuLowLevelError, list[int]]:
        line = BasicDpuAssemblyLine.using_dpus(2, device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            w = assembly.worker(1, device.interface.Task.echo)
            with pytest.raises(DpuLowLevelError) as info:
                await w.echo(13)
            return info.value, (await w.echo(2)).tolist()

    err, after = _emu().run(host, backend=backend)
    assert err.code is DpuErrorCode.DPU_ERR_DPU_FAULT and isinstance(err, aiopim.DpuError)
    assert (err.dpu_number, err.task) == (1, "echo")
    assert re.fullmatch(
        r"DPU_ERR_DPU_FAULT \(23\): DPU 1, task echo: rank 1: DPU 1\.0\.0 tasklet 1 at "
        r"test_kelonia_foundry\.py:\d+ in main: fault 3: unlucky",
        str(err),
    )
    assert after == [3, 4]


def test_memory_copy_round_trip_unaligned_and_transfer_errors(backend: str) -> None:
    device = _echo_device([])

    async def host() -> Any:
        async with await DpuFoundry.targeting(PYTHON).build(
            BasicDpuAssemblyLine.using_dpu(device)
        ) as assembly:
            copy = assembly.worker(device.interface.Task.memory_copy)
            await copy.copy_to_device(0, bytes(range(40)))
            await copy.copy_to_device(3, b"\xff" * 10)  # unaligned: the edges are preserved
            got = await copy.copy_from_device(1, 16)
            with pytest.raises(DpuLowLevelError) as info:
                await copy.copy_to_device((64 << 20) - 4, b"12345678")
            with pytest.raises(TypeError, match="data must be bytes-like"):
                await copy.copy_to_device(0, "text")
            with pytest.raises(ValueError, match="destination must be >= 0"):
                await copy.copy_to_device(-8, b"12345678")
            return got, info.value

    got, err = _emu().run(host, backend=backend)
    assert got.dtype == np.uint8
    assert got.tolist() == [1, 2] + [0xFF] * 10 + [13, 14, 15, 16]
    assert err.code is DpuErrorCode.DPU_ERR_INVALID_SYMBOL_ACCESS
    assert (err.dpu_number, err.task) == (0, "memory_copy")


def test_bad_arguments_and_bad_requests_fail_before_any_job() -> None:
    device = _echo_device([])

    async def host() -> None:
        line = BasicDpuAssemblyLine.using_dpus(2, device)
        assembly = await DpuFoundry.targeting(PYTHON).build(line)
        task = device.interface.Task
        w = assembly.worker(0, task.echo)
        t0 = aiopim.now()
        with pytest.raises(TypeError, match="x must be an int"):
            await w.echo("5")
        with pytest.raises(ValueError, match="x=4294967296 does not fit u32"):
            await w.echo(1 << 32)
        with pytest.raises(TypeError, match="missing 'x'"):
            await w.echo()
        with pytest.raises(TypeError, match="unexpected argument 'z'"):
            await w.echo(1, z=2)
        assert aiopim.now() == t0
        with pytest.raises(DpuFoundryError, match="DPU 2 is not in the assembly of 2"):
            assembly.worker(2, task.echo)
        with pytest.raises(DpuFoundryError, match="not a task of interface 'echo'"):
            assembly.worker(0, "count")
        assert assembly.worker(task.echo) is assembly.worker(0, "echo")
        await assembly.clear()
        with pytest.raises(DpuFoundryError, match="cleared"):
            assembly.worker(0, task.echo)
        assert all(not r.allocated for r in assembly.dpu_set.rank_list)  # type: ignore[union-attr]

    _emu().run(host)


def test_building_checks_the_interface_against_the_program() -> None:
    prog = kc.charcount_program()
    iface = KeloniaInterface(
        parse_didl("function f(a: in u32) { a <- sysmbox[2] }", "three.didl", name="three")
    )

    async def host() -> None:
        with pytest.raises(DidlError, match=r"three\.didl:1:25: sysmbox word 2 does not exist"):
            await DpuFoundry.targeting(PYTHON).build(
                BasicDpuAssemblyLine.using_dpu(DpuDeviceDescription(iface, prog))
            )

    emu = _emu()
    emu.run(host)
    assert emu.now_ps == 0  # refused before allocating anything


def _timed_launch(main: Any, backend: str) -> int:
    prog = aiopim.Program("m", nr_tasklets=1, stdio=False)
    prog.mailboxes(sysmbox=2, mbox=[2])
    prog.main(main)

    async def host() -> int:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(prog)
            start = aiopim.current_emulator().now_ps
            await dpus.launch()
            return aiopim.current_emulator().now_ps - start

    return _emu().run(host, backend=backend)


def test_mailbox_calls_cost_their_instructions(backend: str) -> None:
    async def with_mailboxes(t: aiopim.Tasklet) -> None:
        request = t.sys_mbox_recv()
        t.mbox_recv()
        t.mbox_send(np.array([request[0], 7], np.uint32))

    n = (
        timing.SYS_MBOX_RECV_INSTRUCTIONS
        + timing.MBOX_RECV_INSTRUCTIONS
        + timing.MBOX_SEND_INSTRUCTIONS
        + timing.memcpy_instructions(8)
    )

    async def same_count(t: aiopim.Tasklet) -> None:
        t.compute(n)

    async def one_more(t: aiopim.Tasklet) -> None:
        t.compute(n + 1)

    assert _timed_launch(with_mailboxes, backend) == _timed_launch(same_count, backend)
    assert (
        _timed_launch(one_more, backend) - _timed_launch(same_count, backend)
        == timing.REVOLVER_CYCLES * V1B_CYCLE_PS
    )


def test_mailboxes_are_laid_out_in_wram_and_checked() -> None:
    prog = aiopim.Program("m", nr_tasklets=3, stdio=False)
    layout = prog.mailboxes(sysmbox=2, mbox=[1, 0, 3])
    assert layout.mbox_offset(2) == 4 and layout.mbox_bytes == 16
    assert "__sys_mbox" not in prog.symbols() and "__mbox" not in prog.symbols()
    sys_sym, mbox_sym = prog.mailbox_symbols()
    assert sys_sym is not None and mbox_sym is not None
    assert (sys_sym.size, mbox_sym.size) == (8, 16)
    assert mbox_sym.address == prog.address_of("__mbox") < 0x08000000  # WRAM
    with pytest.raises(ValueError, match="already declared"):
        prog.mailboxes(sysmbox=1)
    with pytest.raises(ValueError, match="one mailbox size per tasklet"):
        aiopim.Program("p", nr_tasklets=2).mailboxes(mbox=[1])
    with pytest.raises(ValueError, match="integers >= 0"):
        aiopim.Program("p").mailboxes(sysmbox=-1)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("send_big", "do not fit tasklet 0's mailbox of 8 bytes"),
        ("send_odd", "do not fit"),
        ("no_box", "tasklet 1 has no mailbox words"),
    ],
)
def test_mailbox_misuse_faults_the_dpu(body: str, reason: str) -> None:
    prog = aiopim.Program("m", nr_tasklets=2, stdio=False)
    prog.mailboxes(sysmbox=0, mbox=[2, 0])

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        if body == "send_big" and t.me() == 0:
            t.mbox_send(np.zeros(3, np.uint32))
        elif body == "send_odd" and t.me() == 0:
            t.mbox_send(b"abc")
        elif body == "no_box" and t.me() == 1:
            t.mbox_recv()

    async def host() -> str:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(prog)
            with pytest.raises(aiopim.DpuError) as info:
                await dpus.launch()
            assert info.value.code is DpuErrorCode.DPU_ERR_DPU_FAULT
            fault = dpus.faults[0]
            assert fault is not None
            return fault.reason

    assert reason in _emu().run(host)


def test_the_host_api_cannot_name_the_mailboxes() -> None:
    prog = aiopim.Program("m", nr_tasklets=2, stdio=False)
    prog.mailboxes(sysmbox=1, mbox=1)

    async def host() -> None:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(prog)
            with pytest.raises(aiopim.DpuError) as info:
                await dpus.copy_to("__sys_mbox", np.zeros(1, np.uint32))
            assert info.value.code is DpuErrorCode.DPU_ERR_UNKNOWN_SYMBOL

    _emu().run(host)


def test_a_program_without_mailboxes_faults_on_sys_mbox_recv() -> None:
    prog = aiopim.Program("m", stdio=False)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.sys_mbox_recv()

    async def host() -> str:
        async with await aiopim.DpuSet.alloc(1) as dpus:
            await dpus.load(prog)
            with pytest.raises(aiopim.DpuError):
                await dpus.launch()
            fault = dpus.faults[0]
            assert fault is not None
            return fault.reason

    assert "declares no mailboxes" in _emu().run(host)


def test_example_script_prints_the_same_on_both_backends() -> None:
    outs = script_outputs(
        ROOT / "examples" / "kelonia_charcount.py", "--dpus", "4", "--large", "200000",
        "--block", "16384",
    )  # fmt: skip
    assert outs[0] == outs[1]
    assert "4 DPUs:" in outs[0] and "virtual time:" in outs[0]


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ([2**64, 1], ValueError, "a has values that do not fit u64"),
        ([-1, 2], ValueError, "do not fit u64"),
        ([1.5, 2], TypeError, "a must hold integers (u64[2]), not float64"),
        ("ab", TypeError, "not a str"),
        ([1, 2, 3], ValueError, "a must have 2 elements (u64), got shape (3,)"),
        ([True, False], TypeError, "not bool"),
    ],
)
def test_array_arguments_are_checked(value: Any, error: type[Exception], message: str) -> None:
    from aiopim.kelonia._interface import elements

    p = parse_didl("function f(a: in u64[2]) { a <- dram[0] }").functions[0].params[0]
    assert elements(p, [2**64 - 1, 3]).tolist() == [2**64 - 1, 3]
    assert elements(p, np.array([7, 8], np.uint8)).dtype == np.uint64
    with pytest.raises(error) as info:
        elements(p, value)
    assert message in str(info.value)


def test_a_posted_word_too_wide_for_its_output_type_fails_the_call(backend: str) -> None:
    iface = KeloniaInterface(
        parse_didl("function f(y: out u8[2]) { y <- mbox[0..1][0] }", "narrow.didl")
    )
    prog = aiopim.Program("narrow", nr_tasklets=2, stdio=False)
    prog.mailboxes(mbox=1)

    @prog.main
    async def main(t: aiopim.Tasklet) -> None:
        t.mbox_send(255 if t.me() == 0 else 300)

    async def host() -> DpuLowLevelError:
        line = BasicDpuAssemblyLine.using_dpu(DpuDeviceDescription(iface, prog))
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            with pytest.raises(DpuLowLevelError) as info:
                await assembly.worker(iface.Task.f).f()
            return info.value

    err = _emu().run(host, backend=backend)
    assert err.code is DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER
    assert "'y' is u8 but the DPU posted 0x12c" in str(err) and err.task == "f"


def test_an_elf_binary_serves_mram_only_interfaces(tmp_path: Path, backend: str) -> None:
    from aiopim.isa.elfwriter import sample_dpu_elf

    data, _ = sample_dpu_elf(nr_tasklets=1)
    path = tmp_path / "kelonia_sum.elf"
    path.write_bytes(data)

    async def model(t: aiopim.Tasklet) -> None:
        await t.mram_read(0x200000, 0x800, 16)
        total = int(t.view(0x800, np.uint32, 4).sum())
        t.view(0x800, np.uint64, 1)[0] = total
        await t.mram_write(0x800, 0x200010, 8)

    aiopim.register_model("kelonia_sum", model)
    iface = KeloniaInterface(
        parse_didl(
            "function sum(x: in u32[4], s: out u64) { x <- dram[0x200000], s <- dram[0x200010] }",
            "sum.didl",
        )
    )

    async def host() -> int:
        line = BasicDpuAssemblyLine.using_dpu(DpuDeviceDescription(iface, str(path)))
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            return int(await assembly.worker(iface.Task.sum).sum([1, 2, 3, 2**32 - 1]))

    assert _emu().run(host, backend=backend) == 2**32 + 5
    boxed = KeloniaInterface(parse_didl("function g(a: in u32) { a <- sysmbox[0] }", "g.didl"))
    with pytest.raises(DidlError, match="declares no mailboxes"):
        DpuDeviceDescription(boxed, str(path)).check(aiopim.load_elf(path))
