"""Schema step 2 -> 3: facts with time and a subject (issue 15, docs/memory.md).

``subject``: whom a fact is about (``owner``, ``user:<id>``, ``chat:<id>``, ``other:<name>``; existing facts
get the one their label implies). ``valid_from`` / ``valid_until``: a fact is current while ``valid_until`` is
NULL; a superseded one keeps its row, ``superseded_by`` naming its successor. Only current facts are in
``facts_fts`` (a trigger here) and ``facts_vec``, and the unique keys hold among a subject's current facts.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import fts_triggers, run_script
from teleton.storage.sqlite_driver import Connection

DDL = f"""
alter table facts add column subject text not null default '';
alter table facts add column valid_from real;
alter table facts add column valid_until real;
alter table facts add column superseded_by integer;
update facts set valid_from = created_at;
update facts set subject = case
    when scope = 'owner' then 'owner'
    when scope like 'user:%' or scope like 'chat:%' then scope
    else '' end;

drop index if exists facts_scope_key;
drop index if exists facts_scope_hash;
create unique index if not exists facts_current_key on facts(scope, subject, category, key)
    where key is not null and valid_until is null;
create unique index if not exists facts_current_hash on facts(scope, subject, hash) where valid_until is null;
create index if not exists facts_superseded_by on facts(superseded_by) where superseded_by is not null;

drop trigger if exists facts_ai;
drop trigger if exists facts_ad;
drop trigger if exists facts_au;
{fts_triggers("facts", ("category", "key", "value"), indexed="{row}.valid_until is null")}
create trigger facts_ended after update of valid_until on facts
    when old.valid_until is null and new.valid_until is not null begin
    insert into facts_fts(facts_fts, rowid, category, key, value)
        values ('delete', old.id, old.category, old.key, old.value);
end;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
