"""The daemon serves the dashboard in its own loop with ``web.enabled`` (issue 35): its live status and spend,
a held send approved on the page and delivered once, a memory search explained and seen as a group, tools
picked and switched as by ``/tool``, the chats' sessions; a dashboard that cannot start (its port taken) is
said while the daemon goes on answering."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.foundation.test_cli import teleton
from tests.web.conftest import daemon_events, dashboard_daemon, owner_client

pytestmark = pytest.mark.costly

TOKEN = "daemon-" + "d" * 40
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
GROUP = {"id": -100777, "type": "group", "title": "Hikers"}
MALLORY = {"id": 3003, "first_name": "Mallory"}


def field(page: str, name: str) -> str:
    """The value of the form field ``name`` (the first one) in ``page``."""
    return page.split(f'name="{name}" value="')[1].split('"')[0]


def test_the_daemon_serves_its_live_status(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN) as (daemon, url):
        daemon.send(OWNER_DM, "hello", message_id=1)
        daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) == 1)
        with owner_client(url, TOKEN) as http:
            page = http.get("/status")
        assert page.status_code == 200 and f"running (pid {daemon.proc.pid}" in page.text  # type: ignore[union-attr]
        assert "read-only" not in page.text
        # The turn went into the day's usage ledger; claude-test has no price: counted, not priced.
        spend = page.text.split('data-field="spend_today">')[1].split("</dd>")[0]
        assert spend == "$0.00 · 1 turn · 1 unpriced"
        # Today's prompt cache, as `teleton status --json` reads the same ledger beside the running daemon.
        proc = teleton("-c", str(daemon.config), "status", "--json", home=daemon_root / "home")
        assert proc.returncode == 0, proc.stderr
        today = json.loads(proc.stdout)["today"]
        assert (today["turns"], today["unpriced_turns"], today["cost_usd"]) == (1, 1, 0.0)
        everything = today["input_tokens"] + today["cache_write_tokens"] + today["cache_read_tokens"]
        assert everything > 0 and today["cache_hit_rate"] == round(today["cache_read_tokens"] / everything, 3)
        cache = page.text.split('data-field="cache_today">')[1].split("</dd>")[0]
        rate, written = 100 * today["cache_read_tokens"] / everything, today["cache_write_tokens"]
        assert cache == f"{rate:.0f}% read from the cache · {everything:,} input tokens, {written:,} written"
        # Its login is throttled: the sixth wrong token starts the wait, said once in the log, never the token.
        with httpx.Client(base_url=url, timeout=30, headers={"origin": url}) as guesser:
            codes = [guesser.post("/login", data={"token": f"guess-{n}"}).status_code for n in range(6)]
        assert codes == [403] * 6
        daemon.wait_for(lambda _: daemon_events(daemon_root, "dashboard_login_throttled"))
        [line] = daemon_events(daemon_root, "dashboard_login_throttled")
        assert (line["client"], line["failures"], line["level"]) == ("127.0.0.1", 6, "warning")
        assert "guess-" not in (daemon_root / "daemon.log").read_text()


def test_a_dashboard_that_cannot_listen_leaves_the_daemon_answering(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(daemon_root, pong_api.base_url, **{"web": {"enabled": True, "port": port}})
        daemon = Daemon(daemon_root, config).start()
        try:
            daemon.wait_for(lambda _: daemon_events(daemon_root, "dashboard_not_started"))
            assert "Address already in use" in daemon_events(daemon_root, "dashboard_not_started")[0]["error"]
            daemon.send(OWNER_DM, "still there?", message_id=1)
            daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) == 1)
        finally:
            daemon.stop()


def _sender(body: dict[str, Any]) -> Any:
    """The owner asks to greet the hikers: a send to a group from a turn that saw the owner's memory, held."""
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return text("asked")
    return tool_use(("send_message", {"chat_id": GROUP["id"], "text": "hello hikers, see you at 8"}))


def test_a_held_send_approved_on_the_dashboard_is_delivered_once(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    pong_api.responder = _sender
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN) as (daemon, url):
        daemon.send(GROUP, "morning all", message_id=1, sender=MALLORY, mentions_us=False)  # the group is known
        daemon.send(OWNER_DM, "greet the hikers for me", message_id=2)
        daemon.wait_for(lambda _: any(e["text"] == "asked" for e in daemon.sent(OWNER["id"])))
        with owner_client(url, TOKEN) as http:
            page = http.get("/approvals").text
            assert "Held #1: a conversation in your own chat with me wants to send a message to group -100777" in page
            assert "hello hikers, see you at 8" in page
            csrf, code = field(page, "csrf"), field(page, "code")
            wrong = http.post("/approvals/1/approve", data={"csrf": csrf, "code": "00000000"})
            assert "code" in wrong.text.lower() and daemon.sent(GROUP["id"]) == []
            done = http.post("/approvals/1/approve", data={"csrf": csrf, "code": code})
            assert done.status_code == 200 and "Done #1: Sent to chat -100777 (message " in done.text
            daemon.wait_for(lambda _: len(daemon.sent(GROUP["id"])) == 1)
            again = http.post("/approvals/1/approve", data={"csrf": csrf, "code": code})
            assert "#1 is already sent" in again.text
            assert "Nothing is waiting for your approval." in http.get("/approvals").text
        assert [e["text"] for e in daemon.sent(GROUP["id"])] == ["hello hikers, see you at 8"]
        assert daemon_events(daemon_root, "dashboard_decided")


def _vault_note(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("# Home\nThe vault code is SECRET-VAULT-8080, behind the boiler.\n")


def test_memory_search_explains_each_hit_and_sees_as_a_group(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN, before=_vault_note) as (daemon, url):
        daemon.send(GROUP, "the vault of the old bank by the lake opens at 8", message_id=1, sender=MALLORY,
                    mentions_us=False)  # fmt: skip
        daemon.wait_for(lambda ev: any(e["op"] == "archived" for e in ev))
        with owner_client(url, TOKEN) as http:
            as_owner = http.get("/memory", params={"q": "vault code"}).text
            as_group = http.get("/memory", params={"q": "vault code", "as": str(GROUP["id"])}).text
    rows = as_owner.split("<tbody>")[1]
    assert "MEMORY.md — Home" in rows and "SECRET-VAULT-8080" in rows and "owner" in rows
    assert "chat -100777, Mallory" in rows and "chat:-100777" in rows
    assert rows.count("<strong>") == rows.count("<tr>")  # every hit with its fused score
    assert "as chat -100777 would get them" in as_group
    assert "SECRET-VAULT-8080" not in as_group and "chat -100777, Mallory" in as_group
    assert '<option value="-100777" selected>group Hikers (-100777)</option>' in as_group


def test_tools_are_picked_for_a_test_message_and_changed_as_by_the_tool_command(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN) as (daemon, url):
        with owner_client(url, TOKEN) as http:
            owner = http.get("/tools", params={"message": "remind me tomorrow at 9 to call mum", "kind": "owner"}).text
            group = http.get("/tools", params={"message": "ban that spammer", "kind": "group"}).text
            assert "<code>schedule_task</code>" in owner.split('class="picks"')[1].split("</p>")[0]
            assert "<code>memory_write</code>" not in group.split('class="picks"')[1].split("</p>")[0]  # dm-only
            done = http.post("/tools/web_fetch/disable", data={"csrf": field(owner, "csrf")}).text
            assert "web_fetch" in done.split('role="status">')[1].split("</p>")[0]
            row = done.split('id="tool-web_fetch">')[1].split("</tr>")[0]
            assert "disabled" in row and "Enable" in row
        daemon.send(OWNER_DM, "/tools", message_id=1)  # the chat command sees the same change
        daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) == 1)
        assert "- web_fetch [OFF, always]" in daemon.sent(OWNER["id"])[0]["text"]


def test_chats_show_each_session_and_one_as_the_model_is_sent_it(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN) as (daemon, url):
        daemon.send(OWNER_DM, "the heron nests by the north pond", message_id=1)
        daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) == 1)
        with owner_client(url, TOKEN) as http:
            listing = http.get("/chats").text
            detail = http.get(f"/chats/{OWNER['id']}").text
    row = listing.split(f'id="chat-{OWNER["id"]}">')[1].split("</tr>")[0]
    assert "<td>dm</td>" in row and "<td>2</td>" in row and "no session" not in row
    assert "DM policy: allowlist" in listing and "Group policy: open" in listing
    assert "the heron nests by the north pond" in detail and "pong: " in detail
    assert detail.count('class="role-user"') == 1 and detail.count('class="role-assistant"') == 1
