"""``/skills`` in chat: the real runtime (tests/agent/conftest.py's harness), a real database and real skill
folders. The owner's own chat sees every skill and approves what waits; another chat sees only what its
clearance reads, and a group's admin approves only a draft that group proposed."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.privacy import Clearance
from teleton.skills import install, store
from teleton.skills.book import SkillBook
from teleton.storage import Database
from tests.agent.conftest import ALICE, GROUP, MALLORY, OTHER_GROUP, OWNER, AgentHarness, build_harness
from tests.fakes.anthropic_server import FakeAnthropic
from tests.skills.conftest import write_skill

OWNERS = ("diary-routine", "bank-export")  # the owner's skills: never named outside the owner's chat
BOB = UserInfo(id=7373, first_name="Bob", username="bob")


@pytest.fixture
async def h(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> AsyncIterator[AgentHarness]:
    """The harness with a skill book: the owner's own skill, an installed one waiting in skills/, an approved
    public one, and a public draft the group GROUP proposed. ALICE is an admin, BOB is not."""
    harness = await build_harness(tmp_path, db, fake_api)
    ws = harness.workspace
    write_skill(ws / "skills" / "diary-routine", description="How I keep my diary.")
    await install.add(db, ws, str(write_skill(tmp_path / "src" / "bank-export", body="Export the bank CSV.\n")))
    public = await install.add(db, ws, str(write_skill(tmp_path / "src" / "weather-brief")), public=True)
    await install.approve(db, ws, "weather-brief", store.approval_code("weather-brief", public.skill.digest))
    group = harness.agent.principals.chat_label(GROUP.id)
    await install.propose(db, ws, "book-picks", "Pick the next book.", "1. Vote.\n", public=True, steering=[group])
    harness.agent.principals.update(OWNER.id, [ALICE.id])
    harness.agent.deps.skills = SkillBook(ws, db, harness.agent.principals)
    yield harness
    await harness.llm.close()


def code_in(text: str, name: str) -> str:
    found = re.search(rf"/skills approve {name} ([0-9a-f]+) enables exactly this", text)
    assert found, text
    return found.group(1)


async def said(h: AgentHarness, text: str, sender: UserInfo = ALICE, chat: ChatInfo = GROUP) -> str:
    reply = await (h.dm(text, sender) if chat.type == "dm" else h.group(text, sender, chat))
    assert reply is not None
    return reply


async def test_the_owner_sees_every_skill_with_its_state(h: AgentHarness) -> None:
    listed = (await h.dm("/skills") or "").splitlines()
    assert "- diary-routine (owner): enabled, label owner, never used" in listed
    assert "- bank-export (installed): waiting for approval, label owner, never used" in listed
    assert "- weather-brief (installed): enabled, label public, never used" in listed
    assert "- book-picks (draft): draft (waiting for approval), label public, never used" in listed
    assert h.main_requests() == []  # answered by the runtime: no model call


async def test_the_owner_looks_at_a_waiting_skill_and_approves_exactly_it(h: AgentHarness) -> None:
    shown = await h.dm("/skills show bank-export") or ""
    assert "Export the bank CSV." in shown and "not used until you approve it" in shown
    code = code_in(shown, "bank-export")
    assert (await h.dm("/skills approve bank-export 00000000") or "").startswith("That is not the code")
    assert (await h.dm(f"/skills approve bank-export {code}") or "").startswith("Approved bank-export")
    book = h.agent.deps.skills
    assert book is not None
    assert "bank-export" in [s.name for s in book.offered(Clearance("owner"))]  # offered at once, no file changed
    assert "bank-export (installed): enabled" in (await h.dm("/skills") or "")
    assert (await h.dm("/skills approve diary-routine 00000000") or "").endswith("nothing to approve.")


async def test_a_group_never_hears_an_owners_skill_named(h: AgentHarness) -> None:
    """Whoever asks, whatever they ask: the list, a look, an approval with a made-up code, a wrong verb."""
    code = code_in(await h.dm("/skills show bank-export") or "", "bank-export")
    replies = []
    for sender in (BOB, ALICE, OWNER):  # a member, an admin, the owner speaking in the group
        for text in ("/skills", "/skills show diary-routine", f"/skills approve bank-export {code}",
                     "/skills approve diary-routine 12345678", "/skills list everything"):  # fmt: skip
            replies.append(await said(h, text, sender))
    replies += [await said(h, "/skills", MALLORY, ChatInfo(id=MALLORY.id, type="dm"))]
    for reply in replies:
        assert not any(name in reply for name in OWNERS if not reply.startswith("No draft named")), reply
    assert replies[0] == "Skills I can use here:\n- weather-brief: What it does and when to use it."
    assert replies[-1] == replies[0]  # another user's DM: the same public skills, no draft
    assert replies[1] == "/skills show works only in the owner's own chat with me."
    assert replies[2].startswith("/skills approve is for the owner")  # a member: refused, whatever the name
    assert replies[7] == "No draft named bank-export that this group proposed waits for approval."
    # The words a name that is nobody's gets: the reply never tells an owner's skill from none.
    assert await said(h, "/skills approve no-such-skill 12345678") == replies[7].replace("bank-export", "no-such-skill")
    assert (await store.rows(h.db))["bank-export"].state == store.PENDING  # the real code did not help


async def test_a_groups_admin_approves_the_draft_that_group_proposed_and_nothing_else(h: AgentHarness) -> None:
    listed = await said(h, "/skills")
    assert "Drafts proposed here, waiting for an admin" in listed and "- book-picks" in listed
    assert "book-picks" not in await said(h, "/skills", BOB)  # a member is not told of drafts
    assert "book-picks" not in await said(h, "/skills", ALICE, OTHER_GROUP)  # nor another group's admin

    shown = await said(h, "/skills approve book-picks")  # no code: the draft's text, whole
    assert "1. Vote." in shown
    code = code_in(shown, "book-picks")
    assert (await said(h, f"/skills approve book-picks {code}", BOB)).startswith("/skills approve is for the owner")
    assert (await said(h, f"/skills approve book-picks {code}", ALICE, OTHER_GROUP)).startswith("No draft named")
    assert (await said(h, f"/skills approve book-picks {code}")).startswith("Approved book-picks")
    assert "- book-picks: Pick the next book." in await said(h, "/skills", BOB)
    assert (await store.rows(h.db))["book-picks"].state == store.ENABLED
