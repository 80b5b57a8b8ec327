"""What a fact is, as saved and as read back, and the two texts derived from it (its hash and its embedding).

A fact has a label (``scope``: who may read it, docs/privacy.md) and a ``subject`` (whom it is about:
``teleton.memory.facts.subjects``). It is current until ``valid_until`` is set, when a newer fact about the same
subject and attribute supersedes it; the old row stays as history (``superseded_by`` names the new one).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from teleton.memory.search.corpora import CURRENT
from teleton.privacy import OWNER
from teleton.storage.sqlite_driver import Connection

COLUMNS = (
    "id, category, key, value, scope, subject, source, importance, access_count, last_access, created_at, "
    "updated_at, valid_from, valid_until, superseded_by"
)


@dataclass(frozen=True)
class Fact:
    value: str
    category: str = "general"
    key: str | None = None
    scope: str = OWNER  # the fact's privacy label
    source: str = "agent"
    importance: float = 0.5
    subject: str = ""  # whom it is about ('' = not said)
    replaces: int | None = None  # a current fact of the same scope this one supersedes (the distiller's word)
    said_by: str = ""  # the subject of who said it ('' = the owner's own tools and scripts)


@dataclass(frozen=True)
class StoredFact:
    id: int
    category: str
    key: str | None
    value: str
    scope: str
    source: str
    importance: float
    access_count: int
    last_access: float | None
    created_at: float
    updated_at: float
    score: float = 0.0
    subject: str = ""
    valid_from: float | None = None
    valid_until: float | None = None
    superseded_by: int | None = None

    @property
    def current(self) -> bool:
        return self.valid_until is None

    def line(self) -> str:
        label = f"{self.category}/{self.key}" if self.key else self.category
        if self.current:
            return f"[{label}] {self.value}"
        return f"[{label}, no longer true since {day(self.valid_until)}] {self.value}"


def stored(row: Any, score: float = 0.0) -> StoredFact:
    return StoredFact(
        id=int(row["id"]),
        category=row["category"],
        key=row["key"],
        value=row["value"],
        scope=row["scope"],
        source=row["source"],
        importance=float(row["importance"]),
        access_count=int(row["access_count"]),
        last_access=row["last_access"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        score=score,
        subject=row["subject"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        superseded_by=row["superseded_by"],
    )


def fact_hash(value: str) -> str:
    return hashlib.sha256(" ".join(value.lower().split()).encode()).hexdigest()


def current_duplicate(conn: Connection, fact: Fact, digest: str) -> int | None:
    """The id of a current fact saying exactly this (``digest``, its ``fact_hash``) in the fact's scope and about
    its subject: saving it again adds nothing."""
    row = conn.execute(
        f"select id from facts where scope = ? and subject = ? and hash = ? and {CURRENT}",
        (fact.scope, fact.subject, digest),
    ).fetchone()
    return None if row is None else int(row[0])


def embedding_text(category: str, key: str | None, value: str) -> str:
    """The one text a fact is embedded as: on save, on merge and on re-embedding alike."""
    return f"{category} {key or ''} {value}"


_PAST = re.compile(
    r"\b(used? to|previous(ly)?|former(ly)?|before|earlier|old|originally|no longer|any ?more|changed|history)\b",
    re.IGNORECASE,
)


def asks_about_past(question: str) -> bool:
    """Whether a question may be about how things were ("where did I use to live?"), so the facts that
    were superseded are worth showing too, marked as no longer true."""
    return bool(_PAST.search(question))


def day(timestamp: float | None) -> str:
    return datetime.fromtimestamp(timestamp or 0).astimezone().strftime("%Y-%m-%d")
