"""exec: run a shell command in the workspace (capabilities.exec; off by default).

A shell reads everything the daemon can, so exec is the owner's alone, with a scrubbed environment
(docs/privacy.md). The command runs in its own session, so on timeout its whole process group is killed
(SIGTERM, then SIGKILL after a grace): a ``sleep 60 &`` cannot outlive the call. Output is read as it comes
and capped (the rest drained, so a full pipe never blocks it), and every run is written to ``exec_audit``.
What it writes where others read is moved aside (``exec_sweep``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from teleton.config.schema import ExecConfig, default
from teleton.llm.tool_loop import ToolResult
from teleton.privacy.quoting import outside, outside_origin, quote_lines
from teleton.process.child_env import scrubbed_env
from teleton.tools.families import exec_sweep
from teleton.tools.held import Held, Outgoing
from teleton.tools.outbox import gate
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

log = structlog.get_logger(__name__)

KILL_GRACE_S = 1.0
AUDIT_CAP = 10_000  # characters of each stream kept in the audit row


@dataclass(frozen=True)
class ExecSettings:
    timeout_s: float = default(ExecConfig, "timeout_s")
    output_cap: int = default(ExecConfig, "output_cap")
    shell: str = "/bin/sh"

    @classmethod
    def from_config(cls, cfg: ExecConfig) -> ExecSettings:
        """From ``config.capabilities.exec``."""
        return cls(timeout_s=cfg.timeout_s, output_cap=cfg.output_cap)


@dataclass(frozen=True)
class ExecOutcome:
    command: str
    exit_code: int | None  # None when killed on timeout
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool
    pid: int


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    kept = bytearray()
    dropped = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        dropped = dropped or len(chunk) > room
    return bytes(kept), dropped


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def run_command(
    command: str,
    cwd: Path,
    settings: ExecSettings,
    on_start: Callable[[int], None] | None = None,
) -> ExecOutcome:
    """Run ``command`` under ``settings``' timeout and output cap; never raises for the command's failure."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        settings.shell,
        "-c",
        command,
        cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group: the unit we kill on timeout
        env=scrubbed_env(),
    )
    if on_start:
        on_start(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    readers = asyncio.gather(
        _read_capped(proc.stdout, settings.output_cap), _read_capped(proc.stderr, settings.output_cap)
    )
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout=settings.timeout_s)
    except TimeoutError:
        timed_out = True
        await _terminate(proc)
    except asyncio.CancelledError:
        await _terminate(proc)
        raise
    finally:
        # Children of a finished shell may still hold the pipes; the group goes with the shell.
        _kill_group(proc.pid, signal.SIGKILL)
    try:
        (out, out_cut), (err, err_cut) = await asyncio.wait_for(readers, timeout=KILL_GRACE_S * 2)
    except TimeoutError:  # something escaped the group (setsid) and holds a pipe: give up on the rest
        readers.cancel()
        (out, out_cut), (err, err_cut) = (b"", True), (b"", True)
    duration_ms = int((time.monotonic() - started) * 1000)
    return ExecOutcome(
        command=command,
        exit_code=None if timed_out else proc.returncode,
        stdout=_text(out, out_cut),
        stderr=_text(err, err_cut),
        duration_ms=duration_ms,
        timed_out=timed_out,
        pid=proc.pid,
    )


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S)
    except TimeoutError:
        pass
    _kill_group(proc.pid, signal.SIGKILL)
    await proc.wait()


def _text(data: bytes, cut: bool) -> str:
    text = data.decode("utf-8", errors="replace")
    return text + "\n[output truncated]" if cut else text


async def audit(db: Any, tool: str, outcome: ExecOutcome, chat_id: int | None) -> None:
    await db.execute(
        "insert into exec_audit(tool, command, exit_code, stdout, stderr, duration_ms, chat_id, created_at) "
        "values (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            tool,
            outcome.command,
            outcome.exit_code,
            outcome.stdout[:AUDIT_CAP],
            outcome.stderr[:AUDIT_CAP],
            outcome.duration_ms,
            chat_id,
            time.time(),
        ),
    )


def format_outcome(outcome: ExecOutcome, settings: ExecSettings) -> ToolResult:
    if outcome.timed_out:
        status = f"killed after {settings.timeout_s:g} s timeout"
    else:
        status = f"exit code {outcome.exit_code}"
    parts = [f"[{status}, {outcome.duration_ms} ms]"]
    # What a command prints may be anyone's words (a group's file, a downloaded document, a page curl got):
    # quoted with its origin, so whoever reads it (this turn, whose taint grows by it in the registry; the
    # owner's next turn, after a released /approve) is steered by nothing unnoticed (quoting.origins_in).
    where = outside_origin(outside("exec"))
    if outcome.stdout:
        parts.append(f"stdout:\n{quote_lines(outcome.stdout, where)}")
    if outcome.stderr:
        parts.append(f"stderr:\n{quote_lines(outcome.stderr, where)}")
    return ToolResult("\n".join(parts), is_error=outcome.timed_out or outcome.exit_code != 0)


def typed_command(command: str, typed: str) -> bool:
    """Whether ``command`` is exactly what the owner typed: their whole message, or a `code` span in it."""
    command = command.strip()
    found = re.findall(r"```(?:[a-z]*\n)?(.*?)```|`([^`\n]+)`", typed, re.DOTALL)
    spans = {part.strip() for pair in found for part in pair if part}
    return bool(command) and (command == typed.strip() or command in spans)


def exec_tools(settings: ExecSettings = ExecSettings()) -> list[Tool]:
    """The exec tool. Register it only when ``capabilities.exec.enabled`` is true."""

    async def run(command: str, deps: ToolDeps, chat_id: int) -> ToolResult:
        """Run ``command`` for the owner: audited, and what it writes where others read set aside."""
        workspace = deps.workspace
        await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
        # What the command writes where others read is set aside as the owner's (exec_sweep, issue 29).
        before = await asyncio.to_thread(exec_sweep.snapshot, workspace, deps.label_of_path)
        moved: list[exec_sweep.Moved] = []

        async def set_aside() -> None:
            moved.extend(
                await asyncio.to_thread(
                    exec_sweep.sweep, workspace, before, deps.label_of_path, run_id=exec_sweep.new_run_id()
                )
            )
            if not moved:
                return
            log.warning("exec_outputs_moved", paths=[m.path for m in moved], chat_id=chat_id)
            index = deps.knowledge
            if index is not None and hasattr(index, "reindex"):
                try:
                    await index.reindex()
                except Exception as exc:  # the files are moved; the watcher catches up
                    log.warning("exec_reindex_failed", error=str(exc))

        started = time.monotonic()
        try:
            outcome = await run_command(command, workspace, settings)
        except asyncio.CancelledError:
            # The turn's own tool timeout (or /stop) ended the run: the group is killed; still audit it.
            cancelled = ExecOutcome(command, None, "", "cancelled", int((time.monotonic() - started) * 1000), True, 0)
            await asyncio.shield(audit(deps.db, "exec", cancelled, chat_id))
            raise
        finally:
            await asyncio.shield(set_aside())  # also after a timeout, a failure or a cancel
        log.info(
            "exec",
            command=command[:200],
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            duration_ms=outcome.duration_ms,
            chat_id=chat_id,
        )
        await audit(deps.db, "exec", outcome, chat_id)
        result = format_outcome(outcome, settings)
        if moved:
            return ToolResult(f"{result.content}\n{exec_sweep.describe(moved)}", is_error=result.is_error)
        return result

    async def exec_command(args: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        if not ctx.clearance.is_owner:  # the registry hides it too; a widened scope must not open a shell
            return ToolResult.error("Commands run only for the owner, in the owner's own chat with me.")
        command = args["command"]
        # A turn that something steered runs only what the owner typed; anything else waits for the owner.
        _, stop = await gate(
            ctx, Outgoing("exec", command.encode(), typed=typed_command(command, ctx.typed), tool="exec")
        )
        return stop if stop is not None else await run(command, ctx.deps, ctx.chat.id)

    async def release_exec(item: Held, deps: ToolDeps) -> str:
        """A command the owner approved: exactly that one, once; its output is the answer to /approve."""
        result = await run(item.text, deps, item.from_chat_id)
        return f"ran it. {result.content}"

    return [
        Tool(
            name="exec",
            description=(
                "Run a shell command on the server in the workspace directory (scripts, git, ls, python, "
                "curl, system status). Returns exit code, stdout and stderr."
            ),
            input_schema=schema(
                {
                    "command": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 10_000,
                        "description": "the shell command line",
                    }
                },
                ("command",),
            ),
            handler=exec_command,
            scope="admin-only",
            category="system",
            owner_only=True,
            release=release_exec,
        )
    ]
