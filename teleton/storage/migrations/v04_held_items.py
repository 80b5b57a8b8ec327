"""Schema step 3 -> 4: held items bound to their content (issue 29, docs/privacy.md, "What `/approve N CODE` releases").

``pending_sends`` holds every way out that waits for the owner, each with the exact bytes that would leave,
their SHA-256, the digest the approval code is cut from, the tool that releases it and, for a forward or a
move, the source's hash as shown. SQLite cannot alter a CHECK, so the table is rebuilt; rows pending from
before were never bound to their content and are marked expired.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
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


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
