"""A text, or an error, as one line: runs of whitespace (newlines included) made one space, and cut."""

from __future__ import annotations

ELLIPSIS = "…"


def one_line(text: str, cap: int) -> str:
    """``text`` on one line; longer than ``cap`` characters, its first ``cap`` and an ellipsis saying so."""
    text = " ".join(text.split())
    return text if len(text) <= cap else text[:cap] + ELLIPSIS


def reason(exc: BaseException, cap: int) -> str:
    """What an error says, on one line and at most ``cap`` characters; its type when it says nothing."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:cap]
