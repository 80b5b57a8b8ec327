"""The package keeps its layers (docs/architecture.md), checked by import-linter; and the check is real: an
upward import, memory reaching for Telethon, sending reaching into receiving, or a circle between parts of
memory or of the agent breaks it.
One run (it is costly): a copy of the package with those breaks planted, where they are all the check finds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.costly

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the tree's own copy of the package, not the installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


# The imports planted below, as the report names them: every chain or circle it lists must run through one.
PLANTED = (
    "teleton.storage.database -> teleton.agent.runtime",
    "teleton.memory.search.stemming -> telethon",
    "- .search -> .facts",
    "- .stages -> .runtime",
    "teleton.telegram.send.split -> teleton.telegram.receive.dispatch",
)


def test_the_package_keeps_its_layers_and_only_a_planted_break_breaks_them(tmp_path: Path) -> None:
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
    with (tmp_path / "teleton/telegram/send/split.py").open("a") as module:  # sending reaching into receiving
        module.write("\nfrom teleton.telegram.receive import dispatch  # noqa: E402\n")

    result = lint(tmp_path)

    assert result.returncode == 1, result.stdout
    assert "0 kept, 4 broken" in result.stdout
    assert "teleton.storage.database -> teleton.agent.runtime" in result.stdout
    assert "teleton.memory.search.stemming -> telethon" in result.stdout
    assert "No cycles are allowed in teleton.agent." in result.stdout
    assert "- .stages -> .runtime" in result.stdout
    assert "teleton.telegram.send.split -> teleton.telegram.receive.dispatch" in result.stdout
    # Each reported chain (a "- " line and its indented continuation) or circle: none is the package's own.
    found = re.findall(r"^- .*(?:\n[ \t]+\S.*)*", result.stdout.partition("Broken contracts")[2], flags=re.M)
    assert found and all(any(edge in chain for edge in PLANTED) for chain in found), result.stdout
