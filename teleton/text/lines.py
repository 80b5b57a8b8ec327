"""A text, or an error, as one line: runs of whitespace (newlines included) made one space, and cut."""

from __future__ import annotations

ELLIPSIS = "…"


def one_line(text: str, cap: int) -> str:
    """``text`` on one line; longer than ``cap`` characters, its first ``cap`` and an ellipsis saying so."""
    text = " ".join(text.split())
    return text if len(text) <= cap else text[:cap] + ELLIPSIS


def shorten(text: str, cap: int) -> str:
    """``text`` on one line; longer than ``cap`` characters, cut at the last word boundary within them (one
    word longer than that: at ``cap``) and an ellipsis saying so, for a reader rather than a record."""
    text = " ".join(text.split())
    if len(text) <= cap:
        return text
    head = text[:cap]
    if text[cap] != " " and " " in head:  # the cut falls in a word: before it
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + ELLIPSIS


def reason(exc: BaseException, cap: int) -> str:
    """What an error says, on one line and at most ``cap`` characters; its type when it says nothing."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:cap]
