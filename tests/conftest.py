"""Fixtures every test family may use."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from teleton.llm import LLMClient, LLMSettings
from teleton.process import redaction
from teleton.process.logging import configure_logging
from teleton.providers import extras
from teleton.storage import Database
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said
from tests.fakes.hf_hub import hub  # noqa: F401  (a fixture for every test: a fake Hugging Face)
from tests.fakes.openai_server import FakeOpenAI

MODEL_CACHE = pytest.StashKey[str]()  # the run's model cache, in the controller (see pytest_configure)

# The longest modules (minutes each) start first, so pytest-xdist's per-module scheduling does not leave one of
# them running alone at the end while the other core idles (with --no-loadscope-reorder, modules are handed out
# in this order; xdist's default orders them by test count, which put these last: 11.5 min instead of ~8).
LONGEST_FIRST = (
    "tests/daemon/test_fault_injection.py",
    "tests/daemon/test_fault_outage.py",
    "tests/cli/test_readme_quickstart.py",
    "tests/privacy/test_10_group_reads.py",  # the attack modules: each holds 1-2 minutes of steps
    "tests/privacy/test_11_files_and_paths.py",
    "tests/privacy/test_14_dm_users.py",
    "tests/privacy/test_22_mcp.py",  # four MCP servers per world, one listing 1,000 tools
    # The longest of the fast command (`-m "not costly"`, ~2.5 min): half a minute each, on a busy core.
    "tests/tools/test_mcp_tools.py",  # an MCP server process (the SDK's import: ~1 s of CPU) per test or more
    "tests/memory/test_e5_model.py",  # two builds of e5, in two processes at once and from a damaged cache
    "tests/media/test_transcription_local.py",
    "tests/agent/test_voice.py",
    "tests/tools/test_mcp_connection.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """One model cache for the whole run, exported as XDG_CACHE_HOME: every xdist worker and every daemon or CLI
    subprocess uses it whatever HOME its test gives it, so the default embedding model (multilingual-e5-small,
    built at first use, ~8 s) is built once per run instead of in every fresh home (its lock makes the first
    workers to need it wait for one build)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        cache = workerinput["teleton_model_cache"]
    else:
        cache = tempfile.mkdtemp(prefix="teleton-test-cache-")
        config.stash[MODEL_CACHE] = cache
    os.environ["XDG_CACHE_HOME"] = cache


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each worker gets the controller's model cache."""
    node.workerinput["teleton_model_cache"] = node.config.stash[MODEL_CACHE]


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = config.stash.get(MODEL_CACHE, None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than cores. The daemon and privacy modules spend much of their time waiting
    for a daemon subprocess; a third worker on two cores fills that time (measured: 184% of 200% CPU busy)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: every other test keeps its order


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Every log line, structlog's and the stdlib's, as JSON lines into a buffer (at debug, redacted as in
    production); afterwards the warning level again and no value remembered for redaction."""
    stream = io.StringIO()
    configure_logging(level="debug", fmt="json", stream=stream)
    yield stream
    configure_logging(level="warning", fmt="json")
    redaction.forget_remembered()


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and TELETON_* pointed at a temp dir, so nothing reads or writes the real ~/.teleton."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("TELETON_CONFIG", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return home


class DatabaseTemplates:
    """Fresh databases for tests, each a copy of a migrated one: migrating a new file takes 30-100 ms, a copy
    ~3 ms, and hundreds of tests open one. The templates are migrated once per worker (by this run's code, so
    a changed migration is what every copy holds), one per vector layout. A copy gets new vector index ids:
    the process's in-memory vector indexes are keyed by them (``memory/search/bit_index.py``), so two tests'
    databases never share one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[tuple[str, int] | None, Path] = {}

    async def open(self, path: Path, *, embedding: tuple[str, int] | None = None) -> Database:
        """``Database.open(path, embedding=embedding)`` on a new file, ``path``'s folder already there."""
        template = self.files.get(embedding)
        if template is None:
            template = self.root / f"template-{len(self.files)}.db"
            await (await Database.open(template, embedding=embedding)).close()
            self.files[embedding] = template
        await asyncio.to_thread(_copy_to_new, template, path)
        database = await Database.open(path, embedding=embedding)
        await database.write(_new_index_ids)
        return database


def _copy_to_new(template: Path, path: Path) -> None:
    assert not path.exists() and path.parent.is_dir(), path
    shutil.copy2(template, path)  # with its mode: 0600, as Database.open creates one


def _new_index_ids(conn: Any) -> None:
    for (key,) in conn.execute("select key from meta where key like 'index_id:%'").fetchall():
        conn.execute("update meta set value = ? where key = ?", (uuid.uuid4().hex, key))


@pytest.fixture(scope="session")
def database_templates(tmp_path_factory: pytest.TempPathFactory) -> DatabaseTemplates:
    return DatabaseTemplates(tmp_path_factory.mktemp("database-templates"))


@pytest.fixture
async def db(tmp_path: Path, database_templates: DatabaseTemplates) -> AsyncIterator[Database]:
    """A real database file with sqlite-vec loaded and 384-dim vector tables."""
    database = await database_templates.open(tmp_path / "teleton.db", embedding=("test-model", 384))
    yield database
    await database.close()


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropic]:
    """The scripted Messages API on 127.0.0.1; ``fake_api.requests`` holds every body it received."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """The scripted OpenAI-compatible API on 127.0.0.1 (tests/fakes/openai_server.py)."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def pong_api() -> Iterator[FakeAnthropic]:
    """The scripted Messages API answering every message with "pong: " and the message's last 40 characters."""
    with FakeAnthropic() as server:
        server.responder = lambda body: text(f"pong: {user_said(body)[-40:]}")
        yield server


@pytest.fixture
async def llm(fake_api: FakeAnthropic) -> AsyncIterator[LLMClient]:
    """The real SDK pointed at ``fake_api``, with retry delays short enough for a 529 storm in a test."""
    settings = LLMSettings(
        model="claude-test",
        utility_model="claude-test-small",
        max_tokens=512,
        request_timeout_s=120,  # a hang guard: a busy machine must not turn a slow answer into a retry
        max_retries=6,
        retry_base_delay_s=0.01,
        retry_max_delay_s=0.5,
    )
    client = LLMClient(settings, api_key="test", base_url=fake_api.base_url)
    yield client
    await client.close()


@pytest.fixture
def daemon_root() -> Iterator[Path]:
    """A data root for the real daemon: short, because its Unix socket path lives under it (~100 bytes)."""
    root = Path(f"/tmp/tlt-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    (root / "home").mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def requires_extra(extra: str) -> pytest.MarkDecorator:
    """Skip unless Teleton's pip extra ``extra`` is installed (the default install lacks it; CI has them all)."""
    absent = extras.missing(extra)
    return pytest.mark.skipif(absent is not None, reason=f"needs the {extra} extra: {extras.install_command(extra)}")


def without_extra(monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    """The packages of ``extra`` made absent at the import system's edge: importing one raises
    ModuleNotFoundError and ``importlib.util.find_spec`` finds nothing, as in a default install."""
    for module in extras.EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    """What the code under test logged (structlog's events as dicts)."""
    with structlog.testing.capture_logs() as captured:
        yield captured
