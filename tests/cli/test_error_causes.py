"""Errors that name the real cause, through the real CLI: a read-only data dir or backup target, a folder this
user may not write, a full disk, a damaged database and a locked one each get their own line and fix. A healthy
database is never called damaged (that fix, restoring a backup over it, would destroy it), and a read-only
disk is never told to `chown`. ``teleton doctor``'s fix for a config that does not load names what is wrong.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from teleton.cli.errors import explain
from teleton.storage import Database
from teleton.storage.failures import cause_of
from tests.cli.storage_faults import bound_by_modes, full_disk, mount_namespaces, read_only, teleton

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times

CONFIG = "embedding:\n  provider: none\ntelegram:\n  owner_id: 1\n"
KEY = {"ANTHROPIC_API_KEY": "sk-ant-test"}


def _home(home: Path) -> tuple[Path, Path]:
    """A config and a healthy database with one entry in ``home``; (config, data dir)."""
    config = home / "config.yaml"
    config.write_text(CONFIG)
    config.chmod(0o600)
    data = home / ".teleton"

    async def seed() -> None:
        db = await Database.open(data / "teleton.db")
        try:
            await db.execute(
                "insert into knowledge(source, path, heading, text, hash, label, created_at, updated_at) "
                "values ('memory', 'MEMORY.md', 'Notes', 'The spare key is with Rui.', 'h1', 'owner', 1, 1)"
            )
        finally:
            await db.close()

    asyncio.run(seed())
    return config, data


def _one_line(proc: object) -> str:
    stderr = getattr(proc, "stderr", "").strip()
    assert getattr(proc, "returncode", None) == 1 and "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1:] == [stderr.splitlines()[-1]] and stderr.startswith("error: "), stderr
    return stderr.splitlines()[-1]


def _doctor(lines: str, name: str) -> tuple[str, str]:
    """(the check's line, its fix line) in doctor's output."""
    rows = lines.splitlines()
    at = next(i for i, row in enumerate(rows) if row[5:].startswith(name))
    fix = rows[at + 1] if at + 1 < len(rows) and rows[at + 1].strip().startswith("fix:") else ""
    return rows[at], fix


def _never_damaged(text: str) -> None:
    assert "damaged" not in text and "restore" not in text and "chown" not in text, text


@pytest.mark.skipif(mount_namespaces() is not None, reason=f"no read-only mount: {mount_namespaces()}")
def test_a_read_only_data_dir_is_named_and_the_database_left_alone(isolated_home: Path) -> None:
    config, data = _home(isolated_home)
    ro = read_only(data)
    for args in (("memory", "search", "spare key"), ("backup", str(isolated_home / "copy.db"))):
        line = _one_line(teleton("-c", str(config), *args, home=isolated_home, prefix=ro))
        assert f"{data}/teleton.db: read-only filesystem" in line, line
        assert f"remount the filesystem read-write ({data} is mounted read-only)" in line
        _never_damaged(line)
    start = teleton("-c", str(config), "start", "--transport", f"loopback:{isolated_home}/s.sock",
                    home=isolated_home, prefix=[*ro, "env", *(f"{k}={v}" for k, v in KEY.items())])  # fmt: skip
    line = _one_line(start)
    assert f"{data}/" in line and "read-only filesystem" in line, line
    _never_damaged(line)

    doctor = teleton("-c", str(config), "doctor", home=isolated_home, prefix=ro).stdout
    for name in ("Database", "Data directory"):
        check, fix = _doctor(doctor, name)
        assert check.startswith("FAIL") and "read-only filesystem" in check, doctor
        assert "remount the filesystem read-write" in fix, doctor
        _never_damaged(check + fix)
    # Nothing was harmed: outside the read-only mount the same database answers.
    found = teleton("-c", str(config), "memory", "search", "spare key", home=isolated_home)
    assert found.returncode == 0 and "The spare key is with Rui." in found.stdout, found.stderr


@pytest.mark.skipif(mount_namespaces() is not None, reason=f"no read-only mount: {mount_namespaces()}")
def test_a_read_only_or_full_backup_target_is_named(isolated_home: Path, tmp_path: Path) -> None:
    config, _ = _home(isolated_home)
    target = tmp_path / "backups"
    target.mkdir()
    line = _one_line(
        teleton("-c", str(config), "backup", str(target / "copy.db"), home=isolated_home, prefix=read_only(target))
    )
    assert line.startswith(f"error: {target}/copy.db: read-only filesystem: remount"), line
    _never_damaged(line)

    # The database is ~250 kB: a 64 kB filesystem fills during the copy, with SQLite's own "full" error.
    line = _one_line(
        teleton("-c", str(config), "backup", str(target / "copy.db"), home=isolated_home, prefix=full_disk(target))
    )
    assert line.startswith(f"error: {target}/copy.db: the disk is full"), line
    assert f"df -h {target}" in line
    _never_damaged(line)
    assert not (target / "copy.db").exists()


@pytest.mark.skipif(bound_by_modes() is None, reason="root, and setpriv(1) is missing to drop DAC override")
def test_a_folder_this_user_may_not_write_is_permission_denied(isolated_home: Path) -> None:
    config, data = _home(isolated_home)
    bound = bound_by_modes()
    data.chmod(0o500)
    try:
        line = _one_line(teleton("-c", str(config), "memory", "search", "spare key", home=isolated_home, prefix=bound))
        assert f"{data}/teleton.db: permission denied for user" in line, line
        assert f"give yourself access: `chmod 700 {data}`" in line
        _never_damaged(line)
        doctor = teleton("-c", str(config), "doctor", home=isolated_home, prefix=bound).stdout
        check, fix = _doctor(doctor, "Data directory")
        assert "permission denied" in check and f"chmod 700 {data}" in fix, (check, fix)
        _never_damaged(check + fix)
    finally:
        data.chmod(0o700)
    # The default config (-c refuses an unreadable file before any command runs).
    default = config.rename(data / "config.yaml")
    default.chmod(0o000)
    check, fix = _doctor(teleton("doctor", home=isolated_home, prefix=bound).stdout, "Config")
    assert check.startswith("FAIL") and "Permission denied" in check, check
    assert f"chmod 600 {default}" in fix, fix


def test_a_damaged_database_is_called_damaged(isolated_home: Path) -> None:
    config, data = _home(isolated_home)
    (data / "teleton.db").write_bytes(os.urandom(16384))
    line = _one_line(teleton("-c", str(config), "memory", "search", "spare key", home=isolated_home))
    assert line.startswith(f"error: {data}/teleton.db: the database is damaged or not a Teleton database"), line
    assert "restore the last backup with `teleton restore ARCHIVE`" in line
    check, fix = _doctor(teleton("-c", str(config), "doctor", home=isolated_home).stdout, "Database")
    assert "damaged" in check and "restore the last backup with `teleton restore" in fix, (check, fix)


def test_a_locked_database_is_locked_not_damaged(isolated_home: Path) -> None:
    config, data = _home(isolated_home)
    holder = sqlite3.connect(data / "teleton.db", isolation_level=None)
    try:
        holder.execute("pragma locking_mode = exclusive")  # like a `sqlite3` shell in the middle of a write
        holder.execute("begin exclusive")
        line = _one_line(teleton("-c", str(config), "memory", "search", "spare key", home=isolated_home))
        assert f"{data}/teleton.db: locked by another process (database is locked)" in line, line
        assert f"`fuser -v {data}/teleton.db` names it" in line
        _never_damaged(line)
        check, fix = _doctor(teleton("-c", str(config), "doctor", home=isolated_home).stdout, "Database")
        assert "locked by another process" in check and "close it" in fix, (check, fix)
        _never_damaged(check + fix)
    finally:
        holder.execute("rollback")
        holder.close()


def test_sqlites_own_full_error_is_the_disk_not_the_database(tmp_path: Path) -> None:
    """SQLITE_FULL as SQLite raises it (a page limit stands in for the disk) maps to "the disk is full"."""
    conn = sqlite3.connect(tmp_path / "small.db")
    conn.execute("create table t(x)")
    conn.execute("pragma max_page_count = 3")
    with pytest.raises(sqlite3.OperationalError) as raised:
        conn.execute("insert into t values (?)", ("x" * 100_000,))
    conn.close()
    cause = cause_of(raised.value, tmp_path / "small.db")
    assert cause is not None and cause.kind == "disk_full" and str(raised.value) == "database or disk is full"
    line = explain(raised.value)
    assert line is not None and line.startswith("the disk is full (database or disk is full): free some space")


def test_doctor_names_what_is_wrong_with_the_config(isolated_home: Path) -> None:
    config = isolated_home / "config.yaml"
    cases = [
        (b"agent:\n  model: [claude\n  provider: anthropic\n", "correct the YAML at line 3, column 11 of"),
        ("agent:\n  model: café\n".encode("latin-1"), f"save {config} as UTF-8"),
        (b"telegram:\n  dm_polcy: open\n", "fix the named key, or run `teleton setup`"),
    ]
    fixes = []
    for content, wanted in cases:
        config.write_bytes(content)
        config.chmod(0o600)
        check, fix = _doctor(teleton("-c", str(config), "doctor", home=isolated_home).stdout, "Config")
        assert check.startswith("FAIL") and wanted in fix, (check, fix)
        fixes.append(fix)
    missing = isolated_home / "nowhere.yaml"
    check, fix = _doctor(teleton("-c", str(missing), "doctor", home=isolated_home).stdout, "Config")
    assert "not found" in check and f"run `teleton setup` to write {missing}" in fix, fix
    assert len({*fixes, fix}) == 4  # one fix per cause
