"""The database check a running daemon makes (after a clean stop, once ready) is read beside the daemon's own
writes. On a connection that had read the feed's FTS5 table before, SQLite's check (3.50) reported "malformed
inverted index" once another connection had committed to it, though the file was sound, and the daemon stopped
itself with "the database is damaged" (seen in CI's fault-injection run). The check has a connection of its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from teleton.daemon.health import quick_check
from teleton.memory.feed import archive as fa
from teleton.storage import Database
from teleton.storage.database import connect
from teleton.storage.sqlite_driver import pick_driver
from tests.waiting import until

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()


async def test_a_sound_database_written_meanwhile_is_never_called_damaged(tmp_path: Path) -> None:
    path = tmp_path / "teleton.db"
    db = await Database.open(path)
    await db.fetchall("select count(*) from tg_messages_fts where tg_messages_fts match 'alpha'")  # as turns do
    done, committed = threading.Event(), [0]

    def write() -> None:  # another connection committing new and edited messages all through the checks
        conn = connect(path, pick_driver(), vectors=False)
        n = 0
        while not done.is_set():
            conn.execute("begin immediate")
            for _ in range(20):
                n += 1
                text = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(12))
                fa.insert_message(conn, fa.MessageRecord(-100 - n % 5, n, time.time(), text, 7, "Ann"))
                conn.execute("update tg_messages set text = ? where id = ?", (text[::-1], max(1, n // 2)))
            conn.execute("commit")
            committed[0] += 1
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        checks = []
        for i in range(30):  # each check beside writes committed since the last one (a count, not a time)
            await until(lambda i=i: committed[0] > i + 1)
            checks.append(await quick_check(db))
    finally:
        done.set()
        writer.join()
        await db.close()
    assert committed[0] > 30  # the writes went on through the checks
    assert checks == [[]] * 30
