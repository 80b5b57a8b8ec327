"""What the owner is shown of a held item: the whole payload, hiding nothing (docs/privacy.md, "What the owner sees").

Plain text, never rendered as Markdown; the payload whole (in the message when short, else an attached file of
its exact bytes), every link written out with its ASCII host, anything invisible shown as ``⟦…⟧``, and a code
that is the digest of exactly what was held. The payload's lines are quoted under an origin line: the notice
sits in the owner's chat, where later turns read it, so planted words arrive there as data with their origin
(``teleton.privacy.quoting``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from teleton.privacy import OWNER, PUBLIC, Principals
from teleton.privacy.payload import Revealed, links, reveal
from teleton.privacy.quoting import QUOTE, origins_text, steered_origin
from teleton.tools.held import Held, is_text, sha256

INLINE_CHARS = 2500  # a payload longer than this (as shown) goes as a file, whole
INLINE_LINES = 60
BEGINNING = 300  # characters of a long payload shown in the message, so the owner knows which file is which


@dataclass(frozen=True)
class Notice:
    text: str  # plain text, at most a few thousand characters
    attachment: bytes | None = None  # the whole payload when it does not fit the message
    filename: str = ""


def readers(label: str | None) -> str:
    if label == PUBLIC:
        return "everyone (every chat and person)"
    if label is None or not label.startswith(("user:", "chat:")):
        return "only you"
    number = label.split(":", 1)[1]
    return f"the group chat {number}" if label.startswith("chat:") else f"the person {number} (their DM with me)"


def chat_name(chat_id: int | None, principals: Principals, title: str = "") -> str:
    if chat_id is None:
        return "no chat"
    if chat_id in principals.owner_chat_ids():
        return "your own chat with me"
    named = f" titled {reveal(title).text!r}" if title else ""
    return f"{'group' if chat_id < 0 else 'the DM of person'} {chat_id}{named}"


def what_happens(item: Held, principals: Principals, title: str = "") -> str:
    """One line: what releasing it does."""
    meta = item.meta
    if item.kind == "message" and "schedule_date" in meta:  # Telegram's own scheduled message
        when = datetime.fromtimestamp(float(meta["schedule_date"])).astimezone()
        where = chat_name(item.to_chat_id, principals, title)
        return f"schedule a message to {where}, which Telegram sends at {when:%Y-%m-%d %H:%M %Z}"
    if item.kind == "message":
        return f"send a message to {chat_name(item.to_chat_id, principals, title)}"
    if item.kind == "forward":
        source = chat_name(int(meta.get("from_chat_id", 0)), principals)
        return (
            f"forward message {meta.get('message_id')} of {source} to {chat_name(item.to_chat_id, principals, title)}. "
            "It goes out as a copy of exactly this text, and not at all if the message changes before you decide"
        )
    if item.kind == "write":
        verb = "append to" if meta.get("append") else "write"
        return f"{verb} the file {meta.get('path')}, which {readers(item.label)} can read"
    if item.kind == "move":
        return (
            f"move the file {meta.get('path')} to {meta.get('new_path')}, where {readers(item.label)} "
            "can read it. This is its content now; if it changes before you decide, nothing is moved"
        )
    if item.kind == "fact":
        key = f", key {meta['key']!r}" if meta.get("key") else ""
        return f"save a fact that {readers(item.label)} can read (category {meta.get('category')!r}{key})"
    if item.kind == "document":
        return f"publish a document as {meta.get('path')}, which {readers(item.label)} can read"
    if item.kind == "fetch":
        return "fetch this address from the internet (its host name leaves at the lookup, all of it at the request)"
    if item.kind == "exec":
        return "run this command on the server (a shell reads and reaches everything I can)"
    if item.kind == "outside_tool":
        return f"call {item.tool} of the outside server {meta.get('server')!r}, which gets exactly these arguments"
    if item.kind == "edit":
        where = chat_name(item.to_chat_id, principals, title)
        return f"edit message {meta.get('message_id')} of {where}: its text becomes this"
    return f"carry out a {item.kind} to {item.destination}"


def notice(item: Held, principals: Principals, *, until: datetime, title: str = "") -> Notice:
    origin = chat_name(item.from_chat_id, principals)
    lines = [f"Held #{item.id}: a conversation in {origin} wants to {what_happens(item, principals, title)}."]
    if item.unreadable:
        lines.append(
            f"It waits for you because they may not read what that conversation saw: {_plain(item.unreadable)}."
        )
    if item.steering:
        lines.append(
            f"The conversation was shown words from elsewhere that may steer it: {origins_text(item.steering)}."
        )
    lines.append("")
    revealed = reveal(item.text) if is_text(item.body) else None
    # Whose words the payload may be, as the owner's DM must name them: a group's own conversation is not
    # "steered" by that group, but its words are the group's, and the notice is read by the owner's turns.
    words_of = {*item.steering, principals.chat_label(item.from_chat_id)} - {OWNER, PUBLIC}
    shown, attachment, filename = _payload(item, revealed, words_of)
    lines += shown
    found = links(item.text) if revealed is not None else []
    if found:
        lines += ["", f"Links in it, written out in full ({len(found)}):"]
        for link in found:
            warn = f" — {'; '.join(link.warnings)}" if link.warnings else ""
            host = f"host {link.host}" + (f" (shown as {link.shown_host})" if link.shown_host != link.host else "")
            lines.append(f"- {link.url} — {host if link.host else 'no host'}{warn}")
    if revealed is not None and revealed.found:
        counts = ", ".join(f"{name} ×{n}" for name, n in revealed.found.items())
        lines += ["", f"Warning: characters you could not see are shown as ⟦…⟧: {counts}."]
    if item.meta.get("stripped"):
        lines += ["", f"{item.meta['stripped']} invisible characters it carried were removed: they will not be sent."]
    lines += [
        "",
        f"/approve {item.id} {item.code} releases exactly this. /deny {item.id} drops it. Expires {until:%H:%M}.",
    ]
    return Notice("\n".join(lines), attachment, filename)


def _payload(item: Held, revealed: Revealed | None, words_of: set[str]) -> tuple[list[str], bytes | None, str]:
    """The payload's lines for the message, and the attachment when it does not fit there (``revealed``:
    the body as text with what cannot be seen escaped; None: the body is not text)."""
    origin = steered_origin(words_of) if words_of else "this conversation"
    head = f"{QUOTE}(from {origin})"
    size = f"{len(item.body):,} bytes, sha256 {sha256(item.body)[:16]}"
    if revealed is None:
        name = f"held-{item.id}{_suffix(item)}"
        said = f"Exactly what would leave is the attached file {name} ({size}): not text, so not shown here."
        return [said], item.body, name
    shown = revealed.text
    body_lines = shown.split("\n")
    if len(shown) <= INLINE_CHARS and len(body_lines) <= INLINE_LINES:
        intro = f"Exactly what would leave ({len(item.text):,} characters), every line quoted with '{QUOTE.strip()}':"
        return [intro, head, *(QUOTE + line for line in body_lines)], None, ""
    name = f"held-{item.id}.txt"
    intro = (
        f"Exactly what would leave is too long for a message ({len(item.text):,} characters, {size}): all of it "
        f"is in the attached file {name}, with characters you could not see shown as ⟦…⟧. It begins:"
    )
    start = shown[:BEGINNING].split("\n")[:5]
    return [intro, head, *(QUOTE + line for line in start), "[… all of it is in the file]"], shown.encode(), name


def summary(item: Held, principals: Principals, now: float, title: str = "") -> str:
    """One line for /held: which item, what it would do, how big; the whole of it is ``/held N``."""
    left = max(0, int((item.expires_at - now) // 60))
    size = f"{len(item.text):,} characters" if is_text(item.body) else f"a file of {len(item.body):,} bytes"
    what = what_happens(item, principals, title)
    return f"#{item.id}: {what} — {size}, expires in {left} min. /held {item.id} shows it whole."


def _suffix(item: Held) -> str:
    """A binary body is a file being moved or written: its own extension, so the owner's client opens it."""
    return PurePosixPath(str(item.meta.get("new_path") or item.meta.get("path") or "")).suffix or ".bin"


def _plain(labels: tuple[str, ...]) -> str:
    # Written without the "(chat:…)" form: these are what was seen, not quoted words (no taint is implied).
    return ", ".join(sorted(labels))
