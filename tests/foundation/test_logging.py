"""Secrets never reach a log line, whichever way they travel."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from teleton.process.logging import configure_logging

SECRETS = {
    "anthropic key": "sk-ant-api03-Xb2kQ9vLmN4pR7sT1uW3yZ5aC8dF0gH2jK4",
    "voyage key": "pa-Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXc",
    "bot token": "7351234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    "phone": "+44 7911 123456",
    "session string": "1" + "BVtsOKBu2Ax3yZ9qWkLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoPq_-" * 4 + "==",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_secret_in_free_text_is_redacted(log_stream: io.StringIO, kind: str) -> None:
    secret = SECRETS[kind]
    structlog.get_logger("t").info("login failed", detail=f"server said: bad credential {secret} (retry)")
    logging.getLogger("telethon.network").warning("connection with %s dropped", secret)
    out = log_stream.getvalue()
    assert secret not in out
    assert out.count("[redacted]") == 2
    assert "server said: bad credential" in out


@pytest.mark.parametrize("field", ["api_key", "bot_token", "phone", "api_hash", "session", "password"])
def test_secret_named_fields_are_redacted(log_stream: io.StringIO, field: str) -> None:
    structlog.get_logger("t").info("config loaded", **{field: "plain-looking-value-42"})
    record = json.loads(log_stream.getvalue().splitlines()[-1])
    assert record[field] == "[redacted]"


def test_exception_text_is_redacted(log_stream: io.StringIO) -> None:
    token = SECRETS["bot token"]
    try:
        raise RuntimeError(f"https://api.telegram.org/bot{token}/getMe returned 401")
    except RuntimeError:
        structlog.get_logger("t").exception("request failed")
    out = log_stream.getvalue()
    assert token not in out
    assert "returned 401" in out


def test_json_lines_when_not_a_terminal(log_stream: io.StringIO) -> None:
    structlog.get_logger("t").info("started", tools=12)
    record = json.loads(log_stream.getvalue().splitlines()[-1])
    assert record["event"] == "started"
    assert record["tools"] == 12
    assert record["level"] == "info"


def test_console_format_is_key_value() -> None:
    stream = io.StringIO()
    configure_logging(level="info", fmt="console", stream=stream)
    structlog.get_logger("t").info("started", tools=12)
    configure_logging(level="warning", fmt="json")
    assert "started" in stream.getvalue()
    assert "tools=12" in stream.getvalue()


def test_a_timing_or_an_id_under_a_secret_name_is_logged_a_session_string_is_not(log_stream: io.StringIO) -> None:
    session = SECRETS["session string"]
    log = structlog.get_logger("t")
    log.info("turn_done", stages={"session": 12.5, "answer": 800.0}, session=42)
    log.info("login", session=session, phone=447911123456)
    done, login = (json.loads(line) for line in log_stream.getvalue().splitlines()[-2:])
    assert done["stages"] == {"session": 12.5, "answer": 800.0} and done["session"] == 42
    assert login["session"] == "[redacted]" and login["phone"] == "[redacted]"  # a phone is digits
    assert session not in log_stream.getvalue()


def test_people_get_one_short_line_per_warning_or_error() -> None:
    stream = io.StringIO()
    configure_logging(level="warning", fmt="human", stream=stream)
    log = structlog.get_logger("t")
    log.info("schema_migrated", version=9)  # below the bar: not shown
    log.warning("embeddings_unavailable", error="model files missing")
    try:
        raise RuntimeError("disk on fire")
    except RuntimeError:
        log.exception("index_failed", api_key="sk-ant-api03-Xb2kQ9vLmN4pR7sT1uW3yZ5aC8dF0gH2jK4")
    configure_logging(level="warning", fmt="json")
    assert stream.getvalue().splitlines() == [
        "warning: embeddings unavailable (error=model files missing)",
        "error: index failed (api_key=[redacted], RuntimeError: disk on fire)",
    ]


def test_the_stream_is_whatever_stderr_is_when_a_record_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    configure_logging(level="warning", fmt="human")
    later = io.StringIO()  # prompt_toolkit's patch_stdout swaps sys.stderr for a proxy above the prompt
    monkeypatch.setattr("sys.stderr", later)
    structlog.get_logger("t").error("llm_failed", error="connection refused")
    configure_logging(level="warning", fmt="json")
    assert later.getvalue() == "error: llm failed (error=connection refused)\n"
