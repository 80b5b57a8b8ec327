"""The dashboard of the real daemon in a real headless Chromium (issue 35): a memory search with each hit's
score breakdown; a send held in the owner's turn approved on the Approvals page and delivered through the
loopback transport; and a cross-site attack: a page on another origin that the logged-in owner visits
submits a form to the dashboard, which refuses it and leaves the held item waiting."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.daemon.harness import OWNER, Daemon
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.web.conftest import chromium, dashboard_daemon, log_in

pytestmark = pytest.mark.costly

TOKEN = "browser-daemon-" + "t" * 32
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
GROUP = {"id": -100888, "type": "group", "title": "Hikers"}
MALLORY = {"id": 3003, "first_name": "Mallory"}


def _greeter(body: dict[str, Any]) -> Any:
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return text("asked")
    said = next(b["text"] for b in reversed(last) if b.get("type") == "text") if isinstance(last, list) else last
    words = "see you at 8" if "first" in said else "bring water"
    return tool_use(("send_message", {"chat_id": GROUP["id"], "text": f"hello hikers, {words}"}))


def _vault_note(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("# Home\nThe vault code is SECRET-VAULT-8080, behind the boiler.\n")


@pytest.fixture
def daemon(pong_api: FakeAnthropic, daemon_root: Path) -> Iterator[tuple[Daemon, str]]:
    pong_api.responder = _greeter
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN, before=_vault_note) as (running, url):
        running.send(GROUP, "morning all", message_id=1, sender=MALLORY, mentions_us=False)
        yield running, url


@pytest.fixture
def attacker() -> Iterator[str]:
    """A page on another origin with a form aimed at the dashboard (filled in by the test)."""
    page: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(page["html"])

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", page  # type: ignore[misc]
    finally:
        server.shutdown()


def test_search_approve_and_a_cross_site_form_refused(browser: Any, daemon: tuple[Daemon, str], attacker: Any) -> None:
    running, url = daemon
    log_in(browser, url, TOKEN)
    WebDriverWait(browser, 60).until(lambda b: b.current_url == url + "/status")

    # Memory: a search shows each hit with its scores.
    browser.get(url + "/memory")
    box = browser.find_element(By.NAME, "q")
    box.send_keys("vault code")
    box.submit()
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "table.hits tbody tr"))
    first = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.hits tbody tr:first-child td")]
    assert first[0] == "knowledge" and first[1] == "MEMORY.md — Home" and "SECRET-VAULT-8080" in first[8]
    assert all(float(cell) >= 0 for cell in (first[4], first[5], first[7]))  # vector, keyword, fused

    # Approvals: the owner asks; the send to the group is held; approved on the page, it is delivered once.
    running.send(OWNER_DM, "greet the hikers first", message_id=2)
    running.wait_for(lambda _: any(e["text"] == "asked" for e in running.sent(OWNER["id"])))
    browser.get(url + "/approvals")
    notice = browser.find_element(By.CSS_SELECTOR, "#held-1 pre.notice").text
    assert "Held #1:" in notice and "hello hikers, see you at 8" in notice
    browser.find_element(By.CSS_SELECTOR, "#held-1 button.approve").click()
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "p.said"))
    assert browser.find_element(By.CSS_SELECTOR, "p.said").text.startswith("Done #1: Sent to chat -100888")
    running.wait_for(lambda _: len(running.sent(GROUP["id"])) == 1)

    # A second held send; a page elsewhere tries to deny it (no code needed to deny) from the owner's browser.
    running.send(OWNER_DM, "and tell them the rest", message_id=3)
    running.wait_for(lambda _: sum(e["text"] == "asked" for e in running.sent(OWNER["id"])) == 2)
    evil, page = attacker
    page["html"] = (f'<form method="post" action="{url}/approvals/2/deny"><input name="csrf" value="guess">'
                    '<button id="go">win a prize</button></form>').encode()  # fmt: skip
    browser.get(evil)
    browser.find_element(By.ID, "go").click()
    WebDriverWait(browser, 60).until(lambda b: b.current_url.startswith(url))
    assert "Log in first." in browser.page_source or "Refused" in browser.page_source
    browser.get(url + "/approvals")
    assert "Held #2:" in browser.find_element(By.CSS_SELECTOR, "#held-2 pre.notice").text  # still waiting
    assert [e["text"] for e in running.sent(GROUP["id"])] == ["hello hikers, see you at 8"]


SAVER_FACTS = (
    {"value": "My cat is called Tom", "category": "pets", "key": "cat_name"},
    {"value": "The spare key hides under the blue flowerpot", "category": "home", "key": "spare_key"},
)


def _saver(body: dict[str, Any]) -> Any:
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return text("saved")
    return tool_use(*(("memory_save", fact) for fact in SAVER_FACTS))


def test_a_fact_edited_shows_its_history_and_a_forgotten_text_its_counts(
    browser: Any, pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    pong_api.responder = _saver
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN) as (running, url):
        running.send(OWNER_DM, "remember these two things", message_id=1)
        running.wait_for(lambda _: any(e["text"] == "saved" for e in running.sent(OWNER["id"])))
        log_in(browser, url, TOKEN)
        WebDriverWait(browser, 60).until(lambda b: b.current_url == url + "/status")
        seen = [browser.page_source]

        browser.get(url + "/facts")
        box = browser.find_element(By.CSS_SELECTOR, 'input[name="value"][value="My cat is called Tom"]')
        box.clear()
        box.send_keys("My cat is called Felix")
        box.submit()
        WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.TAG_NAME, "del"))
        assert [d.text for d in browser.find_elements(By.TAG_NAME, "del")] == ["My cat is called Tom"]
        seen.append(browser.page_source)

        forget = browser.find_element(By.CSS_SELECTOR, '#forget input[name="text"]')
        forget.send_keys("blue flowerpot")
        forget.submit()
        preview = WebDriverWait(browser, 60).until(lambda b: b.find_element(By.ID, "forget-preview")).text
        assert "facts (current and past): 1" in preview
        browser.find_element(By.XPATH, "//button[contains(., 'Erase all of it')]").click()
        WebDriverWait(browser, 60).until(lambda b: "Forgotten:" in b.find_element(By.CSS_SELECTOR, "p.said").text)
        assert "flowerpot" not in browser.find_element(By.CSS_SELECTOR, "main").text.split("Forgotten:")[0]
        seen.append(browser.page_source)
        for path in ("/memory?q=cat", "/approvals", "/chats", "/tools", "/logs"):
            browser.get(url + path)
            seen.append(browser.page_source)
    for page in seen:  # the config's API key is never rendered, on any page
        assert "sk-ant-test" not in page


def test_a_foreign_host_name_pointed_at_the_dashboard_is_refused(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    """DNS rebinding as a browser meets it: evil.example resolves to 127.0.0.1 (Chromium's resolver rules)."""
    with dashboard_daemon(pong_api.base_url, daemon_root, TOKEN) as (_, url):
        port = url.rsplit(":", 1)[1]
        with chromium("--host-resolver-rules=MAP evil.example 127.0.0.1") as browser:
            browser.get(f"http://evil.example:{port}/login")
            assert "This dashboard does not answer to that host name." in browser.page_source
            assert not browser.find_elements(By.ID, "token")  # no login form to phish with
