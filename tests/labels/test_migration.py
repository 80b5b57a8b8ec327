"""Schema step 2 labels a database made before privacy labels, conservatively: what cannot be shown to be a
group's or another person's becomes the owner's; nothing is lost but exact duplicates."""

from __future__ import annotations

import json
from pathlib import Path

from teleton.storage import Database, connect, schema
from teleton.storage.sqlite_driver import pick_driver


def _v1_database(path: Path) -> None:
    conn = connect(path, pick_driver(), vectors=False)
    schema.migrate(conn, schema.MIGRATIONS[:1])
    now = 1.7e9
    knowledge = [
        ("memory", "MEMORY.md", "owner notes"),
        ("session", "sessions/-100777/abc", "a group's summary"),
        ("session", "sessions/4242/def", "a DM's summary (whose? the owner's or a user's: unclear)"),
        ("learned", "", "something learned"),
    ]
    for i, (source, path_, text) in enumerate(knowledge):
        conn.execute(
            "insert into knowledge(source, path, text, hash, created_at, updated_at) values (?, ?, ?, ?, ?, ?)",
            (source, path_, text, f"h{i}", now, now),
        )
    facts = [
        ("user", "pet", "cat", "The cat is Tom", "a"),
        ("global", "pet", "cat", "The cat is Tim", "b"),  # same key as the owner's: keeps its value, loses its key
        ("global", "misc", None, "Water boils at 100 C", "c"),
        ("global", "misc", None, "The cat is Tom (dup)", "a"),  # same text as an owner fact: dropped
        ("chat:-100777", "plan", None, "Hike on Saturday", "d"),
        ("chat:5151", "pref", None, "Alice likes tea", "e"),  # another person's DM
        ("weird scope", "misc", None, "From a broken row", "f"),
    ]
    for scope, category, key, value, digest in facts:
        conn.execute(
            "insert into facts(scope, category, key, value, hash, created_at, updated_at) values (?,?,?,?,?,?,?)",
            (scope, category, key, value, digest, now, now),
        )
    conn.execute(
        "insert into tasks(chat_id, description, kind, payload, status, created_at, updated_at) "
        "values (-100777, 'remind', 'agent', ?, 'pending', ?, ?)",
        (json.dumps({"prompt": "x", "admin": True, "sender_id": 6666}), now, now),
    )
    conn.close()


async def test_a_v1_database_is_labelled_conservatively(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _v1_database(path)
    db = await Database.open(path)
    try:
        assert (db.info.schema_from, db.info.schema_to) == (1, schema.SCHEMA_VERSION)
        labels = {r["text"]: r["label"] for r in await db.fetchall("select text, label from knowledge")}
        assert labels == {
            "owner notes": "owner",
            "a group's summary": "chat:-100777",
            "a DM's summary (whose? the owner's or a user's: unclear)": "owner",
            "something learned": "owner",
        }
        facts = {r["value"]: (r["scope"], r["key"]) for r in await db.fetchall("select value, scope, key from facts")}
        assert facts == {
            "The cat is Tom": ("owner", "cat"),
            "The cat is Tim": ("owner", None),
            "Water boils at 100 C": ("owner", None),
            "Hike on Saturday": ("chat:-100777", None),
            "Alice likes tea": ("user:5151", None),
            "From a broken row": ("owner", None),
        }
        # Relabelled facts need new vectors (their partition changed).
        pending = await db.fetchall("select value from facts where embedded = 0")
        assert len(pending) == 6
        # Old tasks have no stored clearance: they run with their chat's (a group's, here), never as the owner.
        task = await db.fetchone("select clearance, principal_id, principal_admin from tasks")
        assert tuple(task) == (None, None, 0)
        assert (await db.fetchone("select count(*) from pending_sends"))[0] == 0
    finally:
        await db.close()
