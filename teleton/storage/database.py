"""The one SQLite database, behind an async API that never runs SQL on the event-loop thread.

One writer thread owns the only write connection, so writes are serialised without lock contention;
a small pool of reader threads each hold their own connection and read concurrently under WAL.
Callers pass plain functions of a connection (``await db.read(fn)``, ``await db.write(fn)``), which keeps
the SQL in sync functions that are easy to test and lets a write run several statements in one
transaction.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import structlog

from teleton.storage import schema, vector_tables
from teleton.storage.failures import StorageError, cause_of
from teleton.storage.private_files import private_parents, touch_private
from teleton.storage.sqlite_driver import Connection, Driver, has_fts5, load_sqlite_vec, pick_driver

log = structlog.get_logger(__name__)
T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000


def connect(path: Path | str, driver: Driver, *, vectors: bool = True, readonly: bool = False) -> Connection:
    """Open a tuned connection (WAL, foreign keys, busy timeout), with sqlite-vec when asked and possible."""
    conn = driver.module.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.row_factory = driver.module.Row
    conn.execute(f"pragma busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("pragma foreign_keys = on")
    if not readonly:
        conn.execute("pragma journal_mode = wal")
        conn.execute("pragma synchronous = normal")
    else:
        conn.execute("pragma query_only = 1")
    if vectors:
        load_sqlite_vec(conn)
    return conn


@dataclass
class StoreInfo:
    path: Path
    driver: str
    sqlite_version: str
    fts5: bool
    vec_version: str | None
    schema_from: int
    schema_to: int
    vectors_reset: bool = False

    @property
    def vectors(self) -> bool:
        return self.vec_version is not None


@dataclass
class Database:
    """Open with ``await Database.open(path)``; close with ``await db.close()``."""

    path: Path
    info: StoreInfo
    _driver: Driver
    _writer: ThreadPoolExecutor
    _readers: ThreadPoolExecutor
    _write_conn: Connection
    _local: threading.local = field(default_factory=threading.local)
    _reader_conns: list[Connection] = field(default_factory=list)
    _closed: bool = False
    _reader_threads: int = 3

    @property
    def vectors(self) -> bool:
        return self.info.vectors

    @classmethod
    async def open(
        cls,
        path: Path | str,
        *,
        embedding: tuple[str, int] | None = None,
        vectors: bool = True,
        readers: int = 3,
        readonly: bool = False,
    ) -> Database:
        """Open (creating and migrating) the database; ``readonly``: an existing one at this schema version, as
        it is (every write refused by SQLite), for a reader beside the daemon (`teleton dashboard`).

        ``embedding`` is (model name, dimension) of the configured embedding model; with it and a loadable
        sqlite-vec the vector tables exist. Without sqlite-vec the store opens keyword-only and says so once.
        """
        path = Path(path)
        driver = pick_driver()
        writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleton-db-writer")
        loop = asyncio.get_running_loop()

        def _open() -> tuple[Connection, StoreInfo]:
            if readonly:
                return _open_readonly(path, driver, vectors)
            private_parents(path)
            if not path.exists():
                # 0600 before SQLite opens it: its -wal and -shm files are created with the database's mode.
                touch_private(path)
            conn = connect(path, driver, vectors=vectors)
            start, end = schema.migrate(conn)
            vec_version = None
            if vectors and embedding is not None:
                vec_version = _vec_version(conn)
            reset = False
            if vec_version is not None and embedding is not None:
                reset = vector_tables.ensure_vector_tables(conn, embedding[0], embedding[1])
            info = StoreInfo(
                path=path,
                driver=driver.name,
                sqlite_version=driver.sqlite_version,
                fts5=has_fts5(conn),
                vec_version=vec_version,
                schema_from=start,
                schema_to=end,
                vectors_reset=reset,
            )
            return conn, info

        try:
            conn, info = await loop.run_in_executor(writer, _open)
        except BaseException as exc:
            writer.shutdown(wait=False)
            _raise_named(exc, path)
            raise
        if embedding is not None and vectors and not info.vectors:
            log.warning(
                "vectors_unavailable",
                reason="sqlite-vec could not be loaded",
                effect="search runs keyword-only",
            )
        if info.schema_from != info.schema_to:
            log.info("schema_migrated", from_version=info.schema_from, to_version=info.schema_to)
        if info.vectors_reset:
            log.warning("embedding_model_changed", effect="vector index dropped; rows will be re-embedded")
        db = cls(
            path=path,
            info=info,
            _driver=driver,
            _writer=writer,
            _readers=ThreadPoolExecutor(max_workers=readers, thread_name_prefix="teleton-db-reader"),
            _write_conn=conn,
            _reader_threads=readers,
        )
        return db

    def _reader(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, self._driver, vectors=self.info.vectors, readonly=True)
            self._local.conn = conn
            self._reader_conns.append(conn)
        return conn

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` on a reader thread with a read-only connection."""
        self._check_open()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(self._reader()))

    async def read_each(self, fn: Callable[[Connection], object]) -> int:
        """Run ``fn(conn)`` once on every reader thread, each with its own connection (opened now if it was
        not): what a first read on a fresh connection pays (opening it, the schema, cold pages) is then paid
        here. The calls meet at a barrier, so no thread takes two; one that fails is logged and skipped. Returns
        how many ran."""
        self._check_open()
        barrier = threading.Barrier(self._reader_threads)

        def each(conn: Connection) -> None:
            barrier.wait(timeout=60)  # only if another read held a thread that long: the rest then go on
            fn(conn)

        results = await asyncio.gather(*(self.read(each) for _ in range(self._reader_threads)), return_exceptions=True)
        failed = [result for result in results if isinstance(result, BaseException)]
        for error in failed:
            log.warning("reader_call_failed", error=repr(error))
        return len(results) - len(failed)

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` on the writer thread inside one transaction (rolled back if it raises)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, self._transaction, fn)

    def _transaction(self, fn: Callable[[Connection], T]) -> T:
        """One transaction. Any failure — of ``fn`` or of the COMMIT itself (a full disk, a deferred
        constraint) — rolls back, so the writer never stays inside a dead transaction and keeps serving."""
        conn = self._write_conn
        if conn.in_transaction:  # left open by a failure we could not roll back at the time
            _rollback(conn)
        conn.execute("begin immediate")
        try:
            result = fn(conn)
            conn.execute("commit")
        except BaseException:
            _rollback(conn)
            raise
        return result

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one write statement; return lastrowid (inserts) or rowcount."""

        def _run(conn: Connection) -> int:
            cur = conn.execute(sql, params)
            return int(cur.lastrowid or 0) if sql.lstrip().lower().startswith("insert") else int(cur.rowcount)

        return await self.write(_run)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self.read(lambda conn: conn.execute(sql, params).fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return await self.read(lambda conn: conn.execute(sql, params).fetchone())

    async def checkpoint(self) -> None:
        # The pragma answers with a row: read it, or the statement stays open and a later COMMIT fails
        # ("SQL statements in progress") until the cursor happens to be collected.
        await asyncio.get_running_loop().run_in_executor(
            self._writer, lambda: self._write_conn.execute("pragma wal_checkpoint(truncate)").fetchall()
        )

    async def vacuum(self) -> None:
        """Rewrite the file without its free pages (what was deleted before ``secure_delete`` was on)."""
        await asyncio.get_running_loop().run_in_executor(
            self._writer, lambda: self._write_conn.execute("vacuum").fetchall()
        )

    async def close(self) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()

        def _close_readers() -> None:
            self._readers.shutdown(wait=True)
            for conn in self._reader_conns:
                conn.close()

        await asyncio.to_thread(_close_readers)

        def _close_writer() -> None:
            try:
                self._write_conn.execute("pragma wal_checkpoint(truncate)")
            finally:
                self._write_conn.close()

        await loop.run_in_executor(self._writer, _close_writer)
        self._writer.shutdown(wait=True)
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("database is closed")


_STORAGE_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS}
_STORAGE_WORDS = ("disk is full", "disk i/o error", "readonly database", "database is locked")


def storage_fault(exc: BaseException) -> str | None:
    """Why a write failed when the cause is the storage (a full disk, an I/O error, a lock held too long),
    not the data: such a write succeeds later unchanged, so what it recorded must be tried again."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _STORAGE_ERRNOS:
            return seen.strerror or str(seen)
        text = str(seen).lower()
        if any(word in text for word in _STORAGE_WORDS):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def _raise_named(exc: BaseException, path: Path) -> None:
    """Re-raise ``exc`` as a ``StorageError`` naming its cause and ``path`` (SQLite's errors carry no path)."""
    cause = cause_of(exc, path)
    if cause is not None and isinstance(exc, Exception):
        raise StorageError(cause) from exc


def _rollback(conn: Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("rollback")
    except Exception as exc:  # the next transaction checks again
        log.warning("rollback_failed", error=str(exc))


def _vec_version(conn: Connection) -> str | None:
    try:
        return str(conn.execute("select vec_version()").fetchone()[0])
    except Exception:
        return None


def _open_readonly(path: Path, driver: Driver, vectors: bool) -> tuple[Connection, StoreInfo]:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no database yet (the daemon creates it at its first start)")
    conn = connect(path, driver, vectors=vectors, readonly=True)
    version = schema.current_version(conn)
    if version != schema.SCHEMA_VERSION:
        conn.close()
        raise ReadOnlyMismatch(
            f"{path} is at schema version {version} and this Teleton reads {schema.SCHEMA_VERSION}: start the "
            "daemon once (it migrates the database), then try again"
        )
    vec_version = _vec_version(conn) if vectors else None
    info = StoreInfo(path, driver.name, driver.sqlite_version, has_fts5(conn), vec_version, version, version)
    return conn, info


class ReadOnlyMismatch(RuntimeError):
    """A read-only open of a database another version of Teleton wrote; ``str(exc)`` is the one line."""
