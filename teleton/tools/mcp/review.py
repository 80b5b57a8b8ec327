"""What the model is given of an outside server's tools, and the owner's look at exactly that (issue 53).

A tool's description and input schema are the server's words, read by the model like an instruction. The
model gets them cleaned (``given_description``, ``given_schema``): one line, capped, with every invisible
character removed — a hidden instruction in Unicode tag characters never reaches it. The owner approves a
tool from ``review``: exactly those words, whole, as plain text (never Markdown: a link shows its address),
every link written out with its host, anything the server hid named, and the code that binds the approval to
this text (``pins.approval_code``). The review is quoted with the server's origin: it sits in the owner's
chat, where later turns read it as the server's words, not the owner's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from teleton.privacy.payload import links, reveal, strip_invisible
from teleton.privacy.quoting import outside, outside_origin, quote_lines
from teleton.text.lines import one_line
from teleton.tools.mcp.pins import Pin, approval_code

DESCRIPTION_CAP = 1000  # characters of a server's tool description shown to the model
_TAGS = range(0xE0020, 0xE007F)  # Unicode tag characters: ASCII spelled invisibly


def given_description(server: str, text: str) -> str:
    """A server's description of a tool as the model is given it."""
    return f"[MCP server {server}] {one_line(strip_invisible(text)[0], DESCRIPTION_CAP)}"


def given_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An input schema as the model is given it: every string in it (names too) without invisible
    characters; ``{"type": "object"}`` when the server gave none."""
    return _cleaned(schema) or {"type": "object"}


def _cleaned(value: Any) -> Any:
    if isinstance(value, dict):
        return {strip_invisible(str(k))[0]: _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    if isinstance(value, str):
        return strip_invisible(value)[0]
    return value


def hidden_in(text: str) -> str:
    """What ``text`` spells in tag characters (each is an ASCII letter drawn as nothing)."""
    return "".join(chr(ord(ch) - 0xE0000) for ch in text if ord(ch) in _TAGS)


def review(
    server: str, pins: Sequence[Pin], *, why: str, tool_name: Callable[[str, str], str], footer: bool = True
) -> str:
    """The owner's look at ``pins`` of ``server`` and (``footer``) how to approve exactly them: plain text,
    whole. ``tool_name(server, tool)`` is the name the model knows a tool by."""
    code = approval_code(server, pins)
    entries: list[str] = []
    raw = ""
    for number, pin in enumerate(pins, 1):
        schema = json.dumps(given_schema(pin.input_schema), ensure_ascii=False, sort_keys=True)
        entries += [
            f"{number}. {tool_name(server, pin.tool)}",
            f"description: {given_description(server, pin.description)}",
            f"input schema: {schema}",
        ]
        raw += pin.description + json.dumps(pin.input_schema, ensure_ascii=False)
    shown = reveal("\n".join(entries))
    origin = outside_origin(outside("mcp", server))
    lines = [
        f"MCP server {server}: {why}",
        f"Exactly what the model would be given for {_count(len(pins))}, in the server's own words:",
        quote_lines(shown.text, origin),
    ]
    found = links("\n".join(entries))
    if found:
        lines += ["", f"Links in it, written out in full ({len(found)}):"]
        lines += [f"- {link.url} — host {link.host or '(none)'}" for link in found]
    removed = strip_invisible(raw)[1]
    if removed:
        lines += ["", f"The server also put {removed} invisible characters in; they are removed and the model never "
                  "gets them."]  # fmt: skip
        secret = hidden_in(raw)
        if secret:
            lines.append(quote_lines(f"Spelled in hidden tag characters: {secret}", origin))
    if shown.found:
        counts = ", ".join(f"{name} ×{n}" for name, n in shown.found.items())
        lines += ["", f"Warning: characters you could not see are shown as ⟦…⟧: {counts}."]
    target = server if len(pins) != 1 else f"{server} {pins[0].tool}"
    if footer:
        lines += ["", f"/mcp approve {target} {code} approves exactly this (in a shell: teleton mcp approve "
                  f"{target} --code {code})."]  # fmt: skip
    return "\n".join(lines)


def _count(n: int) -> str:
    return "its tool" if n == 1 else f"its {n} tools"
