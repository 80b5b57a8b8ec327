from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from teleton.storage import Database
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropic]:
    """The scripted Messages API on 127.0.0.1; ``fake_api.requests`` holds every body it received."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "teleton.db")
    yield database
    await database.close()
