"""After a restart: every message a crash or a stop left open is answered once, or failed with a reason.

Accepted or archived messages younger than the recovery window are offered again in order (the gate only for
those it never judged); a ``sending`` one is settled by its reply rows: what is still pending is sent again
with the same ``random_id``s, so nothing arrives twice (docs/operations.md, "Exactly once"); older ones
fail, counted in the log. The same pass runs while the daemon is up after a turn could not record its
outcome (a full disk), skipping what is in flight.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import partial

import structlog

from teleton.gateway.contract import ChatInfo, GatewayError, IncomingMessage, Once, SentMessage, UserInfo
from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from teleton.storage import reply_sends as rs
from teleton.storage.sqlite_driver import Connection
from teleton.telegram.receive.dispatch import Dispatcher

TOO_OLD = "too old to answer after a restart (telegram.recovery_window_minutes)"
CUT_WHILE_SENDING = "a restart cut its reply while it was going out; not sent again"
REFUSED = "reply not delivered after a restart"

log = structlog.get_logger(__name__)

Offer = Callable[..., None]  # (IncomingMessage, accepted=bool) -> None: the pipeline's gate and record
SendMessage = Callable[..., Awaitable[SentMessage]]  # the gateway's send_message(chat_id, text, reply_to=, once=, ...)


async def resend_pending(
    db: Database, dispatcher: Dispatcher, send: SendMessage, window_s: float, now: float, *, tasks: bool
) -> dict[str, int]:
    """Send again every reply a crash cut, in order per chat, with its recorded ids. ``tasks``: also the
    replies of scheduled tasks still marked running (only at start: a live pass cannot tell a task's reply
    going out right now from one a fault cut)."""
    report = {"resent": 0, "not_resent": 0}
    for row in await db.read(rs.pending):
        if row.task_id is not None and not tasks:
            continue
        if any(dispatcher.in_flight(row.chat_id, m) for m in row.answers):
            continue  # a live turn is sending it right now
        state = rs.FAILED
        if now - row.created_at <= window_s and await db.read(partial(_still_owed, row=row)):
            state = rs.SENT if await _resend(db, send, row) else rs.FAILED
        await db.write(partial(_closed, row=row, state=state, now=now))
        report["resent" if state == rs.SENT else "not_resent"] += 1
    return report


async def _resend(db: Database, send: SendMessage, row: rs.ReplySend) -> bool:
    async def confirm(parts: int) -> None:
        await db.write(lambda c: rs.progress(c, row.id, parts))

    try:
        once = Once(row.random_base, row.parts_sent, confirm, edits=row.edits)  # a streamed answer: part 0 edits
        await send(row.chat_id, row.text, reply_to=row.reply_to, once=once, topic_id=row.topic_id)
    except GatewayError as exc:  # refused for good (the chat is gone, we were banned): not a fault to retry
        log.warning("reply_not_resent", chat_id=row.chat_id, error=str(exc))
        return False
    return True


def _still_owed(conn: Connection, row: rs.ReplySend) -> bool:
    if row.task_id is not None:
        found = conn.execute("select status from tasks where id = ?", (row.task_id,)).fetchone()
        return found is not None and found[0] == "running"
    return fa.any_open(conn, row.chat_id, row.answers)


def _closed(conn: Connection, row: rs.ReplySend, state: str, now: float) -> None:
    rs.close(conn, row.id, state)
    if row.task_id is not None:
        if state == rs.SENT:
            conn.execute("update tasks set delivered_at = ? where id = ?", (now, row.task_id))
        rs.delete(conn, [row.id])


async def recover_open(
    db: Database, dispatcher: Dispatcher, offer: Offer, window_s: float, now: float, me: UserInfo | None
) -> dict[str, int]:
    rows = await db.read(fa.open_messages)
    report = {"offered": 0, "too_old": 0, "sent_before": 0, "cut_while_sending": 0}
    closes: list[tuple[fa.OpenMessage, str, str | None]] = []
    offers: list[tuple[fa.OpenMessage, bool]] = []
    for row in rows:
        if dispatcher.in_flight(row.chat_id, row.message_id):
            continue
        if row.state == life.STATE_SENDING:  # settled by what its reply rows say, however old
            offers.append((row, False))
        elif now - row.date > window_s:
            closes.append((row, life.STATE_FAILED, TOO_OLD))
            report["too_old"] += 1
        else:
            offers.append((row, row.state == life.STATE_ACCEPTED))

    def resolve(conn: Connection) -> list[tuple[fa.OpenMessage, bool, bool]]:
        """Close what cannot be answered again; return what still can, with its mention facts."""
        for row, state, note in closes:
            life.move(conn, row.chat_id, [row.message_id], state, note)
        kept: list[tuple[fa.OpenMessage, bool, bool]] = []
        for row, accepted in offers:
            if row.state == life.STATE_SENDING:
                settled = _settle_sending(conn, row)
                if settled is not None:
                    state, note, went_out = settled
                    life.move(conn, row.chat_id, [row.message_id], state, note)
                    report["sent_before" if went_out else "cut_while_sending"] += 1
                continue
            replied_to_us = row.reply_to_id is not None and fa.is_our_message(conn, row.chat_id, row.reply_to_id)
            kept.append((row, accepted, replied_to_us))
        rs.delete_settled(conn)
        return kept

    for row, accepted, replied_to_us in await db.write(resolve):
        offer(_incoming(row, me, replied_to_us), accepted=accepted)
        report["offered"] += 1
    return report


def _settle_sending(conn: Connection, row: fa.OpenMessage) -> tuple[str, str | None, bool] | None:
    """What a message whose reply was going out is now: (state, note, went out), or None while a reply of
    it is still pending (in flight in a live pass)."""
    replies = rs.answering(conn, row.chat_id, row.message_id)
    if any(r.state == rs.PENDING for r in replies):
        return None
    if replies:
        sent = [r for r in replies if r.state == rs.SENT]
        if not sent:
            return life.STATE_FAILED, REFUSED, False
        failure = next((r.failure for r in sent if r.failure), None)
        return (life.STATE_FAILED, failure, True) if failure else (life.STATE_ANSWERED, None, True)
    since, failure = fa.read_sending_note(row.note, row.date)
    if not fa.our_message_since(conn, row.chat_id, since):
        return life.STATE_FAILED, CUT_WHILE_SENDING, False
    # What went out was the turn's apology: the message failed, for the turn's reason.
    return (life.STATE_FAILED, failure, True) if failure else (life.STATE_ANSWERED, None, True)


def _incoming(row: fa.OpenMessage, me: UserInfo | None, replied_to_us: bool) -> IncomingMessage:
    sender = None
    if row.sender is not None:
        s = row.sender
        sender = UserInfo(s.id, s.first_name, s.last_name, s.username, s.phone, s.is_bot)
    # A mention by entity was archived with the message; an @username in its text is one too.
    named = row.mentions_us or (me is not None and me.username is not None and _names(row.text, me.username))
    return IncomingMessage(
        chat=ChatInfo(id=row.chat_id, type=row.chat_type, title=row.chat_title),  # type: ignore[arg-type]
        sender=sender,
        message_id=row.message_id,
        text=row.text,
        date=row.date,
        reply_to_id=row.reply_to_id,
        reply_to_us=replied_to_us,
        mentions_us=bool(named),
        forwarded_from=row.fwd_from,
        topic_id=row.topic_id,
    )


def _names(text: str, username: str) -> bool:
    return re.search(rf"@{re.escape(username)}\b", text, re.IGNORECASE) is not None
