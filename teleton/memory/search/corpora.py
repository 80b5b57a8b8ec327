"""The searchable record kinds: where each one's rows, keyword index and vectors live.

All table and column names of the searches come from these constants, never from callers; user text only
ever travels as a bound parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teleton.storage.vector_tables import HALF_VECTOR_TABLE


@dataclass(frozen=True)
class Corpus:
    """Where one kind of record lives. All names are constants of this module, never user input."""

    name: str
    table: str
    fts: str
    vec: str | None
    text_column: str
    columns: tuple[str, ...]  # extra columns returned in SearchHit.meta
    scope_column: str | None  # a column of ``table``: the partition key of a vec0 ``vec``, or the in-memory scope
    fts_columns: tuple[str, ...]  # the FTS table's columns, in order
    fts_weights: tuple[float, ...]  # bm25() weight per FTS column, in the same order
    where: str = "1"  # a constant condition on the base table (alias t)
    # ``vec`` is a plain table of float16 vectors searched through the in-memory ``bit_index`` (scoped or not),
    # not a vec0 table: the feed's, whose chats are too many for vec0's partitions (a chunk of 1,024 vectors
    # each, 1.5 MB for a chat of 3 messages).
    half: bool = False
    scope_fts_column: str | None = None  # an FTS column holding a token per scope value (see chat_token)
    scope_type: type = str  # scope values are converted to this (chat ids arrive as str from some callers)
    date_column: str | None = None  # a column of ``columns``: the row's time, for queries that name one


def chat_token(chat_id: Any) -> str:
    """The token of a chat in ``tg_messages_fts.chat`` (mirrors FEED_CHAT_TOKEN_SQL of the schema)."""
    return "c" + str(int(chat_id)).replace("-", "m")


CURRENT = "valid_until is null"  # facts: the one test of "this fact is still true", in SQL

KNOWLEDGE = Corpus(
    name="knowledge",
    table="knowledge",
    fts="knowledge_fts",
    vec="knowledge_vec",
    text_column="text",
    columns=("source", "path", "heading", "start_line", "label"),
    scope_column="label",
    fts_columns=("heading", "text"),
    fts_weights=(0.5, 1.0),
)
FEED = Corpus(
    name="feed",
    table="tg_messages",
    fts="tg_messages_fts",
    vec=HALF_VECTOR_TABLE,
    text_column="text",
    columns=("chat_id", "message_id", "sender_id", "sender_name", "date", "is_outgoing", "topic_id", "fwd_from"),
    scope_column="chat_id",
    fts_columns=("sender_name", "text", "context", "chat"),
    fts_weights=(1.0, 1.0, 0.3, 0.0),
    where="t.deleted = 0 and t.is_service = 0",  # service messages, slash commands and their replies: not talk
    half=True,
    scope_fts_column="chat",
    scope_type=int,
    date_column="date",
)
FACTS = Corpus(
    name="facts",
    table="facts",
    fts="facts_fts",
    vec="facts_vec",
    text_column="value",
    columns=(
        "category",
        "key",
        "scope",
        "subject",
        "source",
        "importance",
        "access_count",
        "last_access",
        "created_at",
    ),
    scope_column="scope",
    fts_columns=("category", "key", "value"),
    fts_weights=(0.3, 0.7, 1.0),
    where=f"t.{CURRENT}",  # superseded facts are history, never search hits
)
TOOLS = Corpus(
    name="tools",
    table="tool_index",
    fts="tool_index_fts",
    vec="tool_index_vec",
    text_column="description",
    columns=("name",),
    scope_column=None,
    fts_columns=("name", "search_text"),
    fts_weights=(2.0, 1.0),
)
