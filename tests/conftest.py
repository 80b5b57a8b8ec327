"""Fixtures every test family may use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from teleton.storage import Database


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and TELETON_* pointed at a temp dir, so nothing reads or writes the real ~/.teleton."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("TELETON_CONFIG", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """A real database file with sqlite-vec loaded and 384-dim vector tables."""
    database = await Database.open(tmp_path / "teleton.db", embedding=("test-model", 384))
    yield database
    await database.close()
