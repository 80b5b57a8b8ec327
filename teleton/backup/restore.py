"""``teleton restore``: an archive back in place, safely.

Refused while anything uses the data directory (``storage.in_use``). The archive is unpacked and checked in
a staging folder first; only then is what it replaces moved aside into ``before-restore-<time>/`` (never
deleted), the database's stale ``-wal``/``-shm`` with it (SQLite would replay a crashed run's WAL onto the
restored file), and the staged files renamed into place. An older schema migrates forward at the next start.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from teleton.backup import contents
from teleton.backup.sealed import Key
from teleton.backup.unpack import Unpacked, unpack
from teleton.storage import in_use

# Beside the database: its journals and the clean-stop marker (daemon.health), which a restored file must not
# inherit; in the data directory: the lost-database marker the restore answers.
DATABASE_COMPANIONS = ("-wal", "-shm", "-journal", ".clean-stop")
DATA_MARKERS = ("database-lost.json",)


@dataclass
class Restored:
    unpacked: Unpacked
    aside: Path | None  # where what was there went (None: nothing was there)
    config_beside: Path | None = None  # an archive without secrets: its config, not over the one in use
    placed: list[str] = field(default_factory=list)


def restore(archive: Path, layout: contents.Layout, key: Key | None, now: float | None = None) -> Restored:
    """Raise in_use.InUse or unpack.ArchiveError (nothing changed), or put the archive in place."""
    lock = in_use.hold(layout.data_dir, exclusive=True)
    try:
        staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=layout.data_dir))
        try:
            unpacked = unpack(archive, staging, key)
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
            return _swap(unpacked, layout, layout.data_dir / f"before-restore-{stamp}")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        in_use.release(lock)


def _swap(unpacked: Unpacked, layout: contents.Layout, aside: Path) -> Restored:
    names = {entry.name for entry in unpacked.manifest.files}
    restored = Restored(unpacked, None)
    replaced: list[Path] = [layout.database]
    replaced += [layout.database.with_name(layout.database.name + suffix) for suffix in DATABASE_COMPANIONS]
    replaced += [layout.data_dir / marker for marker in DATA_MARKERS]
    if any(name.startswith(contents.WORKSPACE) for name in names):
        replaced.append(layout.workspace)
    if contents.SESSION in names:
        replaced += [layout.session, layout.session.with_name(layout.session.name + "-journal")]
    for item in contents.DATA_ITEMS:
        if any(name == contents.DATA + item or name.startswith(f"{contents.DATA}{item}/") for name in names):
            replaced.append(layout.data_dir / item)
    config_name: Path | None = layout.config
    if contents.CONFIG in names:
        if unpacked.manifest.secrets or not layout.config.exists():
            replaced.append(layout.config)
        else:  # the archive's config has no keys: the one in use keeps working, the archive's goes beside it
            config_name = layout.config.with_name(layout.config.name + ".from-backup")
            restored.config_beside = config_name
    for path in replaced:
        if path.exists() or path.is_symlink():
            aside.mkdir(mode=0o700, exist_ok=True)
            _move(path, _free_name(aside / path.name))
            restored.aside = aside
    for name in sorted(names):
        target = config_name if name == contents.CONFIG else layout.path_of(name)
        assert target is not None
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _move(unpacked.folder.joinpath(*name.split("/")), target)
        restored.placed.append(name)
    return restored


def _free_name(path: Path) -> Path:
    n = 1
    candidate = path
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def _move(source: Path, target: Path) -> None:
    """Rename; across file systems, copy beside the target under a temporary name, then rename."""
    try:
        os.rename(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        temporary = target.with_name(f".{target.name}.restoring")
        if source.is_dir():
            shutil.copytree(source, temporary, symlinks=True)
            shutil.rmtree(source)
        else:
            shutil.copy2(source, temporary)
            source.unlink()
        os.rename(temporary, target)
