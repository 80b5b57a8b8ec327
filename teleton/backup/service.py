"""One backup, as the CLI and the daemon's schedule both make it: written, verified by reading it back,
recorded for `teleton status`. Synchronous: callers run it in a thread."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from teleton.backup import archive, contents, schedule
from teleton.backup.sealed import Key, key_from
from teleton.backup.unpack import Unpacked, unpack
from teleton.config.schema import Config
from teleton.storage import in_use


@dataclass(frozen=True)
class Made:
    path: Path
    manifest: archive.Manifest
    size: int
    seconds: float


def configured_key(config: Config) -> Key | None:
    return key_from(config.backup.passphrase_env, config.backup.key_file)


def target_for(config: Config, path: Path | None, sealed: bool, now: float) -> Path:
    """``path`` as given (a folder: a new archive inside it), or a new archive in ``backup.dir``."""
    if path is not None and not path.is_dir():
        return path
    if path is None:
        assert config.backup.dir is not None  # resolved when the config loads
        path = config.backup.dir
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path / archive.default_name(now, sealed)


def make(config: Config, target: Path, options: archive.Options, now: float | None = None) -> Made:
    """Write and verify one archive at ``target`` and record it; raise on any failure (nothing left behind)."""
    started = time.monotonic()
    data_dir = config.storage.data_dir
    at = time.time() if now is None else now
    if target.exists():
        raise FileExistsError(f"{target} exists; choose a new name")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{target.parent} is not a folder; create it first")
    try:
        lock: int | None = in_use.hold(data_dir)
    except OSError:  # a read-only data directory: no restore can run there either; the copy says what it can
        lock = None
    try:
        manifest = archive.create(contents.Layout.of(config), target, options)
    finally:
        if lock is not None:
            in_use.release(lock)
    try:
        verify(target, options.key, newer_ok=True)
    except Exception:
        target.unlink(missing_ok=True)  # an archive that does not read back must not pass for a backup
        raise
    size = target.stat().st_size
    with contextlib.suppress(OSError):  # a read-only data directory: the archive is made all the same
        schedule.write_record(data_dir, schedule.BackupRecord(at, str(target), size, True, None, at))
    return Made(target, manifest, size, time.monotonic() - started)


def verify(path: Path, key: Key | None, *, newer_ok: bool = False) -> Unpacked:
    """Read the whole archive back into a scratch folder (removed after): checksums, decryption, the
    database's integrity and schema version. Raise unpack.ArchiveError when any fails."""
    scratch = Path(
        tempfile.mkdtemp(prefix=".teleton-verify-", dir=path.parent if os.access(path.parent, os.W_OK) else None)
    )
    try:
        return unpack(path, scratch, key, newer_ok=newer_ok)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def rotate(config: Config) -> list[Path]:
    """Drop the scheduled archives in ``backup.dir`` that ``backup.keep`` no longer keeps."""
    keep = config.backup.keep
    assert config.backup.dir is not None
    gone = schedule.to_remove(archive.archives_in(config.backup.dir), keep.daily, keep.weekly)
    for path in gone:
        path.unlink(missing_ok=True)
    return gone


def one_line(exc: BaseException) -> str:
    """What went wrong, for the owner: the OS's words for a full disk or a refused folder, not a traceback."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
