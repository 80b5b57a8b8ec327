"""The dashboard's browser: Debian's Chromium driven by Selenium, headless (TESTING.md's flags: no background
networking on this machine's closed network). Without it the browser tests skip, saying so; ``.ci/run``
installs it and sets TELETON_REQUIRE_BROWSER, which makes a missing browser a failure."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from tests.daemon.harness import Daemon, write_config

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,800")  # fmt: skip


@contextlib.contextmanager
def chromium(*extra: str) -> Iterator[Any]:
    """A headless Chromium (``extra``: more command-line flags); skipped, or failed under CI, without one."""
    if not (shutil.which(CHROMIUM) and shutil.which(DRIVER)):
        if os.environ.get("TELETON_REQUIRE_BROWSER"):
            pytest.fail(f"browser tests need {CHROMIUM} and {DRIVER} (apt-get install chromium chromium-driver)")
        pytest.skip("Chromium is not installed (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, *extra):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def log_in(browser: Any, url: str, token: str) -> None:
    """Open a page, land on the login page, type the token and send it."""
    browser.get(url + "/status")
    assert browser.current_url == url + "/login"
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "main form button").click()


def daemon_events(root: Path, event: str) -> list[dict[str, Any]]:
    """The daemon's JSON log lines of ``event`` so far."""
    log_file = root / "daemon.log"
    lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
    return [e for e in map(json.loads, filter(None, lines)) if e.get("event") == event]


@contextlib.contextmanager
def dashboard_daemon(api_url: str, root: Path, token: str, *, before: Any = None) -> Iterator[tuple[Daemon, str]]:
    """The real daemon serving its dashboard on a free port: (the daemon, the dashboard's URL, no trailing /).
    ``before(workspace)`` writes files the daemon should find at start."""
    config = write_config(root, api_url, **{"web": {"enabled": True, "port": 0, "token": token}})
    if before is not None:
        workspace = root / "state" / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        before(workspace)
    daemon = Daemon(root, config).start()
    try:
        daemon.wait_for(lambda _: daemon_events(root, "dashboard_started"))
        yield daemon, daemon_events(root, "dashboard_started")[0]["url"].rstrip("/")
    finally:
        daemon.stop()


@contextlib.contextmanager
def owner_client(url: str, token: str) -> Iterator[httpx.Client]:
    """An HTTP client logged in to the dashboard at ``url``; its requests carry the dashboard's own Origin, as a
    browser's from the dashboard's pages do."""
    with httpx.Client(base_url=url, timeout=30, follow_redirects=True, headers={"origin": url}) as http:
        assert http.post("/login", data={"token": token}).url.path == "/status"
        yield http
