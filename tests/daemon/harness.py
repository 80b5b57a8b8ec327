"""Run the real daemon as a subprocess: loopback chat transport on a Unix socket, fake Messages API."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from teleton.storage import connect
from teleton.storage.sqlite_driver import pick_driver

OWNER = {"id": 1001, "first_name": "Olga", "username": "olga"}
DNS_WITNESS = Path(__file__).resolve().parent.parent / "fakes" / "dns_witness"


def write_config(root: Path, api_url: str, **overrides: Any) -> Path:
    config: dict[str, Any] = {
        "agent": {"api_key": "sk-ant-test", "base_url": api_url, "model": "claude-test",
                  "utility_model": "claude-test-small", "max_retries": 3, "retry_max_delay_s": 0.2,
                  # Off: on a loaded machine a slow turn's notice would be one more message in a count (the
                  # notice has its own tests, tests/agent/test_model_faults.py).
                  "request_timeout_s": 10, "slow_notice_s": 0},
        "telegram": {"owner_id": OWNER["id"], "admin_ids": [OWNER["id"]], "dm_policy": "allowlist",
                     "group_policy": "open", "require_mention": True, "debounce_ms": 0,
                     "rate_limit_per_chat": 1000, "rate_limit_global": 10000},
        "storage": {"data_dir": str(root / "state")},
        "memory": {"distill": False},
        "logging": {"format": "json", "level": "info", "file": str(root / "daemon.log")},
    }  # fmt: skip
    for dotted, value in overrides.items():
        node = config
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


class Daemon:
    def __init__(self, root: Path, config: Path) -> None:
        self.root = root
        self.config = config
        self.socket_path = root / "chat.sock"
        self.dns_log = root / "dns.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.events: list[dict[str, Any]] = []
        self.env: dict[str, str] = {}  # extra environment for the daemon (fault knobs)
        self.socket_error: OSError | ValueError | None = None  # the last error reading the socket (see wait_for)
        self._buffer = b""

    def start(self) -> Daemon:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
        env["HOME"] = str(self.root / "home")
        # Every host name the daemon looks up is written down, and none is resolved (tests/fakes/dns_witness).
        env["PYTHONPATH"] = os.pathsep.join([str(DNS_WITNESS), *filter(None, [env.get("PYTHONPATH")])])
        env["DNS_WITNESS_LOG"] = str(self.dns_log)
        env.update(self.env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "teleton.cli.main", "-c", str(self.config), "start",
             "--transport", f"loopback:{self.socket_path}"],
            stdout=subprocess.DEVNULL, stderr=open(self.root / "stderr.log", "ab"), env=env,
        )  # fmt: skip
        # No deadline: a daemon that never listens hangs into pytest-timeout (its stderr.log stays in tmp_path).
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}: {self.stderr()[-3000:]}")
            if self.socket_path.exists():
                try:
                    self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    self.sock.connect(str(self.socket_path))
                    # Blocking (pump polls with select): a send from a burst thread never gives up half-way
                    # because the daemon was slow to read on a busy machine.
                    return self
                except OSError:  # the socket file exists before it listens: try again
                    self.sock = None
            time.sleep(0.05)

    def stderr(self) -> str:
        path = self.root / "stderr.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def send(self, chat: dict[str, Any], text: str, message_id: int, sender: dict[str, Any] | None = OWNER,
             **extra: Any) -> None:  # fmt: skip
        """A message from ``sender`` (the owner by default; None: a message with no sender)."""
        event = {"op": "message", "chat": chat, "sender": sender, "message_id": message_id,
                 "text": text, "date": time.time(), **extra}  # fmt: skip
        assert self.sock is not None
        self.sock.sendall((json.dumps(event) + "\n").encode())

    def pump(self) -> None:
        assert self.sock is not None
        try:
            # Short: a waiter whose state shows in the daemon's log, not on the socket, looks again this soon.
            readable, _, _ = select.select([self.sock], [], [], 0.05)
            # One read per call: under a steady stream a read-until-idle loop would never return.
            chunk = self.sock.recv(1 << 16) if readable else b""
        except (OSError, ValueError) as exc:  # the daemon is gone or the socket was closed: kept for wait_for
            self.socket_error = exc
            return
        if readable and not chunk:
            self.socket_error = ConnectionResetError("the daemon closed the socket")
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        self.events.extend(json.loads(line) for line in lines if line.strip())

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> None:
        """Pump events until ``predicate(events)`` holds (no deadline: a hang is pytest-timeout's to report)."""
        while True:
            self.pump()
            if predicate(self.events):
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"daemon exited ({self.proc.returncode}); last events: {self.events[-5:]}; "
                    f"socket error: {self.socket_error!r}; stderr: {self.stderr()[-3000:]}"
                )

    def looked_up(self) -> list[str]:
        """Every host name the daemon tried to resolve (none was: see tests/fakes/dns_witness)."""
        return self.dns_log.read_text().splitlines() if self.dns_log.exists() else []

    def sent(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["op"] == "send_message" and chat_id in (None, e["chat_id"])]

    def received(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        """What the chats received, as the network (the loopback's stand-in for Telegram) holds it: kept
        across restarts and kills, unlike ``events`` (what this connection happened to read)."""
        path = self.socket_path.with_name(self.socket_path.name + ".received.jsonl")
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [e for e in map(json.loads, lines) if chat_id in (None, e["chat_id"])]

    def acked(self) -> list[tuple[int, int]]:
        return [(e["chat_id"], e["message_id"]) for e in self.events if e["op"] == "archived"]

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self) -> int:
        """The exit code, once the daemon has exited."""
        assert self.proc is not None
        return self.proc.wait()

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def db_rows(root: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of the daemon's database under ``root`` (read beside a running or stopped daemon)."""
    conn = connect(root / "state" / "teleton.db", pick_driver(), vectors=False)
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()
