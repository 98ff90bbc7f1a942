"""The generated module (``aiopim didl``): importable, mypy-strict, stubbable with
``unittest.mock``; and the package layout of the build integration."""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import anyio
import kelonia_charcount as kc
import numpy as np
import pytest
from helpers import load_module

import aiopim
from aiopim.cli import main as cli
from aiopim.kelonia import (
    PYTHON,
    BasicDpuAssemblyLine,
    DpuBackend,
    DpuDeviceDescription,
    DpuFoundry,
    DpuFoundryError,
    WorkerFactoryBuilder,
    find_devices,
    generate_file,
    generate_package,
    load_didl,
)

ROOT = Path(__file__).resolve().parent.parent
FIBONACCI = [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    out = tmp_path_factory.mktemp("gen") / "charcount_interface.py"
    assert cli(["didl", str(ROOT / "examples" / "charcount.didl"), "-o", str(out)]) == 0
    return load_module(out, "charcount_interface")


def test_the_generated_module_has_the_seeds_names(generated: ModuleType) -> None:
    task = generated.Task
    assert [(t.name, t.value) for t in task] == [
        ("count_characters", "countCharacters"),
        ("memory_copy", "memoryCopy"),
    ]
    iface = generated.Charcount.instance()
    assert iface is generated.Charcount.instance() and iface.Task is task
    original = load_didl(ROOT / "examples" / "charcount.didl")
    assert iface.didl.source == original.source and iface.didl.file == "charcount.didl"
    assert [p.name for p in iface.didl.functions[0].params] == [
        p.name for p in original.functions[0].params
    ]
    assert hasattr(generated.CountCharactersWorker, "count_characters")
    assert {"copy_to_device", "copy_from_device"} <= set(dir(generated.MemoryCopyWorker))
    text = Path(generated.__file__).read_text()
    assert (
        "async def count_characters(\n        self, document_length: int, requested_char: int\n"
        in text
    )
    assert "-> npt.NDArray[np.uint32]:" in text


def test_cli_reports_didl_errors_with_their_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.didl"
    bad.write_text("function f(a: in u32) {\n  a <- sysmbox[0..1]\n}\n")
    assert cli(["didl", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2:3: 'a' (u32) needs 1 system mailbox word(s), the mapping has 2" in err
    assert not (tmp_path / "bad_interface.py").exists()
    assert cli(["didl"]) == 2


def test_the_generated_module_drives_emulated_dpus(generated: ModuleType, backend: str) -> None:
    device = DpuDeviceDescription(generated.Charcount.instance(), kc.charcount_program())
    text = kc.sample_text(20_000, 5)

    async def host() -> int:
        line = BasicDpuAssemblyLine.using_dpu(device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            return await kc.count_with_one_dpu(assembly, generated.Task, text)

    assert aiopim.run(host, backend=backend) == text.count(b"a")


def _stubbed_device(generated: ModuleType) -> tuple[DpuDeviceDescription, Any, Any]:
    """The seed's stub: the count worker returns Fibonacci numbers, the copy worker does
    nothing."""
    memory_worker = mock.AsyncMock(spec=generated.MemoryCopyWorker)
    count_worker = mock.AsyncMock(spec=generated.CountCharactersWorker)
    count_worker.count_characters.return_value = np.array(FIBONACCI, np.uint32)
    memory_worker.copy_to_device.return_value = None

    class Stub(generated.StubbedCharcount):  # type: ignore[misc,name-defined]
        def worker_factories(self) -> dict[str, Any]:
            return (
                WorkerFactoryBuilder()
                .with_worker(lambda dpu: count_worker, generated.Task.count_characters)
                .with_worker(lambda dpu: memory_worker, generated.Task.memory_copy)
                .build()
            )

    device = DpuDeviceDescription(Stub(), "charcount.elf", DpuBackend.STUBBED)
    return device, count_worker, memory_worker


def test_the_seeds_stub_drives_the_application_without_an_emulator(
    generated: ModuleType, backend: str
) -> None:
    device, count_worker, memory_worker = _stubbed_device(generated)
    task = generated.Task

    async def app() -> tuple[int, int]:
        foundry = DpuFoundry.targeting(PYTHON)
        async with await foundry.build(BasicDpuAssemblyLine.using_dpu(device)) as assembly:
            one = await kc.count_with_one_dpu(assembly, task, b"abracadabra")
        line = BasicDpuAssemblyLine.using_dpus(3, device)
        async with await foundry.build(line) as assembly:
            assert assembly.dpu_set is None
            many = await kc.count_with_multiple_dpus(
                assembly, task, kc.DataProvider(bytes(10_000), 4096)
            )
        return one, many

    one, many = anyio.run(app, backend=backend)  # plain anyio: no emulator anywhere
    assert one == sum(FIBONACCI) == 376
    assert many == 3 * 376  # three blocks, whichever DPUs took them
    assert count_worker.count_characters.await_args_list[0] == mock.call(11, ord("a"))
    assert memory_worker.copy_to_device.await_args_list[0] == mock.call(0, b"abracadabra")
    assert memory_worker.copy_to_device.await_count == 4


def test_stubbed_backend_errors(generated: ModuleType) -> None:
    with pytest.raises(DpuFoundryError, match="needs a stubbed interface"):
        DpuDeviceDescription(generated.Charcount.instance(), None, DpuBackend.STUBBED)
    with pytest.raises(DpuFoundryError, match="needs the DPU program"):
        DpuDeviceDescription(generated.Charcount.instance(), None)
    empty = DpuDeviceDescription(generated.StubbedCharcount(), None, DpuBackend.STUBBED)

    async def app() -> None:
        assembly = await DpuFoundry.targeting(PYTHON).build(BasicDpuAssemblyLine.using_dpu(empty))
        with pytest.raises(DpuFoundryError, match="has no worker for countCharacters"):
            assembly.worker(generated.Task.count_characters)

    anyio.run(app)


USAGE = """
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from aiopim.kelonia import PYTHON, BasicDpuAssemblyLine, DpuDeviceDescription, DpuFoundry
from charcount_interface import Assembly, Charcount, CountCharactersWorker, MemoryCopyWorker, Task


async def count(program: object, text: bytes) -> int:
    device = DpuDeviceDescription(Charcount.instance(), "charcount.elf")
    line = BasicDpuAssemblyLine.using_dpus(2, device)
    assembly: Assembly = await DpuFoundry.targeting(PYTHON).build(line)
    worker: CountCharactersWorker = assembly.worker(1, Task.count_characters)
    copy: MemoryCopyWorker = assembly.worker(Task.memory_copy)
    await copy.copy_to_device(0, text)
    counters: npt.NDArray[np.uint32] = await worker.count_characters(len(text), 97)
    back: npt.NDArray[np.uint8] = await copy.copy_from_device(0, 4)
    await assembly.clear()
    return int(counters.sum()) + int(back[0])
"""

MISUSE = """
from charcount_interface import Assembly, Task


async def wrong(assembly: Assembly) -> None:
    worker = assembly.worker(0, Task.count_characters)
    await worker.count_characters("long", 97)
    await worker.copy_to_device(0, b"")
"""


def test_generated_module_is_mypy_strict_clean_and_catches_misuse(
    generated: ModuleType, tmp_path: Path
) -> None:
    api = pytest.importorskip("mypy.api")
    shutil.copy(generated.__file__, tmp_path / "charcount_interface.py")
    (tmp_path / "usage.py").write_text(USAGE)
    (tmp_path / "misuse.py").write_text(textwrap.dedent(MISUSE))
    cache = Path(tempfile.gettempdir()) / "aiopim-kelonia-mypy-cache"
    out, err, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(cache),
            "--python-executable",
            sys.executable,
            str(tmp_path / "charcount_interface.py"),
            str(tmp_path / "usage.py"),
            str(tmp_path / "misuse.py"),
        ]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert all(Path(line.split(":")[0]).name == "misuse.py" for line in errors), out + err
    assert any(':7: error: Argument 1 to "count_characters"' in e for e in errors), out
    assert any(':8: error: "CountCharactersWorker" has no attribute "copy_to_device"' in e
               for e in errors), out  # fmt: skip
    assert status == 1 and len(errors) == 2


PACKAGE_PROGRAM = """
import numpy as np
import aiopim

program = aiopim.Program("double", nr_tasklets=4, stdio=False)
program.mailboxes(sysmbox=1, mbox=2)


@program.main
async def main(t):
    x = int(t.sys_mbox_recv()[0])
    t.mbox_send(np.array([2 * x + t.me(), x], np.uint32))
"""

PACKAGE_DIDL = """
function double(x: in u32, y: out u32[8]) { x <- sysmbox[0], y <- mbox[0..3][0..1] }
"""


def test_package_layout_generates_and_finds_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dpu = tmp_path / "kelpkg" / "dpu"
    dpu.mkdir(parents=True)
    (tmp_path / "kelpkg" / "__init__.py").write_text("")
    (dpu / "__init__.py").write_text("")
    (dpu / "double.didl").write_text(PACKAGE_DIDL)
    (dpu / "double.py").write_text(PACKAGE_PROGRAM)
    assert cli(["didl", "--package", str(tmp_path / "kelpkg")]) == 0
    generated = dpu / "double_interface.py"
    first = generated.stat().st_mtime_ns
    assert generate_package(tmp_path / "kelpkg") == [generated]
    assert generated.stat().st_mtime_ns == first  # unchanged: not rewritten
    monkeypatch.syspath_prepend(str(tmp_path))
    devices = find_devices("kelpkg")
    assert list(devices) == ["double"]
    device = devices["double"]

    async def host() -> list[int]:
        line = BasicDpuAssemblyLine.using_dpu(device)
        async with await DpuFoundry.targeting(PYTHON).build(line) as assembly:
            w = assembly.worker(device.interface.Task.double)
            return list((await w.double(x=21)).tolist())

    assert aiopim.run(host) == [42, 21, 43, 21, 44, 21, 45, 21]
    (dpu / "orphan.didl").write_text("function g(a: in u32) { a <- sysmbox[0] }")
    with pytest.raises(DpuFoundryError, match=r"no DPU program for orphan\.didl"):
        find_devices("kelpkg")


def test_setuptools_build_py_generates_the_interfaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setuptools = pytest.importorskip("setuptools")
    from aiopim.kelonia.setuptools_build import build_py

    dpu = tmp_path / "src" / "kelbuild" / "dpu"
    dpu.mkdir(parents=True)
    (dpu.parent / "__init__.py").write_text("")
    (dpu / "__init__.py").write_text("")
    (dpu / "double.didl").write_text(PACKAGE_DIDL)
    (dpu / "double.py").write_text(PACKAGE_PROGRAM)
    monkeypatch.chdir(tmp_path)
    dist = setuptools.Distribution(
        {
            "name": "kelbuild",
            "packages": ["kelbuild", "kelbuild.dpu"],
            "package_dir": {"": "src"},
            "package_data": {"kelbuild.dpu": ["*.didl"]},
            "cmdclass": {"build_py": build_py},
            "script_name": "setup.py",
        }
    )
    cmd = dist.get_command_obj("build_py")
    cmd.build_lib = str(tmp_path / "build")
    dist.run_command("build_py")
    built = tmp_path / "build" / "kelbuild" / "dpu"
    assert (dpu / "double_interface.py").is_file()  # generated in the source tree
    assert sorted(p.name for p in built.iterdir()) == [
        "__init__.py",
        "double.didl",
        "double.py",
        "double_interface.py",
    ]
    text = (built / "double_interface.py").read_text()
    assert "async def double(self, x: int) -> npt.NDArray[np.uint32]:" in text


def test_generated_names_never_collide(tmp_path: Path) -> None:
    didl = tmp_path / "task.didl"
    didl.write_text("function assembly(x: in u32[2], y: inout u64) { x <- sysmbox[0..1], "
                    "y <- dram[8] }")  # fmt: skip
    out = generate_file(didl)
    module = load_module(out, "task_interface")
    assert module.TaskInterface.instance().Task is module.Task
    assert [t.name for t in module.Task] == ["assembly", "memory_copy"]
    text = out.read_text()
    assert (
        "    async def assembly(self, x: Sequence[int] | npt.NDArray[Any] | bytes, y: int)"
        " -> np.uint64:\n" in text
    )
