"""The notebooks in notebooks/ run from top to bottom (so they never rot)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _needs_jupyter() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot' or 'test') is not installed")
    pytest.importorskip("nbformat", reason="nbformat (extra 'test') is not installed")
    pytest.importorskip("nbclient", reason="nbclient (extra 'test') is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel (extra 'test') is not installed")


@pytest.mark.long  # a Jupyter kernel and the replays: about 10 s of CPU
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_readme_command_runs_the_notebook_from_the_repository_root(
    path: Path, tmp_path: Path
) -> None:
    """``jupyter nbconvert --to html --execute notebooks/X.ipynb``, as the README prints it."""
    _needs_jupyter()
    pytest.importorskip("nbconvert", reason="nbconvert (extras test, notebook) is not installed")
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute"]
    cmd += [str(path.relative_to(ROOT)), "--output-dir", str(tmp_path)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    html = (tmp_path / f"{path.stem}.html").read_text()
    assert "image/png" in html  # the timelines were drawn
    assert "Traceback" not in html


@pytest.mark.long
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_its_own_directory(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As Jupyter runs it: the kernel's working directory is the notebook's."""
    _needs_jupyter()
    import nbclient
    import nbformat

    # the kernel imports aiopim from this checkout
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "the notebook should draw its timelines"
