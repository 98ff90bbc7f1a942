from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    """Run the test body on each anyio backend."""
    return str(request.param)


@pytest.fixture(autouse=True, scope="session")
def step_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Compiled fast steps of the test programs go to a directory of this session, not to the
    user's cache (which may be read-only on a CI machine): a few seconds of compiling per run."""
    old = os.environ.get("AIOPIM_CACHE_DIR")
    if old is None:
        os.environ["AIOPIM_CACHE_DIR"] = str(tmp_path_factory.mktemp("aiopim-cache"))
    yield
    if old is None:
        os.environ.pop("AIOPIM_CACHE_DIR", None)
