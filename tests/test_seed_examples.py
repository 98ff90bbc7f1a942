"""The four examples of UPMEM's memory-management guide (seed document), on both backends."""

from __future__ import annotations

from pathlib import Path

import buddy_csv
import fsb_list
import mram_variables
import numpy as np
import pytest
import seqread_checksum
from helpers import script_outputs

import aiopim

ROOT = Path(__file__).resolve().parent.parent


def _run(main: object, backend: str) -> object:
    return aiopim.run(main, backend=backend)  # type: ignore[arg-type]


def test_fsb_list_sum_is_0x45(backend: str) -> None:
    assert _run(fsb_list.host, backend) == 0x45


def test_buddy_csv_logs_each_state_once(backend: str) -> None:
    log = _run(buddy_csv.host, backend)
    assert isinstance(log, str)
    lines = log.splitlines()
    assert lines[0].startswith("=== DPU#0x")
    assert lines[1:] == ["California", "Texas", "New York", "Colorado"]


def test_mram_variables_hold_the_wram_input(backend: str) -> None:
    out, copied = _run(mram_variables.host, backend)  # type: ignore[misc]
    assert out == list(range(16)) and copied == 16


def test_seqread_checksum_of_64k_counting_bytes(backend: str) -> None:
    checksum, seconds = _run(seqread_checksum.host, backend)  # type: ignore[misc]
    assert checksum == 0x7F8000 == 256 * sum(range(256))
    assert seconds > 0
    image = seqread_checksum.sample_image()
    assert int(image[:4].view(np.uint32)[0]) == 64 * 1024 and image[4 + 300] == 300 % 256


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("fsb_list.py", "sum of the remaining values = 0x45"),
        ("buddy_csv.py", "California\nTexas\nNew York\nColorado\n"),
        ("mram_variables.py", "output = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"),
        ("seqread_checksum.py", "checksum = 0x7f8000"),
    ],
)
def test_example_scripts_print_the_result(script: str, expected: str) -> None:
    as_run, in_process = script_outputs(ROOT / "examples" / script)
    assert expected in as_run
    assert in_process == as_run
