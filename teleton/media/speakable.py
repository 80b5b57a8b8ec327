"""The one rule for what of a reply is read aloud, for the HTTP voice and the local one alike."""

from __future__ import annotations

import re

MAX_INPUT_CHARS = 4096  # OpenAI's limit for one request
_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_MARKUP = re.compile(r"[*_`#>|~]+")


def speakable(text: str) -> str:
    """What of a Markdown reply is read aloud: a link by its text, no code, no markup characters."""
    text = _CODE_BLOCK.sub(" (code) ", text)
    text = _URL.sub("a link", _LINK.sub(r"\1", text))
    return " ".join(_MARKUP.sub(" ", text).split())
