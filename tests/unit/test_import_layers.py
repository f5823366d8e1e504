"""The composition root is reached only from the shells: the flow (query, freshness,
evaluate, …) is handed its resources. Imports under ``if TYPE_CHECKING:`` do not count."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline"
#: The shells and the package's lazy public face: the only modules that may import App.
SHELLS = ("cli/", "service/", "hook.py", "mcp_server.py", "__init__.py")


def runtime_imports(path: Path) -> set[str]:
    """Modules ``path`` imports when it runs (anywhere but ``if TYPE_CHECKING:`` blocks)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_only_the_shells_import_the_composition_root() -> None:
    offenders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if not str(path.relative_to(PACKAGE)).startswith(SHELLS)
        and path.name != "app.py"
        and "pipeline.app" in runtime_imports(path)
    )
    assert offenders == []


def test_the_query_flow_and_the_composition_root_form_no_circle() -> None:
    assert "pipeline.query" in runtime_imports(PACKAGE / "app.py")
    assert "pipeline.app" not in runtime_imports(PACKAGE / "query.py")


def test_type_checking_imports_are_not_counted(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pipeline.app import App\n"
        "def f():\n    from pipeline.query import Pipeline\n"
    )
    assert runtime_imports(module) == {"typing", "pipeline.query"}
