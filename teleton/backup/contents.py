"""What a backup holds and where each part lives: the database, the workspace, the config, the Telegram
session and the few files of the data directory that are the agent's own state. Logs, locks, the status
file and the backups themselves are left out (docs/operations.md, Backup and restore)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from teleton.config.loader import default_config_path
from teleton.config.schema import Config, McpServerConfig, session_file

DATABASE = "database/teleton.db"
CONFIG = "config/config.yaml"
SESSION = "telegram/telegram.session"
WORKSPACE = "workspace/"
DATA = "data/"
# Files and folders of the data directory that hold state: held sends waiting for the owner, the dashboard's
# login, what was typed in `teleton chat`. ``dashboard.token`` is a secret like the session.
DATA_ITEMS = ("held", "dashboard.token", "chat_history")
SECRET_DATA = ("dashboard.token",)


@dataclass(frozen=True)
class Layout:
    """Where each part of an archive lives on this machine."""

    data_dir: Path
    database: Path
    workspace: Path
    session: Path
    config: Path

    @classmethod
    def of(cls, config: Config) -> Layout:
        return cls(
            data_dir=config.storage.data_dir,
            database=config.storage.database_file,
            workspace=config.storage.workspace_dir,
            session=session_file(config.telegram.session_path or config.storage.data_dir / "telegram.session"),
            config=config.source or default_config_path(),
        )

    @classmethod
    def under(cls, folder: Path) -> Layout:
        """The default layout inside one folder (``teleton restore --to DIR``)."""
        return cls(
            folder, folder / "teleton.db", folder / "workspace", folder / "telegram.session", folder / "config.yaml"
        )

    def path_of(self, name: str) -> Path:
        """Where the archive member ``name`` goes (its name was checked: no ``..``, no absolute path)."""
        if name == DATABASE:
            return self.database
        if name == CONFIG:
            return self.config
        if name == SESSION:
            return self.session
        if name.startswith(WORKSPACE):
            return self.workspace / name[len(WORKSPACE) :]
        if name.startswith(DATA) and name[len(DATA) :].split("/")[0] in DATA_ITEMS:
            return self.data_dir / name[len(DATA) :]
        raise ValueError(f"{name!r} is not a part of a Teleton backup")


def files_of(layout: Layout, *, secrets: bool) -> Iterator[tuple[str, Path]]:
    """(archive name, file) for everything but the database and the config, which are written specially.
    Regular files only: a symlink is not followed (it could name anything on the machine)."""
    if secrets and layout.session.is_file() and not layout.session.is_symlink():
        yield SESSION, layout.session
    for path in _walk(layout.workspace):
        yield WORKSPACE + path.relative_to(layout.workspace).as_posix(), path
    for item in DATA_ITEMS:
        if not secrets and item in SECRET_DATA:
            continue
        for path in _walk(layout.data_dir / item):
            yield DATA + path.relative_to(layout.data_dir).as_posix(), path


def _walk(root: Path) -> Iterator[Path]:
    if root.is_symlink():
        return
    if root.is_file():
        yield root
        return
    for folder, dirs, files in os.walk(root):  # a linked folder is listed, never entered (followlinks=False)
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                yield path


def without_secrets(raw: dict[str, Any], model: type[BaseModel] = Config) -> dict[str, Any]:
    """The config as written, less every setting the schema marks secret (``repr=False``: keys, tokens,
    the phone number, an MCP server's env and headers)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        field = model.model_fields.get(key)
        if field is None:
            out[key] = value
            continue
        if not field.repr:
            continue
        annotation = field.annotation
        if isinstance(value, dict) and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out[key] = without_secrets(value, annotation)
        elif isinstance(value, dict) and key == "servers":
            out[key] = {name: without_secrets(server, McpServerConfig) for name, server in value.items()}
        else:
            out[key] = value
    return out
