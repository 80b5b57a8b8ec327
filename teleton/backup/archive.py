"""``teleton backup``: the whole agent in one archive, consistent while the daemon writes.

The database is copied with ``VACUUM INTO`` on a connection of its own: one read transaction, so the copy is
the database as it was when the backup began, and the daemon's writer never waits for it. The copy, the
workspace, the config and the session go into a gzip'd tar (sealed when a key is configured), hashed as they
are written; the manifest comes last, with every file's SHA-256 and size. The archive is written under a
temporary name and renamed, so a full disk or a kill leaves no file that passes for a backup.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

import yaml

from teleton import __version__
from teleton.backup import contents
from teleton.backup.sealed import Key, SealedWriter
from teleton.config.loader import read_config_file
from teleton.storage import schema
from teleton.storage.failures import Cause, StorageError, cause_of
from teleton.storage.private_files import create_private
from teleton.storage.sqlite_driver import Connection, load_sqlite_vec, pick_driver
from teleton.storage.vector_tables import HALF_VECTOR_TABLE, VECTOR_SOURCES, VECTOR_TABLES, get_meta

MANIFEST = "manifest.json"
FORMAT = 1
READ_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    name: str
    size: int
    sha256: str


@dataclass
class Manifest:
    teleton: str
    created_at: float
    schema_version: int
    embedding_model: str | None
    vectors: bool
    secrets: bool
    counts: dict[str, int]
    files: list[FileEntry] = field(default_factory=list)
    format: int = FORMAT

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        raw = json.loads(data)
        if raw.get("format") != FORMAT:
            raise ValueError(f"archive format {raw.get('format')!r}, this Teleton reads {FORMAT}")
        raw["files"] = [FileEntry(**entry) for entry in raw["files"]]
        return cls(**raw)


@dataclass(frozen=True)
class Options:
    vectors: bool = True
    secrets: bool = True
    key: Key | None = None


def default_name(now: float, sealed: bool) -> str:
    """``teleton-YYYYmmdd-HHMMSS.tar.gz`` (``.enc`` when sealed): sorts by time; rotation reads it back."""
    return time.strftime("teleton-%Y%m%d-%H%M%S", time.localtime(now)) + (".tar.gz.enc" if sealed else ".tar.gz")


def create(layout: contents.Layout, target: Path, options: Options) -> Manifest:
    """Write the archive to ``target`` (which must not exist); return its manifest. A failure of the machine
    (a full disk, a read-only folder) is a ``StorageError`` naming the archive, or the database it could not
    read; nothing is left behind."""
    partial = target.with_name(f".{target.name}.partial")
    staging: Path | None = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=".teleton-backup-", dir=target.parent))  # 0700, beside the target
        manifest = _copy_database(layout.database, staging / "teleton.db", options)
        _write(layout, staging / "teleton.db", partial, manifest, options)
        os.rename(partial, target)
        _fsync_dir(target.parent)
        return manifest
    except BaseException as exc:
        with contextlib.suppress(OSError):  # a read-only folder refuses even removing what is not there
            partial.unlink(missing_ok=True)
        if isinstance(exc, Exception) and not isinstance(exc, StorageError):
            cause = cause_of(exc, target)
            if cause is not None:  # said of the archive: the staging names are ours, not the user's
                raise StorageError(Cause(cause.kind, target, cause.reason)) from exc
        raise
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _write(layout: contents.Layout, copy: Path, partial: Path, manifest: Manifest, options: Options) -> None:
    with create_private(partial) as raw:
        sealed = SealedWriter(raw, options.key) if options.key is not None else None
        out: BinaryIO = sealed if sealed is not None else raw  # type: ignore[assignment]
        with (
            gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as zipped,
            tarfile.open(fileobj=zipped, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            with copy.open("rb") as db_file:
                manifest.files.append(_add(tar, contents.DATABASE, db_file, copy.stat().st_size))
            copy.unlink()  # the copy's disk space back before the workspace goes in
            config = _config_bytes(layout.config, options.secrets)
            if config is not None:
                manifest.files.append(_add(tar, contents.CONFIG, io.BytesIO(config), len(config)))
            for name, path in contents.files_of(layout, secrets=options.secrets):
                data = _read_whole(path)
                if data is not None:
                    manifest.files.append(_add(tar, name, io.BytesIO(data), len(data)))
            body = manifest.to_json()
            _add(tar, MANIFEST, io.BytesIO(body), len(body))
        if sealed is not None:
            sealed.close()
        raw.flush()
        os.fsync(raw.fileno())


def _copy_database(database: Path, copy: Path, options: Options) -> Manifest:
    if not database.is_file():
        raise FileNotFoundError(f"no database at {database}")
    driver = pick_driver()
    try:  # a connection of its own, never query_only (VACUUM INTO writes its target): the daemon's writer goes on
        conn = driver.module.connect(str(database), isolation_level=None, check_same_thread=False)
        try:
            conn.execute("pragma busy_timeout = 5000")
            conn.execute("vacuum into ?", (str(copy),))
        finally:
            conn.close()
    except driver.module.DatabaseError as exc:
        cause = cause_of(exc, database)
        if cause is not None and cause.kind != "disk_full":  # the database cannot be read; a full disk is the copy's
            raise StorageError(cause) from exc
        raise
    conn = driver.module.connect(str(copy), isolation_level=None)
    try:
        if not options.vectors:
            _drop_vectors(conn)
        return Manifest(
            teleton=__version__,
            created_at=time.time(),
            schema_version=schema.current_version(conn),
            embedding_model=get_meta(conn, "embedding_model") if _has_meta(conn) else None,
            vectors=options.vectors,
            secrets=options.secrets,
            counts=_counts(conn),
        )
    finally:
        conn.close()


def _drop_vectors(conn: Connection) -> None:
    """Every embedding out of the copy, each row marked to be embedded again after a restore."""
    load_sqlite_vec(conn)  # dropping a vec0 table needs its module
    for table in [*VECTOR_TABLES, HALF_VECTOR_TABLE]:
        conn.execute(f"drop table if exists {table}")
    for table in {*VECTOR_SOURCES.values()}:
        with contextlib.suppress(Exception):  # an older schema without the table
            conn.execute(f"update {table} set embedded = 0 where embedded = 1")
    conn.execute("vacuum")


def _has_meta(conn: Connection) -> bool:
    return conn.execute("select 1 from sqlite_master where name = 'meta'").fetchone() is not None


def _counts(conn: Connection) -> dict[str, int]:
    counts = {}
    for name, table in (("messages", "tg_messages"), ("facts", "facts"), ("knowledge_chunks", "knowledge")):
        with contextlib.suppress(Exception):  # a table an older schema does not have
            counts[name] = int(conn.execute(f"select count(*) from {table}").fetchone()[0])
    return counts


def _config_bytes(path: Path, secrets: bool) -> bytes | None:
    if not path.is_file():
        return None
    if secrets:
        return path.read_bytes()
    return yaml.safe_dump(contents.without_secrets(read_config_file(path)), sort_keys=False).encode()


def _read_whole(path: Path) -> bytes | None:
    """A workspace file as it is now, whole (it may change while the backup runs); None: it went meanwhile."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None


class _Hashing(io.RawIOBase):
    def __init__(self, source: BinaryIO) -> None:
        self.source, self.digest = source, hashlib.sha256()

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.source.read(len(buffer))
        self.digest.update(data)
        buffer[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True


def _add(tar: tarfile.TarFile, name: str, source: BinaryIO, size: int) -> FileEntry:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o600, int(time.time())
    hashing = _Hashing(source)
    tar.addfile(info, io.BufferedReader(hashing, READ_CHUNK))
    return FileEntry(name, size, hashing.digest.hexdigest())


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def archives_in(folder: Path) -> Iterator[Path]:
    """The archives ``default_name`` wrote into ``folder`` (what rotation may remove)."""
    if folder.is_dir():
        for path in sorted(folder.glob("teleton-*.tar.gz*")):
            if path.name.endswith((".tar.gz", ".tar.gz.enc")):
                yield path
