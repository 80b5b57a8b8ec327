"""`teleton doctor`'s checks of files: the config's own problem, the data directory, the database, and
whether every private file is private.

Each failure's fix comes from its cause (``storage.failures``): a read-only disk is never told to `chown`,
a lock never told to restore a backup, and a config's YAML mistake, wrong encoding, absence or permissions
each get their own line.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

from teleton.cli.checks import Check
from teleton.config import Config, ConfigError, default_config_path
from teleton.config.schema import session_file
from teleton.daemon.database_watch import MARKER
from teleton.storage.database import connect
from teleton.storage.failures import Cause, cause_of, nearest_existing, problems_line
from teleton.storage.private_files import DIR_MODE, FILE_MODE
from teleton.storage.sqlite_driver import pick_driver
from teleton.text.counts import counted

MIN_FREE_BYTES = 200 * 1024 * 1024  # below this, the archive and the WAL will soon fail to write
# Files the daemon and `teleton chat` write into the data directory.
DATA_FILES = ("chat_history", "chat.log", "status.json", "teleton.lock", MARKER)


def config_fix(exc: ConfigError, path: Path | None) -> str:
    """The fix for a config that did not load, by what went wrong (the loader raises ``from None``, so the
    original error is the exception's ``__context__``)."""
    file = (path or default_config_path()).expanduser()
    original = exc.__context__
    if isinstance(original, UnicodeDecodeError):
        return f'save {file} as UTF-8 (your editor\'s "save with encoding", or `iconv -t utf-8`)'
    if isinstance(original, yaml.YAMLError):
        mark = getattr(original, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1} of " if mark is not None else ""
        return f"correct the YAML at {where}{file}: indent with spaces, quote values holding ': ' or ' #'"
    if isinstance(original, OSError):
        cause = cause_of(original, file)
        return cause.fix if cause is not None else f"check that {file} is a readable file"
    if not file.exists():
        return f"run `teleton setup` to write {file}, or point -c / TELETON_CONFIG at your config"
    return "fix the named key, or run `teleton setup`"


def check_data_dir(config: Config) -> list[Check]:
    """Writable, with room to write: the daemon's first failed write would otherwise be at 3 a.m."""
    data_dir = config.storage.data_dir
    probe = nearest_existing(data_dir) or data_dir  # `teleton setup` creates it: check where it will be made
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".doctor-"):
            pass
        writable = Check("Data directory", True, f"{data_dir} (writable)")
    except OSError as exc:
        found = cause_of(exc, probe)
        cause = Cause(found.kind if found else "permission", probe, exc.strerror or str(exc))
        writable = Check("Data directory", False, f"{probe}: not writable ({cause.what})", cause.fix)
    free = shutil.disk_usage(probe).free
    enough = free >= MIN_FREE_BYTES
    disk = Check(
        "Free disk", enough, f"{free / 2**30:.1f} GiB free under {probe}", "" if enough else "free some disk space"
    )
    return [writable, disk]


def check_database(config: Config) -> Check:
    """``PRAGMA quick_check`` on the database (read-only; safe while the daemon runs). Damage is reported
    only when SQLite says so; a database it cannot open or read gets its cause."""
    path = config.storage.database_file
    if not path.exists():
        return Check("Database", True, f"{path} (not created yet)")
    try:
        conn = connect(path, pick_driver(), vectors=False, readonly=True)
        try:
            found = [str(r[0]) for r in conn.execute("pragma quick_check").fetchall()]
        finally:
            conn.close()
    except Exception as exc:
        cause = cause_of(exc, path)
        if cause is None:
            return Check("Database", False, f"{path}: {exc}", f"look at it with `sqlite3 {path} 'pragma quick_check'`")
        return Check("Database", False, f"{path}: {cause.what}", cause.fix)
    if found != ["ok"]:
        found_line = problems_line(found)
        return Check("Database", False, f"{path}: damaged ({found_line})", Cause("damaged", path, found_line).fix)
    return Check("Database", True, f"{path} (quick_check ok)")


def check_private_files(config: Config) -> Check:
    """The data directory and workspace 0700, and every file Teleton keeps 0600: the config, the Telegram
    session, the database with its -wal/-shm, the chat history and logs, the status file, and any other file
    at the top of the data directory (a backup saved there)."""
    data_dir = config.storage.data_dir
    if not data_dir.exists():
        return Check("Private files", True, f"{data_dir} not created yet")
    folders = [data_dir, config.storage.workspace_dir]
    loose_dirs = [d for d in folders if d.is_dir() and _mode(d) & ~DIR_MODE]
    files = sorted({f for f in private_files(config) if f.is_file() and not f.is_symlink()})
    loose = [f for f in files if _mode(f) & ~FILE_MODE]
    if not loose_dirs and not loose:
        return Check("Private files", True, f"{data_dir} and its workspace 700, {counted(len(files), 'file')} 600")
    detail = "readable by others: " + ", ".join(f"{p} ({_mode(p):o})" for p in [*loose_dirs, *loose])
    fixes = [f"chmod 700 {' '.join(map(str, loose_dirs))}" if loose_dirs else ""]
    fixes.append(f"chmod 600 {' '.join(map(str, loose))}" if loose else "")
    return Check("Private files", False, detail, "; ".join(f for f in fixes if f))


def private_files(config: Config) -> list[Path]:
    data_dir = config.storage.data_dir
    database = config.storage.database_file
    named = [database, *(database.with_name(database.name + s) for s in ("-wal", "-shm", "-journal"))]
    named += [data_dir / name for name in DATA_FILES]
    if config.source is not None:
        named.append(config.source)
    if config.logging.file is not None:
        named.append(config.logging.file)
    session = config.telegram.session_path
    if session is not None:
        session = session_file(session)
        named += [session, session.with_name(session.name + "-journal")]
    try:
        return named + [p for p in data_dir.iterdir() if p.is_file()]
    except OSError:  # a folder this user cannot list: the Data directory check says why
        return named


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777
