"""What ``teleton chat`` shows while an answer is on its way: the answer as it streams, a line per tool call,
a spinner with the elapsed time and the retries.

The prompt stays live below (so ``/stop`` can be typed during an answer); finished lines are printed above
it, and the line being written is shown inside the prompt's own area until it ends, because a terminal
cannot keep half a line above a prompt that redraws.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from prompt_toolkit.filters import is_done
from prompt_toolkit.formatted_text import FormattedText

from teleton.llm.progress import Progress

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PROMPT = "you> "


class ChatScreen:
    def __init__(self, write: Callable[[str], None], redraw: Callable[[], None] = lambda: None) -> None:
        self._write = write  # prints finished lines above the prompt
        self._redraw = redraw
        self.busy_since: float | None = None
        self.retries = 0
        self.partial = ""  # the line being written
        self.answer = ""  # what the model said since its last tool call or retry: the answer if it ends here

    # -- a turn -------------------------------------------------------------------------------------------
    def started(self) -> Progress:
        self.busy_since, self.retries, self.partial, self.answer = time.monotonic(), 0, "", ""
        self._redraw()
        return Progress(text=self.text, tool=self.tool, retry=self.retry)

    def finished(self) -> None:
        self._flush()
        self.busy_since = None
        self._redraw()

    def text(self, piece: str) -> None:
        self.answer += piece
        lines = (self.partial + piece).split("\n")
        for line in lines[:-1]:
            self._write(line + "\n")
        self.partial = lines[-1]
        self._redraw()

    def tool(self, name: str, arguments: dict[str, Any]) -> None:
        self._flush()
        self.answer = ""
        self._write(f"  · {name}({_brief(arguments)})\n")

    def retry(self, attempt: int, wait_s: float, reason: str) -> None:
        self.retries = attempt
        if self.partial or self.answer:
            self._flush()
            self._write("  (interrupted; asking again)\n")
        self.answer = ""
        self._redraw()

    def shown(self, text: str) -> bool:
        """Whether ``text`` is the answer that just streamed (so it is not printed a second time)."""
        return bool(self.answer.strip()) and text.strip() == self.answer.strip()

    # -- the prompt area ----------------------------------------------------------------------------------
    def prompt(self) -> FormattedText:
        # A line accepted during an answer stays on the screen as the prompt last drew it: drawn plain, so no
        # spinner or half line is left frozen above (the half line is still on its way, in the next prompt).
        if self.busy_since is None or is_done():
            return FormattedText([("bold", PROMPT)])
        elapsed = time.monotonic() - self.busy_since
        doing = "writing" if self.answer else "thinking"  # the answer streaming is no longer thought about
        status = f"{SPINNER[int(elapsed * 10) % len(SPINNER)]} {doing} {elapsed:.0f}s"
        if self.retries:
            status += f" · retry {self.retries}"
        status += " · /stop or Ctrl-C to stop"
        parts: list[tuple[str, str]] = []
        if self.partial:
            parts.append(("", self.partial + "\n"))
        parts += [("ansicyan", status + "\n"), ("bold", PROMPT)]
        return FormattedText(parts)

    def _flush(self) -> None:
        if self.partial:
            self._write(self.partial + "\n")
            self.partial = ""


def _brief(arguments: dict[str, Any], limit: int = 80) -> str:
    text = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"
