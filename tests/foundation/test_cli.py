"""The command line as a user meets it: help, version, init, doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from teleton.workspace.template import PROMPT_FILES


def teleton(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    full_env.update({"HOME": str(home), "COLUMNS": "200", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def test_help_lists_commands(isolated_home: Path) -> None:
    proc = teleton("--help", home=isolated_home)
    assert proc.returncode == 0
    for command in ("init", "doctor", "version"):
        assert command in proc.stdout


def test_version(isolated_home: Path) -> None:
    proc = teleton("version", home=isolated_home)
    assert proc.returncode == 0
    assert proc.stdout.startswith("teleton ")
    assert "SQLite" in proc.stdout


def test_init_creates_workspace_and_keeps_existing_files(isolated_home: Path) -> None:
    workspace = isolated_home / ".teleton" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("my own notes\n")
    proc = teleton("init", home=isolated_home)
    assert proc.returncode == 0, proc.stderr
    for name in PROMPT_FILES:
        assert (workspace / name).is_file()
    assert (workspace / "memory").is_dir()
    assert (workspace / "MEMORY.md").read_text() == "my own notes\n"
    assert "kept" in proc.stdout
    soul = (workspace / "SOUL.md").read_text()
    (workspace / "SOUL.md").write_text(soul + "\nBe brief.\n")
    assert teleton("init", home=isolated_home).returncode == 0
    assert (workspace / "SOUL.md").read_text().endswith("Be brief.\n")


def test_doctor_reports_each_check(isolated_home: Path) -> None:
    proc = teleton("doctor", home=isolated_home)
    out = proc.stdout
    for name in ("Python", "SQLite", "FTS5", "sqlite-vec", "Embedding model", "Config", "Telegram session",
                 "Anthropic API key"):  # fmt: skip
        assert name in out
    assert "OK   sqlite-vec" in out
    assert "OK   Embedding model" in out
    # Nothing set up yet: doctor fails and says how to fix each problem.
    assert proc.returncode == 1
    assert "FAIL Anthropic API key" in out and "ANTHROPIC_API_KEY" in out
    assert "FAIL Telegram session" in out and "teleton setup" in out
    assert "FAIL Workspace" in out and "teleton init" in out


def test_doctor_all_ok_when_set_up(isolated_home: Path) -> None:
    assert teleton("init", home=isolated_home).returncode == 0
    session = isolated_home / ".teleton" / "telegram.session"
    session.write_bytes(b"")
    session.chmod(0o600)
    proc = teleton("doctor", home=isolated_home, env={"ANTHROPIC_API_KEY": "sk-ant-test-key-000000000000"})
    assert proc.returncode == 0, proc.stdout
    assert "FAIL" not in proc.stdout
    assert "sk-ant-test" not in proc.stdout
    session.chmod(0o644)
    proc = teleton("doctor", home=isolated_home, env={"ANTHROPIC_API_KEY": "sk-ant-test-key-000000000000"})
    assert proc.returncode == 1
    assert "chmod 600" in proc.stdout
