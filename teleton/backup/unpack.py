"""Reading an archive back: decrypt, unzip and untar as one stream, check every file against the manifest
and the database inside with ``integrity_check``. Everything is written into a staging folder first, so an
archive that fails any check changes nothing (``teleton backup verify``, ``teleton restore``).

A bare SQLite file (what ``teleton backup`` wrote before archives) reads as an archive of the database alone.
"""

from __future__ import annotations

import gzip
import hashlib
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from teleton.backup import contents
from teleton.backup.archive import MANIFEST, FileEntry, Manifest
from teleton.backup.sealed import Key, SealedReader, SealError, is_sealed
from teleton.storage import schema
from teleton.storage.failures import problems_line
from teleton.storage.private_files import create_private
from teleton.storage.sqlite_driver import pick_driver

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
MAX_MANIFEST = 64 * 1024 * 1024


class ArchiveError(Exception):
    """Why an archive cannot be used, in one line; nothing was changed."""


@dataclass
class Unpacked:
    manifest: Manifest
    folder: Path  # the staging folder: member name -> folder / name
    sealed: bool
    legacy: bool = False  # a bare database file

    @property
    def database(self) -> Path:
        return self.folder / contents.DATABASE


def unpack(archive: Path, into: Path, key: Key | None, *, newer_ok: bool = False) -> Unpacked:
    """Every member of ``archive`` into ``into`` (an empty folder), checked; raise ArchiveError otherwise.
    ``newer_ok``: a schema newer than this Teleton's passes (a backup may be made of it, not restored here)."""
    try:
        source = archive.open("rb")
    except OSError as exc:
        raise ArchiveError(f"cannot read {archive}: {exc.strerror or exc}") from None
    with source:
        head = source.read(64)
        source.seek(0)
        if head.startswith(SQLITE_MAGIC):
            return _legacy(source, into, newer_ok)
        sealed = is_sealed(head)
        if not sealed and not head.startswith(GZIP_MAGIC):
            raise ArchiveError("not a Teleton backup (neither an archive nor a database)")
        if sealed and key is None:
            raise ArchiveError(
                "it is encrypted: give its passphrase (backup.passphrase_env, or --passphrase-env VAR) "
                "or its key file (backup.key_file, or --key-file FILE)"
            )
        try:
            stream: BinaryIO = SealedReader(source, key) if sealed and key is not None else source  # type: ignore[assignment]
            manifest, seen = _extract(stream, into)
        except SealError as exc:
            raise ArchiveError(str(exc)) from None
        except (EOFError, gzip.BadGzipFile, zlib.error, tarfile.TarError) as exc:
            raise ArchiveError(f"damaged or cut off ({exc})") from None
    _check_files(manifest, seen)
    unpacked = Unpacked(manifest, into, sealed)
    check_database(unpacked.database, newer_ok=newer_ok)
    return unpacked


def _extract(stream: BinaryIO, into: Path) -> tuple[Manifest, dict[str, FileEntry]]:
    seen: dict[str, FileEntry] = {}
    manifest: Manifest | None = None
    with gzip.GzipFile(fileobj=stream, mode="rb") as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as tar:
        for member in tar:
            if not member.isfile():
                raise ArchiveError(f"the archive holds {member.name!r}, which is not a plain file: refused")
            reader = tar.extractfile(member)
            assert reader is not None  # a regular file
            if member.name == MANIFEST:
                if member.size > MAX_MANIFEST:
                    raise ArchiveError("the archive's manifest is too large to be one")
                try:
                    manifest = Manifest.from_json(reader.read())
                except (ValueError, TypeError, KeyError) as exc:
                    raise ArchiveError(f"the archive's manifest cannot be read ({exc})") from None
                continue
            seen[member.name] = _write_member(reader, _staged(into, member.name), member.name)
    if manifest is None:
        raise ArchiveError("the archive has no manifest: it is cut off or not a Teleton backup")
    return manifest, seen


def _staged(into: Path, name: str) -> Path:
    """Where member ``name`` is staged; a name that climbs out (``..``, absolute) or is not ours is refused."""
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or "\\" in name:
        raise ArchiveError(f"the archive names a path outside itself ({name!r}): refused")
    try:
        contents.Layout.under(into).path_of(name)
    except ValueError:
        raise ArchiveError(f"the archive holds {name!r}, which is not part of a Teleton backup: refused") from None
    return into.joinpath(*parts)


def _write_member(reader: IO[bytes], path: Path, name: str) -> FileEntry:
    digest, size = hashlib.sha256(), 0
    with create_private(path) as out:
        while chunk := reader.read(1024 * 1024):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return FileEntry(name, size, digest.hexdigest())


def _check_files(manifest: Manifest, seen: dict[str, FileEntry]) -> None:
    listed = {entry.name: entry for entry in manifest.files}
    for name, entry in listed.items():
        found = seen.get(name)
        if found is None:
            raise ArchiveError(f"the archive lacks {name}, which its manifest lists: it is incomplete")
        if found != entry:
            raise ArchiveError(f"{name} in the archive differs from its manifest (SHA-256 or size): it was changed")
    extra = sorted(set(seen) - set(listed))
    if extra:
        raise ArchiveError(f"the archive holds {extra[0]}, which its manifest does not list: it was changed")
    if contents.DATABASE not in listed:
        raise ArchiveError("the archive holds no database")


def check_database(path: Path, *, newer_ok: bool = False) -> int:
    """``integrity_check`` and a schema version this Teleton knows (returned), or ArchiveError."""
    driver = pick_driver()
    try:
        conn = driver.module.connect(str(path))  # the staged copy: a WAL database needs its -shm written
        try:
            found = [row[0] for row in conn.execute("pragma integrity_check")]
            version = schema.current_version(conn)
        finally:
            conn.close()
    except driver.module.DatabaseError as exc:
        raise ArchiveError(f"the database in the archive cannot be opened ({exc})") from None
    if found != ["ok"]:
        raise ArchiveError(f"the database in the archive is damaged ({problems_line(found)}); it cannot be restored")
    if version > schema.SCHEMA_VERSION and not newer_ok:
        raise ArchiveError(
            f"the archive's database is at schema version {version}, newer than this Teleton's "
            f"{schema.SCHEMA_VERSION}: upgrade Teleton first, then restore"
        )
    return version


def _legacy(source: BinaryIO, into: Path, newer_ok: bool) -> Unpacked:
    path = into / contents.DATABASE
    entry = _write_member(source, path, contents.DATABASE)
    version = check_database(path, newer_ok=newer_ok)
    manifest = Manifest("unknown", path.stat().st_mtime, version, None, True, False, {}, [entry])
    return Unpacked(manifest, into, sealed=False, legacy=True)
