"""The database of a process: its one pool of driver connections (PostgreSQL) or its two
SQLite connections, its reads and write transactions, its compiled statements."""

import asyncio
import sqlite3
import time
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
)
from contextlib import asynccontextmanager
from typing import Concatenate, ParamSpec, TypeVar, cast

import asyncpg
from sqlalchemy import (
    Executable,
)
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.engine.default import DefaultDialect

from tessera.config import Settings
from tessera.db.compiled import MAX_COMPILED, Compiled
from tessera.db.pool import DISCONNECTED, ConnectionPool, json_codecs
from tessera.db.rows import Rows, Transaction
from tessera.db.sqlite import (
    SQLITE_BUSY_TIMEOUT_MS,
    begin_immediate,
    sqlite_commit,
    sqlite_connection,
)
from tessera.errors import DatabaseUnavailable, TransactionConflict

T = TypeVar("T")
P = ParamSpec("P")

POOL_RECYCLE_SECONDS = 3600.0
# Statements kept prepared on each PostgreSQL connection, the most recently used (asyncpg's
# default): the hot ones are parsed once per connection.
STATEMENT_CACHE_SIZE = 100
# What PostgreSQL aborts a transaction with to let another one through: 40P01, 40001.
CONFLICTS = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


def dialect_of(url: URL) -> Dialect:
    """The dialect the statements are compiled for: that of the driver that runs them, sqlite3
    (whichever driver a SQLite URL names: ``sqlite+aiosqlite`` is the migrations') or asyncpg."""
    if url.get_backend_name() == "sqlite":
        url = url.set(drivername="sqlite")
    dialect = cast(type[DefaultDialect], url.get_dialect())
    return dialect(dbapi=dialect.import_dbapi())


class Database:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        max_overflow: int = 20,
        pool_timeout: float = 10.0,
        transaction_pooler: bool = False,
        on_pool_wait: Callable[[float], None] | None = None,
        on_write_wait: Callable[[float], None] | None = None,
    ) -> None:
        self.url = make_url(url)
        self.max_overflow = max_overflow
        self.pool_timeout = pool_timeout
        # Told how long each use of the pool (PostgreSQL) waited for its connection, and each
        # write (SQLite) for its turn.
        self.on_pool_wait = on_pool_wait
        self.on_write_wait = on_write_wait
        self.writes_waiting = 0
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.dialect = dialect_of(self.url)
        self.pool_size = pool_size
        self._exclusive_slots = asyncio.Semaphore(max(1, pool_size // 2))
        # SQLite: one connection reads (WAL: beside the writer), one writes, in turn.
        self._write_lock: asyncio.Lock | None = None
        self._sqlite_reader: sqlite3.Connection | None = None
        self._sqlite_writer: sqlite3.Connection | None = None
        # PostgreSQL: the process's one pool, of the driver itself; opened as it is needed.
        self.pool: ConnectionPool | None = None
        if self.is_sqlite:
            self._write_lock = asyncio.Lock()
            self._sqlite_reader = sqlite_connection(
                self.url, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS
            )
            self._sqlite_writer = sqlite_connection(self.url, busy_timeout_ms=0)
        else:
            self.pool = ConnectionPool(
                self.url.set(drivername="postgresql").render_as_string(hide_password=False),
                size=pool_size,
                overflow=max_overflow,
                recycle_seconds=POOL_RECYCLE_SECONDS,
                timeout=pool_timeout,
                init=json_codecs,
                # Behind a transaction pooler a named statement may be missing (or another
                # client's) on the next transaction's server connection.
                statement_cache_size=0 if transaction_pooler else STATEMENT_CACHE_SIZE,
            )
        self._compiled: dict[tuple[Executable, tuple[tuple[str, int], ...]], Compiled] = {}
        # One lock per hot row being waited for (``Transaction.one_waiter``), gone once unused.
        self._waiters: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        on_pool_wait: Callable[[float], None] | None = None,
        on_write_wait: Callable[[float], None] | None = None,
        session: bool = False,
    ) -> "Database":
        """The database of a process (a server's, a worker's, a command's) as configured;
        ``session``: for a command that needs a session of its own (a backup), PostgreSQL
        itself when a pooler stands in front (``TESSERA_DATABASE_DIRECT_URL``)."""
        direct = session and settings.database_direct_url is not None
        return cls(
            settings.session_database_url if session else settings.database_url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            pool_timeout=settings.db_pool_timeout_seconds,
            transaction_pooler=settings.db_transaction_pooler and not direct,
            on_pool_wait=on_pool_wait,
            on_write_wait=on_write_wait,
        )

    async def read(
        self,
        query: Callable[Concatenate["Rows", P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run a read-only ``query(rows, *args, **kwargs)`` with the raw driver (typed: the
        arguments are checked against ``query``'s own).

        Reads are async functions of ``Rows``: Core SELECTs, compiled once per backend by
        SQLAlchemy and then run by the driver itself (sqlite3, asyncpg), in autocommit: no
        BEGIN and ROLLBACK around them, no ORM, no per-statement SQLAlchemy execution. On
        SQLite they run at once on the event loop's thread, on one connection of their own
        (a statement costs less than handing it to a thread); on PostgreSQL on a connection of
        ``ConnectionPool``. A read that needs several statements sees each one's committed
        state, as READ COMMITTED does on PostgreSQL, so a read that must be consistent is
        written as one statement.
        """
        if self._sqlite_reader is not None:
            return await query(Rows(self, self._sqlite_reader), *args, **kwargs)
        async with self._driver() as driver:
            return await query(Rows(self, driver), *args, **kwargs)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator["Transaction"]:
        """A write transaction on the raw driver, for every use-case that writes: it reads and
        writes with Core statements (``Transaction``), commits with ``commit()``, and anything
        uncommitted rolls back. On SQLite one writer at a
        time (the in-process lock, then ``BEGIN IMMEDIATE``, waiting for another process's
        write lock without blocking the loop); on PostgreSQL READ COMMITTED with the row locks
        the use-case takes (``lock_for_update``). A transaction PostgreSQL aborts as a
        deadlock or a serialization failure raises ``TransactionConflict``
        (``db.conflicts``).
        """
        if self._sqlite_writer is not None:
            connection = self._sqlite_writer
            await self._writers_turn()
            try:
                await begin_immediate(connection, self.pool_timeout)
                try:
                    yield Transaction(self, connection, commit=sqlite_commit(connection))
                finally:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
            finally:
                self._release_writer()
            return
        async with self._driver() as driver:
            transaction = driver.transaction()
            await transaction.start()
            try:
                yield Transaction(self, driver, commit=transaction.commit)
            except CONFLICTS as exc:  # rolled back: the use-case may run again (db.conflicts)
                raise TransactionConflict() from exc
            finally:
                if driver.is_in_transaction():  # not committed
                    await transaction.rollback()

    @asynccontextmanager
    async def exclusive(self, key: int) -> AsyncIterator[None]:
        """Run the block alone among every process holding ``key`` (a 64-bit number), however
        long it takes and whatever it awaits meanwhile (chain calls, transactions of its own).

        PostgreSQL: a transaction-level advisory lock, in a transaction left open on a
        connection of its own until the block ends (a process that dies gives it back with its
        connection). A session lock would do as much on a direct connection, but behind a
        transaction pooler the unlock could reach another server connection than the lock;
        the open transaction writes nothing, so it holds back neither vacuum nor the change
        feed (no transaction id). At most half the pool's connections hold such locks at once,
        so that their holders always find one for their own statements. SQLite: a lock of this
        process (one process works the jobs of a SQLite database; docs/operations.md).
        """
        if self.pool is None:
            async with self.waiter_lock(("exclusive", key)):
                yield
            return
        # Not through ``_driver``: what the block raises is not the connection's doing.
        async with self._exclusive_slots:
            driver = await self.pool.acquire()
            try:
                async with driver.transaction():
                    await driver.execute("SELECT pg_advisory_xact_lock($1)", key)
                    yield
            finally:
                self.pool.release(driver)

    async def _writers_turn(self) -> None:
        """SQLite: this process's turn to write, in arrival order (told to ``on_write_wait``;
        ``writes_waiting`` counts the writes queued meanwhile)."""
        assert self._write_lock is not None
        self.writes_waiting += 1
        began = time.perf_counter()
        try:
            await self._write_lock.acquire()
        finally:
            self.writes_waiting -= 1
        if self.on_write_wait is not None:
            self.on_write_wait(time.perf_counter() - began)

    def _release_writer(self) -> None:
        assert self._write_lock is not None
        self._write_lock.release()

    @property
    def dialect_name(self) -> str:
        return str(self.dialect.name)

    def waiter_lock(self, key: Hashable) -> asyncio.Lock:
        """The lock of this process's waiters for the row named ``key``."""
        lock = self._waiters.get(key)
        if lock is None:
            lock = self._waiters[key] = asyncio.Lock()
        return lock

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection of asyncpg's pool, for statements that bypass SQLAlchemy's execution.
        A connection that turns out broken (a server restart) fails its request with
        ``DatabaseUnavailable``, and every idle connection of the pool is replaced before its
        next use."""
        pool = self.pool
        assert pool is not None
        began = time.perf_counter()
        connection = await pool.acquire()
        if self.on_pool_wait is not None:
            self.on_pool_wait(time.perf_counter() - began)
        try:
            yield connection
        except DISCONNECTED as exc:
            if isinstance(exc, OSError) and not connection.is_closed():
                raise  # not this connection's
            pool.expire()
            raise DatabaseUnavailable() from exc
        finally:
            pool.release(connection)

    def compiled(self, statement: Executable, sizes: tuple[tuple[str, int], ...]) -> "Compiled":
        """``statement`` compiled for this backend (and these lengths of its list parameters),
        once."""
        key = (statement, sizes)
        compiled = self._compiled.get(key)
        if compiled is None:
            if len(self._compiled) >= MAX_COMPILED:
                self._compiled.clear()
            compiled = self._compiled[key] = Compiled.of(statement, sizes, self.dialect)
        return compiled

    async def dispose(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        for connection in (self._sqlite_reader, self._sqlite_writer):
            if connection is not None:
                connection.close()
