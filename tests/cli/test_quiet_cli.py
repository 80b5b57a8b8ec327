"""The command line as a person and a script meet it: no log line among the output of any command, `--json`
wherever data is printed, help pages without type placeholders, `--version`, documented exit codes.

Every command runs as a user runs it: the real CLI in a subprocess, in a fresh home, against a real database.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import click
import pexpect
import pytest
import typer
import yaml
from typer.testing import CliRunner

from teleton.cli.main import app
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said
from tests.fakes.openai_embeddings import FakeEmbeddings
from tests.foundation.test_cli import teleton
from tests.waiting import until_sync

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times

# What a log record looks like when it is not written for people: structlog's console renderer (a timestamp,
# "[info     ]"), JSON lines, or a level word glued to an event name.
LOG_LINE = re.compile(
    r"\[(debug|info|warning|error|critical)\s*\]|^\s*\{\"|\"event\":|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", re.MULTILINE
)
PLACEHOLDER = re.compile(r"<(bool|str|int|float|path|list|int range|float range)[^>]*>|\{[a-z_]+\}")
README = Path(__file__).resolve().parents[2] / "README.md"


def _home(tmp_path: Path, extra: dict[str, Any] | None = None) -> tuple[Path, Path]:
    home = tmp_path / "home"
    (home / ".teleton" / "workspace").mkdir(parents=True)
    (home / ".teleton" / "workspace" / "MEMORY.md").write_text(
        "# Notes\n\nThe spare key is with Rui.\n\n## Boat\n\nThe boat is blue.\n"
    )
    config = home / "config.yaml"
    settings = {"embedding": {"provider": "none"}, "memory": {"distill": False}, "telegram": {"owner_id": 4242}}
    config.write_text(yaml.safe_dump({**settings, **(extra or {})}))
    config.chmod(0o600)
    return home, config


def _quiet(proc: subprocess.CompletedProcess[str], command: str) -> None:
    shown = proc.stdout + proc.stderr
    assert "Traceback" not in shown, f"{command}:\n{shown}"
    assert not LOG_LINE.search(shown), f"a log line in the output of `teleton {command}`:\n{shown}"


def test_no_command_prints_a_log_line(tmp_path: Path) -> None:
    home, config = _home(tmp_path)
    export = tmp_path / "memory.json"
    commands = [
        "init", "memory index", "memory search key", "memory stats", "memory facts", f"memory export {export}",
        f"memory import {export}", "memory forget Rui --yes", "feed search key", "feed stats", "status",
        "doctor", "models", "version",
    ]  # fmt: skip
    for command in commands:
        proc = teleton("-c", str(config), *command.split(), home=home)
        assert proc.returncode in (0, 1), f"{command}: {proc.stderr}"  # status: not running; doctor: a FAIL
        _quiet(proc, command)


def test_piped_chat_prints_answers_and_its_log_goes_to_the_file(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.responder = lambda body: text(f"You said: {user_said(body)}")
    home, config = _home(tmp_path, {"agent": {"api_key": "test", "base_url": fake_api.base_url}})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))} | {"HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), "chat"],
        input="hello there\n/help\n", capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "You said: hello there" in proc.stdout
    _quiet(proc, "chat (piped)")
    assert '"event": "turn_done"' in (home / ".teleton" / "chat.log").read_text()


def test_every_print_of_data_speaks_json(tmp_path: Path) -> None:
    home, config = _home(tmp_path)
    assert teleton("-c", str(config), "memory", "index", home=home).returncode == 0
    for command, code in [
        ("status --json", 1), ("feed search key --json", 0), ("feed stats --json", 0), ("memory stats --json", 0),
        ("memory search key --json", 0), ("memory facts --json", 0), ("doctor --json", 1),
    ]:  # fmt: skip
        proc = teleton("-c", str(config), *command.split(), home=home)
        assert proc.returncode == code, f"{command}: {proc.stderr}"
        json.loads(proc.stdout)  # all of stdout is the one JSON document
    status = json.loads(teleton("-c", str(config), "status", "--json", home=home).stdout)
    assert status["running"] is False and status["condition"] == "not running"
    hits = json.loads(teleton("-c", str(config), "memory", "search", "spare key", "--json", home=home).stdout)
    # Line numbers as an editor shows them: the chunk begins with "# Notes", line 1 of MEMORY.md.
    assert [(h["meta"]["path"], h["meta"]["start_line"]) for h in hits] == [("MEMORY.md", 1)]
    boat = json.loads(teleton("-c", str(config), "memory", "search", "boat blue", "--json", home=home).stdout)
    assert boat[0]["meta"]["start_line"] == 5  # "## Boat"


def test_embedding_dims_is_a_number(tmp_path: Path) -> None:
    with FakeEmbeddings(dims={"embed-test": 16}) as fake:
        home, config = _home(tmp_path, {"embedding": {"provider": "openai_compatible", "base_url": fake.base_url,
                                                      "model": "embed-test"}})  # fmt: skip
        assert teleton("-c", str(config), "memory", "index", home=home).returncode == 0
        stats = json.loads(teleton("-c", str(config), "memory", "stats", "--json", home=home).stdout)
    assert stats["embedding_dims"] == 16 and stats["embedded"] == 2


def test_an_empty_query_is_a_usage_error(tmp_path: Path) -> None:
    home, config = _home(tmp_path)
    for command in (["memory", "search", ""], ["feed", "search", "  "]):
        proc = teleton("-c", str(config), *command, home=home)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.strip().splitlines() == ["error: the query is empty: say what to look for"]


def test_help_has_no_placeholders_and_every_option_is_documented() -> None:
    root = typer.main.get_command(app)
    runner = CliRunner()
    for path, command in _commands(root, []):
        ctx = click.Context(command, info_name=path[-1] if path else "teleton")
        for param in command.get_params(ctx):
            if not getattr(param, "hidden", False):
                assert getattr(param, "help", None), f"teleton {' '.join(path)}: {param.name} has no help"
        shown = runner.invoke(app, [*path, "--help"], terminal_width=200).output
        assert not PLACEHOLDER.search(shown), f"teleton {' '.join(path)} --help:\n{shown}"
    search = runner.invoke(app, ["memory", "search", "--help"], terminal_width=200).output
    assert "memory search [OPTIONS] QUERY" in search
    assert re.search(r"--limit\s+-n\s+INTEGER", search) and "At most this many hits" in search
    assert "public/" in runner.invoke(app, ["memory", "index", "--help"], terminal_width=200).output


def _commands(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            found += _commands(sub, [*path, name])
    return found


def test_version_flag_and_the_documented_exit_codes(tmp_path: Path) -> None:
    flag = teleton("--version", home=tmp_path)
    assert flag.returncode == 0 and flag.stdout == teleton("version", home=tmp_path).stdout
    assert flag.stdout.startswith("teleton ")
    shown = " ".join(teleton("--help", home=tmp_path).stdout.split())
    documented = "0 ok; 1 failure"
    assert documented in shown and "2 usage or config error" in shown and "78 the daemon stopped" in shown
    commands = README.read_text().split("## Commands", 1)[1].split("\n## ", 1)[0]
    assert "Exit codes" in commands and all(code in commands for code in ("`0`", "`1`", "`2`", "`78`", "`130`"))
    proc = teleton("memory", "search", home=tmp_path)  # a usage error: exit 2
    assert proc.returncode == 2


class GatedEmbeddings(FakeEmbeddings):
    """Answers the dimension probe and the first batch, then holds every request until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.arrived = 0

    def answer(self, path: str, auth: str | None, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        if path == "/v1/embeddings":
            self.arrived += 1  # one request at a time: the client waits for each batch
            if self.arrived > 2:
                self.gate.wait()
        return super().answer(path, auth, body)


def test_ctrl_c_during_memory_index_says_how_far_it_got(tmp_path: Path) -> None:
    with GatedEmbeddings() as fake:
        home, config = _home(tmp_path, {"embedding": {"provider": "openai_compatible", "base_url": fake.base_url,
                                                      "model": "embed-test"}})  # fmt: skip
        notes = home / ".teleton" / "workspace" / "memory"
        notes.mkdir()
        for i in range(100):  # 102 chunks with MEMORY.md: one batch of 64 embedded, the next held
            (notes / f"note-{i:03d}.md").write_text(f"# Note {i}\n\nThing number {i} is worth keeping.\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TELETON_")} | {"HOME": str(home)}
        # Ctrl-C as a terminal's foreground job gets it: a suite started in the background (`pytest &` from a
        # script) ignores SIGINT, and a child would inherit that (POSIX: background jobs ignore it).
        child = pexpect.spawn(sys.executable, ["-m", "teleton.cli.main", "-c", str(config), "memory", "index"],
                              env=env, encoding="utf-8", dimensions=(24, 120),
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
        until_sync(lambda: fake.arrived >= 3)  # the probe, the first batch, and the held one
        child.kill(signal.SIGINT)
        child.expect(pexpect.EOF, timeout=60)
        child.close()
        fake.gate.set()
        assert child.exitstatus == 130, child.before
        assert "64 of 102 embedded; run `teleton memory index` again to resume" in child.before
        resumed = teleton("-c", str(config), "memory", "index", home=home)
    assert resumed.returncode == 0 and "(38 embedded)" in resumed.stdout
