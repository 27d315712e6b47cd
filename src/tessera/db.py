"""Engine, sessions and the few backend-specific helpers.

SQLite is a single-writer database. Write transactions therefore start with ``BEGIN IMMEDIATE``
(so a transaction never fails half-way when it upgrades from a read to a write lock) and, inside
one process, queue on an asyncio lock instead of spinning on SQLite's busy handler. Other
processes (the CLI next to a running server) wait on ``busy_timeout``. Reads use plain deferred
transactions and run alongside the writer thanks to WAL.

PostgreSQL runs READ COMMITTED; use-cases that check-then-write lock the row they depend on with
``SELECT ... FOR NO KEY UPDATE`` (see ``lock_for_update``), which SQLite's whole-database write lock
already provides.
"""

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Annotated, Any, TypeVar

import aiosqlite
from fastapi import Depends, Request
from sqlalchemy import ColumnElement, Engine, Row, Select, create_engine, event, select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.orm.interfaces import ORMOption
from sqlalchemy.util.concurrency import await_

from tessera.errors import NotFound

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_BUSY_RETRY_SECONDS = 0.005

T = TypeVar("T")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Database:
    def __init__(self, url: str, *, pool_size: int = 10, max_overflow: int = 20) -> None:
        self.url = make_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        if self.is_sqlite:
            self.engine = _sqlite_engine(self.url, begin="BEGIN")
            self.write_engine = _sqlite_engine(self.url, begin="BEGIN IMMEDIATE")
            self._write_lock: asyncio.Lock | None = asyncio.Lock()
            self._query_engine: Engine | None = _sqlite_query_engine(self.url)
        else:
            # No ping before each use (a round trip per request): a connection broken by a
            # server restart fails its request, and SQLAlchemy then replaces the whole pool.
            self.engine = create_async_engine(
                url, pool_size=pool_size, max_overflow=max_overflow, pool_recycle=3600
            )
            self.write_engine = self.engine
            self._write_lock = None
            self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
            self._query_engine = None
        self._readers = async_sessionmaker(self.engine, expire_on_commit=False)
        self._writers = async_sessionmaker(self.write_engine, expire_on_commit=False)

    async def read(self, query: Callable[..., T], *args: object) -> T:
        """Run a read-only ``query(connection, *args)`` in one trip to the database.

        Reads are plain functions of a Core ``Connection`` in autocommit: no BEGIN and ROLLBACK
        around them, no ORM identity map. On SQLite the function runs at once on the event
        loop's thread (as the sessions' statements do, see ``_InlineConnection``); on PostgreSQL
        in the engine's greenlet. A read that needs several statements sees each one's committed
        state, as READ COMMITTED does on PostgreSQL, so a read that must be consistent is
        written as one statement.
        """
        if self._query_engine is not None:
            with self._query_engine.connect() as connection:
                return query(connection, *args)
        async with self._autocommit.connect() as connection:
            return await connection.run_sync(query, *args)

    @asynccontextmanager
    async def session(self, *, write: bool = True) -> AsyncIterator[AsyncSession]:
        """A session for one use-case; the use-case commits, anything uncommitted rolls back."""
        if not write:
            async with self._readers() as session:
                yield session
            return
        if self._write_lock is None:
            async with self._writers() as session:
                yield session
            return
        async with self._write_lock, self._writers() as session:
            yield session

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.write_engine is not self.engine:
            await self.write_engine.dispose()
        if self._query_engine is not None:
            self._query_engine.dispose()


def joined(row: Row[Any], **related: object) -> SimpleNamespace:
    """A row read with Core, with its related rows attached as attributes, so that schemas
    built ``from_attributes`` read it as they read an ORM object."""
    return SimpleNamespace(**row._mapping, **related)


def _sqlite_query_engine(url: URL) -> Engine:
    """The connection behind ``Database.read`` on SQLite: synchronous, used on the loop's
    thread one read at a time, in autocommit. In WAL mode a read never waits for a writer."""
    engine = create_engine(
        url.set(drivername="sqlite+pysqlite"),
        pool_size=1,
        max_overflow=0,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # autocommit: each read is its own snapshot
        _sqlite_pragmas(dbapi_connection, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS)

    return engine


def _sqlite_pragmas(dbapi_connection: Any, *, busy_timeout_ms: int) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    cursor.close()


class _InlineConnection(aiosqlite.Connection):
    """aiosqlite's connection with each call run at once on the event loop's thread.

    aiosqlite hands every call (cursor, execute, fetch, commit) to a thread and back; on this
    kind of machine each hand-over costs more than the SQLite statement it carries, and a write
    makes dozens. SQLite statements on an indexed row take microseconds, so the session's
    connections run them inline instead. Nothing may wait inside SQLite on the loop: the only
    wait, for another process's write lock, happens in ``_begin`` with an asyncio sleep.
    The largest read (a page of 1000 users) holds the loop for a few milliseconds.
    """

    def __await__(self) -> Generator[Any, None, "_InlineConnection"]:
        return self._connect().__await__()

    async def _connect(self) -> "_InlineConnection":
        if self._connection is None:
            self._connection = self._connector()
        return self

    async def _execute(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)

    def stop(self) -> None:
        self._running = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _sqlite_engine(url: URL, *, begin: str) -> AsyncEngine:
    path = url.database or ":memory:"

    def open_sqlite() -> sqlite3.Connection:
        # No transaction control by the driver: we say how to BEGIN. No busy timeout: SQLite
        # would sleep on the event loop (see _begin).
        return sqlite3.connect(path, timeout=0, isolation_level=None)

    async def connect() -> _InlineConnection:
        return await _InlineConnection(open_sqlite, 64)

    engine = create_async_engine(url, async_creator=connect)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        _sqlite_pragmas(dbapi_connection, busy_timeout_ms=0)

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Any) -> None:
        # Another process (the CLI, a second server) may hold the write lock: wait for it
        # without blocking the loop, up to the busy timeout.
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                connection.exec_driver_sql(begin)
                return
            except OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
            await_(asyncio.sleep(SQLITE_BUSY_RETRY_SECONDS))

    return engine


SelectT = TypeVar("SelectT", bound=Select[Any])
EndpointT = TypeVar("EndpointT", bound=Callable[..., Any])
RowT = TypeVar("RowT", bound=DeclarativeBase)


def lock_for_update(statement: SelectT) -> SelectT:
    """Row lock on PostgreSQL; a no-op on SQLite, where write transactions are serialised.

    ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: inserting a row whose foreign key points at the
    locked row (an order line, an item) takes ``FOR KEY SHARE`` on it, which ``FOR UPDATE`` would
    wait on, so two such transactions would deadlock. The locked rows never change their keys.
    """
    return statement.with_for_update(key_share=True)


async def get_in_project(
    session: AsyncSession,
    model: type[RowT],
    project_id: uuid.UUID,
    *criteria: ColumnElement[bool],
    not_found: type[NotFound],
    lock: bool = False,
    options: Sequence[ORMOption] = (),
) -> RowT:
    """The one row of ``model`` in the caller's project that matches ``criteria``, else
    ``not_found`` (another project's row is "not found" too, never "forbidden").

    ``lock`` takes the row lock of ``lock_for_update`` and reloads the row, so that the checks
    that follow see its committed state.
    """
    statement = select(model).where(model.__table__.c.project_id == project_id, *criteria)
    if options:
        statement = statement.options(*options)
    if lock:
        statement = lock_for_update(statement).execution_options(populate_existing=True)
    row = await session.scalar(statement)
    if row is None:
        raise not_found
    return row


# POST routes that only read (lookups with a body), marked with @reads_only.
READ_ONLY_ENDPOINTS: set[Callable[..., Any]] = set()


def reads_only(endpoint: EndpointT) -> EndpointT:
    """Mark a POST route that only reads (a lookup with a body): it gets a read session, so on
    SQLite it does not queue behind writers."""
    READ_ONLY_ENDPOINTS.add(endpoint)
    return endpoint


def _writes(request: Request) -> bool:
    if request.method in READ_METHODS:
        return False
    return request.scope.get("endpoint") not in READ_ONLY_ENDPOINTS


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    database: Database = request.app.state.database
    async with database.session(write=_writes(request)) as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]


async def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


DatabaseDep = Annotated[Database, Depends(get_database)]


def skip_locked(statement: SelectT) -> SelectT:
    """For claiming work: PostgreSQL skips rows another worker holds; SQLite has one writer."""
    return statement.with_for_update(skip_locked=True)


async def serialize(session: AsyncSession, key: int) -> None:
    """Run this transaction's critical section alone across processes, until it ends.

    PostgreSQL takes a transaction-level advisory lock on ``key``; SQLite's write transaction
    already holds the whole database.
    """
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
