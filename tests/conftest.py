from __future__ import annotations

import gc
import getpass
import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))


def _cache_bytecode() -> None:
    """Compile each module once, not in every test process, even under PYTHONDONTWRITEBYTECODE.

    Some machines set PYTHONDONTWRITEBYTECODE (so that no ``__pycache__`` lands in checkouts):
    then every Python process a test starts recompiles aiopim and every test module, about a
    second each, a third of the default run's CPU. The bytecode goes to a cache outside the
    checkout instead, for this process and the processes it starts."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return
    prefix = str(Path(tempfile.gettempdir()) / f"aiopim-pycache-{getpass.getuser()}")
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix


_cache_bytecode()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Exempt what collection built from the garbage collector's full passes, and make them
    rarer.

    The test modules, their parameters and Hypothesis's strategies are about 200,000 objects
    that live until the end: each full collection would walk them all again. What the tests
    leave behind still made Python's own full passes cost about 0.13 s each, and they came 65
    times (8.6 s of CPU). The garbage that costs memory is that of dropped emulators, which
    aiopim collects itself by the bytes they hold; the other full passes come ten times less
    often."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    """Run the test body on each anyio backend."""
    return str(request.param)
