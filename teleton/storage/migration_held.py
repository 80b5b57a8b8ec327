"""Schema step 3 -> 4: held items bound to their content (issue 29, docs/privacy.md "Approval is bound to content").

``pending_sends`` now holds every way out that waits for the owner, not only sends and writes: forwards,
moves, public facts and documents, fetches, commands. Each row keeps the exact bytes that would leave
(``body``), their SHA-256 (``body_sha256``), the digest of what was shown to the owner (``digest``: kind,
destination and body; its first 8 hex digits are the approval code), the tool that carries it out
(``tool``), what the release needs besides the body (``payload``, JSON) and, for a forward or a move, the
hash of the source as shown (``source_sha256``: the release refuses if the source changed since).

A table's CHECK cannot be altered in SQLite, so the table is rebuilt. Rows still pending from before were
never bound to their content: they are marked expired (the owner is asked again if the agent retries).
Decided rows keep their history with the text they had as ``body``.
"""

from __future__ import annotations

from collections.abc import Callable

from teleton.storage.sqlite_driver import Connection

KINDS = (
    "message", "forward", "edit", "reaction", "poll", "file", "write", "move", "fact", "document", "fetch",
    "outside_tool", "exec",
)  # fmt: skip

DDL = f"""
create table pending_sends_v4 (
    id            integer primary key,
    from_chat_id  integer not null,
    to_chat_id    integer,
    kind          text not null check (kind in ({", ".join(f"'{k}'" for k in KINDS)})),
    tool          text not null default '',
    label         text,
    payload       text not null default '{{}}',
    body          blob not null,
    body_sha256   text not null,
    source_sha256 text,
    digest        text not null,
    preview       text not null,
    exposure      text not null default '[]',
    steering      text not null default '[]',
    status        text not null default 'pending'
                  check (status in ('pending', 'approved', 'denied', 'expired', 'sent', 'failed')),
    result        text,
    created_at    real not null,
    expires_at    real not null,
    decided_at    real,
    decided_by    integer
);
insert into pending_sends_v4(id, from_chat_id, to_chat_id, kind, tool, label, payload, body, body_sha256, digest,
                             preview, exposure, status, result, created_at, expires_at, decided_at, decided_by)
    select id, from_chat_id, nullif(to_chat_id, 0), case kind when 'rename' then 'move' else kind end, '',
           json_extract(payload, '$.label'), payload, cast(preview as blob), '', '', preview, exposure,
           case status when 'pending' then 'expired' else status end, result, created_at, expires_at,
           decided_at, decided_by
    from pending_sends;
drop table pending_sends;
alter table pending_sends_v4 rename to pending_sends;
create index if not exists pending_sends_status on pending_sends(status, expires_at);
"""


def migrate_held(conn: Connection, run_script: Callable[[Connection, str], None]) -> None:
    run_script(conn, DDL)
