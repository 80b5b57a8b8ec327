"""One redaction rule for every log line: URL query values, header secrets and values read from the
environment for ``${NAME}`` never reach a log line, from structlog or a stdlib logger (httpx2 included)."""

from __future__ import annotations

import io
import json
import logging

import httpx2
import pytest
import structlog

from teleton.process import redaction
from teleton.tools.mcp.connection import expand

QUERY_SECRET = "q5ecret-9f8e7d"
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.sig"
API_KEY = "k3y-abcdef123456"
FROM_ENV = "env-value-7c6b5a"


def records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f'HTTP Request: POST http://127.0.0.1:8080/mcp?api_key={QUERY_SECRET}&v=2 "HTTP/1.1 200 OK"',
            'HTTP Request: POST http://127.0.0.1:8080/mcp?api_key=[redacted]&v=[redacted] "HTTP/1.1 200 OK"',
        ),
        (f"POST /mcp?session={QUERY_SECRET} HTTP/1.1", "POST /mcp?session=[redacted] HTTP/1.1"),
        (f"https://user:{QUERY_SECRET}@example.org/x", "https://user:[redacted]@example.org/x"),
        (f"Authorization: Bearer {BEARER}", "Authorization: Bearer [redacted]"),
        (f"sent X-Api-Key: {API_KEY}, got 401", "sent X-Api-Key: [redacted], got 401"),
        (
            f"headers={{'authorization': 'Basic {API_KEY}', 'x-auth-token': '{API_KEY}'}}",
            "headers={'authorization': 'Basic [redacted]', 'x-auth-token': '[redacted]'}",
        ),
        (f'{{"access_token": "{BEARER}", "n": 1}}', '{"access_token": "[redacted]", "n": 1}'),
        (f"Cookie: sid={API_KEY}; theme=dark", "Cookie: [redacted]"),
        # What is no secret stays as it was.
        ("max_tokens: 4096, token_count=12, tokenizer: minilm", "max_tokens: 4096, token_count=12, tokenizer: minilm"),
        (
            "http://127.0.0.1:8080/mcp answered 200; why? because",
            "http://127.0.0.1:8080/mcp answered 200; why? because",
        ),
    ],
)
def test_free_text_keeps_what_helps_and_loses_the_secret(text: str, shown: str) -> None:
    assert redaction.redact_text(text) == shown
    assert redaction.redact_text(shown) == shown  # a second pass (the stderr limiter's, then the log's) keeps it


def test_url_queries_and_headers_in_fields_and_in_free_text(log_stream: io.StringIO) -> None:
    url = f"http://127.0.0.1:9/mcp?api_key={QUERY_SECRET}"
    log = structlog.get_logger("t")
    log.info(f"connecting to {url}", url=url, headers={"Authorization": f"Bearer {BEARER}", "X-Api-Key": API_KEY})
    log.info("request", target=httpx2.URL(url), args=[url, f"X-Api-Key: {API_KEY}"])  # an object, a list
    logging.getLogger("mcp.client.streamable_http").warning("Connecting to StreamableHTTP endpoint: %s", url)
    out = log_stream.getvalue()
    assert QUERY_SECRET not in out and BEARER not in out and API_KEY not in out
    first, second, third = records(log_stream)
    assert first["url"] == "http://127.0.0.1:9/mcp?api_key=[redacted]"
    assert first["headers"] == {"Authorization": "[redacted]", "X-Api-Key": "[redacted]"}
    assert second["target"] == "http://127.0.0.1:9/mcp?api_key=[redacted]"
    assert third["event"] == "Connecting to StreamableHTTP endpoint: http://127.0.0.1:9/mcp?api_key=[redacted]"


def test_a_value_read_for_a_reference_is_redacted_everywhere(log_stream: io.StringIO) -> None:
    value = expand("Bearer ${SERVER_TOKEN}", {"SERVER_TOKEN": FROM_ENV}, "mcp.servers.x.headers.Authorization")
    assert value == f"Bearer {FROM_ENV}"  # what the server is given is the value itself
    expand("${PASSWORD}", {"PASSWORD": "p@ss/w0rd+1"}, "mcp.servers.x.env.PASSWORD")
    structlog.get_logger("t").info("mcp_server_stderr", server="x", line=f"my token is {FROM_ENV}!")
    logging.getLogger("some.library").warning("echo %s, then GET /login/p%%40ss%%2Fw0rd%%2B1 failed", FROM_ENV)
    out = log_stream.getvalue()
    assert FROM_ENV not in out and "p%40ss" not in out
    assert [r["line" if "line" in r else "event"] for r in records(log_stream)] == [
        "my token is [redacted]!",
        "echo [redacted], then GET /login/[redacted] failed",  # percent-encoded in a URL: redacted too
    ]


def test_a_short_value_is_not_remembered(log_stream: io.StringIO) -> None:
    expand("${MODE}", {"MODE": "test"}, "mcp.servers.x.env.MODE")
    structlog.get_logger("t").info("a test of the mode")
    assert records(log_stream)[-1]["event"] == "a test of the mode"


def test_an_exception_carrying_secrets_is_redacted(log_stream: io.StringIO) -> None:
    redaction.remember(FROM_ENV)
    message = f"GET http://h/x?token={QUERY_SECRET} with Authorization: Bearer {BEARER} echoed {FROM_ENV}"
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        structlog.get_logger("t").exception("call_failed", error=exc)
        logging.getLogger("httpx2").exception("stdlib too")
    out = log_stream.getvalue()
    assert QUERY_SECRET not in out and BEARER not in out and FROM_ENV not in out
    first, second = records(log_stream)
    assert first["error"] == (
        "RuntimeError: GET http://h/x?token=[redacted] with Authorization: Bearer [redacted] echoed [redacted]"
    )
    assert "Traceback" in str(second["exception"]) and "token=[redacted]" in str(second["exception"])


def test_httpx2_at_info_writes_nothing_and_its_warning_is_redacted(log_stream: io.StringIO) -> None:
    httpx = logging.getLogger("httpx2")
    httpx.info('HTTP Request: POST http://127.0.0.1:9/mcp?api_key=%s "HTTP/1.1 200 OK"', QUERY_SECRET)
    for name in ("httpcore", "httpcore2.http11"):
        logging.getLogger(name).debug("send_request_headers.started %s", API_KEY)
    assert log_stream.getvalue() == ""  # the root is at debug: the request lines are quieted by name
    httpx.warning("retrying http://127.0.0.1:9/mcp?api_key=%s (X-Api-Key: %s)", QUERY_SECRET, API_KEY)
    (record,) = records(log_stream)
    assert record["logger"] == "httpx2" and record["level"] == "warning"
    assert record["event"] == "retrying http://127.0.0.1:9/mcp?api_key=[redacted] (X-Api-Key: [redacted])"
