"""`teleton mcp …`: the MCP servers of ``mcp.servers``, as the owner manages them from a shell.

``add`` connects once, shows every tool exactly as the model would be given it (``tools.mcp.review``: the
server's own words, untrusted; the owner's look at them before the model sees them), pins them as approved
and writes the config (mode 0600). ``test`` compares what a server lists now with its pins and changes
nothing; ``approve`` shows what waits whole and approves exactly that text (a prompt, or its code);
``remove`` drops an entry and its pins.
A command that changes what the daemon should offer sends a running daemon SIGHUP: it reconnects its servers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from teleton.cli.context import cli_config, opened, state
from teleton.cli.help_format import App
from teleton.cli.mcp_view import (
    HELD,
    Seen,
    compare,
    list_remote,
    live_servers,
    reload_daemon,
    server_tool,
    transport_of,
    visible,
)
from teleton.config import Config, default_config_path, read_config_file, write_config
from teleton.config.schema import McpConfig, McpServerConfig
from teleton.providers.extras import MissingExtra, require
from teleton.text.counts import counted
from teleton.tools.mcp import pins
from teleton.tools.mcp.connection import McpError, RemoteTool

app = App(help="MCP servers: add, list, test, remove, approve.", no_args_is_help=True)
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH")


def fail(line: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


def need_sdk(what: str) -> None:
    """The one line with the install command when the mcp extra is missing (exit 1)."""
    try:
        require("mcp", what)
    except MissingExtra as exc:
        fail(str(exc))


def listed(name: str, cfg: McpServerConfig) -> list[RemoteTool]:
    try:
        return asyncio.run(list_remote(name, cfg))
    except McpError as exc:
        fail(str(exc))


def config_file(ctx: typer.Context) -> Path:
    return (state(ctx).config_path or default_config_path()).expanduser()


def file_servers(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config file as written (no environment overrides, which must never land in it) and its servers."""
    raw = read_config_file(path) if path.exists() else {}
    return raw, dict((raw.get("mcp") or {}).get("servers") or {})


def write_servers(path: Path, raw: dict[str, Any], servers: dict[str, Any]) -> None:
    """``raw`` with ``mcp.servers`` replaced, every other key as it was; written 0600."""
    section = dict(raw.get("mcp") or {})
    section["servers"] = servers
    if not servers:
        section.pop("servers")
    raw = {**raw, "mcp": section} if section else {k: v for k, v in raw.items() if k != "mcp"}
    write_config(path, raw)


def pairs(values: list[str] | None, option: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():  # the item itself is not echoed: it may be a secret typed alone
            fail(f"{option} takes KEY=VALUE; one value had no KEY=", 2)
        found[key.strip()] = value
    return found


def validated(name: str, entry: dict[str, Any]) -> McpServerConfig:
    """The entry as the schema reads it; its problems on one line (exit 2). No input value is echoed."""
    try:
        return McpConfig.model_validate({"servers": {name: entry}}).servers[name]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(["mcp", *(str(part) for part in err["loc"])])
            problems.append(f"{where}: {str(err['msg']).removeprefix('Value error, ')}")
        fail("; ".join(problems), 2)


def show_tools(name: str, seen: list[Seen]) -> None:
    # Deferred: the tool layer (see mcp_view).
    from teleton.tools.mcp.review import given_description
    from teleton.tools.mcp.tools import tool_name

    width = max(len(tool_name(name, s.tool.name)) for s in seen)
    for s in seen:
        said = visible(given_description(name, s.tool.description))
        typer.echo(f"  {tool_name(name, s.tool.name):<{width}}  {s.status:<10}  {said}")
        if s.was is not None:
            typer.echo(f"  {'':<{width}}  {'':<10}  pinned: {visible(given_description(name, s.was))}")


def review_of(name: str, tools: list[RemoteTool], why: str, *, footer: bool = True) -> str:
    """Exactly what the model would be given of ``tools``, whole (``tools.mcp.review``)."""
    # Deferred: the tool layer (see mcp_view).
    from teleton.tools.mcp.pins import Pin, tool_digest
    from teleton.tools.mcp.review import review
    from teleton.tools.mcp.tools import tool_name

    shown = [Pin(t.name, tool_digest(t), "pending", t.description, t.input_schema) for t in tools]
    return review(name, shown, why=why, tool_name=tool_name, footer=footer)


@app.command("add")
def add_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Its name: a-z, 0-9 and _, a letter first; tools are mcp_NAME_TOOL.")],
    command: Annotated[
        list[str] | None, typer.Argument(help="After --: the program to start and its arguments (stdio).")
    ] = None,
    url: Annotated[str | None, typer.Option(help="A server to reach instead: Streamable HTTP, or SSE.")] = None,
    transport: Annotated[str, typer.Option(help="With --url: streamable_http or sse.")] = "streamable_http",
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="KEY=VALUE in the server's environment (repeatable). For a secret write KEY='${VAR}' (single "
            "quotes): VAR is read from Teleton's environment at connect time; the file holds only its name.",
        ),
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="KEY=VALUE, an HTTP header (repeatable; '${VAR}' too).")
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Its tools only read: a call is never held as a way out.")
    ] = False,
    access: Annotated[str, typer.Option(help="Who may use it: owner, admins or everyone.")] = "owner",
    label: Annotated[str, typer.Option(help="Whose its results are: owner or public (needed beyond owner).")] = "owner",
) -> None:
    """Connect to a server, show its tools as it describes them, pin them and add it to the config.

    `teleton mcp add files -- npx -y @modelcontextprotocol/server-filesystem ~/notes`, or
    `teleton mcp add search --url https://example.org/mcp --header 'Authorization=Bearer ${SEARCH_TOKEN}'`."""
    if not command and url is None:
        fail("say what to start (`-- COMMAND [ARGS...]`) or where the server is (`--url URL`)", 2)
    if transport != "streamable_http" and url is None:
        fail("--transport goes with --url (a command always speaks stdio)", 2)
    entry = entry_of(command, url, transport, pairs(env, "--env"), pairs(header, "--header"))
    extras = {"read_only": read_only or None, "access": access, "label": label}
    entry.update({key: value for key, value in extras.items() if value not in (None, "owner")})
    cfg = validated(name, entry)
    config, path = cli_config(ctx), config_file(ctx)
    if name in config.mcp.servers:
        fail(f"an MCP server named {name} is already configured (`teleton mcp remove {name}` first)", 2)
    raw, servers = file_servers(path)
    need_sdk("teleton mcp add")
    # Deferred: the tool layer (see mcp_view).
    from teleton.tools.mcp.servers import usable_tools

    remote = listed(name, cfg)
    kept, refused = usable_tools(name, cfg, remote)
    kept = kept[: min(config.mcp.max_tools_per_server, config.mcp.max_tools)]
    typer.echo(f"MCP server {name} lists {counted(len(remote), 'tool')}.")
    if kept:
        typer.echo(review_of(name, kept, "read what it tells the model before it does.", footer=False))
    for line in refused:
        typer.echo(f"  left out: {visible(line)}")
    asyncio.run(pin_first(config, name, kept))
    write_servers(path, raw, {**servers, name: entry})
    typer.echo(f"pinned {counted(len(kept), 'tool')} as approved, as shown above; one that later changes what it "
               f"says waits for `teleton mcp approve {name}`")  # fmt: skip
    typer.echo(f"added {name} to {path} (mode 0600)")
    given = {**entry.get("env", {}), **entry.get("headers", {})}
    written = [key for key, value in given.items() if "${" not in value and looks_secret(key)]
    if written:
        typer.echo(f"note: the value of {', '.join(written)} is in the file; to keep it out write KEY='${{VAR}}'")
    typer.echo(reload_daemon(config))


def entry_of(
    command: list[str] | None, url: str | None, transport: str, env: dict[str, str], headers: dict[str, str]
) -> dict[str, Any]:
    """The config entry, with only what was given (the file stays as short as a hand-written one)."""
    entry: dict[str, Any] = {}
    if command:  # a relative program path in full: the daemon starts it from its own working directory
        entry["command"] = os.path.abspath(command[0]) if "/" in command[0] else command[0]
    if command and command[1:]:
        entry["args"] = command[1:]
    if url is not None:
        entry["url"] = url
    if transport != "streamable_http":
        entry["transport"] = transport
    entry |= {key: found for key, found in (("env", env), ("headers", headers)) if found}
    return entry


def looks_secret(key: str) -> bool:
    return any(word in key.upper() for word in SECRET_WORDS)


async def pin_first(config: Config, name: str, tools: list[RemoteTool]) -> None:
    """Pins from an earlier entry of the same name are dropped: what is pinned is what the owner just saw."""
    async with opened(config) as db:
        await pins.pin_approved(db, name, tools)


@app.command("list")
def list_cmd(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False
) -> None:
    """Every configured server: how it is reached, who may use it, its pinned tools and the daemon's view."""
    config = cli_config(ctx)
    pinned = pins.stored(config.storage.database_file)
    live = live_servers(config)
    rows = {}
    for name, cfg in config.mcp.servers.items():
        row = {**transport_of(cfg), "enabled": cfg.enabled, "access": cfg.access, "label": cfg.label}
        row |= {"read_only": cfg.read_only, "env": sorted(cfg.env), "headers": sorted(cfg.headers)}
        row["tools"] = {tool: pin.state for tool, pin in sorted(pinned.get(name, {}).items())}
        row["daemon"] = None if live is None else live.get(name)
        rows[name] = row
    if as_json:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not rows:
        typer.echo("no MCP servers configured: add one with `teleton mcp add NAME -- COMMAND [ARGS...]`")
    for name, row in rows.items():
        typer.echo("\n".join(describe_row(name, row, daemon_runs=live is not None)))


def describe_row(name: str, row: dict[str, Any], *, daemon_runs: bool) -> list[str]:
    where = f"{row['url']} ({row['transport']})" if row["url"] else " ".join([row["command"], *row["args"]])
    env = f" (env {', '.join(row['env'])})" if row["env"] else ""
    flags = ["enabled" if row["enabled"] else "disabled", f"access {row['access']}", f"label {row['label']}"]
    lines = [f"{name}: {where}{env}", "  " + ", ".join([*flags, "read-only" if row["read_only"] else "read-write"])]
    daemon = row["daemon"]
    if not daemon_runs:
        lines.append("  daemon: not running")
    elif daemon is None:
        lines.append("  daemon: not loaded (`systemctl reload teleton`)" if row["enabled"] else "  daemon: off")
    else:
        lines.append(f"  daemon: {daemon['state']}, {counted(len(daemon['tools']), 'tool')} offered"
                     + (f"; last error: {daemon['error']}" if daemon.get("error") else ""))  # fmt: skip
    by_state: dict[str, list[str]] = {}
    for tool, pin_state in row["tools"].items():
        by_state.setdefault(pin_state, []).append(visible(tool))
    if not by_state:
        lines.append("  no tools pinned yet: the first connect pins them")
    for pin_state, tools in sorted(by_state.items()):
        hint = f" (teleton mcp approve {name})" if pin_state == "pending" else ""
        lines.append(f"  {pin_state}{hint}: {', '.join(tools)}")
    return lines


@app.command("test")
def test_cmd(ctx: typer.Context, name: Annotated[str, typer.Argument(help="A configured server.")]) -> None:
    """Connect and list its tools against their pins (as pinned, pending, changed, new); call nothing, change
    nothing."""
    config = cli_config(ctx)
    cfg = config.mcp.servers.get(name)
    if cfg is None:
        fail(f"no MCP server {name!r} is configured (`teleton mcp list` shows them)", 2)
    need_sdk("teleton mcp test")
    remote = listed(name, cfg)
    seen = compare(name, cfg, remote, pins.stored(config.storage.database_file).get(name, {}))
    state_note = "" if cfg.enabled else " (disabled in the config)"
    typer.echo(f"MCP server {name}{state_note} answered with {counted(len(remote), 'tool')}:")
    if seen:
        show_tools(name, seen)
    held = [s for s in seen if s.status in HELD]
    if held:
        typer.echo(f"{len(held)} new or changed: kept from the model until approved (`teleton mcp approve {name}`, "
                   "once the daemon has seen them)")  # fmt: skip
    typer.echo("nothing was called; no pin changed")


@app.command("remove")
def remove_cmd(ctx: typer.Context, name: Annotated[str, typer.Argument(help="A configured server.")]) -> None:
    """Drop a server from the config and forget its pins (added again, it starts from a first connect)."""
    config, path = cli_config(ctx), config_file(ctx)
    raw, servers = file_servers(path)
    if servers.pop(name, None) is None:
        fail(f"no MCP server {name!r} in {path} (`teleton mcp list` shows them)", 2)
    write_servers(path, raw, servers)
    count = len(pins.stored(config.storage.database_file).get(name, {}))
    asyncio.run(forget(config, name))
    typer.echo(f"removed {name} from {path} and forgot its {count} pinned tools")
    typer.echo(reload_daemon(config))


async def forget(config: Config, name: str) -> None:
    async with opened(config) as db:
        await pins.forget(db, name)


@app.command("approve")
def approve_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A configured server.")],
    tool: Annotated[str | None, typer.Argument(help="One tool (its name or mcp_NAME_TOOL); default: all.")] = None,
    code: Annotated[
        str | None, typer.Option(help="The code printed with what waits: approves exactly that text, unasked.")
    ] = None,
) -> None:
    """Show what waits for approval (new, changed or unreviewed tools) exactly as the model would be given it,
    and approve that text: at the prompt, or with --code."""
    config = cli_config(ctx)
    pinned = pins.stored(config.storage.database_file).get(name, {})
    if name not in config.mcp.servers and not pinned:
        fail(f"no MCP server {name!r} is configured (`teleton mcp list` shows them)", 2)
    wanted = server_tool(name, tool, pinned) if tool is not None else None
    waiting = [pin for pin in pinned.values() if pin.state in pins.WAITING and wanted in (None, pin.tool)]
    if not waiting:
        typer.echo(f"nothing waits for approval on {name}" + (f" named {visible(tool)}" if tool else ""))
        return
    # Deferred: the tool layer (see mcp_view).
    from teleton.tools.mcp.review import review
    from teleton.tools.mcp.tools import tool_name

    typer.echo(review(name, waiting, why="these tools wait for your approval.", tool_name=tool_name, footer=False))
    shown = pins.approval_code(name, waiting)
    if code is None:
        if not sys.stdin.isatty():
            typer.echo(f"nothing approved: approve exactly this with `teleton mcp approve {name}"
                       + (f" {wanted}" if wanted else "") + f" --code {shown}`")  # fmt: skip
            raise typer.Exit(1)
        if not typer.confirm("Approve exactly this?", default=False):
            typer.echo("nothing approved")
            raise typer.Exit(1)
        code = shown
    approved = asyncio.run(approve(config, name, code, wanted))
    if approved is None:
        fail("that is not the code of what waits now (it changed since it was shown): nothing approved", 1)
    typer.echo(f"approved {len(approved)}: {', '.join(tool_name(name, t) for t in approved)}")
    typer.echo(reload_daemon(config))


async def approve(config: Config, name: str, code: str, tool: str | None) -> list[str] | None:
    async with opened(config) as db:
        return await pins.approve(db, name, code, tool)
