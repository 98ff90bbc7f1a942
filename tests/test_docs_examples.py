"""Every ```python block of README.md and docs/*.md runs, or is explicitly marked as a fragment.

A block runs as printed, as a complete program, in a scratch directory that holds a copy of
``scenarios/``. An HTML comment on the line just above a block changes that:

* ``<!-- fragment: why -->`` the block is an excerpt (undefined names, top-level ``await``, a
  ``...`` body); it is only compiled. :data:`EXPECTED_FRAGMENTS` counts them per file, so a new
  fragment is a deliberate change of this test, never an accident.
* ``<!-- pytest -->`` the block is a pytest module (or conftest); it runs through pytest in a
  subprocess, each one with the test that fits it below.
* ``<!-- needs: build/checksum.dpu -->`` the block runs after the test wrote that input file.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(fragment|pytest|needs)\b:?\s*(.*?)\s*-->\s*$")

#: fragments per file: update this when a fragment is added or made complete
EXPECTED_FRAGMENTS = {
    "docs/elf.md": 1,
    "docs/fifo.md": 2,
    "docs/kelonia.md": 5,
    "docs/testing.md": 6,
    "docs/timelines.md": 1,
    "docs/umem.md": 2,
}


@dataclass(frozen=True)
class Block:
    path: str
    line: int
    code: str
    kind: str  # "run", "fragment", "pytest", "needs"
    note: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def _blocks() -> list[Block]:
    out: list[Block] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        rel = doc.relative_to(ROOT).as_posix()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.search(before)
            kind, note = (marker.group(1), marker.group(2)) if marker else ("run", "")
            out.append(Block(rel, line, m.group(1), kind, note))
    return out


BLOCKS = _blocks()


def _of(kind: str) -> list[Block]:
    return [b for b in BLOCKS if b.kind == kind]


def test_blocks_are_found_and_every_fragment_is_counted() -> None:
    assert len(BLOCKS) >= 19  # guards the parser; more blocks are welcome
    fragments: dict[str, int] = {}
    for b in _of("fragment"):
        assert b.note, f"{b.id}: say why the block is a fragment (<!-- fragment: why -->)"
        fragments[b.path] = fragments.get(b.path, 0) + 1
    assert fragments == EXPECTED_FRAGMENTS
    assert {b.path for b in _of("run")} >= {"README.md", "docs/runtime.md", "docs/timelines.md"}
    # a marker that names an unknown kind would silently run the block: none exists
    for doc in DOCS:
        for m in re.finditer(r"<!--\s*(\w[\w-]*)", doc.read_text(encoding="utf-8")):
            assert m.group(1) in {"fragment", "pytest", "needs"}, (doc.name, m.group(0))


@pytest.mark.parametrize("block", _of("fragment"), ids=lambda b: b.id)
def test_fragment_compiles(block: Block) -> None:
    """An excerpt is still valid Python (``await`` allowed at the top level)."""
    compile(block.code, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a copy of the scenarios and the assembly examples (blocks may
    write files there)."""
    shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
    shutil.copytree(ROOT / "examples" / "isa", tmp_path / "examples" / "isa")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    return tmp_path


def _exec(block: Block) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(block.code, block.id, "exec"), namespace)
    return namespace


@pytest.mark.parametrize("block", _of("run"), ids=lambda b: b.id)
def test_program_runs(block: Block, scratch: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    _exec(block)


def _write_needs(block: Block, scratch: Path) -> None:
    from aiopim.isa.elfwriter import sample_dpu_elf

    if block.note == "build/checksum.dpu":
        image, _ = sample_dpu_elf(
            nr_tasklets=4,
            host_vars={"input_size": bytes(4), "result": bytes(8)},
        )
        (scratch / "build").mkdir()
        (scratch / "build" / "checksum.dpu").write_bytes(image)
    else:  # pragma: no cover - a new marker needs its input here
        pytest.fail(f"{block.id}: no input known for <!-- needs: {block.note} -->")


@pytest.mark.parametrize("block", _of("needs"), ids=lambda b: b.id)
def test_program_with_inputs_runs(block: Block, scratch: Path) -> None:
    from aiopim.elf import unregister_model

    _write_needs(block, scratch)
    try:
        _exec(block)
    finally:
        unregister_model("checksum")


def _pytest(tmp: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp / name).write_text(text, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "examples")]))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _pytest_block(path: str) -> Block:
    found = [b for b in _of("pytest") if b.path == path]
    assert len(found) == 1, f"expected one <!-- pytest --> block in {path}"
    return found[0]


#: trio and anyio tests that use the README's fixtures: virtual time must pass, not wall time
README_FIXTURE_USERS = """
import time

import anyio
import pytest
import trio

import aiopim
from aiopim.sdk import DPU_SYNCHRONOUS, dpu_alloc, dpu_launch, dpu_load

prog = aiopim.Program("spin")


@prog.main
async def main(t):
    t.compute(4_000)  # 4,000 instructions x 11 cycles at 400 MHz = 110 us


@pytest.mark.trio
async def test_trio_uses_the_clock_fixture(clock):
    assert isinstance(trio.lowlevel.current_clock(), type(clock))
    wall = time.monotonic()
    await trio.sleep(3600)
    assert aiopim.now() == trio.current_time() == 3600.0
    dpus = await dpu_alloc(64, "")
    await dpu_load(dpus, prog)
    start = aiopim.now()
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    assert aiopim.now() > start + 110e-6
    assert time.monotonic() - wall < 60


@pytest.mark.anyio
async def test_anyio_uses_the_backend_fixture(anyio_backend):
    assert anyio_backend[0] == "trio"
    await anyio.sleep(7200)
    assert aiopim.now() == 7200.0


@pytest.mark.anyio
async def test_anyio_without_naming_the_fixture():
    dpus = await aiopim.DpuSet.alloc(64)
    assert len(dpus) == 64
    await anyio.sleep(1)
    assert aiopim.now() == 1.0
"""


def test_readme_fixtures_work_as_printed(tmp_path: Path) -> None:
    block = _pytest_block("README.md")
    done = _pytest(tmp_path, {"conftest.py": block.code, "test_use.py": README_FIXTURE_USERS})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout, done.stdout


def test_testing_md_pytest_module_runs(tmp_path: Path) -> None:
    block = _pytest_block("docs/testing.md")
    done = _pytest(tmp_path, {"test_doc.py": block.code})
    assert done.returncode == 0, done.stdout + done.stderr
    # the anyio test runs on both backends, the trio one once
    assert "3 passed" in done.stdout, done.stdout


def test_doc_citations_point_into_the_repository() -> None:
    """Docs cite docs/sdk-reference.md, never the developers' spec files."""
    banned = re.compile(r"upmem-semantics|timing-model\.md|spec/|spec §|\.\./shared")
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert not banned.search(line), f"{doc.name}:{n}: {line}"


def _reference_sections() -> set[str]:
    text = (ROOT / "docs" / "sdk-reference.md").read_text(encoding="utf-8")
    return set(re.findall(r"^##+ (\d+(?:\.\d+)?)\.? ", text, re.M))


def test_sdk_reference_has_every_cited_section() -> None:
    """Every "sdk-reference.md §X.Y" (and every legacy "spec §X.Y" in the code, which the
    lead rewrites mechanically) names a section that exists."""
    sections = _reference_sections()
    assert {"1.2", "1.5", "2.1", "2.2", "3.2", "3.5", "4.1", "4.3", "5.10"} <= sections
    cite = re.compile(
        r"(?:sdk-reference\.md|spec)\)? §(\d+(?:\.\d+)?)((?:\s*[-\u2013,]\s*§?\d+(?:\.\d+)?)*)"
    )
    files = [*DOCS, *sorted((ROOT / "aiopim").rglob("*.py"))]
    cited: set[str] = set()
    for f in files:
        for m in cite.finditer(f.read_text(encoding="utf-8")):
            cited.add(m.group(1))
            cited.update(re.findall(r"\d+(?:\.\d+)?", m.group(2)))
    assert cited, "no citation found"
    missing = sorted(cited - sections)
    assert not missing, f"cited but absent from docs/sdk-reference.md: {missing}"


def test_quirks_cite_existing_sections() -> None:
    sections = _reference_sections()
    text = (ROOT / "docs" / "quirks.md").read_text(encoding="utf-8")
    cited = set(re.findall(r"§(\d+(?:\.\d+)?)", text))
    assert cited and cited <= sections, sorted(cited - sections)


def test_reference_quirks_each_have_a_row_in_quirks_md() -> None:
    """quirks.md covers at least as many QUIRKs as the reference marks, section by section."""
    ref = (ROOT / "docs" / "sdk-reference.md").read_text(encoding="utf-8")
    quirks = (ROOT / "docs" / "quirks.md").read_text(encoding="utf-8")
    current = "0"
    per_section: dict[str, int] = {}
    for line in ref.splitlines():
        head = re.match(r"^##+ (\d+(?:\.\d+)?)", line)
        if head:
            current = head.group(1)
        per_section[current] = per_section.get(current, 0) + line.count("QUIRK")
    for section, n in per_section.items():
        if n and section != "0":
            rows = [r for r in quirks.splitlines() if r.startswith("|") and f"§{section}" in r]
            assert len(rows) >= 1, f"§{section} marks {n} QUIRK(s) but quirks.md has no row"


def test_markers_are_textwrapped() -> None:
    """Sanity check of the parser on a synthetic document."""
    doc = textwrap.dedent(
        """\
        text
        <!-- fragment: needs a DpuSet -->
        ```python
        await x()
        ```

        ```python
        print(1)
        ```
        """
    )
    found = [
        (m.group(1), MARKER.search(doc[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]))
        for m in FENCE.finditer(doc)
    ]
    assert [c for c, _ in found] == ["await x()\n", "print(1)\n"]
    assert found[0][1] is not None and found[0][1].group(2) == "needs a DpuSet"
    assert found[1][1] is None


def _reference_text() -> str:
    return (ROOT / "docs" / "sdk-reference.md").read_text(encoding="utf-8")


def test_reference_error_table_matches_the_code() -> None:
    """§2.1 lists every DpuErrorCode with its value, and nothing else."""
    from aiopim import DpuErrorCode
    from aiopim.sdk import DPU_ERR_ASYNC_JOBS

    rows = {
        name: int(value)
        for value, name in re.findall(
            r"^\| (\d+) \| `(DPU_(?:OK|ERR_\w+))` \|", _reference_text(), re.M
        )
    }
    codes = {c.name: int(c) for c in DpuErrorCode if c.name != "DPU_ERR_ASYNC_JOBS"}
    assert rows == codes
    assert f"| `0x{DPU_ERR_ASYNC_JOBS:08X}` | `DPU_ERR_ASYNC_JOBS` |" in _reference_text()


def test_reference_job_types_match_the_code() -> None:
    """§2.2's job-type table gives every JobType its value."""
    from aiopim import JobType

    text = _reference_text()
    section = text[text.index("## 2.2 ") : text.index("## 3. ")]
    rows = {name: int(value) for name, value in re.findall(r"`([A-Z_]+)` \| (\d+)", section)}
    assert rows == {t.name: int(t) for t in JobType}
    # the worked examples of the encoding
    for encoded, job, code in re.findall(r"`(0x8[0-9A-F]{7})` \(type (\d+), code (\d+)\)", section):
        assert int(encoded, 16) == 0x80000000 | int(job) << 16 | int(code)


def test_reference_flag_values_match_the_sdk_module() -> None:
    """Every ``NAME`` (value) pair of §1.1 is the value aiopim.sdk defines."""
    import aiopim.sdk as sdk

    text = _reference_text()
    section = text[text.index("## 1.1 ") : text.index("## 1.2 ")]
    pairs = re.findall(r"`(DPU_\w+)` \((\d+)\)", section)
    assert len(pairs) >= 20
    for name, value in pairs:
        assert getattr(sdk, name) == int(value), name
    assert sdk.DPU_MRAM_HEAP_POINTER_NAME == "__sys_used_mram_end"
    assert sdk.DPU_ERROR_ASYNC_JOB_TYPE_SHIFT == 16
