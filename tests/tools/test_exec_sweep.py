"""exec: what a command writes where others read (public/, persona files, other chats' folders) is moved to
exec-output/<run id>/ (the owner's) after the run, whatever its end; an overwritten public file gets its
earlier content back; owner paths are left alone (issue 29). Real shell commands, real files."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.storage import Database
from teleton.tools.families.exec import ExecSettings, exec_tools
from teleton.tools.families.exec_sweep import OUTPUT_DIR, snapshot, sweep
from teleton.tools.families.workspace import workspace_tools
from teleton.tools.registry import ToolDeps, ToolRegistry
from tests.tools.conftest import DM, GROUP, call, make_ctx, principals
from tests.waiting import until

SECRET = "# Money\n\nThe owner's bank PIN is 4921.\n"
SOUL = "# Soul\n\nI am a friendly hiking assistant.\n"


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "MEMORY.md").write_text(SECRET)
    (workspace / "SOUL.md").write_text(SOUL)
    (workspace / "public" / "faq.md").write_text("# FAQ\n\nMeet at the station at 8.\n")
    return workspace


@pytest.fixture
def deps(db: Database, ws: Path) -> ToolDeps:
    index = KnowledgeIndex(db, ws, principals=principals())
    return ToolDeps(db=db, workspace=ws, principals=principals(), knowledge=index)


def registry(timeout_s: float = 10.0) -> ToolRegistry:
    tools = ToolRegistry([*exec_tools(ExecSettings(timeout_s=timeout_s)), *workspace_tools()])
    tools.set_override("workspace_read", scope="always")  # what a group may read is the clearance's call
    return tools


async def run(deps: ToolDeps, command: str) -> str:
    result = await call(registry(), make_ctx(deps, DM, admin=True), "exec", command=command)
    return result.content


def outputs(ws: Path) -> list[str]:
    """Everything under exec-output/, relative to the run folder (there is one run per test here)."""
    root = ws / OUTPUT_DIR
    if not root.exists():
        return []
    (run_dir,) = root.iterdir()
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*"))


def copied(path: Path) -> bool:
    """The command's copy is whole: the file appears when cp opens it, before a byte is written."""
    return path.exists() and path.read_text() == SECRET


def gone(path: Path) -> bool:
    return not path.is_symlink() and not path.exists()


def output(ws: Path, rel: str) -> Path:
    (run_dir,) = (ws / OUTPUT_DIR).iterdir()
    return run_dir / rel


async def test_copy_of_memory_into_public_is_moved_to_the_owners_output(deps: ToolDeps, ws: Path) -> None:
    content = await run(deps, "cp MEMORY.md public/leak.md")
    assert not (ws / "public" / "leak.md").exists()
    assert output(ws, "public/leak.md").read_text() == SECRET
    assert "public/leak.md → moved to exec-output/" in content and "workspace_rename" in content
    assert deps.label_of_path(f"{OUTPUT_DIR}/x/public/leak.md") == "owner"
    group = make_ctx(deps, GROUP, admin=True)
    read = await call(registry(), group, "workspace_read", path="public/leak.md")
    assert read.is_error and "4921" not in read.content
    moved = output(ws, "public/leak.md").relative_to(ws).as_posix()
    read = await call(registry(), group, "workspace_read", path=moved)
    assert read.is_error and "private" in read.content
    owner = await call(registry(), make_ctx(deps, DM, admin=True), "workspace_read", path=moved)
    assert owner.content == SECRET
    row = await deps.db.fetchone("select command, exit_code from exec_audit")
    assert row["command"] == "cp MEMORY.md public/leak.md" and row["exit_code"] == 0


async def test_the_index_forgets_what_was_read_in_public_while_the_command_ran(deps: ToolDeps, ws: Path) -> None:
    """The known gap, shown: while the command runs, the file is in public/ (the watcher may index it); the
    sweep moves it and re-indexes, so no public row of it is left."""
    gate = ws / "gate"
    os.mkfifo(gate)  # the command waits on it, so the test decides when it ends
    running = asyncio.create_task(run(deps, "cp MEMORY.md public/leak.md && read line < gate"))
    await until(lambda: copied(ws / "public" / "leak.md") or running.done())
    await deps.knowledge.reindex()  # what the watcher does when the file appears
    rows = await deps.db.fetchall("select label, text from knowledge where path = 'public/leak.md'")
    assert rows and rows[0]["label"] == "public" and any("4921" in r["text"] for r in rows)
    await asyncio.to_thread(gate.write_text, "go\n")
    content = await running
    assert "public/leak.md → moved" in content
    assert await deps.db.fetchall("select id from knowledge where path = 'public/leak.md'") == []
    assert await deps.db.fetchall("select id from knowledge where label = 'public' and text like '%4921%'") == []


async def test_appending_to_soul_puts_its_old_text_back(deps: ToolDeps, ws: Path) -> None:
    content = await run(deps, "cat MEMORY.md >> SOUL.md")
    assert (ws / "SOUL.md").read_text() == SOUL
    assert (ws / "SOUL.md").stat().st_mode & 0o777 == 0o600
    assert output(ws, "SOUL.md").read_text() == SOUL + SECRET
    assert "SOUL.md → moved to" in content and "the earlier SOUL.md was put back" in content


@pytest.mark.parametrize("folder", ["chats/-100500", "downloads/2002"])
async def test_files_written_into_another_chats_folder_are_moved(deps: ToolDeps, ws: Path, folder: str) -> None:
    assert deps.label_of_path(f"{folder}/x") in ("chat:-100500", "user:2002")
    (ws / folder).mkdir(parents=True)
    (ws / folder / "theirs.md").write_text("their own file")
    content = await run(deps, f"cp MEMORY.md {folder}/x.md && cp MEMORY.md {folder}/x")
    assert sorted(os.listdir(ws / folder)) == ["theirs.md"]  # theirs untouched, the copies gone
    assert output(ws, f"{folder}/x.md").read_text() == SECRET and output(ws, f"{folder}/x").read_text() == SECRET
    assert f"{folder}/x.md → moved" in content


async def test_a_new_chat_folder_is_moved_as_a_whole(deps: ToolDeps, ws: Path) -> None:
    await run(deps, "mkdir -p chats/-100500 && cp MEMORY.md chats/-100500/x.md")
    assert not (ws / "chats" / "-100500").exists()
    assert (ws / "chats").is_dir()  # chats/ itself is the owner's: left as the command made it
    assert outputs(ws) == ["chats", "chats/-100500", "chats/-100500/x.md"]


async def test_a_symlink_into_public_is_moved_and_not_followed(deps: ToolDeps, ws: Path) -> None:
    (ws / "memory" / "2026-01-01.md").write_text("[10:00] User: secret")
    content = await run(deps, "ln -s ../MEMORY.md public/link.md && ln -s ../memory public/mem")
    assert gone(ws / "public" / "link.md") and gone(ws / "public" / "mem")
    assert os.readlink(output(ws, "public/link.md")) == "../MEMORY.md"
    assert os.readlink(output(ws, "public/mem")) == "../memory"
    assert (ws / "MEMORY.md").read_text() == SECRET  # nothing behind the links touched
    assert (ws / "memory" / "2026-01-01.md").read_text() == "[10:00] User: secret"
    assert "public/link.md → moved" in content and "public/mem → moved" in content


async def test_a_new_folder_under_public_is_moved_as_a_whole(deps: ToolDeps, ws: Path) -> None:
    before = sorted(p.relative_to(ws).as_posix() for p in (ws / "public").rglob("*"))
    content = await run(deps, "mkdir -p public/deep/er && cp MEMORY.md public/deep/er/a.md")
    assert sorted(p.relative_to(ws).as_posix() for p in (ws / "public").rglob("*")) == before
    assert output(ws, "public/deep/er/a.md").read_text() == SECRET
    assert "public/deep → moved" in content


async def test_owner_paths_are_left_alone(deps: ToolDeps, ws: Path) -> None:
    content = await run(deps, "mkdir -p notes && echo hi > notes/ok.md && cat MEMORY.md > USER.md")
    assert (ws / "notes" / "ok.md").read_text() == "hi\n" and (ws / "USER.md").read_text() == SECRET
    assert "moved" not in content and "workspace_rename" not in content
    assert not (ws / OUTPUT_DIR).exists()


async def test_a_command_killed_by_its_timeout_is_swept_too(deps: ToolDeps, ws: Path) -> None:
    ctx = make_ctx(deps, DM, admin=True)
    running = asyncio.create_task(
        call(registry(timeout_s=2.0), ctx, "exec", command="cp MEMORY.md public/t.md; sleep 30")
    )
    await until(lambda: copied(ws / "public" / "t.md") or running.done())
    assert (ws / "public" / "t.md").exists() or not running.done(), "the copy should be made before the kill"
    result = await running
    assert result.is_error and "timeout" in result.content and "public/t.md → moved" in result.content
    assert not (ws / "public" / "t.md").exists() and output(ws, "public/t.md").read_text() == SECRET


async def test_a_cancelled_command_is_swept_too(deps: ToolDeps, ws: Path) -> None:
    ctx = make_ctx(deps, DM, admin=True)
    running = asyncio.create_task(call(registry(), ctx, "exec", command="cp MEMORY.md public/c.md; sleep 30"))
    await until(lambda: copied(ws / "public" / "c.md"))
    running.cancel()  # the turn's own tool timeout, or /stop
    with pytest.raises(asyncio.CancelledError):
        await running
    assert not (ws / "public" / "c.md").exists() and output(ws, "public/c.md").read_text() == SECRET
    row = await deps.db.fetchone("select stderr from exec_audit")
    assert row["stderr"] == "cancelled"


async def test_an_unchanged_public_file_is_untouched_and_a_touched_one_is_put_back(deps: ToolDeps, ws: Path) -> None:
    """A file touched with identical content cannot be told from a rewritten one by its stamp: it is
    treated as changed (moved aside, its kept copy put back)."""
    (ws / "public" / "same.md").write_text("# Same\n")
    faq = (ws / "public" / "faq.md").stat()
    content = await run(deps, "touch public/same.md && cat public/faq.md > /dev/null")
    after = (ws / "public" / "faq.md").stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (faq.st_ino, faq.st_mtime_ns, faq.st_ctime_ns)
    assert (ws / "public" / "same.md").read_text() == "# Same\n"
    assert output(ws, "public/same.md").read_text() == "# Same\n"
    assert "public/same.md → moved" in content and "public/faq.md" not in content


async def test_deleting_a_public_file_is_not_undone(deps: ToolDeps, ws: Path) -> None:
    content = await run(deps, "rm public/faq.md")
    assert not (ws / "public" / "faq.md").exists() and "moved" not in content


async def test_an_exec_output_symlink_into_public_is_set_aside_first(deps: ToolDeps, ws: Path) -> None:
    """A command that makes exec-output/ a link into public/ does not get the sweep to publish for it."""
    await run(deps, "ln -s public exec-output && cp MEMORY.md public/leak.md")
    assert sorted(os.listdir(ws / "public")) == ["faq.md"]
    assert (ws / OUTPUT_DIR).is_dir() and not (ws / OUTPUT_DIR).is_symlink()
    assert output(ws, "public/leak.md").read_text() == SECRET
    (aside,) = [n for n in os.listdir(ws) if n.startswith(f"{OUTPUT_DIR}.displaced-")]
    assert os.readlink(ws / aside) == "public"


def test_a_shared_pattern_reaching_into_exec_output_gets_the_file_deleted(ws: Path) -> None:
    """With privacy.shared_paths as wide as ``**/*.md`` exec-output/ would be public too: the entry is deleted."""
    deps = ToolDeps(db=None, workspace=ws, principals=principals(), shared_paths=("**/*.md",))
    before = snapshot(ws, deps.label_of_path)
    (ws / "public" / "leak.md").write_text(SECRET)
    (moved,) = sweep(ws, before, deps.label_of_path, run_id="r1")
    assert (moved.path, moved.moved_to, moved.restored) == ("public/leak.md", "", False)
    assert not (ws / "public" / "leak.md").exists() and outputs(ws) == []


def test_backups_keep_persona_files_first_within_the_cap(ws: Path) -> None:
    deps = ToolDeps(db=None, workspace=ws, principals=principals())
    (ws / "public" / "big.md").write_text("x" * 5000)
    kept = snapshot(ws, deps.label_of_path, backup_cap=len(SOUL) + 100).backups
    assert kept["SOUL.md"] == SOUL.encode() and "public/big.md" not in kept
