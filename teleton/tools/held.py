"""A way out as data: what would leave (``Outgoing``) and, once held for the owner, what was held (``Held``).

The body is exactly the bytes that leave: a message's text, the snapshot of a file being moved, the full
URL of a fetch, the command of an exec. A held item is released from its stored body and nothing else
(docs/privacy.md, "Approval is bound to content"); its digest covers kind, destination and body, and the first
8 hex digits of it are the approval code the owner types (or a button carries).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from teleton.privacy.egress import CHAT_KINDS, OUTSIDE, SHELL, Kind

CODE_LENGTH = 8


@dataclass(frozen=True)
class Outgoing:
    kind: Kind
    body: bytes  # exactly what leaves
    to_chat_id: int | None = None  # chat kinds: the receiving chat
    label: str | None = None  # publish kinds: the label the written item gets (who will read it)
    meta: dict[str, Any] = field(default_factory=dict)  # what the release needs besides the body (paths, ids)
    source_sha256: str | None = None  # forward, move: the source as shown; released only if still the same
    typed: bool = False  # fetch, exec: exactly what the speaker typed in the turn's message
    tool: str = ""  # the tool whose ``release`` carries it out when the owner approves

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    @property
    def destination(self) -> str:
        """Where it goes, as stored and hashed: a chat id, a label, ``outside`` or ``shell``."""
        if self.kind in CHAT_KINDS:
            return f"chat {self.to_chat_id}"
        if self.kind == "exec":
            return SHELL
        if self.kind in ("fetch", "outside_tool"):
            return OUTSIDE
        return f"label {self.label}"


@dataclass(frozen=True)
class Held(Outgoing):
    id: int = 0
    from_chat_id: int = 0
    digest: str = ""
    unreadable: tuple[str, ...] = ()
    steering: tuple[str, ...] = ()
    status: str = "pending"
    created_at: float = 0.0
    expires_at: float = 0.0

    @property
    def code(self) -> str:
        return self.digest[:CODE_LENGTH]

    @classmethod
    def from_row(cls, row: Any) -> Held:
        return cls(
            kind=row["kind"],
            body=bytes(row["body"]),
            to_chat_id=row["to_chat_id"],
            label=row["label"],
            meta=json.loads(row["payload"] or "{}"),
            source_sha256=row["source_sha256"],
            tool=row["tool"],
            id=int(row["id"]),
            from_chat_id=int(row["from_chat_id"]),
            digest=row["digest"],
            unreadable=tuple(json.loads(row["exposure"] or "[]")),
            steering=tuple(json.loads(row["steering"] or "[]")),
            status=row["status"],
            created_at=float(row["created_at"]),
            expires_at=float(row["expires_at"]),
        )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(out: Outgoing) -> str:
    """What the approval code stands for: this kind of way out, to this destination, of these bytes."""
    head = f"{out.kind}\0{out.destination}\0{json.dumps(out.meta, sort_keys=True)}\0".encode()
    return hashlib.sha256(head + out.body).hexdigest()


def is_text(body: bytes) -> bool:
    """A body the owner can read in a message (UTF-8, no NUL); anything else is shown as a file."""
    if b"\0" in body:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
