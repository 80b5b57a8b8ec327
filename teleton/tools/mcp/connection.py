"""One connection to one MCP server, on the official SDK (``mcp``, the ``mcp`` extra; docs/mcp.md).

The SDK's transports and session must be entered and left by one task, so a connection is a task that owns
them: it connects, lists the tools, then pings every ``PING_S`` until closed or the server goes away
(``wait_closed``; ``servers.McpServers`` reconnects). Calls are bounded by the server's ``timeout_s``. A stdio
server's environment is the child allow-list plus its ``env`` (``${NAME}`` read at connect time, its value
redacted from the log), never Teleton's secrets; its stderr is logged line by line, cut and rate-limited.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from teleton.config.schema import McpServerConfig
from teleton.process import redaction
from teleton.process.child_env import scrubbed_env
from teleton.providers.extras import require
from teleton.text.lines import reason
from teleton.tools.mcp.stderr import StderrLimiter, stderr_to_log

log = structlog.get_logger(__name__)

PING_S = 15.0
STDERR_DRAIN_S = 2.0  # the most a failed start waits for the rest of the program's stderr
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpError(Exception):
    """A server could not be reached or answered wrongly; ``str(exc)`` is one line naming the server."""


@dataclass(frozen=True)
class RemoteTool:
    """A tool as the server lists it (its description is untrusted input)."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class CallOutcome:
    text: str
    is_error: bool = False
    images: tuple[tuple[str, bytes], ...] = ()  # (mime type, bytes) of image blocks in the result


@dataclass
class _Live:
    session: Any
    tools: list[RemoteTool] = field(default_factory=list)


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """``value`` with each ``${NAME}`` read from ``environ``; McpError naming the variable when it is unset.

    Every value read is remembered by the redaction: a server that echoes it (on its stderr, in an error)
    never puts it in a log line."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise McpError(f"{where} names ${{{name}}}, which is not set in Teleton's environment")
        redaction.remember(environ[name])
        return environ[name]

    return _REF.sub(one, value)


def references(value: str) -> list[str]:
    """The environment variables ``value`` names as ``${NAME}`` (what ``teleton doctor`` checks are set)."""
    return _REF.findall(value)


def server_env(name: str, cfg: McpServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a stdio server: the allow-list and its config's ``env``, nothing else."""
    source = os.environ if environ is None else environ
    env = scrubbed_env(source)
    for key, value in cfg.env.items():
        env[key] = expand(value, source, f"mcp.servers.{name}.env.{key}")
    return env


class McpConnection:
    def __init__(self, name: str, cfg: McpServerConfig, environ: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.cfg = cfg
        self._environ = os.environ if environ is None else environ
        self._live: _Live | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()  # a call failed: ping now rather than at the next round
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.error: str | None = None  # why it closed, when it did not close on request
        self._stderr = StderrLimiter(name)

    @property
    def tools(self) -> list[RemoteTool]:
        return [] if self._live is None else list(self._live.tools)

    @property
    def connected(self) -> bool:
        return self._live is not None and not self._closed.is_set()

    async def start(self) -> list[RemoteTool]:
        """Connect and list the tools within ``connect_timeout_s``; McpError (one line) when it cannot."""
        require("mcp", f"MCP server {self.name!r} (mcp.servers)")
        ready: asyncio.Future[list[RemoteTool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name=f"mcp-{self.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), timeout=self.cfg.connect_timeout_s)
        except TimeoutError:
            await self.close()
            raise McpError(f"MCP server {self.name!r} did not answer within {self.cfg.connect_timeout_s:g} s") from None
        except McpError:
            await self.close()
            raise

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=5.0)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
        self._closed.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallOutcome:
        """Call ``tool``; a timeout, a dead server or a protocol error comes back as a one-line error."""
        live = self._live
        if live is None or self._closed.is_set():
            return CallOutcome(f"MCP server {self.name!r} is not connected ({self.error or 'starting'})", True)
        call = asyncio.ensure_future(live.session.call_tool(tool, arguments))
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            done, _ = await asyncio.wait({call, closed}, timeout=self.cfg.timeout_s, return_when="FIRST_COMPLETED")
        except asyncio.CancelledError:  # the turn's own tool timeout or /stop: the request goes too
            call.cancel()
            raise
        finally:
            closed.cancel()
        if call not in done:
            call.cancel()
            if closed in done:
                return CallOutcome(f"MCP server {self.name!r} went away during the call ({self.error})", True)
            log.warning("mcp_call_timeout", server=self.name, tool=tool, timeout_s=self.cfg.timeout_s)
            return CallOutcome(f"MCP server {self.name!r} did not answer within {self.cfg.timeout_s:g} s", True)
        try:
            return result_outcome(call.result())
        except Exception as exc:  # the server's error reply, or the connection ending mid-call
            self._wake.set()
            return CallOutcome(f"MCP server {self.name!r}: {first_reason(exc)}", True)

    async def _run(self, ready: asyncio.Future[list[RemoteTool]]) -> None:
        try:
            async with self._session() as session:
                tools = await list_tools(session)
                self._live = _Live(session, tools)
                ready.set_result(tools)
                await self._keep(session)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # anyio wraps errors in groups; the reason is the first leaf
            self.error = first_reason(exc)
            if self.error == "Connection closed" and self.cfg.command is not None and not ready.done():
                self.error += await self._last_words()
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {self.name!r}: {self.error}"))
            elif not self._stop.is_set():
                log.warning("mcp_server_lost", server=self.name, error=self.error)
        finally:
            self._live = None
            self._closed.set()

    async def _last_words(self) -> str:
        """Why a program ended before it answered, in its own last line on stderr (read to its end first)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stderr.ended.wait(), timeout=STDERR_DRAIN_S)
        if last := self._stderr.last:
            return f" (the program ended before it answered; its last line on stderr: {last})"
        return " (the program ended before it answered, saying nothing on stderr: is it an MCP server?)"

    async def _keep(self, session: Any) -> None:
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            while not self._stop.is_set():
                wake = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({stop, wake}, timeout=PING_S, return_when="FIRST_COMPLETED")
                wake.cancel()
                self._wake.clear()
                if self._stop.is_set():
                    return
                await asyncio.wait_for(session.send_ping(), timeout=self.cfg.connect_timeout_s)
        finally:
            stop.cancel()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[Any]:
        from mcp import ClientSession  # the mcp extra, loaded when a server is configured (start's `require`)

        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(stack))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            yield session

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        cfg = self.cfg
        if cfg.command is not None:
            # The mcp extra, as in _session.
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=cfg.command, args=cfg.args, env=server_env(self.name, cfg, self._environ)
            )
            self._stderr = StderrLimiter(self.name)
            return stdio_client(params, errlog=stack.enter_context(stderr_to_log(self.name, self._stderr)))
        # The mcp extra, as in _session.
        import httpx2
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        url = str(cfg.url)
        headers = {
            key: expand(value, self._environ, f"mcp.servers.{self.name}.headers.{key}")
            for key, value in cfg.headers.items()
        }
        if cfg.transport == "sse":
            return sse_client(url, headers=headers, timeout=cfg.connect_timeout_s, sse_read_timeout=PING_S * 20)
        timeout = httpx2.Timeout(cfg.connect_timeout_s, read=max(cfg.timeout_s, PING_S * 2))
        client = httpx2.AsyncClient(headers=headers, timeout=timeout)
        stack.push_async_callback(client.aclose)
        return streamable_http_client(url, http_client=client)


async def list_tools(session: Any) -> list[RemoteTool]:
    from mcp import types  # the mcp extra, as in McpConnection._session

    tools: list[RemoteTool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            tools.append(RemoteTool(tool.name, tool.description or "", dict(tool.input_schema or {})))
        cursor = page.next_cursor
        if not cursor or len(tools) > 1000:
            return tools


def result_outcome(result: Any) -> CallOutcome:
    """An SDK ``CallToolResult`` as text (and images): what the model is shown of it."""
    parts: list[str] = []
    images: list[tuple[str, bytes]] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            data = base64.b64decode(block.data)
            images.append((block.mime_type, data))
            parts.append(f"[image {len(images)}: {block.mime_type}, {len(data)} bytes]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(
                f"[resource {resource.uri}]\n{text}"
                if text is not None
                else f"[resource {resource.uri}: {resource.mime_type or 'binary'}, not shown]"
            )
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}: {block.name}]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return CallOutcome("\n".join(parts) or "(no output)", bool(result.is_error), tuple(images))


def first_reason(exc: BaseException) -> str:
    """The first real reason inside ``exc`` (anyio's exception groups nest it), on one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return reason(exc, 300)
