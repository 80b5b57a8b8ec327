"""Schema step 2 -> 3: facts with time and a subject (issue 15).

- ``subject``: whom a fact is about — ``owner``, ``user:<id>`` (a Telegram user), ``chat:<id>`` (a group as a
  whole) or ``other:<name>`` (another person or a thing, by name); ``''`` when unknown. Existing facts get
  the subject their label implies: ``owner`` for the owner's, ``user:<id>`` for another person's DM, the
  group itself for a group's.
- ``valid_from`` / ``valid_until``: when the fact became and stopped being true as far as memory knows.
  A fact is current while ``valid_until`` is NULL; a superseded fact keeps its row as history, with
  ``superseded_by`` naming the fact that replaced it.
- Only current facts are in ``facts_fts`` and ``facts_vec``: ending a fact takes it out of the keyword index
  here (trigger) and out of the vector table in ``teleton.memory.facts.store``, so no search path can offer it as
  current. The unique keys (same text, same attribute) hold among current facts of one subject only, so a
  value can be superseded and later said again.
"""

from __future__ import annotations

from collections.abc import Callable

from teleton.storage.sqlite_driver import Connection

DDL = """
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
create trigger facts_ai after insert on facts when new.valid_until is null begin
    insert into facts_fts(rowid, category, key, value) values (new.id, new.category, new.key, new.value);
end;
create trigger facts_ad after delete on facts when old.valid_until is null begin
    insert into facts_fts(facts_fts, rowid, category, key, value)
        values ('delete', old.id, old.category, old.key, old.value);
end;
create trigger facts_au after update of category, key, value on facts
    when old.valid_until is null and new.valid_until is null begin
    insert into facts_fts(facts_fts, rowid, category, key, value)
        values ('delete', old.id, old.category, old.key, old.value);
    insert into facts_fts(rowid, category, key, value) values (new.id, new.category, new.key, new.value);
end;
create trigger facts_ended after update of valid_until on facts
    when old.valid_until is null and new.valid_until is not null begin
    insert into facts_fts(facts_fts, rowid, category, key, value)
        values ('delete', old.id, old.category, old.key, old.value);
end;
"""


def migrate_fact_history(conn: Connection, run_script: Callable[[Connection, str], None]) -> None:
    run_script(conn, DDL)
