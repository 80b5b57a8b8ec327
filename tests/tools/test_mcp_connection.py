"""One MCP server connection, against a real server written with the SDK (tests/fakes/mcp_server.py):
stdio, Streamable HTTP and SSE; what the subprocess inherits; timeouts, crashes, errors, big and image
results."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from teleton.config.schema import McpServerConfig
from teleton.tools.mcp.connection import McpConnection, McpError
from tests.fakes.mcp_http import served

FAKE = str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")
TOOLS = {"add", "note", "linked", "environment", "stall", "fail", "picture", "big", "crash"}


def stdio(**extra: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[FAKE], **extra)


@pytest.fixture(params=["--http", "--sse"])
def http_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The fake served over HTTP on 127.0.0.1: (url, transport)."""
    with served(FAKE, request.param) as port:
        if request.param == "--http":
            yield f"http://127.0.0.1:{port}/mcp", "streamable_http"
        else:
            yield f"http://127.0.0.1:{port}/sse", "sse"


@pytest.fixture
async def fake() -> AsyncIterator[McpConnection]:
    conn = McpConnection("fake", stdio(timeout_s=2.0))
    await conn.start()
    yield conn
    await conn.close()


async def test_a_stdio_server_lists_its_tools_and_answers_a_call(fake: McpConnection) -> None:
    assert {tool.name for tool in fake.tools} == TOOLS
    add = next(tool for tool in fake.tools if tool.name == "add")
    assert add.description == "Add two integers."
    assert set(add.input_schema["properties"]) == {"a", "b"}
    outcome = await fake.call("add", {"a": 2, "b": 40})
    assert (outcome.text, outcome.is_error) == ("42", False)


async def test_an_http_server_answers_over_streamable_http_and_sse(http_server: tuple[str, str]) -> None:
    url, transport = http_server
    conn = McpConnection("web", McpServerConfig(url=url, transport=transport))  # type: ignore[arg-type]
    try:
        assert {tool.name for tool in await conn.start()} == TOOLS
        assert (await conn.call("add", {"a": 1, "b": 1})).text == "2"
    finally:
        await conn.close()


async def test_the_subprocess_inherits_none_of_telotons_secrets() -> None:
    """Checked from inside the server: only the allow-list and what the config names, ${NAME} expanded."""
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/owner",
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "TELETON_TELEGRAM__BOT_TOKEN": "123:abc",
        "OPENAI_API_KEY": "sk-open",
        "CAL_TOKEN": "cal-123",
    }
    conn = McpConnection("cal", stdio(env={"CALENDAR_TOKEN": "${CAL_TOKEN}", "MODE": "test"}), environ)
    await conn.start()
    try:
        seen = dict(line.split("=", 1) for line in (await conn.call("environment", {})).text.splitlines())
    finally:
        await conn.close()
    assert seen["CALENDAR_TOKEN"] == "cal-123" and seen["MODE"] == "test" and seen["HOME"] == "/home/owner"
    assert not {"ANTHROPIC_API_KEY", "TELETON_TELEGRAM__BOT_TOKEN", "OPENAI_API_KEY", "CAL_TOKEN"} & set(seen)
    assert "sk-ant-secret" not in str(seen.values())


async def test_an_unset_variable_is_one_line_naming_it() -> None:
    conn = McpConnection("cal", stdio(env={"TOKEN": "${NOT_SET_ANYWHERE}"}), {"PATH": "/usr/bin"})
    with pytest.raises(McpError) as caught:
        await conn.start()
    assert "${NOT_SET_ANYWHERE}" in str(caught.value) and "mcp.servers.cal.env.TOKEN" in str(caught.value)
    assert "\n" not in str(caught.value)


async def test_a_command_that_is_not_there_is_one_line() -> None:
    conn = McpConnection("gone", McpServerConfig(command="/nonexistent/mcp-server"))
    with pytest.raises(McpError) as caught:
        await conn.start()
    assert str(caught.value).startswith("MCP server 'gone':") and "\n" not in str(caught.value)


async def test_a_program_that_dies_before_it_answers_is_explained_by_its_last_words() -> None:
    """`teleton mcp add` reads no log: the one line it prints says why the program ended, redacted."""
    dying = "import sys; print('loading', file=sys.stderr); sys.exit('ModuleNotFoundError: No module named x')"
    conn = McpConnection("broken", McpServerConfig(command=sys.executable, args=["-c", dying]))
    with pytest.raises(McpError) as caught:
        await conn.start()
    said = str(caught.value)
    assert said.startswith("MCP server 'broken': Connection closed") and "\n" not in said
    assert said.endswith("its last line on stderr: ModuleNotFoundError: No module named x)")

    silent = McpConnection("silent", McpServerConfig(command=sys.executable, args=["-c", "pass"]))
    with pytest.raises(McpError) as caught:
        await silent.start()
    assert "saying nothing on stderr: is it an MCP server?" in str(caught.value)


async def test_a_call_that_hangs_ends_at_its_timeout_and_the_server_stays_usable(fake: McpConnection) -> None:
    stalled = await fake.call("stall", {"seconds": 30})
    assert stalled.is_error and stalled.text == "MCP server 'fake' did not answer within 2 s"
    assert (await fake.call("add", {"a": 1, "b": 2})).text == "3"


async def test_a_tool_error_and_a_bad_argument_come_back_as_errors(fake: McpConnection) -> None:
    failed = await fake.call("fail", {})
    assert failed.is_error and "the fake failed on purpose" in failed.text
    wrong = await fake.call("add", {"a": "not a number", "b": 1})
    assert wrong.is_error


async def test_a_server_that_dies_mid_call_ends_the_call_and_the_connection(fake: McpConnection) -> None:
    died = await fake.call("crash", {})
    assert died.is_error and died.text.startswith("MCP server 'fake'")
    await fake.wait_closed()  # noticed at once (the failed call pings), so the keeper can reconnect
    assert not fake.connected and fake.error
    after = await fake.call("add", {"a": 1, "b": 2})
    assert after.is_error and "not connected" in after.text


async def test_five_megabytes_arrive_whole_and_images_are_kept_apart() -> None:
    # Its own connection with the default call timeout: 5 MB over a pipe takes more than 2 s on a loaded machine.
    fake = McpConnection("fake", stdio())
    await fake.start()
    try:
        big = await fake.call("big", {"megabytes": 5})
        picture = await fake.call("picture", {})
    finally:
        await fake.close()
    assert len(big.text) == 5_000_000 and not big.is_error
    assert picture.text == "a red pixel\n[image 1: image/png, 70 bytes]"
    assert [(mime, data[:4]) for mime, data in picture.images] == [("image/png", b"\x89PNG")]
