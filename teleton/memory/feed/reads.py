"""The archive's reads that other parts make, by name: the feed package owns every line of SQL on the
``tg_*`` tables, so a change to them (a column, an index, the ``deleted`` rule) is made here once.

Each takes a connection, to run inside ``Database.read``; none filters by privacy label: the caller reads
only chats its clearance allows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from teleton.storage.sqlite_driver import Connection


def message(conn: Connection, chat_id: int, message_id: int) -> Any | None:
    """One message as it is now (None when it is gone): sender, direction, text, media, edit date."""
    return conn.execute(
        "select sender_id, sender_name, is_outgoing, text, media_kind, edit_date, fwd_from from tg_messages "
        "where chat_id = ? and message_id = ? and deleted = 0",
        (chat_id, message_id),
    ).fetchone()


def recent_lines(
    conn: Connection, chat_id: int, limit: int, *, exclude: int | None, chars: int, topic: int | None = None
) -> list[Any]:
    """The last ``limit`` messages with text of one chat (of one forum topic: ``topic``, None being the General
    one and every message of a chat without topics) but ``exclude``, oldest first, each text read up to
    ``chars`` characters (a 10 MB paste stays whole in the archive; a prompt reads its head). Slash commands
    and their replies (``is_service``) are never a recent message, as they are never a relevant one."""
    rows = conn.execute(
        "select chat_id, message_id, date, sender_id, sender_name, is_outgoing, fwd_from, substr(text, 1, ?) as text "
        "from tg_messages where chat_id = ? and topic_id is ? and deleted = 0 and is_service = 0 "
        "and message_id != ? and text != '' "
        "order by date desc, message_id desc limit ?",
        (chars, chat_id, topic, -1 if exclude is None else exclude, limit),
    ).fetchall()
    return list(reversed(rows))


def history(conn: Connection, chat_id: int, limit: int, before: int | None = None) -> list[Any]:
    """A chat's last ``limit`` messages (before message ``before``), oldest first, service messages left out."""
    sql = (
        "select message_id, date, sender_id, sender_name, text, is_outgoing, media_kind, reply_to_id, fwd_from "
        "from tg_messages where chat_id = ? and deleted = 0 and is_service = 0 "
    )
    params: list[Any] = [chat_id]
    if before is not None:
        sql += "and message_id < ? "
        params.append(before)
    rows = conn.execute(sql + "order by date desc, message_id desc limit ?", [*params, limit]).fetchall()
    return list(reversed(rows))


def count(conn: Connection, chat_ids: Sequence[int] | None = None) -> int:
    """How many messages the archive holds (of ``chat_ids`` only, when given)."""
    if chat_ids is None:
        return int(conn.execute("select count(*) from tg_messages where deleted = 0").fetchone()[0])
    return int(
        conn.execute(
            "select count(*) from tg_messages where deleted = 0 and chat_id in (select value from json_each(?))",
            (json.dumps(list(chat_ids)),),
        ).fetchone()[0]
    )


def newest_row(conn: Connection) -> int:
    """The archive's newest row id: how many messages it has taken in (deleted ones too)."""
    return int(conn.execute("select max(id) from tg_messages").fetchone()[0] or 0)


def recent_senders(conn: Connection, chat_id: int, limit: int) -> list[Any]:
    """(sender id, a name it used, its @username) of the senders among a chat's last ``limit`` messages."""
    return conn.execute(
        "select m.sender_id, m.sender_name, u.username from (select sender_id, max(sender_name) as sender_name "
        "from (select sender_id, sender_name from tg_messages where chat_id = ? and sender_id is not null "
        "order by date desc limit ?) group by sender_id) m left join tg_users u on u.id = m.sender_id",
        (chat_id, limit),
    ).fetchall()


def has_written(conn: Connection, chat_id: int, user_id: int) -> bool:
    """Whether the archive holds a message of ``user_id`` in chat ``chat_id``."""
    row = conn.execute("select 1 from tg_messages where chat_id = ? and sender_id = ? limit 1", (chat_id, user_id))
    return row.fetchone() is not None


def chat(conn: Connection, chat_id: int) -> Any | None:
    """A chat as the archive knows it: type, title, @username, member count (None: never seen)."""
    return conn.execute("select type, title, username, member_count from tg_chats where id = ?", (chat_id,)).fetchone()


def chat_titles(conn: Connection, chat_ids: Sequence[int]) -> dict[int, str]:
    """Chat id -> title, of those the archive knows."""
    rows = conn.execute(
        "select id, title from tg_chats where id in (select value from json_each(?))", (json.dumps(list(chat_ids)),)
    ).fetchall()
    return {int(row[0]): str(row[1] or "") for row in rows}


def recent_chats(conn: Connection, limit: int) -> list[Any]:
    """(id, type, title) of the chats most recently seen, newest first (the dashboard's "see as" list)."""
    return conn.execute("select id, type, title from tg_chats order by updated_at desc limit ?", (limit,)).fetchall()


def user_name(conn: Connection, user_id: int) -> Any | None:
    """A user's names as the archive knows them: first, last, @username (never the phone)."""
    return conn.execute("select first_name, last_name, username from tg_users where id = ?", (user_id,)).fetchone()


def messages_by_key(
    conn: Connection, keys: Sequence[tuple[int, int]], columns: Sequence[str]
) -> dict[tuple[int, int], Any]:
    """Archived messages by (chat id, message id) with ``columns`` and their text; deleted ones and service
    messages left out, as the feed's search leaves them out."""
    if not keys:
        return {}
    wanted = ", ".join(f"m.{c}" for c in columns)
    rows = conn.execute(
        f"select m.id, m.text, {wanted} from tg_messages m join json_each(?) k "
        "on m.chat_id = json_extract(k.value, '$[0]') and m.message_id = json_extract(k.value, '$[1]') "
        "where m.deleted = 0 and m.is_service = 0",
        (json.dumps([list(k) for k in keys]),),
    ).fetchall()
    return {(int(r["chat_id"]), int(r["message_id"])): r for r in rows}
