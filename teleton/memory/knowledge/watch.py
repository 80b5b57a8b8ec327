"""Following the knowledge files while the daemon runs: an edit is searchable within about a second."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import structlog
from watchfiles import awatch

from teleton.memory.knowledge.files import is_knowledge
from teleton.process.supervisor import Supervisor

log = structlog.get_logger(__name__)


class Reindexable(Protocol):
    """What the watcher drives (a ``KnowledgeIndex``)."""

    workspace: Path

    async def reindex(self) -> object: ...


class KnowledgeWatcher:
    """Re-indexes after the knowledge files change; ``await stop()`` ends it.

    Uses filesystem notifications (watchfiles), debounced so an editor's save burst is one re-index.
    Only knowledge files count (``files.is_knowledge``); the reindex only embeds changed chunks.
    """

    def __init__(self, index: Reindexable, debounce_ms: int = 500) -> None:
        self.index = index
        self.debounce_ms = debounce_ms
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.reindexes = 0

    def start(self, supervisor: Supervisor | None = None) -> None:
        if self._task is None:
            supervisor = supervisor or Supervisor(lambda name, reason: None)
            self._task = supervisor.run("knowledge watcher", self._run)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _relevant(self, path: str) -> bool:
        p, workspace = Path(path), self.index.workspace.resolve()
        return p.is_relative_to(workspace) and is_knowledge(p.relative_to(workspace).as_posix())

    async def _run(self, up: Callable[[], None]) -> None:
        workspace = self.index.workspace.resolve()
        await asyncio.to_thread(lambda: (workspace / "memory").mkdir(parents=True, exist_ok=True))
        up()
        try:
            await self._watch(workspace, force_polling=False)
        except (OSError, RuntimeError) as exc:
            # inotify can be unavailable (container limits, network filesystems): poll instead.
            log.warning("knowledge_watch_polling", reason=str(exc))
            await self._watch(workspace, force_polling=True)

    async def _watch(self, workspace: Path, *, force_polling: bool) -> None:
        # Recursive: public/ may hold folders; events elsewhere in the workspace are filtered out below.
        async for changes in awatch(
            workspace,
            debounce=self.debounce_ms,
            step=50,
            recursive=True,
            stop_event=self._stop,
            force_polling=force_polling,
            poll_delay_ms=300,
        ):
            if not any(self._relevant(path) for _, path in changes):
                continue
            await self.index.reindex()  # a failure goes to the supervisor: retried, shown in status
            self.reindexes += 1
