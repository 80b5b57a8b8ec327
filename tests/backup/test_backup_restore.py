"""`teleton backup`, `teleton backup verify` and `teleton restore` through the real CLI on a real data
directory: what an archive holds, what it leaves out, and every way a restore could damage what is there."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from teleton.storage import Database, schema
from teleton.storage.sqlite_driver import pick_driver
from tests.waiting import until_sync

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times

SECRET_KEY = "sk-ant-backup-secret-0123456789"
SECRET_HASH = "0123456789abcdef0123456789abcdef"


def _cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    base.update(HOME=str(home), COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(home / "config.yaml"), *args],
        capture_output=True, text=True, env=base, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _count(db: Path, table: str = "tg_messages") -> int:
    conn = pick_driver().module.connect(str(db))
    try:
        return int(conn.execute(f"select count(*) from {table}").fetchone()[0])
    finally:
        conn.close()


def _insert(conn: object, start: int, n: int) -> None:
    conn.executemany(  # type: ignore[attr-defined]
        "insert into tg_messages(chat_id, message_id, date, text) values (1, ?, 0, ?)",
        [(i, f"message number {i} about the lighthouse") for i in range(start, start + n)],
    )


@pytest.fixture
def home(isolated_home: Path) -> Path:
    """A data directory as a user's: 300 messages, a fact, notes, a session, a dashboard token, a config."""
    data = isolated_home / "data"
    (isolated_home / "config.yaml").write_text(
        f"storage:\n  data_dir: {data}\nembedding:\n  provider: none\nagent:\n  api_key: {SECRET_KEY}\n"
        f"telegram:\n  api_id: 12345\n  api_hash: {SECRET_HASH}\n"
    )
    (isolated_home / "config.yaml").chmod(0o600)

    async def fill() -> None:
        db = await Database.open(data / "teleton.db")
        await db.write(lambda c: _insert(c, 0, 300))
        await db.execute(
            "insert into facts(category, key, value, scope, hash, created_at, updated_at) "
            "values ('general', 'boat', 'the owner sails a blue boat', 'owner', 'h1', 0, 0)"
        )
        await db.close()

    asyncio.run(fill())
    workspace = data / "workspace"
    (workspace / "memory" / "trips").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Memory\nThe owner's boat is blue.\n")
    (workspace / "memory" / "trips" / "norway.md").write_text("Bergen in June.\n")
    (data / "telegram.session").write_bytes(b"telethon-session-bytes")
    (data / "dashboard.token").write_text("dashboard-login-token")
    (data / "chat.log").write_text("a log line\n")
    return isolated_home


def _members(archive: Path) -> dict[str, bytes]:
    with gzip.open(archive) as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as tar:
        out = {}
        for member in tar:
            reader = tar.extractfile(member)
            assert reader is not None
            out[member.name] = reader.read()
        return out


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "in-use.lock"
    }


def test_an_archive_holds_the_whole_agent_with_a_manifest_and_is_private(home: Path) -> None:
    made = _cli(home, "backup", str(home / "a.tar.gz"))
    assert made.returncode == 0, made.stderr
    assert "verified" in made.stdout and "300 messages, 1 facts" in made.stdout
    archive = home / "a.tar.gz"
    assert archive.stat().st_mode & 0o777 == 0o600
    members = _members(archive)
    assert set(members) == {
        "database/teleton.db", "config/config.yaml", "telegram/telegram.session", "workspace/MEMORY.md",
        "workspace/memory/trips/norway.md", "data/dashboard.token", "manifest.json",
    }  # fmt: skip
    manifest = json.loads(members["manifest.json"])
    assert manifest["schema_version"] == schema.SCHEMA_VERSION and manifest["counts"]["messages"] == 300
    for entry in manifest["files"]:
        assert hashlib.sha256(members[entry["name"]]).hexdigest() == entry["sha256"]
        assert len(members[entry["name"]]) == entry["size"]
    assert SECRET_KEY.encode() in members["config/config.yaml"]  # the config as written, keys in
    assert _cli(home, "backup", str(archive)).returncode == 1  # an existing file is never overwritten


def test_no_secrets_leaves_out_the_session_the_token_and_every_key(home: Path) -> None:
    assert _cli(home, "backup", "--no-secrets", str(home / "ns.tar.gz")).returncode == 0
    members = _members(home / "ns.tar.gz")
    assert "telegram/telegram.session" not in members and "data/dashboard.token" not in members
    everything = b"".join(members.values())
    for secret in (SECRET_KEY, SECRET_HASH, "telethon-session-bytes", "dashboard-login-token"):
        assert secret.encode() not in everything
    assert b"api_id: 12345" in members["config/config.yaml"]  # what is not secret stays


def test_the_default_target_is_backup_dir_and_status_shows_the_last_backup(home: Path) -> None:
    assert _cli(home, "backup").returncode == 0
    archives = list((home / "data" / "backups").glob("teleton-*.tar.gz"))
    assert len(archives) == 1
    status = _cli(home, "status")
    line = next(line for line in status.stdout.splitlines() if line.startswith("last backup:"))
    assert "verified" in line and str(archives[0]) in line


def test_verify_says_what_it_holds_and_refuses_a_changed_or_cut_archive_in_one_line(home: Path) -> None:
    archive = home / "a.tar.gz"
    _cli(home, "backup", str(archive))
    ok = _cli(home, "backup", "verify", str(archive))
    assert ok.returncode == 0 and ok.stdout.startswith("OK ") and "300 messages" in ok.stdout
    data = archive.read_bytes()
    flipped, cut = home / "flipped.tar.gz", home / "cut.tar.gz"
    changed = bytearray(data)
    changed[len(data) // 2] ^= 0x40
    flipped.write_bytes(bytes(changed))
    cut.write_bytes(data[: len(data) * 2 // 3])
    (home / "junk.tar.gz").write_bytes(b"not an archive at all")
    for bad in (flipped, cut, home / "junk.tar.gz", home / "missing.tar.gz"):
        proc = _cli(home, "backup", "verify", str(bad))
        assert proc.returncode == 1, bad
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("FAIL "), proc.stderr
        assert "Traceback" not in proc.stderr


def test_an_archive_whose_file_differs_from_its_manifest_is_refused(home: Path) -> None:
    archive = home / "a.tar.gz"
    _cli(home, "backup", str(archive))
    members = _members(archive)
    members["workspace/MEMORY.md"] = b"# Memory\nThe boat is red.\n"  # the manifest still says blue's hash
    _write_tar(home / "edited.tar.gz", members)
    proc = _cli(home, "backup", "verify", str(home / "edited.tar.gz"))
    assert proc.returncode == 1 and "workspace/MEMORY.md" in proc.stderr and "differs from its manifest" in proc.stderr


def _write_tar(path: Path, members: dict[str, bytes]) -> None:
    with gzip.open(path, "wb") as zipped, tarfile.open(fileobj=zipped, mode="w|") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("name", ["../outside.txt", "/etc/evil", "workspace/../../outside.txt", "elsewhere/x"])
def test_a_member_naming_a_path_outside_the_data_is_refused_and_nothing_is_written(home: Path, name: str) -> None:
    archive = home / "a.tar.gz"
    _cli(home, "backup", str(archive))
    members = _members(archive)
    _write_tar(home / "evil.tar.gz", {name: b"owned", **members})
    before = _snapshot(home / "data")
    proc = _cli(home, "restore", str(home / "evil.tar.gz"))
    assert proc.returncode == 1 and "refused" in proc.stderr and "nothing was changed" in proc.stderr
    assert _snapshot(home / "data") == before
    assert not (home / "outside.txt").exists() and not Path("/etc/evil").exists()


def test_a_symlink_in_the_workspace_is_not_followed_into_the_archive(home: Path) -> None:
    outside = home / "private.txt"
    outside.write_text("ssh key material")
    (home / "data" / "workspace" / "link.md").symlink_to(outside)
    _cli(home, "backup", str(home / "a.tar.gz"))
    members = _members(home / "a.tar.gz")
    assert "workspace/link.md" not in members and b"ssh key material" not in b"".join(members.values())


def _crash_leaving_a_wal(db: Path, start: int, n: int) -> None:
    """A writer commits ``n`` rows and is killed -9 before any checkpoint: its -wal stays beside the file."""
    code = (
        "import os, signal, sqlite3, sys\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('pragma journal_mode=wal'); c.execute('pragma wal_autocheckpoint=0')\n"
        "c.execute('begin')\n"
        f"c.executemany('insert into tg_messages(chat_id, message_id, date, text) values (2, ?, 0, ?)', "
        f"[(i, 'after the backup') for i in range({start}, {start + n})])\n"
        "c.execute('commit'); print('committed', flush=True); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and "committed" in proc.stdout, proc.stderr


def test_restore_after_a_crash_puts_the_archive_back_exactly_and_moves_the_stale_wal_aside(home: Path) -> None:
    data = home / "data"
    archive = home / "a.tar.gz"
    assert _cli(home, "backup", str(archive)).returncode == 0
    (data / "workspace" / "MEMORY.md").write_text("# Memory\nedited after the backup\n")
    _crash_leaving_a_wal(data / "teleton.db", 10_000, 800)
    assert (data / "teleton.db-wal").stat().st_size > 0  # what `cp backup over it` would have had replayed
    proc = _cli(home, "restore", str(archive))
    assert proc.returncode == 0, proc.stderr
    assert not (data / "teleton.db-wal").exists() and not (data / "teleton.db-shm").exists()
    assert _count(data / "teleton.db") == 300  # the backup's rows, none of the crashed run's
    assert (data / "workspace" / "MEMORY.md").read_text() == "# Memory\nThe owner's boat is blue.\n"
    aside = [p for p in data.iterdir() if p.name.startswith("before-restore-")]
    assert len(aside) == 1 and str(aside[0]) in proc.stdout
    assert (aside[0] / "teleton.db-wal").exists() and (aside[0] / "workspace" / "MEMORY.md").exists()
    assert _count(aside[0] / "teleton.db") == 1100  # what was there is kept, its WAL beside it
    doctor = _cli(home, "doctor")
    database = next(line for line in doctor.stdout.splitlines() if "Database" in line)
    assert database.lstrip().startswith("OK") and "quick_check ok" in database, doctor.stdout


def test_restore_is_refused_while_teleton_uses_the_data_directory(home: Path) -> None:
    archive = home / "a.tar.gz"
    _cli(home, "backup", str(archive))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from teleton.storage import in_use\n"
         f"in_use.hold(Path({str(home / 'data')!r})); print('holding', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        before = _snapshot(home / "data")
        proc = _cli(home, "restore", str(archive))
        assert proc.returncode == 1 and "is using" in proc.stderr and "nothing was changed" in proc.stderr
        assert _snapshot(home / "data") == before
    finally:
        holder.kill()
        holder.wait()
    assert _cli(home, "restore", str(archive)).returncode == 0  # the lock went with its process


def test_a_newer_schema_is_refused_with_its_version_and_an_older_one_migrates_forward(home: Path) -> None:
    data = home / "data"
    conn = pick_driver().module.connect(str(data / "teleton.db"), isolation_level=None)
    conn.execute("update meta set value = ? where key = 'schema_version'", (str(schema.SCHEMA_VERSION + 1),))
    conn.close()
    assert _cli(home, "backup", str(home / "newer.tar.gz")).returncode == 0  # kept safe, though not restorable here
    before = _snapshot(data)
    for command in (("restore",), ("backup", "verify")):
        proc = _cli(home, *command, str(home / "newer.tar.gz"))
        assert proc.returncode == 1 and f"schema version {schema.SCHEMA_VERSION + 1}, newer" in proc.stderr
        assert "upgrade Teleton first" in proc.stderr

    old = home / "old.db"  # an old single-file backup (what `teleton backup` wrote before archives), schema 10
    conn = pick_driver().module.connect(str(old), isolation_level=None)
    schema.migrate(conn, schema.MIGRATIONS[:10])
    conn.execute("insert into tg_messages(chat_id, message_id, date, text) values (1, 1, 0, 'from long ago')")
    conn.close()
    assert _snapshot(data) == before
    proc = _cli(home, "restore", str(old))
    assert proc.returncode == 0 and f"migrated to {schema.SCHEMA_VERSION} at the next start" in proc.stdout

    async def reopen() -> tuple[int, int]:
        db = await Database.open(data / "teleton.db")
        try:
            return db.info.schema_from, db.info.schema_to
        finally:
            await db.close()

    assert asyncio.run(reopen()) == (10, schema.SCHEMA_VERSION)
    assert _count(data / "teleton.db") == 1
    assert (data / "workspace" / "MEMORY.md").exists()  # a database-only backup leaves the workspace in place


def test_restore_to_another_folder_lays_out_a_data_directory(home: Path) -> None:
    _cli(home, "backup", str(home / "a.tar.gz"))
    target = home / "moved"
    proc = _cli(home, "restore", str(home / "a.tar.gz"), "--to", str(target))
    assert proc.returncode == 0, proc.stderr
    assert (
        _count(target / "teleton.db") == 300 and (target / "telegram.session").read_bytes() == b"telethon-session-bytes"
    )
    assert (target / "workspace" / "memory" / "trips" / "norway.md").read_text() == "Bergen in June.\n"
    assert SECRET_KEY in (target / "config.yaml").read_text() and (target / "dashboard.token").exists()
    assert _count(home / "data" / "teleton.db") == 300  # the data in use is untouched
    assert f"names storage.data_dir {home / 'data'}: set it to {target} in {target / 'config.yaml'}" in proc.stdout


def test_backup_while_a_writer_commits_holds_whole_transactions_only(home: Path) -> None:
    data, stop = home / "data", home / "stop-writing"
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import os, sqlite3, sys\n"
         f"c = sqlite3.connect({str(data / 'teleton.db')!r}, isolation_level=None)\n"
         "c.execute('pragma busy_timeout=5000')\n"
         "batch = 0\n"
         f"while not os.path.exists({str(stop)!r}):\n"
         "    c.execute('begin immediate')\n"
         "    c.executemany('insert into tg_messages(chat_id, message_id, date, text) values (3, ?, 0, ?)',"
         " [(batch * 50 + i, 'ingested') for i in range(50)])\n"
         "    c.execute('commit'); batch += 1\n"],
    )  # fmt: skip
    try:
        until_sync(lambda: _count(data / "teleton.db") >= 300 + 3 * 50)
        proc = _cli(home, "backup", str(home / "live.tar.gz"))
        done = _count(data / "teleton.db")
        until_sync(lambda: _count(data / "teleton.db") > done)  # it went on after the backup
    finally:
        stop.touch()
        writer.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _cli(home, "restore", str(home / "live.tar.gz"), "--to", str(home / "r")).returncode == 0
    ingested = _count(home / "r" / "teleton.db") - 300
    written = _count(data / "teleton.db") - 300
    assert ingested % 50 == 0 and 0 < ingested < written  # a snapshot between two commits, while they went on


def test_an_archive_without_secrets_restores_beside_the_keys_and_session_in_use(home: Path) -> None:
    assert _cli(home, "backup", "--no-secrets", str(home / "ns.tar.gz")).returncode == 0
    (home / "data" / "workspace" / "MEMORY.md").write_text("changed since\n")
    proc = _cli(home, "restore", str(home / "ns.tar.gz"))
    assert proc.returncode == 0, proc.stderr
    assert SECRET_KEY in (home / "config.yaml").read_text()  # the config in use keeps working
    beside = home / "config.yaml.from-backup"
    assert beside.exists() and SECRET_KEY not in beside.read_text() and str(beside) in proc.stdout
    assert (home / "data" / "telegram.session").read_bytes() == b"telethon-session-bytes"
    assert (home / "data" / "dashboard.token").read_text() == "dashboard-login-token"
    assert (home / "data" / "workspace" / "MEMORY.md").read_text() == "# Memory\nThe owner's boat is blue.\n"


def test_a_corrupt_cut_or_wrongly_encrypted_archive_restores_nothing(home: Path) -> None:
    sealed = home / "sealed.tar.gz.enc"
    made = _cli(home, "backup", "--passphrase-env", "BK_PASS", str(sealed), env={"BK_PASS": "the right words"})
    assert made.returncode == 0 and "encrypted" in made.stdout, made.stderr
    assert b"lighthouse" not in sealed.read_bytes() and b"SQLite format 3" not in sealed.read_bytes()
    data = sealed.read_bytes()
    changed = bytearray(data)
    changed[len(data) // 2] ^= 0x01
    (home / "flipped.enc").write_bytes(bytes(changed))
    (home / "cut.enc").write_bytes(data[: len(data) // 2])
    _crash_leaving_a_wal(home / "data" / "teleton.db", 20_000, 10)  # a data directory as a crash left it
    before = _snapshot(home / "data")
    cases = [
        ("flipped.enc", "the right words", "damaged or cut off"),
        ("cut.enc", "the right words", "damaged or cut off"),
        ("sealed.tar.gz.enc", "wrong words", "does not open this archive: a wrong passphrase or key"),
    ]
    for name, passphrase, said in cases:
        proc = _cli(home, "restore", "--passphrase-env", "BK_PASS", str(home / name), env={"BK_PASS": passphrase})
        assert proc.returncode == 1 and said in proc.stderr, (name, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "nothing was changed" in proc.stderr
        assert _snapshot(home / "data") == before
    assert not [p for p in (home / "data").iterdir() if p.name.startswith((".restore-", "before-restore-"))]
    proc = _cli(home, "restore", "--passphrase-env", "BK_PASS", str(sealed), env={"BK_PASS": "the right words"})
    assert proc.returncode == 0 and _count(home / "data" / "teleton.db") == 300
