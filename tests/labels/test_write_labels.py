"""Every write path takes its label from the turn that wrote (docs/privacy.md, "Write rule"): facts saved by a tool
and by the distiller, compaction summaries in the knowledge base and the daily log, daily-log lines,
learnings. A group writes only its own label, another person's DM only theirs; nothing they write becomes
the owner's, and the owner's learnings hear only of the owner's own turns."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from teleton.agent.distiller import Distiller
from teleton.memory.journal.learnings import CORRECTIONS_FILE, ERRORS_FILE, Learnings
from teleton.storage import Database
from tests.agent.conftest import ALICE, GROUP, OWNER, build_harness
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_results, tool_use, user_said

BOB_LABEL, GROUP_LABEL = f"user:{ALICE.id}", f"chat:{GROUP.id}"


def model(body: Body) -> Reply:
    """Saves a fact and makes one failing call (limit 99 breaks the schema) for every message."""
    if tool_results(body):
        return text("done")
    said = user_said(body).rsplit(": ", 1)[-1]  # a group message comes as "Name: text"
    return tool_use(
        ("memory_save", {"value": f"fact from: {said[-40:]}", "category": "note"}),
        ("memory_recall", {"query": f"error from: {said[-40:]}", "limit": 99}),
    )


def utility(body: Body) -> Reply:
    prompt = str(body["messages"][-1]["content"])
    if "record_facts" in str(body.get("tools")):
        where = "owner" if "private chat with the owner" in prompt else "elsewhere"
        # Every fact claims the widest scope and a correction: neither may be taken from a non-owner turn.
        fact = {"content": f"distilled {where}", "category": "rule", "scope": "global", "importance": 1.0}
        return tool_use(("record_facts", {"facts": [{**fact, "correction": True}]}))
    return text("summary of: " + prompt[-200:])


async def test_each_write_carries_the_writing_turns_label(tmp_path: Path, db: Database, fake_api: FakeAnthropic):
    h = await build_harness(tmp_path, db, fake_api)
    h.main, h.utility = model, utility
    learnings = Learnings(h.workspace)
    h.agent.deps.learnings = h.agent.prompt.learnings = learnings
    h.agent.deps.distiller = Distiller(h.llm, h.agent.deps.facts, learnings)

    await h.dm("owner speaking")
    await h.dm("alice speaking", sender=ALICE)  # another person's DM (the harness has no policy gate)
    await h.group("group speaking")
    await h.agent.deps.distiller.drain()
    for sender in (OWNER, ALICE):
        await h.dm("/new", sender=sender)
    await h.group("/new", sender=OWNER)  # the owner ends the group's session: still the group's summary
    await h.agent.deps.distiller.drain()

    facts = {r["value"]: r["scope"] for r in await db.fetchall("select scope, value from facts")}
    assert facts["fact from: owner speaking"] == "owner"
    assert facts["fact from: alice speaking"] == BOB_LABEL
    assert facts["fact from: group speaking"] == GROUP_LABEL
    distilled = {(r["value"], r["scope"]) for r in await db.fetchall("select scope, value from facts")}
    assert ("distilled owner", "owner") in distilled
    assert ("distilled elsewhere", BOB_LABEL) in distilled and ("distilled elsewhere", GROUP_LABEL) in distilled
    assert not any(scope in ("global", "user") for _, scope in distilled)

    summaries = {r["path"].split("/")[1]: r["label"] for r in await db.fetchall(
        "select path, label from knowledge where source = 'session'"
    )}  # fmt: skip
    assert summaries == {str(OWNER.id): "owner", str(ALICE.id): BOB_LABEL, str(GROUP.id): GROUP_LABEL}

    log = (h.workspace / "memory" / f"{datetime.now().astimezone():%Y-%m-%d}.md").read_text()
    lines = log.splitlines()
    owner_line = next(line for line in lines if "User: owner speaking" in line)
    assert owner_line.startswith("[")  # the owner's own line, as written
    for said, origin in (("alice speaking", BOB_LABEL), ("group speaking", GROUP_LABEL)):
        line = next(line for line in lines if said in line)
        assert line.startswith("> [") and f"({origin}))" in line  # quoted data with its origin
    # A group's summary section: a heading naming its origin, every body line quoted.
    heading = next(i for i, line in enumerate(lines) if "Session ended (new)" in line and GROUP_LABEL in line)
    body = []
    for line in lines[heading + 1 :]:
        if not line.strip() or line.startswith("## "):
            break
        body.append(line)
    assert body and all(line.startswith("> ") for line in body)

    errors = (h.workspace / ERRORS_FILE).read_text()
    assert "error from: owner speaking" in errors
    assert "alice speaking" not in errors and "group speaking" not in errors
    corrections = (h.workspace / CORRECTIONS_FILE).read_text()
    assert "distilled owner" in corrections and "distilled elsewhere" not in corrections
    for path in (h.workspace / ERRORS_FILE, h.workspace / CORRECTIONS_FILE, h.workspace / "memory"):
        assert os.stat(path).st_mode & 0o077 == 0  # nobody but the owner reads them
    await h.llm.close()
