"""A fake OpenAI-compatible model on the host's loopback, for scripts/container_smoke.sh.

It runs on the host (the repository's tests/fakes on the path) and the container reaches it through host
networking. Every answer is "pong: <what the user said>". The first message containing SLOW is held for
--slow-s seconds (a turn still owed when the container is killed); every later one is answered at once.
With --host 0.0.0.0 it also answers on the host's other addresses (compose's bridge network reaches it as
host.containers.internal); the URL written is the loopback one. It writes its base URL to --url-file and
one JSON line per request to --log, then serves until killed.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.anthropic_server import text
from tests.fakes.openai_server import FakeOpenAI, said


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url-file", required=True, type=Path)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--slow-s", type=float, default=120.0)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()

    log = args.log.open("a", encoding="utf-8")
    lock = threading.Lock()
    held = {"done": False}

    def respond(body: dict):
        typed = said(body).strip()
        with lock:
            log.write(json.dumps({"t": time.time(), "said": typed, "stream": bool(body.get("stream"))}) + "\n")
            log.flush()
            slow = "SLOW" in typed and not held["done"]
            held["done"] = held["done"] or slow
        return text("pong: " + typed[-80:], delay=args.slow_s if slow else 0.0)

    fake = FakeOpenAI()
    fake.host = args.host
    fake.responder = respond
    fake.start()
    url = fake.base_url.replace(f"//{args.host}:", "//127.0.0.1:")
    args.url_file.write_text(url)
    print(url, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
