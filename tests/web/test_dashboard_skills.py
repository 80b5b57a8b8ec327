"""The Skills page (issue 59), read only: real skill folders in a workspace, recorded by the real ``SkillBook``
and ``skills.install``, served by the real app from the store opened read-only as `teleton dashboard` opens it
— an owner's skill enabled, a stale one, a draft waiting with the command that approves it, an installed skill
whose file changed since approval held back naming that file, an archived one, the pins, the lines of a skill
left out, and a stranger's ``<script>`` shown as text; and the real daemon's own page showing its skill."""

from __future__ import annotations

import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from teleton.memory.facts.store import FactStore
from teleton.skills import install, store
from teleton.skills.book import SkillBook
from teleton.storage.database import Database
from teleton.web.app import Dashboard, build_app
from teleton.web.facts_view import FactsView
from teleton.web.security import Guard
from teleton.web.server import WebServer, listen
from tests.fakes.anthropic_server import FakeAnthropic
from tests.web.conftest import dashboard_daemon, owner_client

TOKEN = "skills-" + "s" * 40
DAY = store.DAY_S
EVIL = '<script>alert("hi")</script> & <b>bold</b>'


def skill(base: Path, name: str, description: str, body: str = "Do the thing.", **files: str) -> Path:
    folder = base / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    for rel, text in files.items():
        (folder / rel).write_text(text)
    return folder


def section(page: str, name: str) -> str:
    return page.split(f'<section id="skills-{name}">')[1].split("</section>")[0]


def item(page: str, key: str) -> str:
    """The table row or article whose id is ``key`` (``enabled-brew-coffee``, ``held-pdf-tools``)."""
    found = re.search(rf'<(tr|article)[^>]* id="{key}"[^>]*>(.*?)</\1>', page, re.S)
    assert found is not None, key
    return found[2]


@asynccontextmanager
async def served(dash: Dashboard, sock: Any) -> AsyncIterator[httpx.AsyncClient]:
    server = WebServer(build_app(dash), sock)
    server.start()
    host = f"127.0.0.1:{server.port}"
    try:
        async with httpx.AsyncClient(base_url=f"http://{host}", timeout=30) as http:
            await http.post("/login", data={"token": TOKEN}, headers={"origin": f"http://{host}"})
            yield http
    finally:
        await server.stop()


async def workspace_of_skills(db: Database, tmp_path: Path) -> Path:
    """The workspace the page is asked about, left by the real skill code."""
    workspace = tmp_path / "workspace"
    skill(workspace / "skills", "brew-coffee", "How I like my coffee brewed.")
    skill(workspace / "skills", "old-notes", "Notes nobody reads any more.")
    skill(workspace / "skills", "old-habit", "A habit dropped long ago.")
    skill(workspace / "public" / "skills", "house-rules", "Rules of the group.")
    broken = workspace / "skills" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("no front matter here\n")
    await SkillBook(workspace, db).refresh()  # records the owner's own, as a turn does

    elsewhere = tmp_path / "elsewhere"
    source = skill(elsewhere, "pdf-tools", "Fill PDF forms.", "Run the helper.", **{"helper.py": "print('ok')\n"})
    staged = await install.add(db, workspace, str(source))
    code = store.approval_code("pdf-tools", staged.skill.digest)
    assert await install.approve(db, workspace, "pdf-tools", code) is not None
    (workspace / "skills" / "pdf-tools" / "helper.py").write_text("print('changed behind your back')\n")
    skill(elsewhere, "evil-skill", f"'{EVIL}'")
    await install.add(db, workspace, str(elsewhere / "evil-skill"))
    await install.propose(db, workspace, "weekly-report", "Write the weekly report.", "Gather, then write.",
                          public=False, steering=())  # fmt: skip

    now = time.time()
    await db.execute("update skills set created_at = ?, last_used = ?, uses = 4 where name = 'old-notes'",
                     (now - 40 * DAY, now - 31 * DAY))  # fmt: skip
    await db.execute("update skills set created_at = ?, last_used = null where name = 'old-habit'", (now - 91 * DAY,))
    assert await SkillBook(workspace, db).curate() == ["old-habit"]  # moved into skills/.archive/
    return workspace


async def test_the_page_shows_each_skill_as_the_store_and_the_disk_hold_it(db: Database, tmp_path: Path) -> None:
    workspace = await workspace_of_skills(db, tmp_path)
    before = await store.rows(db)
    stored = await Database.open(db.path, readonly=True, vectors=False)  # as `teleton dashboard` opens it
    sock = listen("127.0.0.1", 0)
    guard = Guard.build(TOKEN, "127.0.0.1", sock.getsockname()[1])

    async def status() -> dict[str, Any]:
        return {"state": "stopped", "pid": os.getpid(), "at": time.time()}

    dash = Dashboard(guard, status, read_only=True, facts_view=FactsView(stored, FactStore(stored), workspace))
    try:
        async with served(dash, sock) as http:
            answer = await http.get("/skills")
            status_page = (await http.get("/status")).text
    finally:
        await stored.close()
    assert answer.status_code == 200
    page = answer.text
    assert '<a href="/skills" aria-current="page">Skills</a>' in page and 'href="/skills"' in status_page

    enabled = section(page, "enabled")
    coffee = item(enabled, "enabled-brew-coffee")
    assert "<td>owner</td>" in coffee and "How I like my coffee brewed." in coffee and "stale" not in coffee
    assert "<td>public</td>" in item(enabled, "enabled-house-rules")
    old = item(enabled, "enabled-old-notes")
    assert "<td>4</td>" in old and "stale: unused 31 days" in old
    assert "pdf-tools" not in enabled and "weekly-report" not in enabled and "old-habit" not in enabled

    waiting = section(page, "waiting")
    draft = item(waiting, "waiting-weekly-report")
    assert "the agent&#39;s draft" in draft and "Write the weekly report." in draft
    assert "teleton skills show weekly-report\nteleton skills approve weekly-report --code …" in draft
    stranger = item(waiting, "waiting-evil-skill")
    shown = "&lt;script&gt;alert(&#34;hi&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;"  # the words, as text
    assert shown in stranger and "installed, not approved yet" in stranger
    assert "<script>" not in page and "<b>bold" not in page

    held = item(section(page, "held"), "held-pdf-tools")
    assert re.search(r"<li><code>helper\.py</code> changed</li>", held) and "SKILL.md" not in held
    assert "teleton skills approve pdf-tools --code …" in held
    assert "pdf-tools" not in section(page, "waiting")

    assert "skills/.archive/old-habit" in item(section(page, "archived"), "archived-old-habit")
    pins = section(page, "pins")
    helper = re.search(r'<tr data-skill="pdf-tools" class="error">.*?</tr>', pins, re.S)
    approved = before["pdf-tools"].approved_files["helper.py"][:12]
    assert helper is not None and "helper.py" in helper[0] and approved in helper[0]
    assert (workspace / "skills" / "pdf-tools" / "helper.py").exists()
    assert "skills/broken/SKILL.md: SKILL.md must begin with" in section(page, "left-out")

    assert "<form" not in page.split("</header>")[1]  # nothing to approve, change or remove here
    assert await store.rows(db) == before


@pytest.mark.costly  # the real daemon in a subprocess
def test_the_daemons_own_page_shows_the_skill_it_recorded(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    def before(workspace: Path) -> None:
        skill(workspace / "skills", "brew-coffee", "How I like my coffee brewed.")

    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN, before=before) as (daemon, url):
        with owner_client(url, TOKEN) as http:
            # The daemon's skills job runs at start and records the folder as the owner's own.
            daemon.wait_for(lambda _: "not recorded yet" not in http.get("/skills").text)
            page = http.get("/skills").text
    coffee = item(section(page, "enabled"), "enabled-brew-coffee")
    assert "<td>owner</td>" in coffee and "How I like my coffee brewed." in coffee and "read-only" not in page
