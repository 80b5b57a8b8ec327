"""The dashboard's browser: Debian's Chromium driven by Selenium, headless (TESTING.md's flags: no background
networking on this machine's closed network). Without it the browser tests skip, saying so; ``.ci/run``
installs it and sets TELETON_REQUIRE_BROWSER, which makes a missing browser a failure."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,800")  # fmt: skip


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(DRIVER)):
        if os.environ.get("TELETON_REQUIRE_BROWSER"):
            pytest.fail(f"browser tests need {CHROMIUM} and {DRIVER} (apt-get install chromium chromium-driver)")
        pytest.skip("Chromium is not installed (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def log_in(browser: Any, url: str, token: str) -> None:
    """Open a page, land on the login page, type the token and send it."""
    browser.get(url + "/status")
    assert browser.current_url == url + "/login"
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
