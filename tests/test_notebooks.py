"""The notebooks in notebooks/ run from top to bottom (so they never rot)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot' or 'test') is not installed")
    nbformat = pytest.importorskip("nbformat", reason="nbformat (extra 'test') is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient (extra 'test') is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel (extra 'test') is not installed")
    # the kernel imports aiopim from this checkout
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "the notebook should draw its timelines"
