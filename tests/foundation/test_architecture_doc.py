"""docs/architecture.md stays true: every package is on its map, every path it names exists, and its layers are
the ones import-linter enforces."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/architecture.md").read_text()
EVERY_PATH = [p.relative_to(ROOT).as_posix() for p in (ROOT / "teleton").rglob("*") if "__pycache__" not in p.parts]


def packages() -> set[str]:
    found = {f"{init.parent.relative_to(ROOT).as_posix()}/" for init in (ROOT / "teleton").rglob("__init__.py")}
    return found - {"teleton/"}


def named_paths() -> set[str]:
    tokens = re.findall(r"`([^`\s<]+)`", DOC)  # not a slash command (/forget), not a pattern (tests/<package>/)
    return {t for t in tokens if not t.startswith("/") and ("/" in t or t.endswith(".py"))}


def exists(path: str) -> bool:
    """A path from the repository root, from the package, or the tail of a package path (``receive/``)."""
    bare = path.rstrip("/")
    if (ROOT / bare).exists() or (ROOT / "teleton" / bare).exists():
        return True
    return any(p == bare or p.endswith("/" + bare) for p in EVERY_PATH)


def table_after(marker: str) -> list[str]:
    block = DOC.split(marker, 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines() if line.startswith("| `")]


def test_every_package_is_on_the_map() -> None:
    mapped = {re.match(r"\| `([^`]+)`", row).group(1) for row in table_after("<!-- module map")}  # type: ignore[union-attr]
    assert packages() - mapped == set(), "packages missing from docs/architecture.md"
    assert mapped - packages() == set(), "docs/architecture.md maps packages that do not exist"


def test_every_path_it_names_exists() -> None:
    missing = sorted(p for p in named_paths() if not exists(p))
    assert missing == []


def test_its_layers_are_the_enforced_ones() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    enforced = next(c["layers"] for c in contracts if c["type"] == "layers")
    documented = [
        " | ".join(f"teleton.{name}" for name in re.findall(r"`([a-z_]+)`", row.split("|")[1]))
        for row in table_after("<!-- layers")
    ]
    assert documented == enforced


def test_the_checks_compare_against_the_real_tree() -> None:
    """Not vacuous: the packages and paths the checks compare against are the real ones, and a stale path is seen."""
    assert {"teleton/memory/search/", "teleton/telegram/receive/", "teleton/agent/stages/"} <= packages()
    assert "telegram/receive/dispatch.py" in named_paths() and exists("telegram/receive/dispatch.py")
    assert not exists("telegram/dispatch.py")
