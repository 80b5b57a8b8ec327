"""Screenshots of the dashboard's pages at 1280x800 for docs/dashboard/ (issue 35), taken in headless Chromium
from a real `teleton dashboard` reading a status file written here (a daemon of a few days, one MCP server
with a tool waiting for approval, one loop recovering).

    python scripts/dashboard_screenshots.py            # writes docs/dashboard/status.png

Needs the web extra, selenium (dev) and Debian's chromium + chromium-driver."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from teleton.daemon.status_file import DaemonStatus, write_status
from teleton.process.supervisor import LoopHealth

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "screenshot-" + "t" * 32
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1280,800",
         "--hide-scrollbars")  # fmt: skip


def sample_status() -> DaemonStatus:
    now = time.time()
    status = DaemonStatus(pid=os.getpid(), started_at=now - 3 * 86400 - 4 * 3600, state="running", turns=1842)
    status.archived_messages, status.queue_depth = 104_382, 0
    status.messages = {"accepted": 1, "failed": 3}
    status.queues = {"turns": 0, "archive": 2}
    status.details = {"loop_lag_p99_ms": 4.1, "loop_lag_max_ms": 18.0}
    status.loops = {
        "telegram": LoopHealth("telegram", "up", now - 7200, 1, "ConnectionError: reset by peer", now - 7210).as_dict(),
        "feed-embedder": LoopHealth("feed-embedder", "up", now - 3 * 86400).as_dict(),
        "knowledge-watch": LoopHealth("knowledge-watch", "up", now - 3 * 86400).as_dict(),
    }
    status.errors = {"model": ["529 overloaded (retried, answered)", now - 5400]}
    status.mcp = {
        "calendar": {"state": "connected", "tools": ["mcp_calendar_list_events", "mcp_calendar_create_event"],
                     "pending": ["delete_event"], "error": None, "restarts": 0},
        "files": {"state": "connected", "tools": ["mcp_files_read_file", "mcp_files_search_files"], "pending": [],
                  "error": None, "restarts": 0},
    }  # fmt: skip
    return status


def main() -> None:
    out = ROOT / "docs" / "dashboard"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir(mode=0o700)
        config = Path(tmp) / "config.yaml"
        config.write_text(f"storage: {{data_dir: {data}}}\nembedding: {{provider: none}}\nweb: {{token: {TOKEN}}}\n")
        config.chmod(0o600)
        write_status(data / "status.json", sample_status())
        proc = subprocess.Popen(
            [sys.executable, "-m", "teleton.cli.main", "-c", str(config), "dashboard", "--port", "0"],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "HOME": tmp},
        )  # fmt: skip
        options = Options()
        options.binary_location = "/usr/bin/chromium"
        for flag in FLAGS:
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split(" on ")[1].split("/ ")[0]
            driver.get(url + "/login")
            driver.save_screenshot(str(out / "login.png"))
            driver.find_element(By.ID, "token").send_keys(TOKEN)
            driver.find_element(By.CSS_SELECTOR, "main form button").click()
            WebDriverWait(driver, 60).until(lambda d: d.current_url.endswith("/status"))
            driver.save_screenshot(str(out / "status.png"))
            print(f"wrote {out / 'login.png'} and {out / 'status.png'}")
        finally:
            driver.quit()
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
