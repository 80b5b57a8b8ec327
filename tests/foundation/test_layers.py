"""The package keeps its layers (docs/architecture.md), checked by import-linter; and the check is real: an
upward import, memory reaching for Telethon, or a circle between parts of memory or of the agent breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the tree's own copy of the package, not the installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_package_keeps_its_layers() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_an_upward_import_a_telegram_import_in_memory_or_a_circle_breaks_the_check(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "teleton", tmp_path / "teleton", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / "teleton/storage/database.py").open("a") as module:
        module.write("\nfrom teleton.agent import runtime  # noqa: E402\n")
    with (tmp_path / "teleton/memory/search/corpora.py").open("a") as module:  # facts already import search
        module.write("\nfrom teleton.memory.facts import store  # noqa: E402\n")
    with (tmp_path / "teleton/memory/search/stemming.py").open("a") as module:
        module.write("\nimport telethon  # noqa: E402\n")
    with (tmp_path / "teleton/agent/stages/aftercare.py").open("a") as module:  # a stage calling back the runtime
        module.write("\nfrom teleton.agent import runtime  # noqa: E402\n")

    result = lint(tmp_path)

    assert result.returncode == 1, result.stdout
    assert "0 kept, 3 broken" in result.stdout
    assert "teleton.storage.database -> teleton.agent.runtime" in result.stdout
    assert "teleton.memory.search.stemming -> telethon" in result.stdout
    assert "No cycles are allowed in teleton.agent." in result.stdout
    assert "- .stages -> .runtime" in result.stdout
