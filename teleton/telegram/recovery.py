"""After a restart: every message a crash or a stop left open is answered once or failed with a reason.

- accepted (the gate said yes) and younger than the recovery window: offered again, in order per chat,
  without asking the gate twice (the dispatcher refuses one already in flight);
- archived (committed, the gate never ran): through the gate now, as it would have been;
- sending (its reply was going out): our reply in the chat's archive since then means it went out — it
  is answered (failed, with the turn's reason, when what went out was an apology for a failed turn);
  otherwise it failed, and it is not sent again (a reply is never sent twice);
- older than the window: failed, "too old to answer after a restart", and counted in the log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory import feed_archive as fa
from teleton.storage import Database
from teleton.storage.sqlite_driver import Connection

TOO_OLD = "too old to answer after a restart (telegram.recovery_window_minutes)"
CUT_WHILE_SENDING = "a restart cut its reply while it was going out; not sent again"

Offer = Callable[..., None]  # (IncomingMessage, accepted=bool) -> None: the pipeline's gate and record


async def recover_open(
    db: Database, dispatcher: Any, offer: Offer, window_s: float, now: float, me: UserInfo | None
) -> dict[str, int]:
    rows = await db.read(fa.open_messages)
    report = {"offered": 0, "too_old": 0, "sent_before": 0, "cut_while_sending": 0}
    closes: list[tuple[fa.OpenMessage, str, str | None]] = []
    offers: list[tuple[fa.OpenMessage, bool]] = []
    for row in rows:
        if dispatcher.in_flight(row.chat_id, row.message_id):
            continue
        if now - row.date > window_s:
            closes.append((row, fa.STATE_FAILED, TOO_OLD))
            report["too_old"] += 1
        elif row.state == fa.STATE_SENDING:
            offers.append((row, False))
        else:
            offers.append((row, row.state == fa.STATE_ACCEPTED))

    def resolve(conn: Connection) -> list[tuple[fa.OpenMessage, bool, bool]]:
        """Close what cannot be answered again; return what still can, with its mention facts."""
        for row, state, note in closes:
            fa.set_answer_state(conn, row.chat_id, [row.message_id], state, note)
        kept: list[tuple[fa.OpenMessage, bool, bool]] = []
        for row, accepted in offers:
            if row.state == fa.STATE_SENDING:
                since, failure = fa.read_sending_note(row.note, row.date)
                went_out = fa.our_message_since(conn, row.chat_id, since)
                if not went_out:
                    state, note = fa.STATE_FAILED, CUT_WHILE_SENDING
                elif failure:  # what went out was the turn's apology: the message failed, for the turn's reason
                    state, note = fa.STATE_FAILED, failure
                else:
                    state, note = fa.STATE_ANSWERED, None
                fa.set_answer_state(conn, row.chat_id, [row.message_id], state, note)
                report["sent_before" if went_out else "cut_while_sending"] += 1
                continue
            replied_to_us = row.reply_to_id is not None and fa.is_our_message(conn, row.chat_id, row.reply_to_id)
            kept.append((row, accepted, replied_to_us))
        return kept

    for row, accepted, replied_to_us in await db.write(resolve):
        offer(_incoming(row, me, replied_to_us), accepted=accepted)
        report["offered"] += 1
    return report


def _incoming(row: fa.OpenMessage, me: UserInfo | None, replied_to_us: bool) -> IncomingMessage:
    sender = None
    if row.sender is not None:
        s = row.sender
        sender = UserInfo(s.id, s.first_name, s.last_name, s.username, s.phone, s.is_bot)
    # Entity mentions are not archived; an @username in the text is the mention a re-gate can still see.
    named = me is not None and me.username is not None and _names(row.text, me.username)
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
    )


def _names(text: str, username: str) -> bool:
    return re.search(rf"@{re.escape(username)}\b", text, re.IGNORECASE) is not None
