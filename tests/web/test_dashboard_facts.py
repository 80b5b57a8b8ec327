"""The Facts page (issue 35): facts by person and category with their history, a fact edited as a new value
that supersedes the old one, a text forgotten as `teleton memory forget` forgets it (with its counts), and the
knowledge files edited and re-indexed — against the real daemon (facts saved by a scripted turn's
memory_save, seen again by the chat's memory_recall) and, read-only, the real app over HTTP on a real
database."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.storage.database import Database
from teleton.web.app import Dashboard, build_app
from teleton.web.facts_view import FactsView
from teleton.web.security import Guard
from teleton.web.server import WebServer, listen
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic, Reply, result_text, text, tool_results, tool_use, user_said
from tests.web.conftest import daemon_events

pytestmark = pytest.mark.costly

TOKEN = "facts-" + "f" * 40
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
CAT = {"value": "My cat is called Tom", "category": "pets", "key": "cat_name"}
KEY = {"value": "The spare key hides under the blue flowerpot", "category": "home", "key": "spare_key"}


def _model(body: dict[str, Any]) -> Reply:
    """The owner's turns: "remember" saves two facts, "recall" asks for the cat's name with its history; the
    tools' answers are said back, so the test reads them in the owner's DM."""
    results = tool_results(body)
    if results:
        return text("tools said: " + " | ".join(result_text(r) for r in results))
    said = user_said(body)
    if "remember" in said:
        return tool_use(("memory_save", CAT), ("memory_save", KEY))
    if "recall" in said:
        return tool_use(("memory_recall", {"query": "what is my cat called", "category": "pets", "history": True}))
    return text("pong")


@contextmanager
def _dashboard(daemon: Daemon, root: Path) -> Iterator[tuple[httpx.Client, dict[str, str], str]]:
    """A logged-in client of the daemon's dashboard, the same-origin header, and the pages' CSRF token."""
    daemon.wait_for(lambda _: daemon_events(root, "dashboard_started"))
    url = daemon_events(root, "dashboard_started")[0]["url"]
    origin = {"origin": f"http://{url.split('//')[1].rstrip('/')}"}
    with httpx.Client(base_url=url, timeout=30, follow_redirects=True) as http:
        page = http.post("/login", data={"token": TOKEN}, headers=origin).text
        yield http, origin, _csrf(page)


def _csrf(page: str) -> str:
    return page.split('name="csrf" value="')[1].split('"')[0]


def _row(page: str, fact_id: int) -> str:
    return page.split(f'<tr id="fact-{fact_id}">')[1].split("</tr>")[0]


def _fact_id(page: str, value: str) -> int:
    """The id of the row that shows ``value`` in its edit box."""
    before = page.split(f'value="{value}"')[0]
    return int(before.rsplit('<tr id="fact-', 1)[1].split('"')[0])


def _said(page: str) -> str:
    return page.split('role="status">')[1].split("</p>")[0]


def _hits(page: str) -> str:
    return page.split("<tbody>")[1].split("</tbody>")[0]


def test_a_fact_edited_keeps_its_old_value_as_history_and_a_text_is_forgotten_with_counts(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    pong_api.responder = _model
    config = write_config(daemon_root, pong_api.base_url, **{"web": {"enabled": True, "port": 0, "token": TOKEN}})
    daemon = Daemon(daemon_root, config).start()
    try:
        daemon.send(OWNER_DM, "remember these two things", message_id=1)
        daemon.wait_for(lambda _: any("tools said" in e["text"] for e in daemon.sent(OWNER["id"])))
        with _dashboard(daemon, daemon_root) as (http, origin, csrf):
            page = http.get("/facts").text
            assert "you (the owner)" in page and "<h3>pets</h3>" in page and "<h3>home</h3>" in page
            cat = _fact_id(page, "My cat is called Tom")
            assert "cat_name" in _row(page, cat) and "owner" in _row(page, cat)

            edit = {"csrf": csrf, "value": "My cat is called Felix"}
            edited = http.post(f"/facts/{cat}/edit", data=edit, headers=origin).text
            assert f"it replaces fact #{cat}, kept as history" in _said(edited)
            row = _row(edited, _fact_id(edited, "My cat is called Felix"))
            assert "<del>My cat is called Tom</del>" in row
            assert f'<tr id="fact-{cat}">' not in edited  # history now, under the fact that replaced it

            assert "flowerpot" in _hits(http.get("/memory", params={"q": "flowerpot"}).text)
            found = http.post("/facts/forget", data={"csrf": csrf, "text": "blue flowerpot"}, headers=origin).text
            preview = found.split('id="forget-preview">')[1].split("</pre>")[0]
            assert "facts (current and past): 1" in preview and "lines of daily logs: " in preview
            assert "Erase all of it" in found
            done = http.post("/facts/forget/confirm", data={"csrf": csrf, "text": "blue flowerpot"}, headers=origin)
            report = _said(done.text)
            assert "Forgotten:" in report and "facts (current and past): 1" in report
            assert "lines of daily logs: " in report and "flowerpot" not in done.text  # gone from the list too
            assert "0 results" in http.get("/memory", params={"q": "flowerpot"}).text
        assert daemon_events(daemon_root, "dashboard_fact_edited") and daemon_events(daemon_root, "dashboard_forgot")
        assert all("flowerpot" not in json.dumps(e) for e in daemon_events(daemon_root, "dashboard_forgot"))

        daemon.send(OWNER_DM, "recall my cat", message_id=2)  # the chat's own tool sees the same edit
        daemon.wait_for(lambda _: len([e for e in daemon.sent(OWNER["id"]) if "tools said" in e["text"]]) == 2)
        recalled = daemon.sent(OWNER["id"])[-1]["text"]
        assert "My cat is called Felix" in recalled and "no longer true since" in recalled
        assert "My cat is called Tom" in recalled
    finally:
        daemon.stop()


def test_memory_md_edited_on_the_page_is_searchable_and_paths_out_are_refused(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url, **{"web": {"enabled": True, "port": 0, "token": TOKEN}})
    workspace = daemon_root / "state" / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Boat\nThe boat is called Seagull.\n")
    (workspace / "memory" / "leak.md").symlink_to(config)  # a link out of the workspace, to the config
    daemon = Daemon(daemon_root, config).start()
    try:
        with _dashboard(daemon, daemon_root) as (http, origin, csrf):
            listed = http.get("/facts").text.split('id="knowledge-files">')[1].split("</ul>")[0]
            assert "MEMORY.md" in listed and "leak.md" not in listed
            shown = http.get("/facts/file", params={"path": "MEMORY.md"}).text
            assert "The boat is called Seagull." in shown.split("<textarea")[1]

            new = "# Boat\r\nThe boat is called Seagull.\r\nIt is moored at pier Quokka-42.\r\n"  # a browser's CRLF
            saved = http.post("/facts/file", data={"csrf": csrf, "path": "MEMORY.md", "text": new}, headers=origin)
            assert "Saved MEMORY.md" in _said(saved.text) and "re-indexed: " in _said(saved.text)
            assert (workspace / "MEMORY.md").read_text() == new.replace("\r\n", "\n")
            assert oct((workspace / "MEMORY.md").stat().st_mode & 0o777) == "0o600"
            hits = _hits(http.get("/memory", params={"q": "Quokka"}).text)
            assert "MEMORY.md — Boat" in hits and "pier Quokka-42" in hits

            made = http.post("/facts/file", data={"csrf": csrf, "path": "memory/trips.md", "text": "Oslo in May"},
                             headers=origin)  # fmt: skip
            assert made.status_code == 200 and (workspace / "memory" / "trips.md").read_text() == "Oslo in May"

            up = http.get("/facts/file", params={"path": "../config.yaml"})
            assert (
                up.status_code == 400
                and "is not allowed; paths stay inside the workspace" in up.text
                and "sk-ant" not in up.text
            )
            out = http.post("/facts/file", data={"csrf": csrf, "path": "memory/../../x.md", "text": "x"},
                            headers=origin)  # fmt: skip
            assert out.status_code == 400 and not (daemon_root / "state" / "x.md").exists()
            link = http.get("/facts/file", params={"path": "memory/leak.md"})
            assert link.status_code == 400 and "outside the workspace" in link.text and "sk-ant" not in link.text
            soul = http.post("/facts/file", data={"csrf": csrf, "path": "SOUL.md", "text": "obey"}, headers=origin)
            assert soul.status_code == 400 and "obey" not in (workspace / "SOUL.md").read_text()  # the daemon's own

            forged = http.post("/facts/file", data={"path": "MEMORY.md", "text": "gone"}, headers=origin)
            assert forged.status_code == 403 and "CSRF" in forged.text
            no_token = http.post("/facts/forget", data={"text": "Seagull"}, headers=origin)
            assert no_token.status_code == 403 and "Seagull" in (workspace / "MEMORY.md").read_text()
        saved_events = daemon_events(daemon_root, "dashboard_file_saved")
        assert [e["path"] for e in saved_events] == ["MEMORY.md", "memory/trips.md"]
        assert all("Quokka" not in json.dumps(e) for e in saved_events)  # what was saved, not what it says
    finally:
        daemon.stop()


@asynccontextmanager
async def _served(dash: Dashboard, sock: Any) -> AsyncIterator[httpx.AsyncClient]:
    server = WebServer(build_app(dash), sock)
    server.start()
    host = f"127.0.0.1:{server.port}"
    try:
        async with httpx.AsyncClient(base_url=f"http://{host}", timeout=30) as http:
            await http.post("/login", data={"token": TOKEN}, headers={"origin": f"http://{host}"})
            yield http
    finally:
        await server.stop()


async def test_read_only_shows_facts_and_files_and_changes_nothing(db: Database, tmp_path: Path) -> None:
    store = FactStore(db)
    await store.save(Fact("My cat is called Tom", "pets", "cat_name", subject="owner"))
    await store.save(Fact("My cat is called Felix", "pets", "cat_name", subject="owner"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("The boat is called Seagull.\n")
    sock = listen("127.0.0.1", 0)
    guard = Guard.build(TOKEN, "127.0.0.1", sock.getsockname()[1])

    async def status() -> dict[str, Any]:
        return {"state": "stopped", "pid": os.getpid(), "at": time.time()}

    dash = Dashboard(guard, status, read_only=True, facts_view=FactsView(db, store, workspace))
    async with _served(dash, sock) as http:
        page = (await http.get("/facts")).text
        row = _row(page, 2)
        assert "My cat is called Felix" in row and "<del>My cat is called Tom</del>" in row
        assert 'action="/facts/2/edit"' not in page and 'action="/facts/forget"' not in page
        shown = (await http.get("/facts/file", params={"path": "MEMORY.md"})).text
        assert "The boat is called Seagull." in shown and "<textarea" not in shown

        csrf, same = _csrf(page), {"sec-fetch-site": "same-origin"}
        changes = [
            ("/facts/2/edit", {"value": "My cat is called Rex"}),
            ("/facts/forget", {"text": "Seagull"}),
            ("/facts/forget/confirm", {"text": "Seagull"}),
            ("/facts/file", {"path": "MEMORY.md", "text": "sunk"}),
        ]
        for path, form in changes:
            answer = await http.post(path, data={"csrf": csrf, **form}, headers=same)
            assert answer.status_code == 409 and "Read-only" in answer.text
    assert [f.value for f in await store.recent(None)] == ["My cat is called Felix"]
    assert (workspace / "MEMORY.md").read_text() == "The boat is called Seagull.\n"
