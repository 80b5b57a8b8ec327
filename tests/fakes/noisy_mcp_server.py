"""A noisy MCP server written with the SDK, for the log tests: ``python noisy_mcp_server.py`` serves stdio,
``--http PORT`` Streamable HTTP on 127.0.0.1.

Steered by its environment (so a test also proves what the client passed):
- ``ECHO_VALUE``: printed on stderr when it starts (a server echoing the secret it was given).
- ``FLOOD_MB``: that many megabytes of stderr lines (each also quoting ``ECHO_VALUE``, and one line of 2 MB
  with no break) are written before it serves; with ``FLOOD_MARK``, only when that file does not exist yet
  (it is created), and the server then exits without serving: the next start serves.
- ``EXPECT_API_KEY`` / ``EXPECT_HEADER`` (HTTP): a request without ``?api_key=EXPECT_API_KEY`` and
  ``X-Api-Key: EXPECT_HEADER`` is refused with 401.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from mcp.server.mcpserver import MCPServer

FLOOD_LINE = 100  # bytes of one flood line, its newline included
LONG_LINE = 2_000_000  # one line longer than any reader's buffer

app = MCPServer("noisy")


@app.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


def flood(megabytes: float, echo: str) -> int:
    """Write the flood to stderr; the number of lines written."""
    out = sys.stderr.buffer
    total, lines = int(megabytes * 1_000_000), 0
    out.write(b"a long line " + b"y" * LONG_LINE + b"\n")
    written, lines = LONG_LINE, 1
    while written < total:
        head = f"flood line {lines} token={echo} ".encode()
        out.write(head + b"x" * max(0, FLOOD_LINE - 1 - len(head)) + b"\n")
        written, lines = written + FLOOD_LINE, lines + 1
    out.flush()
    return lines


def guarded(inner: Any, api_key: str, header: str) -> Any:
    """``inner`` (an ASGI app) behind the query key and header check."""

    async def app_(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            query = parse_qs(scope.get("query_string", b"").decode())
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            if query.get("api_key") != [api_key] or headers.get("x-api-key") != header:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no key"})
                return
        await inner(scope, receive, send)

    return app_


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    echo = os.environ.get("ECHO_VALUE", "")
    print(f"noisy MCP server starting; my token is {echo}", file=sys.stderr, flush=True)
    if os.environ.get("FLOOD_MB"):
        mark = os.environ.get("FLOOD_MARK")
        if mark is None or not Path(mark).exists():
            lines = flood(float(os.environ["FLOOD_MB"]), echo)
            if mark is not None:
                Path(mark).write_text(str(lines))  # how many lines, for the test's count
                os._exit(1)
    if args.http:
        import uvicorn

        inner = app.streamable_http_app()
        api = guarded(inner, os.environ.get("EXPECT_API_KEY", ""), os.environ.get("EXPECT_HEADER", ""))
        uvicorn.run(api, host="127.0.0.1", port=args.http, log_level="warning", lifespan="on")
    else:
        app.run()


if __name__ == "__main__":
    main()
