"""``teleton backup [PATH]``, ``teleton backup verify ARCHIVE`` and ``teleton restore ARCHIVE``
(docs/operations.md, Backup and restore). Every failure is one line and exit code 1; nothing half-written."""

from __future__ import annotations

import datetime as dt
import getpass
import sys
import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from teleton.backup import archive, contents, service
from teleton.backup.contents import Layout
from teleton.backup.restore import restore as restore_archive
from teleton.backup.sealed import Key, SealError, is_sealed, key_from
from teleton.backup.unpack import ArchiveError
from teleton.cli.context import cli_config
from teleton.config import ConfigError
from teleton.config.loader import read_config_file
from teleton.config.schema import Config
from teleton.storage import schema
from teleton.storage.in_use import InUse
from teleton.text.counts import counted

console = Console(soft_wrap=True, highlight=False)
KeyFile = Annotated[Path | None, typer.Option("--key-file", help="The key file (else backup.key_file).")]
PassphraseEnv = Annotated[
    str | None,
    typer.Option("--passphrase-env", help="Environment variable with the passphrase (else backup.passphrase_env)."),
]


def backup(
    ctx: typer.Context,
    path: Annotated[
        str | None,
        typer.Argument(help="Archive to write, or a folder for it (default: backup.dir); `verify ARCHIVE` checks one."),
    ] = None,
    archive_path: Annotated[
        Path | None, typer.Argument(help="With `verify`: the archive to check.", show_default=False)
    ] = None,
    no_secrets: Annotated[
        bool, typer.Option("--no-secrets", help="Leave out the Telegram session and the config's keys.")
    ] = False,
    no_vectors: Annotated[
        bool, typer.Option("--no-vectors", help="Leave out the embeddings (rebuilt after a restore).")
    ] = False,
    key_file: KeyFile = None,
    passphrase_env: PassphraseEnv = None,
) -> None:
    """The whole agent in one archive, consistent while the daemon runs: database, workspace, config, Telegram
    session, a manifest of checksums. `teleton backup verify ARCHIVE` reads one back and says what it holds."""
    config = cli_config(ctx)
    if path == "verify":
        if archive_path is None:
            _fail("usage: teleton backup verify ARCHIVE (name the archive to check)", code=2)
        _verify(config, archive_path, key_file, passphrase_env)
        return
    if archive_path is not None:
        _fail(f"usage: teleton backup [PATH]: one archive path at a time (got {path} and {archive_path})", code=2)
    key = _key(config, key_file, passphrase_env, None)
    now = time.time()
    target = service.target_for(config, None if path is None else Path(path).expanduser(), key is not None, now)
    options = archive.Options(
        vectors=config.backup.vectors and not no_vectors, secrets=config.backup.secrets and not no_secrets, key=key
    )
    try:  # what the machine refuses (a full disk, a read-only folder) is said by `teleton`'s own error line
        made = service.make(config, target, options, now)
    except (ArchiveError, SealError, InUse) as exc:
        _fail(f"error: backup failed: {exc}")
    m = made.manifest
    console.print(f"backup written: {made.path} ({made.size / 2**20:.1f} MB, verified, {made.seconds:.1f} s)")
    console.print("  " + _holds(m, sealed=key is not None))
    if not m.vectors:
        console.print("  embeddings left out: they are rebuilt after a restore (the daemon embeds in the background)")


def restore(
    ctx: typer.Context,
    archive_path: Annotated[Path, typer.Argument(help="The archive (or an old single-file database backup).")],
    to: Annotated[
        Path | None, typer.Option("--to", help="Restore into this folder instead of the configured data directory.")
    ] = None,
    key_file: KeyFile = None,
    passphrase_env: PassphraseEnv = None,
) -> None:
    """Put an archive back in place: refused while Teleton runs; what is there now is moved aside into
    before-restore-<time>/ first (never deleted); the archive is checked whole before anything moves."""
    config = cli_config(ctx)
    layout = Layout.under(to.expanduser()) if to is not None else Layout.of(config)
    key = _key(config, key_file, passphrase_env, archive_path)
    try:
        done = restore_archive(archive_path.expanduser(), layout, key)
    except (ArchiveError, SealError, InUse) as exc:
        _fail(f"error: not restored: {exc}; nothing was changed")
    except OSError as exc:
        _fail(
            f"error: restore stopped: {service.one_line(exc)}; what was there is in {layout.data_dir}/before-restore-*"
        )
    m = done.unpacked.manifest
    console.print(f"restored {archive_path} into {layout.data_dir}")
    console.print("  " + _holds(m, sealed=done.unpacked.sealed))
    if done.aside is not None:
        console.print(f"  what was there before: {done.aside}")
    if done.config_beside is not None:
        console.print(f"  the archive's config (without keys) is {done.config_beside}; the config in use is kept")
    if m.schema_version < schema.SCHEMA_VERSION:
        console.print(f"  schema version {m.schema_version}: migrated to {schema.SCHEMA_VERSION} at the next start")
    if not m.vectors:
        console.print("  the archive has no embeddings: the next start rebuilds them in the background")
    named = _data_dir_named(layout.config) if contents.CONFIG in done.placed else None
    if named is not None and named != layout.data_dir:  # another machine's layout, or --to
        console.print(
            f"  the restored config names storage.data_dir {named}: set it to {layout.data_dir} in {layout.config}"
        )
    elif to is not None and contents.CONFIG in done.placed:
        console.print(f"  to run from it: teleton -c {layout.config} (set storage.data_dir: {layout.data_dir} there)")
    console.print("  next: `teleton doctor`, then start Teleton again")


def _data_dir_named(config: Path) -> Path | None:
    """The data directory a restored config names (the default when it names none); None: unreadable."""
    try:
        raw = read_config_file(config)
    except ConfigError:
        return None
    named = (raw.get("storage") or {}).get("data_dir") if isinstance(raw.get("storage"), dict) else None
    return Path(str(named or "~/.teleton")).expanduser()


def _verify(config: Config, path: Path, key_file: Path | None, passphrase_env: str | None) -> None:
    key = _key(config, key_file, passphrase_env, path)
    try:
        unpacked = service.verify(path.expanduser(), key)
    except (ArchiveError, SealError) as exc:
        _fail(f"FAIL {path}: {exc}")
    console.print(f"OK {path}: checksums match, database integrity ok, schema version known")
    console.print("  " + _holds(unpacked.manifest, sealed=unpacked.sealed))
    if unpacked.legacy:
        console.print("  an old single-file backup: the database alone (no workspace, config or session)")


def _holds(m: archive.Manifest, *, sealed: bool) -> str:
    when = dt.datetime.fromtimestamp(m.created_at).strftime("%Y-%m-%d %H:%M")
    counts = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in m.counts.items())
    parts = {e.name.split("/")[0] for e in m.files}
    return (
        f"made {when} by Teleton {m.teleton}, schema {m.schema_version}, {counted(len(m.files), 'file')} "
        f"({', '.join(sorted(parts))}); {counts or 'no counts'}; embeddings {'in' if m.vectors else 'left out'}"
        f"{f' ({m.embedding_model})' if m.embedding_model and m.vectors else ''}; "
        f"secrets {'in' if m.secrets else 'left out'}; {'encrypted' if sealed else 'not encrypted'}"
    )


def _key(config: Config, key_file: Path | None, passphrase_env: str | None, reading: Path | None) -> Key | None:
    """The key from the options, else the config; reading a sealed archive with none: ask at a terminal."""
    try:
        if key_file is not None or passphrase_env is not None:
            return key_from(passphrase_env, key_file.expanduser() if key_file else None)
        key = service.configured_key(config)
    except SealError as exc:
        _fail(f"error: {exc}")
    if key is None and reading is not None and sys.stdin.isatty() and _sealed(reading):
        return Key.from_passphrase(getpass.getpass(f"passphrase for {reading}: "), "the passphrase typed")
    return key


def _sealed(path: Path) -> bool:
    try:
        with path.expanduser().open("rb") as fh:
            return is_sealed(fh.read(64))
    except OSError:
        return False


def _fail(line: str, code: int = 1) -> NoReturn:
    print(line, file=sys.stderr)
    raise typer.Exit(code)
