"""format_dpu_list: short lists in full, long ones cut with the number left out."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiopim._dpulist import format_dpu_list


@dataclass(frozen=True)
class FakeDpu:
    name: str


def test_short_lists_are_complete() -> None:
    assert format_dpu_list([]) == ""
    assert format_dpu_list(["0.0.1"]) == "0.0.1"
    names = [f"0.0.{i}" for i in range(8)]
    assert format_dpu_list(names) == ", ".join(names)


def test_a_long_list_says_how_many_were_left_out() -> None:
    dpus = [FakeDpu(f"0.{i // 8}.{i % 8}") for i in range(64)]
    text = format_dpu_list(dpus)
    assert text == "0.0.0, 0.0.1, 0.0.2, 0.0.3, 0.0.4, 0.0.5, 0.0.6, 0.0.7 … and 56 more"
    assert format_dpu_list(dpus, limit=2) == "0.0.0, 0.0.1 … and 62 more"
    assert format_dpu_list(range(9), limit=8) == "0, 1, 2, 3, 4, 5, 6, 7 … and 1 more"


def test_it_takes_any_iterable_once() -> None:
    gen = (FakeDpu(f"1.0.{i}") for i in range(10))
    assert format_dpu_list(gen, limit=3) == "1.0.0, 1.0.1, 1.0.2 … and 7 more"


def test_bad_limits() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        format_dpu_list(["a"], limit=0)
    with pytest.raises(TypeError, match="limit"):
        format_dpu_list(["a"], limit=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limit"):
        format_dpu_list(["a"], limit=True)


@given(
    names=st.lists(st.from_regex(r"[0-9]{1,2}\.[0-7]\.[0-7]", fullmatch=True), max_size=80),
    limit=st.integers(1, 70),
)
def test_nothing_is_dropped_silently(names: list[str], limit: int) -> None:
    text = format_dpu_list(names, limit)
    m = re.fullmatch(r"(.*?)(?: … and (\d+) more)?", text)
    assert m is not None
    shown = m.group(1).split(", ") if m.group(1) else []
    hidden = int(m.group(2) or 0)
    assert shown == names[:limit]
    assert len(shown) + hidden == len(names)
    assert (hidden > 0) == (len(names) > limit)
