"""The feed's conversational context in SQL: the triggers that fill ``tg_messages_fts.context`` (created by
schema steps 1 and 6, ``storage/migrations/``).

A message's keyword row carries the text of up to ``FEED_CONTEXT_MESSAGES`` earlier messages of its chat
sent within ``FEED_CONTEXT_SECONDS`` before it (``teleton.memory.feed.embedding`` applies the same rule in
Python, for the vector and when it refreshes a row). In the keyword row each of them contributes at most
``FEED_CONTEXT_CHARS`` of its text: Telegram's longest message whole, but not a 10 MB pasted log, which the
index would otherwise tokenise again into each of the next two rows, and find those rows by the paste's
words (issue 30).
"""

from __future__ import annotations

FEED_CONTEXT_MESSAGES = 2
FEED_CONTEXT_SECONDS = 6 * 3600
FEED_CONTEXT_CHARS = 4_096

# The token of a chat in tg_messages_fts.chat: "c" + the id, "-" spelled "m" (a tokenizer separator).
# teleton.memory.search.corpora.chat_token builds the same token for queries.
FEED_CHAT_TOKEN_SQL = "('c' || replace(cast(new.chat_id as text), '-', 'm'))"


def context_sql(chars: int | None) -> str:
    """The context of the row ``new`` (``chars``: each earlier message's text cut there; None: whole)."""
    text = "text" if chars is None else f"substr(text, 1, {int(chars)}) as text"
    return f"""(
        select coalesce(group_concat(p.text, ' '), '') from (
            select {text} from tg_messages
            where chat_id = new.chat_id and id != new.id and deleted = 0 and is_service = 0
              and date <= new.date and date >= new.date - {FEED_CONTEXT_SECONDS}
            order by date desc, id desc limit {FEED_CONTEXT_MESSAGES}
        ) p
    )"""


def feed_triggers(chars: int | None) -> str:
    """The insert and update triggers of the feed's keyword index (the delete trigger needs no context)."""
    context = context_sql(chars)
    return f"""
create trigger if not exists tg_messages_ai after insert on tg_messages begin
    insert into tg_messages_fts(rowid, sender_name, text, context, chat)
        values (new.id, new.sender_name, new.text, {context}, {FEED_CHAT_TOKEN_SQL});
end;
create trigger if not exists tg_messages_au after update of sender_name, text on tg_messages begin
    delete from tg_messages_fts where rowid = old.id;
    insert into tg_messages_fts(rowid, sender_name, text, context, chat)
        values (new.id, new.sender_name, new.text, {context}, {FEED_CHAT_TOKEN_SQL});
    update tg_messages set embedded = 0 where id = new.id and new.text is not old.text;
end;
"""
