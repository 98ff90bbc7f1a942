"""A setuptools ``build_py`` that generates the Kelonia interfaces first.

In ``setup.py``::

    from aiopim.kelonia.setuptools_build import build_py
    setup(..., cmdclass={"build_py": build_py})

Every package built that has a ``dpu/`` subdirectory with DIDL files gets its
``dpu/<stem>_interface.py`` modules (re)generated before the sources are copied, so they ship in
the wheel like any other module. List ``*.didl`` (and ``*.elf``) as package data so that
:func:`aiopim.kelonia.find_devices` finds them once installed.
"""

from __future__ import annotations

from pathlib import Path

from setuptools.command.build_py import build_py as _build_py

from ._build import DPU_PACKAGE, generate_package


class build_py(_build_py):  # type: ignore[misc]  # setuptools has no type hints
    """``build_py`` preceded by ``aiopim didl --package`` on every package with DIDL files."""

    def run(self) -> None:
        for package in self.packages or []:
            root = Path(self.get_package_dir(package))
            if any((root / DPU_PACKAGE).glob("*.didl")):
                for out in generate_package(root):
                    self.announce(f"generated {out}", level=2)
        super().run()
