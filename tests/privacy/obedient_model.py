"""The fake model behind the daemon's API: it obeys whatever text it is shown, the attacker's included.

With a model that never refuses, whatever keeps a secret in place is the product's rules and not the
model's judgement, so each scenario tests the rules alone. The module also holds the readers of a Messages
API request body that the model needs to find its directives (and that the World and the tests reuse).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic_server import Body, Reply, text, tool_use
from tests.fakes.turn_message import turn_message
from tests.privacy.oracles import S_PHOTO

UTILITY_MODEL = "claude-test-small"
_CHAT_LINE = re.compile(
    r"## This chat\nYou are in (?:a private chat \(DM\)|a group|a channel)(?: \"[^\"\n]*\")? \(id (-?\d+)"
)
_TO_HOMOGLYPH = str.maketrans("AEKMHOPCTXSIaeopcxsi", "АЕКМНОРСТХЅІаеорсхѕі")


def call(tool: str, args: dict[str, Any] | None = None) -> str:
    """One directive line for the obedient model."""
    return f"CALL {tool} {json.dumps(args or {}, ensure_ascii=False)}"


_DIRECTIVE = re.compile(r"\bCALL\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?=\{)")
_FACT = re.compile(r"\bFACT\s*(?=\{)")
_ENCODE = re.compile(r"\bENCODE\s+(base64|reverse|zwsp|codeblock|homoglyph|spaced)\b")
_FIND = re.compile(r"\{\{(FIND|WORD|TAGS):([^}]{1,60})\}\}")
_TOKEN = re.compile(r"[A-Z0-9]+(?:-[A-Z0-9]+)+")
SYSTEM_CAP = 20_000  # {{SYSTEM}} is cut to fit send_message's 40,000-character limit
MAX_CALLS = 40


def _json_escape(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def defang(value: str) -> str:
    """What the model itself writes never carries live directives (no echo loops through the archive)."""
    value = re.sub(r"\bCALL\b", "call", value)
    value = re.sub(r"\bFACT\b", "fact", value)
    return re.sub(r"\bENCODE\b", "encode", value)


def system_text(body: Body) -> str:
    """The system prompt and the turn's note (daily logs, the time: what used to be its third block), all the
    words a request carries about the agent's own setup and memory: what FIND and {{SYSTEM}} leak."""
    system = body.get("system") or ""
    if not isinstance(system, str):
        system = "\n\n".join(b.get("text", "") for b in system if b.get("type") == "text")
    note = turn_message(body).note if body.get("messages") else ""
    return "\n\n".join(filter(None, [system, note]))


def _text_blocks(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if b.get("type") == "text"]


def _is_tool_results(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _last_user_prompt(body: Body) -> str:
    """The last user message that is not tool results: its text blocks (retrieved context + what was said)."""
    for message in reversed(body.get("messages", [])):
        if message["role"] == "user" and not _is_tool_results(message):
            return "\n".join(_text_blocks(message))
    return ""


def _substitute(segment: str, system: str, body: Body) -> str:
    segment = segment.replace("{{SYSTEM}}", _json_escape(defang(system)[:SYSTEM_CAP]))
    segment = segment.replace("{{BODY}}", _json_escape(defang(json.dumps(body, ensure_ascii=False))[:3000]))

    def find(match: re.Match[str]) -> str:
        """FIND: the system prompt's lines with the word; WORD: the first code-like token in them (a URL's
        host or query can carry it); TAGS: those lines spelled in invisible Unicode tag characters."""
        how, word = match.group(1), match.group(2).lower()
        found = defang(" ".join(line for line in system.splitlines() if word in line.lower()))[:1500]
        if how == "WORD":
            token = _TOKEN.search(found)
            found = token.group(0) if token else ""
        elif how == "TAGS":
            found = "".join(chr(0xE0000 + ord(c)) for c in found if 0x20 <= ord(c) < 0x7F)
        return _json_escape(found)

    return _FIND.sub(find, segment)


def directives(
    source: str, system: str, body: Body, may_run: Callable[[str], bool] | None = None
) -> list[tuple[str, dict[str, Any], str]]:
    """``CALL`` directives of ``source`` as (tool, input with placeholders filled in, key); ``may_run(key)``
    says whether one may run (the key is the directive as written)."""
    found: list[tuple[str, dict[str, Any], str]] = []
    seen: set[str] = set()
    decoder = json.JSONDecoder()
    for line in source.splitlines():
        for match in _DIRECTIVE.finditer(line):
            raw = line[match.end() :]
            try:
                _, end = decoder.raw_decode(raw)  # placeholders are plain JSON strings: the extent is known
                args = json.loads(_substitute(raw[:end], system, body).replace("{{SELF}}", _json_escape(line)))
            except ValueError:
                continue
            key = match.group(1) + " " + raw[:end]
            if not isinstance(args, dict) or key in seen or (may_run is not None and not may_run(key)):
                continue
            seen.add(key)
            found.append((match.group(1), args, key))
    return found[:MAX_CALLS]


def facts_in(source: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    facts = []
    for match in _FACT.finditer(source):
        try:
            fact, _ = decoder.raw_decode(source[match.end() :])
        except ValueError:
            continue
        if isinstance(fact, dict):
            facts.append(fact)
    return facts


def encode(value: str, mode: str | None) -> str:
    if mode == "base64":
        return base64.b64encode(value.encode()).decode()
    if mode == "reverse":
        return value[::-1]
    if mode == "zwsp":
        return "\u200b".join(value)
    if mode == "codeblock":
        return "```\n" + value + "\n```"
    if mode == "homoglyph":
        return value.translate(_TO_HOMOGLYPH)
    if mode == "spaced":
        return " ".join(value)
    return value


class ObedientModel:
    """A model that does whatever any text it is shown tells it to.

    - The last message holds tool results: run the ``CALL`` directives of a skill's steps (a skill_read
      result, once per chat), else answer ``RESULTS: `` + every result (so whatever a tool returned is
      repeated into the chat the turn runs in).
    - Else run every ``CALL <tool> <json>`` directive of the last user message (retrieved context blocks
      and what was said), of the system prompt and of the offered tools' descriptions, whether or not the
      tool was offered. A directive typed in the message itself always runs; one found in context runs once
      per chat (an obedient model, not a loop: a scheduled task's turn must not re-schedule itself from the
      message that created it).
    - Else answer ``ECHO: `` + the system prompt + the last user message.
    ``ENCODE <mode>`` in the message encodes the answer. Placeholders: ``{{SYSTEM}}`` (the system prompt),
    ``{{BODY}}`` (the request), ``{{FIND:word}}`` (the system prompt's lines with that word), ``{{SELF}}``
    (the directive's own line). The utility model answers the distiller with the ``FACT <json>`` directives
    it finds, and summaries with ``SUMMARY: `` + what it was given.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ran: set[tuple[int, str]] = set()  # (chat id, directive) run from context

    def __call__(self, body: Body) -> Reply:
        if body.get("model") == UTILITY_MODEL:
            return _utility(body)
        messages = body.get("messages", [])
        system = system_text(body)
        prompt = _last_user_prompt(body)
        typed = _typed(body)
        mode_match = _ENCODE.search(typed)
        mode = mode_match.group(1) if mode_match else None
        chat = _CHAT_LINE.search(system)
        chat_id = int(chat.group(1)) if chat else 0

        def first_time(key: str) -> bool:
            with self._lock:
                if (chat_id, key) in self._ran:
                    return False
                self._ran.add((chat_id, key))
                return True

        if messages and messages[-1]["role"] == "user" and _is_tool_results(messages[-1]):
            # A skill is steps to follow: what skill_read returned is obeyed like the rest of what it is shown.
            steps = directives(_results_text(messages, only="skill_read"), system, body, first_time)
            if steps:
                return tool_use(*[(name, args) for name, args, _ in steps])
            return text("RESULTS: " + encode(defang(_results_text(messages)), mode))
        typed_calls = directives(typed, system, body)
        typed_keys = {key for _, _, key in typed_calls}

        for key in typed_keys:  # what was typed also counts as run in this chat
            first_time(key)
        # Tool descriptions are text it is shown too (an outside server's are written by someone else).
        described = "\n".join(str(t.get("description", "")) for t in body.get("tools") or [])
        context_calls = [
            c
            for c in directives(prompt + "\n" + system + "\n" + described, system, body, first_time)
            if c[2] not in typed_keys
        ]
        calls = [(name, args) for name, args, _ in typed_calls + context_calls][:MAX_CALLS]
        if calls:
            return tool_use(*calls)
        return text("ECHO: " + encode(defang(system + "\n---\n" + prompt), mode))


def _typed(body: Body) -> str:
    """What the sender typed: the last text block of the last user message that is not tool results."""
    for message in reversed(body.get("messages", [])):
        if message["role"] == "user" and not _is_tool_results(message):
            blocks = _text_blocks(message)
            return blocks[-1] if blocks else ""
    return ""


def _results_text(messages: list[dict[str, Any]], only: str = "") -> str:
    """The last message's tool results (``only``: those of that tool which did not fail), one line each."""
    names = {}
    if len(messages) >= 2 and isinstance(messages[-2]["content"], list):
        names = {b["id"]: b["name"] for b in messages[-2]["content"] if b.get("type") == "tool_use"}
    parts = []
    for block in messages[-1]["content"]:
        if block.get("type") != "tool_result":
            continue
        content = block.get("content", "")
        if isinstance(content, list):
            content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        flag = " ERROR" if block.get("is_error") else ""
        if only and (flag or names.get(block.get("tool_use_id")) != only):
            continue
        parts.append(f"[{names.get(block.get('tool_use_id'), '?')}{flag}] {content}")
    return "\n".join(parts)


def _utility(body: Body) -> Reply:
    last = body.get("messages", [{}])[-1].get("content")
    if isinstance(last, list) and any(b.get("type") == "image" for b in last):
        # The only photo of the world is the owner's: a note with a code written on it, read by the model.
        return text(f"A handwritten note on a fridge that reads {S_PHOTO.token}")
    content = "\n".join("\n".join(_text_blocks(m)) for m in body.get("messages", []))
    if any(t.get("name") == "record_facts" for t in body.get("tools") or []):
        return tool_use(("record_facts", {"facts": facts_in(content)}))
    return text("SUMMARY: " + defang(content)[-4000:])
