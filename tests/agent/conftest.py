"""Fixtures for the agent suite: a real SQLite store, the real SDK against the scripted Messages API, the
real runtime, and the terminal implementation of the Gateway contract (its console captured)."""

from __future__ import annotations

import io
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from teleton.agent.media_reader import MediaReader, MediaSettings, describer
from teleton.agent.runtime import Agent, AgentDeps, AgentSettings
from teleton.cli.terminal_gateway import TerminalGateway
from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.llm import LLMClient, LLMSettings
from teleton.llm.openai_provider import OpenAIProvider
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import archive as fa
from teleton.memory.recall import Reranker
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.registry import ToolRegistry
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_view import PROVIDERS, FakeOpenAIInAnthropicTerms

OWNER = UserInfo(id=4242, first_name="Olga", username="olga")
ALICE = UserInfo(id=5151, first_name="Alice", username="alice")
MALLORY = UserInfo(id=6666, first_name="Mallory", username="mallory")
OWNER_DM = ChatInfo(id=OWNER.id, type="dm")
GROUP = ChatInfo(id=-100777, type="group", title="Book club", member_count=5)
OTHER_GROUP = ChatInfo(id=-100888, type="group", title="Chess")
MAIN_MODEL = "claude-test"
UTILITY_MODEL = "claude-test-small"


def default_utility(body: Body) -> Reply:
    """The utility model: fact extraction records no facts, summaries summarise the user lines it was given."""
    prompt = body["messages"][-1]["content"]
    if "Extract the durable facts" in prompt:
        return tool_use(("record_facts", {"facts": []}))
    said = [line[6:] for line in prompt.splitlines() if line.startswith("User: ")]
    return text("Summary: the user talked about " + "; ".join(said)[:400])


@dataclass
class AgentHarness:
    """Drives one real Agent: a real database and workspace, the real SDK against a scripted model API."""

    tmp_path: Path
    db: Database
    fake: FakeAnthropic | FakeOpenAI
    agent: Agent
    gateway: TerminalGateway
    llm: LLMClient
    console_out: io.StringIO
    main: Callable[[Body], Reply] = field(default=lambda body: text("ok"))
    utility: Callable[[Body], Reply] = field(default=default_utility)
    _ids: Any = field(default_factory=lambda: itertools.count(500_000))

    @property
    def workspace(self) -> Path:
        return self.tmp_path / "workspace"

    def respond(self, body: Body) -> Reply:
        return (self.utility if body["model"] == UTILITY_MODEL else self.main)(body)

    def message(self, chat: ChatInfo, sender: UserInfo, text_: str, **extra: Any) -> IncomingMessage:
        return IncomingMessage(
            chat=chat, sender=sender, message_id=next(self._ids), text=text_, date=time.time(), **extra
        )

    async def archive(self, msg: IncomingMessage) -> None:
        """What the Telegram layer does before the agent sees a message."""
        await archive_incoming(self.db, msg)

    async def send(self, chat: ChatInfo, sender: UserInfo, text_: str, **extra: Any) -> str | None:
        msg = self.message(chat, sender, text_, **extra)
        await self.archive(msg)
        return await self.agent.handle(msg)

    async def dm(self, text_: str, sender: UserInfo = OWNER) -> str | None:
        return await self.send(ChatInfo(id=sender.id, type="dm"), sender, text_)

    async def group(self, text_: str, sender: UserInfo = ALICE, chat: ChatInfo = GROUP) -> str | None:
        return await self.send(chat, sender, text_, mentions_us=True)

    def main_requests(self, start: int = 0) -> list[Body]:
        return [b for b in self.fake.requests[start:] if b["model"] == MAIN_MODEL]


def llm_settings() -> LLMSettings:
    return LLMSettings(
        model=MAIN_MODEL,
        utility_model=UTILITY_MODEL,
        max_tokens=1024,
        request_timeout_s=120,  # a hang guard: the scripted API answers at once unless a test stalls it
        max_retries=5,
        retry_base_delay_s=0.002,
        retry_max_delay_s=0.05,
    )


async def build_harness(
    tmp_path: Path,
    db: Database,
    fake: FakeAnthropic | FakeOpenAI,
    settings: AgentSettings | None = None,
    llm: LLMClient | None = None,
    reranker: Reranker | None = None,
) -> AgentHarness:
    """The agent on the provider ``fake`` plays: the scripted Messages API, or the OpenAI-compatible one
    (``llm``: a client built by the test, e.g. from a config with fallbacks)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    if llm is None and isinstance(fake, FakeOpenAI):
        llm = LLMClient(llm_settings(), provider=OpenAIProvider(api_key="test", base_url=fake.base_url), name="openai")
    elif llm is None:
        llm = LLMClient(llm_settings(), api_key="test", base_url=fake.base_url)
    out = io.StringIO()
    gateway = TerminalGateway(Console(file=out, width=100), db=db)
    deps = AgentDeps(
        db=db,
        llm=llm,
        gateway=gateway,
        registry=ToolRegistry(memory_tools()),
        workspace=workspace,
        facts=FactStore(db),
        owner=OWNER,
        principals=Principals(owner_id=OWNER.id),
        media=MediaReader(db, gateway, workspace, MediaSettings(), describe=describer(llm)),
        reranker=reranker,
    )
    settings = settings or AgentSettings(session_reset_hour=None, session_idle_minutes=None)
    harness = AgentHarness(
        tmp_path=tmp_path, db=db, fake=fake, agent=Agent(deps, settings), gateway=gateway, llm=llm, console_out=out
    )
    fake.responder = harness.respond
    return harness


@pytest.fixture
async def harness(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> AsyncIterator[AgentHarness]:
    h = await build_harness(tmp_path, db, fake_api)
    yield h
    await h.llm.close()


@pytest.fixture(params=PROVIDERS)
def any_api(request: pytest.FixtureRequest) -> Iterator[FakeAnthropic | FakeOpenAI]:
    """The scripted model once per provider, each reached through its real SDK in its own wire format. The
    OpenAI-compatible fake shows its requests and responder the Messages API's shape (``anthropic_view``),
    so one test body, its scripted model and its assertions serve both."""
    with FakeAnthropic() if request.param == "anthropic" else FakeOpenAIInAnthropicTerms() as fake:
        yield fake


@pytest.fixture
async def any_harness(tmp_path: Path, db: Database, any_api: FakeAnthropic | FakeOpenAI) -> AsyncIterator[AgentHarness]:
    """The harness once per provider: the same scripted exchange, sent in each API's wire format."""
    h = await build_harness(tmp_path, db, any_api)
    yield h
    await h.llm.close()


async def archive_incoming(db: Database, msg: IncomingMessage, agent_state: str | None = None) -> None:
    """Archive ``msg`` as the Telegram layer does (``agent_state``: the gate's verdict already recorded)."""
    record = fa.MessageRecord(
        chat_id=msg.chat.id,
        message_id=msg.message_id,
        date=msg.date,
        text=msg.text,
        sender_id=msg.sender.id if msg.sender else None,
        sender_name=msg.sender.display_name if msg.sender else "",
        fwd_from=msg.forwarded_from,
    )
    chat = ChatInfo(id=msg.chat.id, type=msg.chat.type, title=msg.chat.title)

    def _write(conn: Any) -> None:
        fa.upsert_chat(conn, chat, time.time())
        fa.insert_message(conn, record, agent_state=agent_state)

    await db.write(_write)
