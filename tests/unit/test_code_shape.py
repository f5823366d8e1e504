"""The shape the codebase keeps (issue 34): no function in pipeline/ over 80 lines unless a
``# long:`` comment right above it says why it must be."""

from __future__ import annotations

import ast
from pathlib import Path

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
MAX_LINES = 80


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function over ``MAX_LINES`` without a reason."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        above = lines[first - 2].strip() if first >= 2 else ""
        if length > MAX_LINES and not above.startswith("# long:"):
            found.append((node.name, node.lineno, length))
    return found


def test_no_function_in_the_pipeline_is_over_80_lines_without_saying_why() -> None:
    offenders = {
        f"{path.relative_to(PIPELINE.parent)}:{line} {name}": length
        for path in sorted(PIPELINE.rglob("*.py"))
        for name, line, length in long_functions(path.read_text(encoding="utf-8"))
    }
    assert offenders == {}


def test_the_finder_sees_a_long_function_and_accepts_a_stated_reason() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    assert long_functions(f"def f():\n{body}") == [("f", 1, MAX_LINES + 1)]
    assert long_functions(f"# long: one table, read top to bottom\ndef f():\n{body}") == []
    short = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 1))
    assert long_functions(f"def f():\n{short}") == []
