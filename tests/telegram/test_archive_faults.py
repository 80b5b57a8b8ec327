"""The archive under write failures: a COMMIT that fails is retried until it succeeds, nothing is
acknowledged before it is on disk, nothing queued is lost, and callers wait while the queue is full."""

from __future__ import annotations

import asyncio

from teleton.memory.feed.archive import MessageRecord, insert_message
from teleton.storage import Database
from teleton.telegram.receive.archiver import ArchiveBatcher
from tests.waiting import until


def _message(message_id: int):
    return lambda conn: insert_message(conn, MessageRecord(chat_id=7, message_id=message_id, date=1.0, text="hi"))


def _commit_fails_until_task_77_exists(conn) -> None:
    # A deferred foreign key is checked at COMMIT: this batch's commit fails, as on a full disk, until the
    # row it points to exists ("space returns").
    conn.execute("pragma defer_foreign_keys = on")
    conn.execute("insert into tasks(id, description, kind, created_at, updated_at) values (10, 'x', 'agent', 0, 0)")
    conn.execute("insert into task_dependencies(task_id, depends_on) values (10, 77)")


async def test_a_failing_commit_is_retried_and_loses_nothing(db: Database) -> None:
    batcher = ArchiveBatcher(db, retry_max_s=0.05)
    await batcher.run(_message(1))  # acknowledged: on disk
    acks = [await batcher.put(_commit_fails_until_task_77_exists), await batcher.put(_message(2))]
    await until(lambda: batcher.failing_since is not None)
    assert not any(f.done() for f in acks)  # nothing is acknowledged while its commit fails
    assert [r[0] for r in await db.fetchall("select message_id from tg_messages")] == [1]
    later = await batcher.put(_message(3))  # new writes queue behind the failing batch
    await db.execute("insert into tasks(id, description, kind, created_at, updated_at) values (77, 'y', 'agent', 0, 0)")
    await asyncio.gather(*acks, later)
    assert batcher.failing_since is None and batcher.batches >= 2
    assert [r[0] for r in await db.fetchall("select message_id from tg_messages order by message_id")] == [1, 2, 3]
    await batcher.close()


async def test_a_full_queue_makes_callers_wait(db: Database) -> None:
    batcher = ArchiveBatcher(db, max_queue=2, retry_max_s=0.05)
    await batcher.put(_commit_fails_until_task_77_exists)
    await until(lambda: batcher.failing_since is not None)
    await batcher.put(_message(1))
    await batcher.put(_message(2))
    blocked = asyncio.create_task(batcher.put(_message(3)))
    for _ in range(20):  # let it run as far as it can
        await asyncio.sleep(0)
    assert not blocked.done() and batcher.depth == 2  # back-pressure, not unbounded memory
    await db.execute("insert into tasks(id, description, kind, created_at, updated_at) values (77, 'y', 'agent', 0, 0)")
    await (await blocked)
    assert (await db.fetchone("select count(*) from tg_messages"))[0] == 3
    await batcher.close()
