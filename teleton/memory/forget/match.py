"""What counts as a copy of the text to forget: one matcher, used on rows, JSON, files and raw database bytes.

A text matches case-insensitively, any run of whitespace standing for any other. A needle made of digits and
phone punctuation only (``+351 912 345 678``) matches the same digits written with other spacing or
punctuation (``351912345678``, ``(351) 912-345-678``). A needle is never an FTS query: it is matched by a
regular expression built from escaped text, so ``NEAR( OR *`` is just those characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from teleton.memory.journal.daily_logs import USER_CAP, flatten

MIN_CHARS = 3  # a shorter needle ("a", "of") would match nearly every message
MAX_CHARS = 500
MIN_DIGITS = 5  # a digit needle: a phone number, an account, a code; "2024" is a text needle
# A message forgotten by reply is looked for elsewhere (sessions, logs) only when its text is this long:
# "ok" would otherwise scrub every "ok" of every conversation.
MESSAGE_TEXT_MIN = 12
_PHONE = re.compile(r"[\d\s+().\-/‐-―]+")
_SEP = r"[\s.()/+\-‐-―]{0,3}"
_SEP_BYTES = rb"(?:[\s.()/+\-]|\xe2\x80[\x90-\x95]){0,3}"
_READ = 8 << 20  # bytes of the database file read at a time when looking for left-over copies


class NeedleError(ValueError):
    """A needle that cannot be forgotten safely; the message says why, for the person who sent it."""


@dataclass(frozen=True)
class Matcher:
    """A compiled needle. ``message_id``: a message forgotten by reply (its row); ``pattern`` None: look for
    nothing else (its text is too short to be told apart from everyday words)."""

    pattern: re.Pattern[str] | None
    raw: re.Pattern[bytes] | None
    message_id: int | None = None
    needle: str = ""
    # A short message forgotten by reply: its own daily-log line, the exchange line of its minute whose user
    # part is its whole text, in the log of its day (``daily_logs.exchange_line``).
    log_line: re.Pattern[str] | None = None
    log_file: str = ""

    @classmethod
    def for_message(cls, row_id: int, text: str, date: float | None = None) -> Matcher:
        words = text.split()
        if len(" ".join(words)) < MESSAGE_TEXT_MIN:
            if not words or date is None:
                return cls(None, None, row_id)
            when = datetime.fromtimestamp(date).astimezone()
            said = re.escape(flatten(text, USER_CAP))
            # "[HH:MM] ", an origin for a quoted line, a group's "Sender: ", then exactly the message.
            head = rf"^(?:> )?\[{when:%H:%M}\] (?:\(from [^\n]{{0,200}}?\) )?User: (?:[^\n|]{{0,200}}?: )?"
            line = re.compile(rf"{head}{said} \| Assistant: ")
            return cls(None, None, row_id, log_line=line, log_file=f"memory/{when:%Y-%m-%d}.md")
        # Its whole text, or the head a daily-log line keeps (flattened and cut).
        forms = [_words(words)]
        head = flatten(text, USER_CAP)
        if head != " ".join(words):
            forms.append(_words(head.split()))
        source = "|".join(f"(?:{form})" for form in forms)
        raw = b"|".join(b"(?:" + _words_bytes(form.split()) + b")" for form in (" ".join(words), head))
        return cls(re.compile(source, re.IGNORECASE), re.compile(raw, re.IGNORECASE), row_id)

    def hit(self, text: Any) -> bool:
        return self.pattern is not None and isinstance(text, str) and self.pattern.search(text) is not None

    def hit_line(self, rel: str, line: str) -> bool:
        """Whether a line of the workspace file ``rel`` holds the needle, or is the message's own log line."""
        own = self.log_line is not None and rel == self.log_file and self.log_line.match(line) is not None
        return own or self.hit(line)

    def search(self, text: str) -> tuple[int, int] | None:
        found = None if self.pattern is None else self.pattern.search(text)
        return None if found is None else found.span()

    def sub(self, text: str, replacement: str = "[forgotten]") -> tuple[str, int]:
        if self.pattern is None:
            return text, 0
        return self.pattern.subn(replacement, text)

    def json_hit(self, raw: Any) -> bool:
        """Whether any string inside a JSON document matches (escapes decoded first)."""
        if self.pattern is None or not isinstance(raw, str):
            return False
        try:
            return any(self.hit(s) for s in strings(json.loads(raw)))
        except ValueError:
            return self.hit(raw)

    def json_sub(self, raw: str) -> tuple[str, int]:
        """``raw`` with every match inside its strings replaced; (new JSON, matches)."""
        try:
            document = json.loads(raw)
        except ValueError:
            return self.sub(raw)
        counter = [0]
        scrubbed = _scrub(document, self, counter)
        return json.dumps(scrubbed, ensure_ascii=False), counter[0]

    def in_file(self, path: Path) -> bool:
        """Whether the bytes of the database file (or its WAL) still hold a copy."""
        if self.raw is None:
            return False
        return any(_file_holds(candidate, self.raw) for candidate in (path, path.with_name(path.name + "-wal")))


def compile_needle(text: str) -> Matcher:
    """The matcher of a text needle; ``NeedleError`` when it is empty, too short or too long."""
    words = text.split()
    flat = " ".join(words)
    if not flat:
        raise NeedleError("Tell me what to forget: /forget <text>, or send /forget as a reply to a message.")
    if len(flat) > MAX_CHARS:
        raise NeedleError(f"That is too long to look for ({len(flat)} characters; at most {MAX_CHARS}).")
    digits = re.sub(r"\D", "", flat)
    if _PHONE.fullmatch(flat) and len(digits) >= MIN_DIGITS:
        source = r"\+?" + _SEP.join(digits)  # a leading + goes with the number it belongs to
        raw = rb"\+?" + _SEP_BYTES.join(d.encode() for d in digits)
        return Matcher(re.compile(source), re.compile(raw), needle=flat)
    if len(flat.replace(" ", "")) < MIN_CHARS:
        raise NeedleError(
            f"“{flat}” is too short to forget safely: it would match nearly everything. "
            f"Use at least {MIN_CHARS} characters."
        )
    return Matcher(
        re.compile(_words(words), re.IGNORECASE), re.compile(_words_bytes(words), re.IGNORECASE), needle=flat
    )


def strings(value: Any) -> Iterator[str]:
    """Every string value inside a decoded JSON document (keys are structure, not content)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def _scrub(value: Any, matcher: Matcher, counter: list[int]) -> Any:
    if isinstance(value, str):
        new, n = matcher.sub(value)
        counter[0] += n
        return new
    if isinstance(value, dict):
        return {key: _scrub(item, matcher, counter) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item, matcher, counter) for item in value]
    return value


def _words(words: list[str]) -> str:
    return r"\s+".join(re.escape(w) for w in words)


def _words_bytes(words: list[str]) -> bytes:
    return rb"\s+".join(re.escape(w.encode()) for w in words)


def _file_holds(path: Path, raw: re.Pattern[bytes]) -> bool:
    if not path.exists():
        return False
    overlap = max(4096, len(raw.pattern) * 4)  # a copy split across two reads is still seen
    tail = b""
    with path.open("rb") as fh:
        while block := fh.read(_READ):
            window = tail + block
            if raw.search(window):
                return True
            tail = window[-overlap:]
    return False
