"""The command line as a user meets it: help, version, init, doctor."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from teleton.providers import extras
from teleton.storage.workspace_template import PROMPT_FILES
from tests.conftest import requires_extra
from tests.fakes.anthropic_server import FakeAnthropic, error

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times


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


TELEGRAM = {"TELETON_TELEGRAM__API_ID": "12345", "TELETON_TELEGRAM__API_HASH": "0123456789abcdef"}


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
    assert "SKIP Telegram session" in out and "terminal only" in out and "teleton setup" in out
    assert "FAIL Workspace" in out and "teleton init" in out
    # Once Telegram is configured, a missing session is a failure.
    proc = teleton("doctor", home=isolated_home, env=TELEGRAM)
    assert "FAIL Telegram session" in proc.stdout and "not found" in proc.stdout


def telethon_session(path: Path, *, logged_in: bool) -> None:
    """A real Telethon session file: an auth key, and (after a finished login) Telethon's own user id."""
    from telethon.crypto import AuthKey
    from telethon.sessions import SQLiteSession
    from telethon.tl import types

    session = SQLiteSession(str(path))
    session.set_dc(2, "149.154.167.51", 443)
    session.auth_key = AuthKey(os.urandom(256))
    if logged_in:  # what TelegramClient saves at disconnect once signed in
        session.process_entities(types.contacts.ResolvedPeer(None, [types.InputPeerUser(0, 777000)], []))
    session.save()
    session.close()
    path.with_suffix(".session").chmod(0o600)


def test_doctor_all_ok_when_set_up(isolated_home: Path) -> None:
    assert teleton("init", home=isolated_home).returncode == 0
    session = isolated_home / ".teleton" / "telegram.session"
    telethon_session(session, logged_in=True)
    proc = teleton("doctor", home=isolated_home, env={**TELEGRAM, "ANTHROPIC_API_KEY": "sk-ant-test-key-000000000000"})
    assert proc.returncode == 0, proc.stdout
    assert "FAIL" not in proc.stdout and "logged in as user id 777000" in proc.stdout
    assert "OK   Data directory" in proc.stdout and "OK   Free disk" in proc.stdout
    assert "OK   Database" in proc.stdout or "not created yet" in proc.stdout
    assert "sk-ant-test" not in proc.stdout
    session.chmod(0o644)
    proc = teleton("doctor", home=isolated_home, env={**TELEGRAM, "ANTHROPIC_API_KEY": "sk-ant-test-key-000000000000"})
    assert proc.returncode == 1
    assert "chmod 600" in proc.stdout


def test_doctor_fails_a_session_whose_login_never_finished_or_that_is_not_one(isolated_home: Path) -> None:
    assert teleton("init", home=isolated_home).returncode == 0
    session = isolated_home / ".teleton" / "telegram.session"
    telethon_session(session, logged_in=False)
    proc = teleton("doctor", home=isolated_home, env=TELEGRAM)
    assert "FAIL Telegram session" in proc.stdout and "the login was never completed" in proc.stdout
    session.write_bytes(b"garbage, not a database")
    proc = teleton("doctor", home=isolated_home, env=TELEGRAM)
    assert "is not a Telegram session file" in proc.stdout and proc.returncode == 1


def test_doctor_lists_every_check_after_a_config_error_and_speaks_json(isolated_home: Path) -> None:
    config = isolated_home / "config.yaml"
    config.write_text("telegram:\n  dm_polcy: open\n")
    proc = teleton("-c", str(config), "doctor", home=isolated_home)
    assert proc.returncode == 1 and "FAIL Config" in proc.stdout
    for name in ("Embedding model", "Workspace", "Database", "Data directory", "Free disk", "Telegram session"):
        assert f"SKIP {name}" in proc.stdout
    proc = teleton("-c", str(config), "doctor", "--json", home=isolated_home)
    checks = {c["name"]: c["ok"] for c in json.loads(proc.stdout)}
    assert checks["Config"] is False and checks["Telegram session"] is None and checks["Python"] is True


def test_doctor_names_a_data_dir_it_cannot_write(isolated_home: Path) -> None:
    config = isolated_home / "config.yaml"
    config.write_text("storage:\n  data_dir: /proc/teleton-data\n")  # not writable, not even for root
    config.chmod(0o600)
    proc = teleton("-c", str(config), "doctor", home=isolated_home)
    assert "FAIL Data directory" in proc.stdout and "/proc: not writable" in proc.stdout


def test_doctor_online_checks_the_api_key_with_one_request(isolated_home: Path, fake_api: FakeAnthropic) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-000000000000", "ANTHROPIC_BASE_URL": fake_api.base_url}
    proc = teleton("doctor", "--online", home=isolated_home, env=env)
    assert "OK   Anthropic API (online)" in proc.stdout and len(fake_api.requests) == 1
    assert fake_api.requests[0]["max_tokens"] == 1
    assert "SKIP Telegram (online)" in proc.stdout  # no api_id: nothing to connect with
    fake_api.responder = lambda body: error(401, "authentication_error", "invalid x-api-key")
    proc = teleton("doctor", "--online", home=isolated_home, env=env)
    assert "FAIL Anthropic API (online)" in proc.stdout and "API key rejected" in proc.stdout
    assert len(fake_api.requests) == 2  # rejected at once: never retried


def _config(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_bytes(text.encode("latin-1"))
    path.chmod(0o600)
    return path


def test_cli_errors_are_one_line_with_the_fix(isolated_home: Path) -> None:
    unwritable = _config(isolated_home, "storage:\n  data_dir: /proc/teleton-data\n")
    cases: list[tuple[tuple[str, ...], str, int]] = [
        (("-c", str(unwritable), "init"), "error: /proc/teleton-data: No such file or directory: check the path", 1),
        (("-c", str(unwritable), "memory", "index"), "error: /proc/teleton-data", 1),
    ]
    for args, expected, code in cases:
        proc = teleton(*args, home=isolated_home)
        assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(expected)

    latin = _config(isolated_home, "agent:\n  model: café\n")
    proc = teleton("-c", str(latin), "init", home=isolated_home)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "config error: config.yaml: not UTF-8 text (byte 0xe9 at offset 19): save the file as UTF-8"
    )

    assert teleton("init", home=isolated_home).returncode == 0
    (isolated_home / ".teleton" / "teleton.db").write_text("garbage, not a database")
    proc = teleton("memory", "index", home=isolated_home)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    damaged = f"error: {isolated_home}/.teleton/teleton.db: the database is damaged or not a Teleton database"
    assert proc.stderr.strip().startswith(damaged)
    assert "restore the last backup with `teleton restore" in proc.stderr

    (isolated_home / ".teleton" / "teleton.db").unlink()
    assert teleton("memory", "index", home=isolated_home).returncode == 0  # creates a good database
    proc = teleton("backup", str(isolated_home / "missing" / "copy.db"), home=isolated_home)
    assert proc.returncode == 1 and "missing is not a folder; create it first" in proc.stderr


def test_a_broken_model_file_at_start_is_one_line(isolated_home: Path) -> None:
    model = isolated_home / "model"
    model.mkdir()
    (model / "model.onnx").write_bytes(b"truncated")
    (model / "tokenizer.json").write_text("{}")
    config = _config(isolated_home, f"embedding:\n  model_path: {model}\ntelegram:\n  owner_id: 1\n")
    socket = f"/tmp/tlt-cli-{os.getpid()}.sock"
    proc = teleton("-c", str(config), "start", "--transport", f"loopback:{socket}", home=isolated_home,
                   env={"ANTHROPIC_API_KEY": "sk-ant-test"})  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: embedding model: {model}/model.onnx is not a loadable ONNX model")
    assert "embedding.model_path" in last


@pytest.mark.parametrize(
    ("model", "model_id", "file"),
    [
        ("null", "multilingual-e5-small-int8", "multilingual-e5-small-int8/model.onnx"),  # the default
        pytest.param(
            "use-multilingual",
            "use-multilingual-v3-onnx-int8",
            "universal-sentence-encoder-multilingual.onnx",
            marks=requires_extra("use-multilingual"),
        ),
        pytest.param("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-onnx-int8", "model.onnx", marks=requires_extra("minilm")),
    ],
)
def test_doctor_checks_the_packaged_model_the_config_names(
    isolated_home: Path, model: str, model_id: str, file: str
) -> None:
    config = _config(isolated_home, f"embedding:\n  model: {model}\n")
    line = next(x for x in teleton("-c", str(config), "doctor", home=isolated_home).stdout.splitlines()
                if "Embedding model" in x)  # fmt: skip
    assert line.split()[:4] == ["OK", "Embedding", "model", model_id], line
    assert f"{file}) · prompts: " in line, line


def without_extras_on_path(folder: Path, *extras_: str) -> dict[str, str]:
    """The environment of a CLI subprocess that lacks ``extras_``, as a default install does: a
    ``sitecustomize`` on PYTHONPATH makes their packages unimportable (and unfindable) at start."""
    modules = sorted(m for extra in extras_ for m in extras.EXTRAS[extra])
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(f"import sys\nsys.modules.update(dict.fromkeys({modules!r}))\n")
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def expanded(command: str, home: Path | None = None) -> list[str]:
    """A command's words as a shell with that home folder reads them ("~/" expanded)."""
    home_dir = str(home or Path.home())
    return [home_dir + w[1:] if w.startswith("~/") else w for w in shlex.split(command)]


def test_doctor_on_a_default_install_skips_voice_notes_and_names_the_extra_of_a_configured_model(
    isolated_home: Path,
) -> None:
    env = {**without_extras_on_path(isolated_home / "slim", "voice", "minilm"), "ANTHROPIC_API_KEY": "sk-ant-test"}
    config = _config(isolated_home, "telegram:\n  owner_id: 1\n")
    assert teleton("-c", str(config), "init", home=isolated_home, env=env).returncode == 0
    proc = teleton("-c", str(config), "doctor", home=isolated_home, env=env)
    lines = proc.stdout.splitlines()
    [skip] = [x for x in lines if "Transcription" in x]
    assert skip.split()[:7] == ["SKIP", "Transcription", "voice", "notes", "are", "not", "transcribed:"], skip
    assert expanded(skip.split("transcribed: ")[1], isolated_home) == expanded(extras.install_command("voice"))
    assert not [x for x in lines if x.startswith("FAIL")], proc.stdout  # the default install passes
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr

    config = _config(isolated_home, "embedding:\n  model: all-MiniLM-L6-v2\nmedia:\n  voice_replies: always\n")
    proc = teleton("-c", str(config), "doctor", home=isolated_home, env=env)
    failed = [x for x in proc.stdout.splitlines() if x.startswith("FAIL")]
    assert len(failed) == 2 and proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout
    model, voice = failed
    assert "Embedding model" in model and "[minilm]" in model and "install" in model
    assert "Voice replies" in voice and "[voice]" in voice and "install" in voice
