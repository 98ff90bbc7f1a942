"""PrIM's RED and TRNS as compiled by UPMEM's clang (the conformance corpus), run through the host
programs of ``benchmarks/prim_isa.py`` at its ``--quick`` sizes.

Each must check exactly as PrIM's ``app.c`` checks, and execute the same DPU instructions in the
same virtual time on asyncio and trio. The corpus is UPMEM/PrIM software kept outside the
repository (``$AIOPIM_CONFORMANCE_DIR``, default ``../shared/conformance``): without it these
tests are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import load_module

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "prim_isa.py"
prim_isa = load_module(SCRIPT, "prim_isa")
PRIM = prim_isa.corpus_dir() / "prim"
QUICK = prim_isa.SIZES["quick"]

pytestmark = pytest.mark.skipif(
    not all(prim_isa.binary_path(PRIM / b).is_file() for b in ("RED", "TRNS")),
    reason=f"PrIM binaries not found under {PRIM} (set AIOPIM_CONFORMANCE_DIR to the corpus)",
)


def _run(name: str, backend: str) -> dict[str, Any]:
    if name == "red":
        return prim_isa.run_red(PRIM / "RED", prim_isa.NR_DPUS, QUICK["red"], backend)
    return prim_isa.run_trns(PRIM / "TRNS", prim_isa.NR_DPUS, QUICK["trns"], backend)


def _deterministic(r: dict[str, Any]) -> list[tuple[str, int, float]]:
    return [(x["name"], x["instructions"], x["virtual_s"]) for x in r["launches"]]


@pytest.mark.parametrize("name", ["red", "trns"])
def test_prim_binary_checks_and_matches_across_backends(name: str) -> None:
    runs = {backend: _run(name, backend) for backend in ("asyncio", "trio")}
    for backend, r in runs.items():
        assert r["ok"], f"{name} on {backend}: the DPUs' output differs from NumPy's"
        assert (r["dpus"], r["tasklets"], r["chip"]) == (64, 16, "v1A")
        assert all(x["instructions"] > 0 and x["virtual_s"] > 0 for x in r["launches"])
    assert _deterministic(runs["asyncio"]) == _deterministic(runs["trio"])
