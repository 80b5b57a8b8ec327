"""Replies recorded before they go out (``reply_sends``, schema step 5): what recovery sends again, once.

A row is written with the ``sending`` record of the messages it answers (or the task it reports), moves on
as its parts are delivered (``parts_sent``), ends ``sent`` or ``failed``, and is deleted when its turn is
settled. Only rows of a turn a crash or a full disk cut are left behind, and recovery resends those still
``pending`` with the same ``random_base`` (see ``teleton/telegram/send/sending.py``). A streamed answer's
row names the message its part 0 is edited into (``edits``, step 7), and a reply in a forum topic the topic
(``topic_id``, step 10).

``reply_streams`` (step 7) holds a streamed message until its answer's row takes it over: what a restart
in the middle of the stream edits the new answer into (``stream_left``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from teleton.storage.sqlite_driver import Connection

RANDOM_MAX = 2**62  # a signed 64-bit random_id, with room for the part numbers added to the base
PENDING, SENT, FAILED = "pending", "sent", "failed"


def new_random_base() -> int:
    return secrets.randbelow(RANDOM_MAX - 1) + 1


@dataclass(frozen=True)
class ReplySend:
    id: int
    chat_id: int
    answers: tuple[int, ...]
    task_id: int | None
    text: str
    reply_to: int | None
    random_base: int
    parts_sent: int
    state: str
    failure: str | None
    created_at: float
    edits: int | None = None  # the streamed message part 0 is an edit of
    topic_id: int | None = None  # the forum topic it lands in (step 10)


_COLUMNS = (
    "id, chat_id, answers, task_id, text, reply_to, random_base, parts_sent, state, failure, created_at, edits, "
    "topic_id"
)


def record(
    conn: Connection,
    *,
    chat_id: int,
    text: str,
    reply_to: int | None,
    random_base: int,
    now: float,
    answers: Sequence[int] = (),
    task_id: int | None = None,
    failure: str | None = None,
    edits: int | None = None,
    topic_id: int | None = None,
) -> int:
    cur = conn.execute(
        "insert into reply_sends(chat_id, answers, task_id, text, reply_to, random_base, failure, created_at, "
        "edits, topic_id) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (chat_id, json.dumps(list(answers)), task_id, text, reply_to, random_base, failure, now, edits, topic_id),
    )
    if edits is not None:  # the reply's record takes the streamed message over
        stream_gone(conn, chat_id, edits)
    return int(cur.lastrowid)


def progress(conn: Connection, row_id: int, parts_sent: int) -> None:
    conn.execute("update reply_sends set parts_sent = max(parts_sent, ?) where id = ?", (parts_sent, row_id))


def close(conn: Connection, row_id: int, state: str) -> None:
    conn.execute("update reply_sends set state = ? where id = ? and state = 'pending'", (state, row_id))


def delete(conn: Connection, row_ids: Sequence[int]) -> None:
    conn.execute("delete from reply_sends where id in (select value from json_each(?))", (json.dumps(list(row_ids)),))


def delete_settled(conn: Connection) -> None:
    """Rows whose messages are all settled (answered, failed): nothing is owed through them any more."""
    conn.execute(
        "delete from reply_sends where task_id is null and state != 'pending' and not exists ("
        "select 1 from json_each(reply_sends.answers) j join tg_messages m on m.chat_id = reply_sends.chat_id "
        "and m.message_id = j.value where m.agent_state in ('archived', 'accepted', 'sending'))"
    )
    conn.execute(
        "delete from reply_streams where not exists (select 1 from json_each(reply_streams.answers) j "
        "join tg_messages m on m.chat_id = reply_streams.chat_id and m.message_id = j.value "
        "where m.agent_state in ('archived', 'accepted', 'sending'))"
    )


def pending(conn: Connection) -> list[ReplySend]:
    """Every reply still owed to a chat, in the order it was meant to go out."""
    rows = conn.execute(f"select {_COLUMNS} from reply_sends where state = 'pending' order by chat_id, id")
    return [_row(r) for r in rows]


def answering(conn: Connection, chat_id: int, message_id: int) -> list[ReplySend]:
    """The replies recorded for one archived message, oldest first."""
    rows = conn.execute(
        f"select {_COLUMNS} from reply_sends where chat_id = ? and exists "
        "(select 1 from json_each(reply_sends.answers) where value = ?) order by id",
        (chat_id, message_id),
    )
    return [_row(r) for r in rows]


def stream_shown(conn: Connection, chat_id: int, message_id: int, answers: Sequence[int], now: float) -> None:
    """A streamed message went out for these messages (still owed their answer)."""
    conn.execute(
        "insert or replace into reply_streams(chat_id, message_id, answers, started_at) values (?, ?, ?, ?)",
        (chat_id, message_id, json.dumps(list(answers)), now),
    )


def stream_left(conn: Connection, chat_id: int, answers: Sequence[int]) -> int | None:
    """The newest streamed message a cut turn left for any of these messages, taken over by the turn that
    answers them now (its record answers both sets); None: none."""
    found = conn.execute(
        "select message_id, answers, started_at from reply_streams where chat_id = ? and exists (select 1 "
        "from json_each(reply_streams.answers) j where j.value in (select value from json_each(?))) "
        "order by started_at desc, message_id desc limit 1",
        (chat_id, json.dumps(list(answers))),
    ).fetchone()
    if found is None:
        return None
    message_id, before = int(found[0]), json.loads(str(found[1]))
    merged = [*before, *(m for m in answers if m not in before)]
    stream_shown(conn, chat_id, message_id, merged, float(found[2]))
    return message_id


def stream_gone(conn: Connection, chat_id: int, message_id: int) -> None:
    conn.execute("delete from reply_streams where chat_id = ? and message_id = ?", (chat_id, message_id))


def streams_settled(conn: Connection, chat_id: int, answers: Sequence[int]) -> None:
    """The turn answering these messages is over: streamed messages left for them owe nothing any more."""
    conn.execute(
        "delete from reply_streams where chat_id = ? and exists (select 1 from json_each(reply_streams.answers) j "
        "where j.value in (select value from json_each(?)))",
        (chat_id, json.dumps(list(answers))),
    )


def _row(r: Sequence[object]) -> ReplySend:
    return ReplySend(
        id=int(r[0]),  # type: ignore[call-overload]
        chat_id=int(r[1]),  # type: ignore[call-overload]
        answers=tuple(json.loads(str(r[2]))),
        task_id=None if r[3] is None else int(r[3]),  # type: ignore[call-overload]
        text=str(r[4]),
        reply_to=None if r[5] is None else int(r[5]),  # type: ignore[call-overload]
        random_base=int(r[6]),  # type: ignore[call-overload]
        parts_sent=int(r[7]),  # type: ignore[call-overload]
        state=str(r[8]),
        failure=None if r[9] is None else str(r[9]),
        created_at=float(r[10]),  # type: ignore[arg-type]
        edits=None if r[11] is None else int(r[11]),  # type: ignore[call-overload]
        topic_id=None if r[12] is None else int(r[12]),  # type: ignore[call-overload]
    )
