"""An import inside a function is there to break a cost (a heavy or optional library, a command's own stack)
and says so: a comment on its line or above its group of imports. Anything else belongs at the top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "teleton"


def explained(lines: list[str], lineno: int) -> bool:
    if "#" in lines[lineno - 1]:
        return True
    for line in reversed(lines[: lineno - 1]):  # up through the imports of the same group
        stripped = line.strip()
        if stripped.startswith("#"):
            return True
        if stripped and not stripped.startswith(("from ", "import ")):
            return False
    return False


def unexplained(source: str) -> list[int]:
    lines = source.splitlines()
    found = set()
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom) and not explained(lines, node.lineno):
                    found.add(node.lineno)
    return sorted(found)


def test_every_import_inside_a_function_says_why() -> None:
    missing = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in unexplained(path.read_text())
    ]
    assert missing == []


def test_the_check_finds_a_silent_import() -> None:
    source = (
        "def quiet():\n    import json\n\n"
        "def said():\n    import onnx  # deferred: heavy\n\n"
        "def group():\n    # Deferred: heavy.\n    import a\n\n    from b import c\n"
    )
    assert unexplained(source) == [2]
