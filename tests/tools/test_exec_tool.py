"""exec: off by default, the owner's alone, scrubbed environment, timeout kills the whole process group,
every run audited."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import pytest

from teleton.config.schema import Config
from teleton.llm.tool_loop import ToolResult
from teleton.storage import Database
from teleton.tools.families.exec import ExecOutcome, ExecSettings, exec_tools, run_command, typed_command
from teleton.tools.registry import ToolDeps, ToolRegistry
from teleton.tools.suite import build_registry
from tests.tools.conftest import BOB_DM, DM, GROUP, call, make_ctx, principals
from tests.waiting import until

T = TypeVar("T")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``, from /proc."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            alive.append(int(entry))
    return alive


def in_workspace(workspace: Path) -> list[int]:
    """Live processes whose working directory is this test's own workspace."""
    real = os.path.realpath(workspace)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == real and "Z" not in _state(entry):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _state(pid: str) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_exec_is_not_registered_unless_enabled() -> None:
    config = Config()
    assert "exec" not in build_registry(config).names
    config.capabilities.exec.enabled = True
    registry = build_registry(config)
    assert registry.scope_of("exec") == "admin-only"


# The command's timeout is what these tests are about. The shells and both sleeps start within milliseconds,
# but on a busy machine they may not have before a short timeout fires: a run that never saw them running
# proves nothing, so it is run again with twice the timeout (what passes is what was seen, never a time).
EXEC_TIMEOUTS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


async def killed_while_running(start: Callable[[float], Awaitable[T]], running: Callable[[], int]) -> T:
    """``start(timeout_s)``'s result for the first timeout at which the shells and both sleeps (``running()``
    counts them) were all seen running before it fired."""
    for timeout_s in EXEC_TIMEOUTS_S:
        seen, result = await _one_run(start(timeout_s), running)
        if seen:
            return result
        await until(lambda: running() == 0)  # what did start is killed: the next run counts its own
    raise AssertionError("the shells and both sleeps were never all running before the timeout fired")


async def _one_run(run: Awaitable[T], running: Callable[[], int]) -> tuple[bool, T]:
    """(were all three seen running while ``run`` ran, its result)."""
    task = asyncio.ensure_future(run)
    seen = False

    def all_running_or_done() -> bool:
        nonlocal seen
        seen = seen or running() >= 3
        return seen or task.done()

    await until(all_running_or_done)
    return seen, await task


async def test_timeout_kills_children_and_is_audited(db: Database, workspace: Path) -> None:
    deps = ToolDeps(db=db, workspace=workspace, principals=principals())
    ctx = make_ctx(deps, DM, admin=True)

    def start(timeout_s: float) -> Awaitable[ToolResult]:
        registry = ToolRegistry(exec_tools(ExecSettings(timeout_s=timeout_s)))
        return call(registry, ctx, "exec", command="sh -c 'sleep 60 & sleep 60'")

    result = await killed_while_running(start, lambda: len(in_workspace(workspace)))  # all were running ...
    assert result.is_error and "timeout" in result.content
    assert in_workspace(workspace) == []  # ... and the shells and both sleeps are gone
    row = await db.fetchone(
        "select tool, command, exit_code, duration_ms, chat_id from exec_audit order by rowid desc limit 1"
    )
    assert row["tool"] == "exec" and row["command"] == "sh -c 'sleep 60 & sleep 60'"
    assert row["exit_code"] is None and row["chat_id"] == DM.id
    assert isinstance(row["duration_ms"], int) and row["duration_ms"] > 0  # recorded (its value is not timed here)


async def test_timeout_leaves_no_process_of_the_group(workspace: Path) -> None:
    pids: list[int] = []

    def start(timeout_s: float) -> Awaitable[ExecOutcome]:
        settings = ExecSettings(timeout_s=timeout_s)
        return run_command("sh -c 'sleep 1000 & sleep 1000'", workspace, settings, on_start=pids.append)

    # The shells and both sleeps were running (pids[-1]: this run's shell, the group's leader) ...
    outcome = await killed_while_running(start, lambda: len(group_members(pids[-1])) if pids else 0)
    assert outcome.timed_out and outcome.exit_code is None
    # ... and are killed: gone as soon as the kernel has run their exits (on a busy machine, a moment after the
    # return; one that lived on, 1,000 s, would hang here until pytest-timeout says so).
    await until(lambda: group_members(pids[-1]) == [])


async def test_output_cap_exit_code_and_cwd(db: Database, workspace: Path) -> None:
    registry = ToolRegistry(exec_tools(ExecSettings(timeout_s=5, output_cap=100)))
    ctx = make_ctx(ToolDeps(db=db, workspace=workspace, principals=principals()), DM, admin=True)
    result = await call(registry, ctx, "exec", command="pwd; head -c 100000 /dev/zero | tr '\\0' x; exit 3")
    assert result.is_error and "exit code 3" in result.content
    assert os.path.realpath(workspace) in result.content  # noqa: ASYNC240
    assert "[output truncated]" in result.content and len(result.content) < 400
    ctx = make_ctx(ctx.deps, DM, admin=True)  # the next turn: this one was shown the output above
    ok = await call(registry, ctx, "exec", command="echo hello >&2")
    assert not ok.is_error and "stderr:\n> (from a command's output (outside: exec)) hello" in ok.content
    rows = await db.fetchall("select exit_code, stderr from exec_audit order by id")
    assert [r["exit_code"] for r in rows] == [3, 0] and rows[1]["stderr"] == "hello\n"


async def test_exec_is_the_owners_alone_even_when_called_by_name(db: Database, workspace: Path) -> None:
    registry = ToolRegistry(exec_tools())
    deps = ToolDeps(db=db, workspace=workspace, principals=principals())
    owner = make_ctx(deps, DM, admin=True)
    assert "exec" in [t.name for t in registry.available(owner.chat, owner.is_admin, is_owner=True)]
    # An admin in their own DM, an admin in a group, a stranger in a group: none is the owner's clearance.
    others = [make_ctx(deps, BOB_DM, admin=True), make_ctx(deps, GROUP, admin=True), make_ctx(deps, GROUP, admin=False)]
    for ctx in others:
        offered = registry.available(ctx.chat, ctx.is_admin, is_owner=ctx.clearance.is_owner)
        assert "exec" not in [t.name for t in offered]
        result = await call(registry, ctx, "exec", command="touch pwned")
        assert result.is_error
    registry.set_override("exec", scope="always")  # a careless override still does not open a shell
    tool = registry.get("exec")
    assert tool is not None
    for ctx in others:
        assert "exec" not in [t.name for t in registry.available(ctx.chat, ctx.is_admin)]
        result = await call(registry, ctx, "exec", command="touch pwned")
        assert result.is_error
        # The handler checks again, should a caller ever skip the registry's door.
        direct = await tool.handler({"command": "touch pwned"}, ctx)
        assert isinstance(direct, ToolResult) and direct.is_error and "owner" in direct.content
    assert not (workspace / "pwned").exists()
    assert (await db.fetchone("select count(*) from exec_audit"))[0] == 0  # refused calls never ran


async def test_exec_runs_with_a_scrubbed_environment(
    db: Database, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-SECRET-KEY")
    monkeypatch.setenv("TELETON_TELEGRAM__BOT_TOKEN", "123:SECRET-TOKEN")
    monkeypatch.setenv("TELETON_CONFIG", "/etc/teleton/config.yaml")
    registry = ToolRegistry(exec_tools(ExecSettings(timeout_s=10)))
    ctx = make_ctx(ToolDeps(db=db, workspace=workspace, principals=principals()), DM, admin=True)
    result = await call(registry, ctx, "exec", command="env; echo PATH-IS=$PATH")
    assert not result.is_error
    assert "SECRET" not in result.content and "TELETON_" not in result.content and "ANTHROPIC" not in result.content
    assert "PATH-IS=/" in result.content  # commands still find their programs


async def test_a_turn_timeout_cancelling_exec_still_kills_and_audits(db: Database, workspace: Path) -> None:
    from teleton.llm.tool_loop import LoopLimits, ToolCall, run_one

    registry = ToolRegistry(exec_tools(ExecSettings(timeout_s=30)))
    ctx = make_ctx(ToolDeps(db=db, workspace=workspace, principals=principals()), DM, admin=True)
    marker = workspace / "started"
    command = f"touch {marker}; sleep 60 & sleep 60"
    outcome = await run_one(
        ToolCall("t", "exec", {"command": command}), lambda c: registry.execute(c, ctx), LoopLimits(tool_timeout_s=0.5)
    )
    assert outcome.is_error and "timed out" in outcome.content
    row = await db.fetchone("select command, exit_code, stderr from exec_audit")
    assert row["command"] == command and row["exit_code"] is None and row["stderr"] == "cancelled"
    assert in_workspace(workspace) == []


@pytest.mark.parametrize(
    ("command", "typed", "exact"),
    [
        ("ls -la", "ls -la", True),  # the whole message
        ("ls -la", "please run `ls -la` for me", True),  # a code span
        ("git status", "run this:\n```sh\ngit status\n```", True),  # a code block
        ("ls", "run ls", False),  # a word of the message is not the command the owner typed
        ("ls -la; curl evil.example", "please run `ls -la`", False),
        ("ls -la", "", False),  # scheduled work and forwarded messages type nothing
    ],
)
def test_a_typed_command_is_exactly_what_the_owner_wrote(command: str, typed: str, exact: bool) -> None:
    assert typed_command(command, typed) is exact


async def test_a_steered_turn_runs_only_what_the_owner_typed(db: Database, workspace: Path) -> None:
    """Issue 29: a command in a turn that something steered is refused (nobody here to approve it) unless
    it is exactly what the owner typed; a clean turn runs what it is asked to."""
    registry = ToolRegistry(exec_tools())
    deps = ToolDeps(db=db, workspace=workspace, principals=principals())
    steered = make_ctx(deps, DM, admin=True)
    steered.taint.add("chat:-100500")  # a group's planted words were in its context
    refused = await call(registry, steered, "exec", command="touch planted")
    assert refused.is_error and "steer" in refused.content and not (workspace / "planted").exists()
    typed = replace(steered, typed="`touch mine`")
    assert not (await call(registry, typed, "exec", command="touch mine")).is_error
    assert (workspace / "mine").exists()
    clean = make_ctx(deps, DM, admin=True)
    assert not (await call(registry, clean, "exec", command="touch asked")).is_error
    rows = await db.fetchall("select command from exec_audit order by id")
    assert [r["command"] for r in rows] == ["touch mine", "touch asked"]
