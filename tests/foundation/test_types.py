"""The package's types are checked (mypy, configured in pyproject.toml): what AgentDeps, ToolDeps and the
stages hold is what they say, and a wrong one fails here, not in a user's turn."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).parent / "mypy"


def check(tree: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MYPY), "--cache-dir", str(cache), "--no-color-output"],
        cwd=tree, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for both runs: the second re-checks only what the change touches."""
    return tmp_path_factory.mktemp("mypy-cache")


def test_the_package_type_checks(cache: Path) -> None:
    result = check(ROOT, cache)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_type_fails_the_check(tmp_path: Path, cache: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "teleton", tree / "teleton", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree)
    with (tree / "teleton/agent/stages/session.py").open("a") as module:
        module.write("\n\ndef _wrong(agent: AgentCore) -> int:\n    return agent.sessions\n")

    result = check(tree, cache)

    assert result.returncode == 1
    assert "teleton/agent/stages/session.py" in result.stdout
    assert 'Incompatible return value type (got "SessionStore", expected "int")' in result.stdout
