"""The shipped examples run, compute the right data and give the same result on both backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import vector_add

import aiopim

ROOT = Path(__file__).resolve().parent.parent


def test_vector_add_correct_and_identical_across_backends() -> None:
    results = {}
    traces = {}
    for backend in ("asyncio", "trio"):
        emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=4, nr_dpus_per_rank=64))
        results[backend] = emu.run(vector_add.host, 128, 1 << 16, 7, backend=backend)
        assert emu.recorder is not None
        traces[backend] = emu.recorder.to_jsonl()
    assert results["asyncio"]["correct"] is True
    assert results["asyncio"] == results["trio"]
    assert traces["asyncio"] == traces["trio"]
    assert results["asyncio"]["dpus"] == 128


def test_vector_add_script_output_identical() -> None:
    outs = []
    for backend in ("asyncio", "trio"):
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "vector_add.py"),
                "--backend",
                backend,
                "--elements",
                "100000",
                "--dpus",
                "16",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        outs.append(proc.stdout.replace(f"({backend})", "(backend)"))
    assert "OK" in outs[0]
    assert outs[0] == outs[1]
    assert "virtual time" in outs[0]
