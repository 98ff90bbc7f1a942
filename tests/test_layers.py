"""The core's three layers import only downward: runtime <- machine <- ops (<- the faces)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "aiopim"

#: what each layer may import from aiopim (besides itself)
ALLOWED = {
    "_runtime": {"_errors"},
    "_machine": {"_errors", "_runtime", "_dpulist", "timing"},
    "_ops": {"_errors", "_runtime", "_machine", "_dpulist", "timing"},
}


def _aiopim_imports(path: Path) -> set[str]:
    """Top-level aiopim modules ``path`` imports at run time (``TYPE_CHECKING`` blocks excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.relative_to(PKG.parent).with_suffix("").parts[:-1]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            for child in ast.walk(node) if not isinstance(node, ast.If) else [node]:
                if isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = list(package[: len(package) - child.level + 1])
                        parts = base + (child.module.split(".") if child.module else [])
                    else:
                        parts = (child.module or "").split(".")
                    if parts and parts[0] == "aiopim":
                        if len(parts) > 1:
                            found.add(parts[1])
                        else:
                            found.update(a.name for a in child.names)
            if isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)

    visit(tree.body)
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_downward(layer: str) -> None:
    for path in sorted((PKG / layer).glob("*.py")):
        bad = _aiopim_imports(path) - ALLOWED[layer] - {layer}
        assert not bad, f"{path.relative_to(PKG.parent)} imports {sorted(bad)} from above its layer"
