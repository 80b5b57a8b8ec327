"""Screenshots of every dashboard page at 1280x800 for docs/dashboard/ (issue 35), in headless Chromium, from
the real daemon (loopback transport, a scripted model) with a little history: a note in MEMORY.md, a group
and a DM that talked, a fact, a send held for approval.

    python scripts/dashboard_screenshots.py            # writes docs/dashboard/<page>.png

Needs the web extra, selenium (dev) and Debian's chromium + chromium-driver."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "screenshot-" + "t" * 32
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1280,800",
         "--hide-scrollbars")  # fmt: skip
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
HIKERS = {"id": -100777, "type": "group", "title": "Hikers"}
MALLORY = {"id": 3003, "first_name": "Mallory"}


def model(body: dict[str, Any]) -> Any:
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return text("Done — it waits for your approval, since the hikers may not read your notes.")
    said = last if isinstance(last, str) else next(b["text"] for b in reversed(last) if b.get("type") == "text")
    if "greet" in said:
        return tool_use(("send_message", {"chat_id": HIKERS["id"], "text": "Hello hikers, see you at the lake at 8!"}))
    if "remember" in said:
        return tool_use(("memory_save", {"value": "Olga's sister Anna lives in Porto", "category": "people"}))
    return text("The lake trip is on Saturday at 8; Mallory brings the map.")


def events(root: Path, name: str) -> list[dict[str, Any]]:
    log_file = root / "daemon.log"
    lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
    return [e for e in map(json.loads, filter(None, lines)) if e.get("event") == name]


def main() -> None:
    out = ROOT / "docs" / "dashboard"
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="tlt-shots-", dir="/tmp"))
    (root / "home").mkdir()
    with FakeAnthropic() as api:
        api.responder = model
        web = {"enabled": True, "port": 0, "token": TOKEN}
        config = write_config(root, api.base_url, **{"web": web, "agent.model": "claude-sonnet-4-5"})  # a priced one
        workspace = root / "state" / "workspace"
        workspace.mkdir(parents=True)
        (workspace / "MEMORY.md").write_text("# Trips\nThe lake trip is on Saturday; the car key is in the blue jar.\n")
        daemon = Daemon(root, config).start()
        options = Options()
        options.binary_location = "/usr/bin/chromium"
        for flag in FLAGS:
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            daemon.wait_for(lambda _: events(root, "dashboard_started"))
            url = events(root, "dashboard_started")[0]["url"].rstrip("/")
            daemon.send(
                HIKERS, "who brings the map for the lake trip?", message_id=1, sender=MALLORY, mentions_us=False
            )
            daemon.send(OWNER_DM, "when is the lake trip?", message_id=2)
            daemon.send(OWNER_DM, "remember that my sister Anna lives in Porto", message_id=3)
            daemon.send(OWNER_DM, "greet the hikers for me", message_id=4)
            daemon.wait_for(lambda _: len([e for e in daemon.sent(OWNER["id"]) if "approval" in e["text"]]) >= 1)
            status = root / "state" / "status.json"  # written every 5 s: the Status page shows the turns once it is
            daemon.wait_for(lambda _: status.exists() and json.loads(status.read_text()).get("turns", 0) >= 3)
            driver.get(url + "/login")
            driver.save_screenshot(str(out / "login.png"))
            driver.find_element(By.ID, "token").send_keys(TOKEN)
            driver.find_element(By.CSS_SELECTOR, "main form button").click()
            WebDriverWait(driver, 60).until(lambda d: d.current_url.endswith("/status"))
            pages = {
                "status": "/status",
                "memory": "/memory?q=lake+trip",
                "facts": "/facts",
                "approvals": "/approvals",
                "chats": "/chats",
                "chat": f"/chats/{OWNER['id']}",
                "tools": "/tools?message=remind+me+tomorrow+at+9",
                "logs": "/logs",
            }
            for name, path in pages.items():
                driver.get(url + path)
                driver.save_screenshot(str(out / f"{name}.png"))
            print(f"wrote {', '.join(pages)} and login to {out}")
        finally:
            driver.quit()
            daemon.stop()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
