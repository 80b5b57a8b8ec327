"""Files: the knowledge index and every reader stay inside the workspace and label by the real path; what
the daemon writes is the owner's alone (0600 files, 0700 folders) whatever the umask."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from teleton.agent.prompt.system import PromptBuilder, PromptInputs
from teleton.daemon.status_file import DaemonStatus, write_status
from teleton.gateway.contract import ChatInfo
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.journal.learnings import Learnings
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.privacy import Clearance, Principals
from teleton.storage import Database
from teleton.storage.workspace_template import create_workspace


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)  # the usual default: would make files world-readable
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


async def test_index_refuses_links_out_and_skips_binary_files_once(tmp_path: Path, db: Database) -> None:
    ws = tmp_path / "ws"
    create_workspace(ws)
    (ws / "MEMORY.md").write_text("# Memory\n\nThe locker code is 4711.\n")
    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (ws / "memory" / "x.md").symlink_to(outside)
    (ws / "memory" / "blob.md").write_bytes(b"\x00\x01\x02binary\x00")
    (ws / "memory" / "latin.md").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (ws / "public" / "faq.md").write_text("# FAQ\n\nThe club meets on Tuesdays.\n")
    (ws / "public" / "leak.md").symlink_to(ws / "MEMORY.md")
    index = KnowledgeIndex(db, ws)
    with structlog.testing.capture_logs() as logs:
        await index.reindex()
        await index.reindex()
    skipped = sorted((e["path"], e["reason"]) for e in logs if e["event"] == "knowledge_file_skipped")
    assert skipped == [
        ("memory/blob.md", "binary file"),
        ("memory/latin.md", "not UTF-8 text"),
        ("memory/x.md", "it leads outside the workspace"),
    ]  # one line each, not one per re-index
    assert not await index.search("root bash", labels=None)  # nothing from outside was indexed
    rows = {r["path"]: r["label"] for r in await db.fetchall("select path, label from knowledge")}
    # The link into MEMORY.md is labelled by its target: the owner's, though it sits in public/.
    assert rows == {"MEMORY.md": "owner", "public/faq.md": "public", "public/leak.md": "owner"}
    group = Clearance("chat:-100500")
    hits = await index.search("locker code club Tuesdays", labels=group.readable())
    assert [h.meta["path"] for h in hits] == ["public/faq.md"]  # public knowledge reaches a group; no more


async def test_prompt_files_are_confined_and_labelled_by_target(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    create_workspace(ws)
    (ws / "MEMORY.md").write_text("The locker code is 4711.")
    (ws / "SOUL.md").unlink()
    (ws / "SOUL.md").symlink_to(ws / "MEMORY.md")  # a persona file pointing at private memory
    outside = tmp_path / "secret.txt"
    outside.write_text("a file outside the workspace")
    (ws / "SECURITY.md").unlink()
    (ws / "SECURITY.md").symlink_to(outside)
    builder = PromptBuilder(ws, DailyLogs(ws / "memory"), None, principals=Principals(owner_id=1001))
    group = PromptInputs(ChatInfo(-100500, "group", "Club"), None, Clearance("chat:-100500"))
    with structlog.testing.capture_logs() as logs:
        text = str(await builder.build(group))
    assert "4711" not in text and "outside the workspace" not in text
    assert any(e["event"] == "prompt_file_skipped" and e["file"] == "SECURITY.md" for e in logs)
    assert group.taint.labels <= {"public", "chat:-100500"}  # nothing of anyone else's was shown
    owner = PromptInputs(ChatInfo(1001, "dm"), None, Clearance("owner"))
    assert "4711" in str(await builder.build(owner))


async def test_private_files_are_0600_in_0700_folders(tmp_path: Path, loose_umask: None) -> None:
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o755)
    (ws / "MEMORY.md").write_text("kept as it was")
    os.chmod(ws / "MEMORY.md", 0o644)
    create_workspace(ws)
    assert (ws / "MEMORY.md").read_text() == "kept as it was" and _mode(ws / "MEMORY.md") == 0o600
    for folder in (ws, ws / "memory", ws / "learnings", ws / "downloads", ws / "public"):
        assert _mode(folder) == 0o700, folder
    for created in (ws / "SOUL.md", ws / "USER.md", ws / "HEARTBEAT.md"):
        assert _mode(created) == 0o600, created
    logs = DailyLogs(ws / "memory")
    await logs.append_exchange("hello", "hi")
    learnings = Learnings(ws)
    await learnings.record_error("tool", "{}", "boom")
    await learnings.record_correction("my sister is Ana")
    write_status(tmp_path / "status.json", DaemonStatus(pid=1, started_at=0.0))
    written = [*ws.glob("memory/*.md"), *ws.glob("learnings/*.md"), tmp_path / "status.json"]
    assert len(written) == 4 and all(_mode(path) == 0o600 for path in written), [oct(_mode(p)) for p in written]
