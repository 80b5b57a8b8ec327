"""The package's types are checked (mypy, configured in pyproject.toml): what AgentDeps, ToolDeps and the
stages hold is what they say, and a wrong one fails here, not in a user's turn. One run (it is costly): a copy
of the package with one wrong type planted, which must be the only error mypy finds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.costly

ROOT = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).parent / "mypy"


def check(tree: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MYPY), "--cache-dir", str(cache), "--no-color-output"],
        cwd=tree, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_the_package_type_checks_and_a_wrong_type_fails_the_check(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "teleton", tree / "teleton", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree)
    with (tree / "teleton/agent/stages/session.py").open("a") as module:
        module.write("\n\ndef _wrong(agent: AgentCore) -> int:\n    return agent.sessions\n")

    result = check(tree, tmp_path / "mypy-cache")

    assert result.returncode == 1
    assert "teleton/agent/stages/session.py" in result.stdout
    assert 'Incompatible return value type (got "SessionStore", expected "int")' in result.stdout
    assert "Found 1 error in 1 file" in result.stdout, result.stdout  # the package itself checks clean
