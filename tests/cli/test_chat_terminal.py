"""`teleton chat` driven as a real terminal: a pseudo-terminal (pexpect), the screen rebuilt by a terminal
emulator (pyte), the real SDK streaming from the fake Messages API.

What is asserted is what a person at the terminal sees: the first half of an answer while the model still
holds the second, no log lines between the answers, a pasted block answered once, /stop ending an answer
half-way, a rejected key named at once.
"""

from __future__ import annotations

import re
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pyte
import pytest
import yaml

from teleton.cli.chat_cmd import INTERACTIVE_RETRIES
from tests.fakes.anthropic_server import FakeAnthropic, Reply, error, halted, overloaded, text, tool_use, user_said

pytestmark = pytest.mark.costly  # `teleton chat` in a subprocess (a pseudo-terminal), test after test

COLUMNS, ROWS = 110, 40
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


class Terminal:
    """`teleton chat` in a pseudo-terminal, and what its screen shows."""

    def __init__(self, config: Path, home: Path, executable: str | None = None) -> None:
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "LANG": "C.UTF-8",
               "PROMPT_TOOLKIT_NO_CPR": "1"}  # fmt: skip
        command = [executable] if executable else [sys.executable, "-m", "teleton.cli.main"]
        self.child = pexpect.spawn(
            command[0], [*command[1:], "-c", str(config), "chat"],
            env=env, dimensions=(ROWS, COLUMNS), encoding="utf-8", codec_errors="replace",
        )  # fmt: skip
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.Stream(self.screen)
        self.data = config.parent / "data"
        self.seen = ""  # everything the program wrote, escape sequences and all

    def pump(self) -> None:
        try:
            while True:
                data = self.child.read_nonblocking(65536, timeout=0.05)
                self.stream.feed(data)
                self.seen += data
        except (pexpect.TIMEOUT, pexpect.EOF):  # nothing more for now, or the program has ended
            pass

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, wanted: Callable[[str], bool], what: str) -> str:
        """Until the screen shows ``what`` (the hang guard is pytest-timeout's, not ours)."""
        while True:
            self.pump()
            shown = self.text()
            if wanted(shown):
                return shown
            if not self.child.isalive():
                raise AssertionError(f"teleton chat exited while waiting for {what}:\n{shown}")

    def wait_text(self, needle: str) -> str:
        return self.wait_for(lambda shown: needle in shown, repr(needle))

    def type(self, line: str) -> None:
        self.child.send(line + "\r")

    def paste(self, block: str) -> None:
        self.child.send(PASTE_START + block + PASTE_END)

    def close(self) -> None:
        if self.child.isalive():
            self.child.sendcontrol("d")
            self.child.expect(pexpect.EOF, timeout=60)
        self.child.close()


def model(body: dict) -> Reply:
    said = user_said(body)
    if said.strip() == "what is 2+2":
        return text("2+2 is 4.")
    return text(f"You said: {said[:60]}")


def open_terminal(tmp_path: Path, base_url: str, agent: dict[str, str] | None = None) -> Terminal:
    """`teleton chat` in a terminal, on Anthropic's API at ``base_url`` unless ``agent`` says otherwise."""
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({
            "agent": agent or {"api_key": "test", "base_url": base_url, "model": "claude-test",
                               "utility_model": "claude-test-small"},
            "storage": {"data_dir": str(tmp_path / "data")},
            "embedding": {"provider": "none"},
            "memory": {"distill": False},
            "telegram": {"owner_id": 4242},
        })
    )  # fmt: skip
    config.chmod(0o600)
    term = Terminal(config, tmp_path)
    term.wait_text("you>")
    return term


@pytest.fixture
def terminal(tmp_path: Path, fake_api: FakeAnthropic) -> Iterator[Terminal]:
    fake_api.responder = model
    term = open_terminal(tmp_path, fake_api.base_url)
    yield term
    term.close()


def answers(fake_api: FakeAnthropic) -> list[dict]:
    """The answering requests (the tool loop streams; the utility model's requests do not)."""
    return [body for body in fake_api.requests if body.get("stream")]


def test_an_answer_streams_onto_the_screen_and_no_log_line_does(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    gate = threading.Event()
    # Overloaded once, then an answer the model writes half of and holds.
    fake_api.queue(overloaded(), halted("The first half is on the screen", " and the second half came later.", gate))
    terminal.type("tell me something")
    shown = terminal.wait_for(lambda s: "The first half is on the screen" in s and "writing" in s, "the text")
    # The model still holds the rest: what is visible arrived as it was written.
    assert "second half" not in shown
    # The spinner line: writing (no longer "thinking" once text streams), the elapsed time and the retry.
    assert re.search(r"writing \d+s · retry 1", shown) and "thinking" not in shown
    gate.set()
    shown = terminal.wait_text("and the second half came later.")
    terminal.wait_for(lambda s: "writing" not in s, "the spinner to go")
    assert shown.count("The first half is on the screen") == 1  # streamed, then not printed again
    for log_word in ("turn_done", "schema_migrated", "tool_index_synced", '"event"', "HTTP Request"):
        assert log_word not in terminal.seen


def test_a_multi_line_paste_is_one_message(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    before = len(answers(fake_api))
    terminal.paste("first pasted line\nsecond pasted line\nthird pasted line")
    terminal.type("")
    terminal.wait_text("You said: first pasted line")
    sent = answers(fake_api)[before:]
    assert len(sent) == 1
    assert "first pasted line\nsecond pasted line\nthird pasted line" in user_said(sent[0])
    history = terminal.data / "chat_history"  # the arrow keys bring it back, in the next chat too
    assert "third pasted line" in history.read_text()


def test_stop_typed_during_an_answer_ends_it(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    gate = threading.Event()
    fake_api.queue(halted("Once upon a time", " there was a very long poem that never ended.", gate))
    terminal.type("write me an epic poem")
    terminal.wait_text("Once upon a time")
    terminal.type("/stop")
    terminal.wait_text("(stopped)")
    gate.set()  # the fake may finish its (abandoned) answer now
    terminal.type("what is 2+2")
    shown = terminal.wait_text("2+2 is 4.")
    assert "never ended" not in shown


def test_no_spinner_is_left_behind_after_an_answer_stop_or_ctrl_c(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    gate = threading.Event()
    fake_api.queue(halted("Once upon a time", " there was a poem.", gate))
    terminal.type("write me a poem")
    terminal.wait_text("Once upon a time")
    terminal.type("/stop")  # a line accepted while the spinner runs
    terminal.wait_text("(stopped)")
    gate.set()
    again = threading.Event()
    fake_api.queue(halted("Twice upon a time", " there was another.", again))
    terminal.type("another poem")
    terminal.wait_text("Twice upon a time")
    terminal.child.sendcontrol("c")
    shown = terminal.wait_for(lambda s: s.count("(stopped)") == 2, "the second stop")
    again.set()
    terminal.type("what is 2+2")
    shown = terminal.wait_for(lambda s: "2+2 is 4." in s and s.rstrip().endswith("you>"), "the answer")
    assert not re.search(r"(thinking|writing) \d+s", shown), shown


def test_each_tool_call_is_one_status_line(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    fake_api.queue(tool_use(("memory_save", {"value": "The boat is blue"})), text("Saved it."))
    terminal.type("remember: the boat is blue")
    shown = terminal.wait_text("Saved it.")
    assert shown.count('· memory_save(value="The boat is blue")') == 1


def test_a_rejected_key_is_named_at_once(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    before = len(fake_api.requests)
    fake_api.queue(error(401, "authentication_error", "invalid x-api-key"))
    terminal.type("hello")
    shown = terminal.wait_text("API key")
    assert "rejected" in shown
    assert len(fake_api.requests) - before == 1  # no retries: waiting cannot fix a key


def test_a_one_megabyte_paste_then_a_question(terminal: Terminal, fake_api: FakeAnthropic) -> None:
    paste = "\n".join(f"log line {i:06d} " + "x" * 60 for i in range(14_500))  # ~1 MB
    assert len(paste) > 1_000_000
    terminal.paste(paste)
    terminal.type("")
    terminal.wait_text("You said: log line 000000")
    terminal.type("what is 2+2")
    terminal.wait_text("2+2 is 4.")
    # The paste went to the model as an excerpt, not whole, then and in every later request.
    assert all(len(str(body["messages"])) < 200_000 for body in answers(fake_api))


def test_an_unreachable_api_is_named_after_a_few_retries(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on: every connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    term = open_terminal(tmp_path, f"http://127.0.0.1:{port}")
    try:
        term.type("hello")
        shown = term.wait_for(lambda s: "can't connect" in s and s.rstrip().endswith("you>"), "the apology")
        assert "try again in a moment" not in shown
        assert f"http://127.0.0.1:{port}/v1/messages" in " ".join(shown.split())  # where it tried, not the key
        # The error is one line for people, above the prompt: never over it, never a raw log record.
        assert "error: llm failed (" in shown and "[error" not in shown and '"event"' not in shown
        assert not any(line.startswith("you>") and "llm" in line for line in shown.splitlines())
    finally:
        term.close()
    retries = (term.data / "chat.log").read_text().count('"event": "llm_retry"')
    assert retries == INTERACTIVE_RETRIES  # in a terminal the wait is short; the daemon's is longer


def test_help_status_and_tools_read_as_lists(terminal: Terminal) -> None:
    terminal.type("/help")
    shown = terminal.wait_text("/status")
    assert sum(_item(line).startswith("• /") for line in shown.splitlines()) >= 5  # one command a line
    terminal.type("/status")
    shown = terminal.wait_text("Model: claude-test")
    assert "• Session:" in shown and "• Memory:" in shown
    terminal.type("/tools")
    shown = terminal.wait_text("workspace_read [on")  # the last family: the list has come to its end
    assert sum("[on," in line and _item(line).startswith("•") for line in shown.splitlines()) >= 5


def _item(line: str) -> str:
    """A line of a reply's panel without its border."""
    return line.strip("│ ")
