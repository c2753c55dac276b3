"""Imports flow one way: engine at the bottom; then cas and projections; then workflow
logic; then api; then cli and agents on top (lazy, function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "uwf"
LEAVES = {"uwf.errors", "uwf.redact", "uwf.ids", "uwf"}  # imported by every layer, import no layer
ALLOWED = {
    "engine": {"engine"},
    "cas": {"cas"},
    "projections": {"engine", "projections"},
    "workflow": {"engine", "cas", "projections", "workflow"},
    "api": {"engine", "cas", "projections", "workflow", "api"},
    "cli": {"engine", "cas", "projections", "workflow", "api", "cli"},
    "agents": {"engine", "cas", "projections", "workflow", "api", "agents"},
}


def imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return [name for name in found if name == "uwf" or name.startswith("uwf.")]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    wrong = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for name in imports(path):
            if name in LEAVES:
                continue
            target = name.split(".")[1]
            if target not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert wrong == []


def test_the_leaves_import_no_layer() -> None:
    for leaf in ("errors.py", "redact.py", "ids.py"):
        assert [n for n in imports(PACKAGE / leaf) if n not in LEAVES] == []


def test_every_module_belongs_to_a_layer() -> None:
    top = {p.name for p in PACKAGE.iterdir() if not p.name.startswith((".", "_"))}
    assert top - {"py.typed"} == {*ALLOWED, "errors.py", "redact.py", "ids.py"}
