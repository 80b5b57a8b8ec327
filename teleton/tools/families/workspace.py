"""Workspace file tools: list, read, write, delete, rename — confined to the workspace.

Scopes are the first gate (docs/tools.md, "Memory and workspace tools"); the second is in every handler,
whatever the scope: a file's label comes from its real path (``workspace_paths``), a read needs the clearance
to read it and a write needs it to be the turn's own, so no admin or widened scope pulls MEMORY.md into a
group. SOUL.md, STRATEGY.md and SECURITY.md are read-only; binary files are not read as text; files are written
0600, all I/O in a thread.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teleton.llm.tool_loop import ToolResult
from teleton.privacy import PUBLIC
from teleton.privacy.quoting import label_origin, mark, origin_at, origins_in, quote_lines
from teleton.storage.private_files import Unreadable, private_dir, read_confined, write_private
from teleton.tools.families.workspace_paths import (
    PathRefused,
    WorkspacePath,
    check_readable,
    check_writable,
    may_see,
    resolve,
)
from teleton.tools.held import Held, Outgoing, sha256
from teleton.tools.outbox import EgressRefused, gate
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

READ_CAP = 60_000  # characters returned by one read; the model pages with offset
WRITE_CAP = 1_000_000  # characters accepted by one write
LIST_CAP = 300  # entries shown by one listing
SNAPSHOT_CAP = 20 * 2**20  # bytes of a file held for the owner's approval of a move


@dataclass(frozen=True)
class Limits:
    read_cap: int = READ_CAP
    write_cap: int = WRITE_CAP
    list_cap: int = LIST_CAP


async def _resolve(ctx: ToolContext, given: str) -> WorkspacePath:
    # realpath touches the disk (symlinks); keep it off the event loop like the rest of the file I/O
    return await asyncio.to_thread(resolve, ctx.deps.workspace, given)


def _refusal(exc: PathRefused) -> ToolResult:
    return ToolResult.error(str(exc))


async def _target(
    ctx: ToolContext, given: str, check: Callable[[WorkspacePath, ToolContext], object]
) -> WorkspacePath | ToolResult:
    """The path the model gave, resolved and passed through ``check``; a refusal is the call's result."""
    try:
        target = await _resolve(ctx, given)
        check(target, ctx)
    except PathRefused as exc:
        return _refusal(exc)
    return target


async def workspace_list(args: dict[str, Any], ctx: ToolContext, limits: Limits) -> str | ToolResult:
    target = await _target(ctx, args.get("path", "."), check_readable)
    if isinstance(target, ToolResult):
        return target

    def _list() -> list[str] | None:
        root = Path(os.path.realpath(ctx.deps.workspace))
        if not target.real.is_dir():
            return None
        lines = []
        for entry in sorted(target.real.iterdir(), key=lambda p: p.name):
            try:
                child = resolve(root, (target.rel / entry.name).as_posix())
            except PathRefused:
                continue  # a symlink out of the workspace is not shown
            if not may_see(child, ctx):
                continue
            if entry.is_dir():
                lines.append(f"{child.name}/")
            else:
                lines.append(f"{child.name}  ({entry.stat().st_size} bytes)")
        return lines

    lines = await asyncio.to_thread(_list)
    if lines is None:
        return ToolResult.error(f"{target.name} is not a directory")
    if not lines:
        return f"{target.name}/ is empty"
    shown = lines[: limits.list_cap]
    more = f"\n… and {len(lines) - len(shown)} more" if len(lines) > len(shown) else ""
    return "\n".join(shown) + more


async def workspace_read(args: dict[str, Any], ctx: ToolContext, limits: Limits) -> str | ToolResult:
    target = await _target(ctx, args["path"], check_readable)
    if isinstance(target, ToolResult):
        return target
    offset = int(args.get("offset", 0))

    def _read() -> tuple[str, str] | None:
        if not target.real.is_file():
            return None
        # Characters, not bytes, are asked for: 4 bytes per character at most.
        text, _ = read_confined(ctx.deps.workspace, target.real, limit=4 * (offset + limits.read_cap + 1))
        # A page that begins inside words quoted from elsewhere says whose they are (its first line does).
        return origin_at(text, offset), text[offset : offset + limits.read_cap + 1]

    try:
        read = await asyncio.to_thread(_read)
    except Unreadable as exc:
        return ToolResult.error(f"{target.name} cannot be read as text: {exc}")
    if read is None:
        return ToolResult.error(f"{target.name} is not a file")
    head, text = read
    head = f"{head}\n" if head else ""
    if len(text) > limits.read_cap:
        end = offset + limits.read_cap
        return head + text[: limits.read_cap] + f"\n[truncated: read again with offset={end} for more]"
    return head + text if text else f"({target.name} is empty)"


async def workspace_write(args: dict[str, Any], ctx: ToolContext, limits: Limits) -> str | ToolResult:
    content: str = args["content"]
    if len(content) > limits.write_cap:
        return ToolResult.error(f"content is {len(content)} characters; the limit is {limits.write_cap}")
    target = await _target(ctx, args["path"], check_writable)
    if isinstance(target, ToolResult):
        return target
    append = bool(args.get("append", False))
    label = ctx.deps.label_of_path(target.rel)
    if label != ctx.clearance.label:  # into public/ or a chat's folder: others will read it (the egress rule)
        meta = {"path": target.name, "append": append}
        _, stop = await gate(ctx, Outgoing("write", content.encode(), label=label, meta=meta, tool="workspace_write"))
        if stop is not None:
            return stop
    else:  # words a steered turn writes into its own files keep their origin (a later reader is tainted)
        content = mark(content, ctx.taint.steering(ctx.clearance.label))

    def _write() -> str | None:
        if target.real.is_dir():
            return f"{target.name} is a directory"
        write_private(target.real, content, append=append, stop_at=ctx.deps.workspace)
        return None

    done = f"{'Appended' if append else 'Wrote'} {len(content)} characters to {target.name}."
    return await _change(ctx.deps, _write, target.rel.parts, done)


async def workspace_delete(args: dict[str, Any], ctx: ToolContext, limits: Limits) -> str | ToolResult:
    target = await _target(ctx, args["path"], check_writable)
    if isinstance(target, ToolResult):
        return target

    def _delete() -> str | None:
        if target.real.is_dir():
            if any(target.real.iterdir()) and not args.get("recursive"):
                return f"{target.name} is a non-empty directory; pass recursive=true to delete it"
            shutil.rmtree(target.real)
            return None
        if not target.real.exists():
            return f"{target.name} does not exist"
        target.real.unlink()
        return None

    return await _change(ctx.deps, _delete, target.rel.parts, f"Deleted {target.name}.")


async def workspace_rename(args: dict[str, Any], ctx: ToolContext, limits: Limits) -> str | ToolResult:
    try:
        source = await _resolve(ctx, args["path"])
        dest = await _resolve(ctx, args["new_path"])
        check_writable(source, ctx)
        check_writable(dest, ctx)
    except PathRefused as exc:
        return _refusal(exc)
    was = ctx.deps.label_of_path(source.rel)
    ctx.shown(was)  # what is moved is the file's content
    label = ctx.deps.label_of_path(dest.rel)
    if label != ctx.clearance.label:  # where others read: the approval is of the content, not the name
        try:
            content = await asyncio.to_thread(snapshot, source)
        except PathRefused as exc:
            return _refusal(exc)
        meta = {"path": source.name, "new_path": dest.name}
        out = Outgoing("move", content, label=label, meta=meta, source_sha256=sha256(content), tool="workspace_rename")
        _, stop = await gate(ctx, out)
        if stop is not None:
            return stop

    def _rename() -> str | None:
        if not source.real.exists():
            return f"{source.name} does not exist"
        if dest.real.exists():
            return f"{dest.name} already exists; delete it first or pick another name"
        private_dir(dest.real.parent, stop_at=ctx.deps.workspace)
        source.real.rename(dest.real)
        if was not in (label, PUBLIC):  # another chat's words, kept where the owner's are: still theirs
            keep_origin(dest.real, label_origin(was))
        return None

    done = f"Renamed {source.name} to {dest.name}."
    return await _change(ctx.deps, _rename, source.rel.parts + dest.rel.parts, done)


def keep_origin(moved: Path, where: str) -> None:
    """Every text file of ``moved`` (a file or a folder) quoted with ``where`` it came from, unless it already
    names an origin on its first line; a file that is not text has no words to steer with, and a link is left
    alone (what it points to is not what was moved)."""
    for path in [moved, *(sorted(moved.rglob("*")) if moved.is_dir() else [])]:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip() and not any(origins_in(text.split("\n", 1)[0])):
            write_private(path, quote_lines(text, where) + "\n")


def snapshot(path: WorkspacePath) -> bytes:
    """A file's bytes as the owner will be shown them (a folder cannot be shown exactly: refused)."""
    if path.real.is_dir():
        raise PathRefused(f"{path.name} is a folder: move its files one at a time, so each can be shown to the owner")
    if not path.real.is_file():
        raise PathRefused(f"{path.name} does not exist")
    if path.real.stat().st_size > SNAPSHOT_CAP:
        raise PathRefused(f"{path.name} is larger than {SNAPSHOT_CAP // 2**20} MB: too large to hold for approval")
    return path.real.read_bytes()


async def release_write(item: Held, deps: ToolDeps) -> str:
    target = await asyncio.to_thread(resolve, deps.workspace, str(item.meta["path"]))
    if deps.label_of_path(target.rel) != item.label:  # what the path means changed since it was shown
        raise EgressRefused(f"{target.name} is no longer read by {item.label}")
    append = bool(item.meta.get("append"))
    await asyncio.to_thread(write_private, target.real, item.text, append=append, stop_at=deps.workspace)
    await _reindex(deps, target.rel.parts)
    return f"{'appended to' if append else 'wrote'} {target.name}"


async def release_move(item: Held, deps: ToolDeps) -> str:
    """The bytes shown go to the destination, and the source goes, only if it still holds exactly them."""
    source = await asyncio.to_thread(resolve, deps.workspace, str(item.meta["path"]))
    dest = await asyncio.to_thread(resolve, deps.workspace, str(item.meta["new_path"]))
    if deps.label_of_path(dest.rel) != item.label:
        raise EgressRefused(f"{dest.name} is no longer read by {item.label}")

    def move() -> None:
        if not source.real.is_file() or sha256(source.real.read_bytes()) != item.source_sha256:
            raise EgressRefused(f"{source.name} changed after you were shown it; nothing was moved")
        private_dir(dest.real.parent, stop_at=deps.workspace)
        try:
            fd = os.open(dest.real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise EgressRefused(f"{dest.name} exists now; nothing was moved") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(item.body)
        source.real.unlink()

    await asyncio.to_thread(move)
    await _reindex(deps, source.rel.parts + dest.rel.parts)
    return f"moved {source.name} to {dest.name}"


async def _change(
    deps: ToolDeps, change: Callable[[], str | None], parts: tuple[str, ...], done: str
) -> str | ToolResult:
    """Run one file change in a thread: the problem it names is the result; else the index follows, and ``done``."""
    problem = await asyncio.to_thread(change)
    if problem:
        return ToolResult.error(problem)
    await _reindex(deps, parts)
    return done


async def _reindex(deps: ToolDeps, parts: tuple[str, ...]) -> None:
    # docs/memory.md: a write through a tool is searchable at once; the index follows MEMORY.md, memory/, public/.
    index = deps.knowledge
    if index is None or not hasattr(index, "reindex") or not ({"MEMORY.md", "memory", "public"} & set(parts)):
        return
    try:
        await index.reindex()
    except Exception:  # the file is written; the watcher catches up
        return


def _path_prop(what: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 1024, "description": what}


def workspace_tools(limits: Limits = Limits()) -> list[Tool]:
    def bind(fn: Any) -> Any:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
            return await fn(args, ctx, limits)

        return handler

    return [
        Tool(
            name="workspace_list",
            description=(
                "List the files and folders in your workspace directory (your notes, documents, downloads). "
                "Shows names and sizes; give a folder path to look inside it."
            ),
            input_schema=schema(
                {
                    "path": {
                        "type": "string",
                        "maxLength": 1024,
                        "description": "folder relative to the workspace (default: root)",
                    }
                }
            ),
            handler=bind(workspace_list),
            category="workspace",
        ),
        Tool(
            name="workspace_read",
            description=(
                "Read a text file from your workspace: notes, documents, saved files, downloaded text. "
                "Open and show the contents of a file by its path."
            ),
            input_schema=schema(
                {
                    "path": _path_prop("file path relative to the workspace, e.g. notes/todo.md"),
                    "offset": {"type": "integer", "minimum": 0, "description": "character offset to start at"},
                },
                ("path",),
            ),
            handler=bind(workspace_read),
            category="workspace",
        ),
        Tool(
            name="workspace_write",
            description=(
                "Create or overwrite a file in your workspace, or append to it: write notes, drafts, lists, "
                "documents to disk. Folders are created as needed."
            ),
            input_schema=schema(
                {
                    "path": _path_prop("file path relative to the workspace"),
                    "content": {"type": "string", "description": "the text to write"},
                    "append": {"type": "boolean", "description": "append instead of overwriting"},
                },
                ("path", "content"),
            ),
            handler=bind(workspace_write),
            scope="admin-only",
            category="workspace",
            release=release_write,
        ),
        Tool(
            name="workspace_delete",
            description="Delete a file (or a folder, with recursive=true) from your workspace. Remove files.",
            input_schema=schema(
                {
                    "path": _path_prop("file or folder relative to the workspace"),
                    "recursive": {"type": "boolean"},
                },
                ("path",),
            ),
            handler=bind(workspace_delete),
            scope="admin-only",
            category="workspace",
        ),
        Tool(
            name="workspace_rename",
            description="Rename or move a file or folder inside your workspace.",
            input_schema=schema(
                {
                    "path": _path_prop("current path relative to the workspace"),
                    "new_path": _path_prop("new path relative to the workspace"),
                },
                ("path", "new_path"),
            ),
            handler=bind(workspace_rename),
            scope="admin-only",
            category="workspace",
            release=release_move,
        ),
    ]
