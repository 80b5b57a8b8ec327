"""Talk to `teleton start --transport loopback:SOCKET` from inside the container (standard library only).

scripts/container_smoke.sh pipes this file into `podman exec -i CONTAINER python3 - ...`, so nothing of it is
in the image. Two commands:

  send SOCKET MESSAGE_ID TEXT [--wait]   a DM from the owner (id 1001); --wait: until the daemon sends a reply,
                                         printed as the last line; without it, until the message is archived
  received SOCKET COUNT                  until the owner's chat has received COUNT messages (the loopback's
                                         record on disk, kept across kills); prints them, one per line

Each waits at most --timeout seconds (exit 1 on a timeout).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

OWNER = {"id": 1001, "first_name": "Olga", "username": "olga"}
DM = {"id": OWNER["id"], "type": "dm", "title": ""}


def connect(path: str, deadline: float) -> socket.socket:
    while True:
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                sys.exit(f"no daemon listening on {path}")
            time.sleep(0.2)


def send(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.timeout
    sock = connect(args.socket, deadline)
    event = {"op": "message", "chat": DM, "sender": OWNER, "message_id": args.message_id, "text": args.text,
             "date": time.time()}  # fmt: skip
    sock.sendall((json.dumps(event) + "\n").encode())
    sock.settimeout(1.0)
    buffer = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            sys.exit("the daemon closed the socket")
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            if ev.get("op") == "archived" and ev.get("message_id") == args.message_id and not args.wait:
                print(f"archived {args.message_id}")
                return
            if ev.get("op") == "send_message" and ev.get("chat_id") == OWNER["id"] and args.wait:
                print(ev["text"])
                return
    sys.exit(f"timed out after {args.timeout:.0f} s")


def received(args: argparse.Namespace) -> None:
    path = Path(args.socket + ".received.jsonl")
    deadline = time.monotonic() + args.timeout
    while True:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        mine = [e for e in map(json.loads, filter(None, lines)) if e["chat_id"] == OWNER["id"]]
        if len(mine) >= args.count:
            for entry in mine:
                print(entry["text"])
            return
        if time.monotonic() > deadline:
            sys.exit(f"timed out after {args.timeout:.0f} s: {len(mine)} of {args.count} received")
        time.sleep(0.3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=90.0)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send")
    s.add_argument("socket")
    s.add_argument("message_id", type=int)
    s.add_argument("text")
    s.add_argument("--wait", action="store_true")
    r = sub.add_parser("received")
    r.add_argument("socket")
    r.add_argument("count", type=int)
    args = parser.parse_args()
    send(args) if args.command == "send" else received(args)


if __name__ == "__main__":
    main()
