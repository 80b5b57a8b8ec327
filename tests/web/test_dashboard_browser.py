"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
Selenium), served by a real ``teleton dashboard`` subprocess: logging in, a wrong token refused, the Status
page showing the daemon's record and following it live (server-sent events, no reload), logging out.

The browser fixture is in tests/web/conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from teleton.daemon.status_file import DaemonStatus, write_status
from teleton.process.supervisor import LoopHealth
from tests.web.conftest import log_in

pytestmark = pytest.mark.costly

TOKEN = "browser-" + "t" * 40


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`teleton dashboard` on a free port: (its URL, the status file it reads)."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    config = tmp_path / "config.yaml"
    config.write_text(f"storage: {{data_dir: {data}}}\nembedding: {{provider: none}}\nweb: {{token: {TOKEN}}}\n")
    config.chmod(0o600)
    status_file = data / "status.json"
    write_status(status_file, DaemonStatus(pid=os.getpid(), started_at=time.time(), state="running", turns=3))
    proc = subprocess.Popen(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), "dashboard", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("dashboard (read-only) on http://127.0.0.1:"), first + proc.stderr.read()
        yield first.split(" on ")[1].split("/ ")[0], status_file
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def shown(browser: Any, field: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, f'[data-field="{field}"]').text)


def test_log_in_see_the_status_follow_it_live_and_log_out(browser: Any, dashboard: tuple[str, Path]) -> None:
    url, status_file = dashboard
    log_in(browser, url, "not-the-token")
    # The refusal is a new page: waited for, as a loaded machine may not have it yet when the click returns.
    alert = WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "[role=alert]"))
    assert alert[0].text == "That token is not this dashboard's."

    log_in(browser, url, TOKEN)
    WebDriverWait(browser, 60).until(lambda b: b.current_url != url + "/login")
    assert browser.current_url == url + "/status" and browser.title == "Status — Teleton"
    assert shown(browser, "line").startswith("running (pid") and shown(browser, "turns") == "3"
    assert "read-only" in browser.find_element(By.CSS_SELECTOR, ".badge").text

    # The daemon answers two more messages and a loop goes down: the open page follows, without a reload.
    later = DaemonStatus(pid=os.getpid(), started_at=time.time(), state="running", turns=5)
    later.loops = {"telegram": LoopHealth("telegram", "down", time.time(), 2, "FloodWait 30 s").as_dict()}
    write_status(status_file, later)
    marker = browser.find_element(By.TAG_NAME, "h1")
    WebDriverWait(browser, 60).until(lambda b: shown(b, "turns") == "5")
    rows = browser.find_elements(By.CSS_SELECTOR, '[data-table="loops"] tbody tr')
    assert [r.text for r in rows] == ["telegram down 2 FloodWait 30 s"]
    assert marker.is_displayed()  # the same document: updated in place

    browser.find_element(By.CSS_SELECTOR, "form.logout button").click()
    WebDriverWait(browser, 60).until(lambda b: b.current_url == url + "/login")
    browser.get(url + "/status")
    assert browser.current_url == url + "/login"
