"""Which interpreter runs DPU binaries: the compiled extension or the same source as Python.

``aiopim/isa/_interp.py`` is compiled by the package's build (Cython, pure-Python mode) into an
extension module; imported uncompiled it is the executable reference. ``AIOPIM_ISA_ENGINE``
(``compiled``, the default, or ``python``) or :func:`set_engine` picks one for the schedulers
created afterwards (one per emulator run). Where the extension was not built, runs use the
Python path and say so once, with the command that builds it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

from . import _interp

__all__ = ["ENGINES", "compiled_available", "engine", "engine_name", "set_engine"]

ENGINES: Final = ("compiled", "python")
_PYTHON_NAME: Final = "aiopim.isa._interp_py"
#: the command that builds the extension in a source checkout
BUILD_COMMAND: Final = 'pip install -e ".[test]"  (or: python setup.py build_ext --inplace)'

_override: str | None = None
_told = False


def compiled_available() -> bool:
    """Whether the compiled extension was built and imports."""
    return bool(_interp.compiled)


def set_engine(name: str | None) -> None:
    """Run the DPUs of emulator runs started afterwards on ``"compiled"`` or ``"python"``
    (None: back to ``AIOPIM_ISA_ENGINE``, default compiled)."""
    global _override
    if name is not None and name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}: use one of {', '.join(ENGINES)}")
    _override = name


def engine_name() -> str:
    """The engine runs started now use."""
    name = _override or os.environ.get("AIOPIM_ISA_ENGINE", "").strip().lower() or "compiled"
    if name not in ENGINES:
        raise ValueError(
            f"AIOPIM_ISA_ENGINE={name!r} is not an engine: use one of {', '.join(ENGINES)}"
        )
    if name == "compiled" and not compiled_available():
        _tell_once()
        return "python"
    return name


def _tell_once() -> None:
    global _told
    if not _told:
        _told = True
        print(
            "aiopim: the compiled instruction-set engine is not built; DPU binaries run on the "
            f"pure-Python engine (much slower). Build it with: {BUILD_COMMAND}",
            file=sys.stderr,
        )


def engine(name: str | None = None) -> ModuleType:
    """The interpreter module of engine ``name`` (default: :func:`engine_name`)."""
    name = name or engine_name()
    if name == "compiled":
        if not compiled_available():
            raise RuntimeError(f"the compiled engine is not built: {BUILD_COMMAND}")
        return _interp
    if not compiled_available():
        return _interp
    module = sys.modules.get(_PYTHON_NAME)
    if module is None:
        source = Path(_interp.__file__).with_name("_interp.py")
        spec = importlib.util.spec_from_file_location(_PYTHON_NAME, source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_PYTHON_NAME] = module
        spec.loader.exec_module(module)
    return module
