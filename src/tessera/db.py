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
import collections
import inspect
import json
import sqlite3
import time
import uuid
import weakref
from collections import namedtuple
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterable,
    Iterator,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

import asyncpg
from fastapi import Depends, Request
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Dialect,
    Executable,
    Select,
    String,
    Table,
    bindparam,
    event,
    insert,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.orm.interfaces import ORMOption
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from tessera.errors import NotFound

SQLITE_BUSY_TIMEOUT_MS = 30_000
POOL_RECYCLE_SECONDS = 3600.0
SQLITE_BUSY_RETRY_SECONDS = 0.005

T = TypeVar("T")
P = ParamSpec("P")
AnySelect = Select[*tuple[Any, ...]]
# A row read with ``Rows``: its columns, and what the read attached (``attach``), as attributes.
# Schemas read it ``from_attributes``; a route renders it through its response model
# (``tessera.render``) without building the model.
Row = Any


def _row_type(name: str, keys: list[str]) -> Any:
    """The named tuple of a statement's columns, known only at run time; its rows take other
    attributes too (``attach``)."""
    return type(name, (namedtuple(name, keys),), {})  # no __slots__: a __dict__ when needed


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class ConnectionPool:
    """The asyncpg connections of the hot reads and writes, kept open for the next request.

    asyncpg's own ``Pool`` wraps each connection in a proxy and does more on each acquire and
    release than a whole read costs Tessera otherwise (bench/README.md); this is a stack of
    idle connections, the last one given back on top. Up to ``size`` connections stay open; in
    a burst up to ``size + overflow`` are open at once, the ones beyond ``size`` closed as they
    come back. Past that, a request waits, first come first served, for a connection given
    back. A connection found closed (a server restart), older than ``recycle_seconds``, or
    open when ``expire()`` was called is replaced before it is used again.
    """

    def __init__(
        self,
        dsn: str,
        *,
        size: int,
        overflow: int,
        recycle_seconds: float,
        init: Callable[[asyncpg.Connection], Awaitable[None]],
    ) -> None:
        self.dsn = dsn
        self.size = size
        self.limit = size + overflow
        self.recycle_seconds = recycle_seconds
        self.init = init
        self.opened = 0  # open, or being opened
        self._generation = 0
        self._idle: list[tuple[asyncpg.Connection, float, int]] = []
        self._in_use: dict[asyncpg.Connection, tuple[float, int]] = {}
        # A waiter is handed a connection, or None: a place is free to open one.
        self._waiting: collections.deque[asyncio.Future[asyncpg.Connection | None]] = (
            collections.deque()
        )

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def acquire(self) -> asyncpg.Connection:
        while True:
            while self._idle:
                connection, opened_at, generation = self._idle.pop()
                if self._fresh(connection, opened_at, generation):
                    self._in_use[connection] = (opened_at, generation)
                    return connection
                self._discard(connection)
            if self.opened < self.limit:
                return await self._open()
            waiter: asyncio.Future[asyncpg.Connection | None] = (
                asyncio.get_running_loop().create_future()
            )
            self._waiting.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # handed over as it was cancelled
                    if (connection := waiter.result()) is not None:
                        self.release(connection)
                    else:
                        self._hand(None)
                raise
            if handed is not None:
                return handed

    def release(self, connection: asyncpg.Connection) -> None:
        opened_at, generation = self._in_use.pop(connection)
        if not self._fresh(connection, opened_at, generation):
            self._discard(connection)
            self._hand(None)
        elif self._waiting:
            self._in_use[connection] = (opened_at, generation)
            if not self._hand(connection):
                self._in_use.pop(connection)
                self._keep(connection, opened_at, generation)
        else:
            self._keep(connection, opened_at, generation)

    def expire(self) -> None:
        """Every connection open now is replaced before its next use."""
        self._generation += 1

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection, _, _ in idle:
            self.opened -= 1
            await connection.close()

    def _keep(self, connection: asyncpg.Connection, opened_at: float, generation: int) -> None:
        if self.opened > self.size:  # an overflow connection
            self._discard(connection)
        else:
            self._idle.append((connection, opened_at, generation))

    def _hand(self, item: asyncpg.Connection | None) -> bool:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return True
        return False

    def _fresh(self, connection: asyncpg.Connection, opened_at: float, generation: int) -> bool:
        return (
            generation == self._generation
            and not connection.is_closed()
            and time.monotonic() - opened_at < self.recycle_seconds
        )

    def _discard(self, connection: asyncpg.Connection) -> None:
        self.opened -= 1
        if not connection.is_closed():
            connection.terminate()

    async def _open(self) -> asyncpg.Connection:
        self.opened += 1
        try:
            connection = await asyncpg.connect(self.dsn)
            await self.init(connection)
        except BaseException:
            self.opened -= 1
            self._hand(None)
            raise
        self._in_use[connection] = (time.monotonic(), self._generation)
        return connection


class Database:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        max_overflow: int = 20,
        on_pool_wait: Callable[[float], None] | None = None,
    ) -> None:
        self.url = make_url(url)
        self.max_overflow = max_overflow
        # Told how long each use of the pool (PostgreSQL) waited for its connection.
        self.on_pool_wait = on_pool_wait
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        if self.is_sqlite:
            self.engine = _sqlite_engine(self.url, begin="BEGIN")
            self.write_engine = _sqlite_engine(self.url, begin="BEGIN IMMEDIATE")
            self._write_lock: asyncio.Lock | None = asyncio.Lock()
            self._sqlite_reader: sqlite3.Connection | None = _sqlite_connection(
                self.url, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS
            )
            self._sqlite_writer: sqlite3.Connection | None = _sqlite_connection(
                self.url, busy_timeout_ms=0
            )
        else:
            # The ORM sessions' pool (the use-cases that are not hot, the credential checks on
            # a cache miss, the worker, the console), pinged before each use, as they are
            # not hot: a server restart goes unnoticed. The hot reads and writes have a pool of
            # their own, of the driver itself (``ConnectionPool``).
            self.engine = create_async_engine(
                url,
                pool_size=max(2, pool_size // 4),
                max_overflow=max_overflow,
                pool_recycle=POOL_RECYCLE_SECONDS,
                pool_pre_ping=True,
            )
            self.write_engine = self.engine
            self._write_lock = None
            self._sqlite_reader = self._sqlite_writer = None
        self.pool_size = pool_size
        # The hot reads' and writes' connections (PostgreSQL); opened as they are needed.
        self.pool: ConnectionPool | None = None
        if not self.is_sqlite:
            self.pool = ConnectionPool(
                self.url.set(drivername="postgresql").render_as_string(hide_password=False),
                size=pool_size,
                overflow=max_overflow,
                recycle_seconds=POOL_RECYCLE_SECONDS,
                init=_json_codecs,
            )
        self._readers = async_sessionmaker(self.engine, expire_on_commit=False)
        self._writers = async_sessionmaker(self.write_engine, expire_on_commit=False)
        self._compiled: dict[tuple[Executable, tuple[int, ...]], _Compiled] = {}
        # One lock per hot row being waited for (``Transaction.one_waiter``), gone once unused.
        self._waiters: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = (
            weakref.WeakValueDictionary()
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
        """A write transaction on the raw driver, for the hot write use-cases: they read and
        write with Core statements (``Transaction``), commit with ``commit()``, and anything
        uncommitted rolls back. The same guarantees as ``session()``: on SQLite one writer at a
        time (the in-process lock, then ``BEGIN IMMEDIATE``, waiting for another process's
        write lock without blocking the loop); on PostgreSQL READ COMMITTED with the row locks
        the use-case takes (``lock_for_update``).
        """
        if self._sqlite_writer is not None:
            assert self._write_lock is not None
            connection = self._sqlite_writer
            async with self._write_lock:
                await _begin_immediate(connection)
                try:
                    yield Transaction(self, connection, commit=_sqlite_commit(connection))
                finally:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
            return
        async with self._driver() as driver:
            transaction = driver.transaction()
            await transaction.start()
            try:
                yield Transaction(self, driver, commit=transaction.commit)
            finally:
                if driver.is_in_transaction():  # not committed
                    await transaction.rollback()

    def waiter_lock(self, key: Hashable) -> asyncio.Lock:
        """The lock of this process's waiters for the row named ``key``."""
        lock = self._waiters.get(key)
        if lock is None:
            lock = self._waiters[key] = asyncio.Lock()
        return lock

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection of asyncpg's pool, for statements that bypass SQLAlchemy's execution.
        A connection that turns out broken (a server restart) fails its request, and every
        idle connection of the pool is replaced before its next use."""
        pool = self.pool
        assert pool is not None
        began = time.perf_counter()
        connection = await pool.acquire()
        if self.on_pool_wait is not None:
            self.on_pool_wait(time.perf_counter() - began)
        try:
            yield connection
        except DISCONNECTED:
            pool.expire()
            raise
        finally:
            pool.release(connection)

    def compiled(self, statement: Executable, sizes: tuple[int, ...]) -> "_Compiled":
        """``statement`` compiled for this backend (and these lengths of its list parameters),
        once."""
        key = (statement, sizes)
        compiled = self._compiled.get(key)
        if compiled is None:
            if len(self._compiled) >= MAX_COMPILED:
                self._compiled.clear()
            compiled = self._compiled[key] = _Compiled.of(statement, sizes, self.engine.dialect)
        return compiled

    @asynccontextmanager
    async def session(self, *, write: bool = True) -> AsyncIterator[AsyncSession]:
        """A session for one use-case; the use-case commits, anything uncommitted rolls back."""
        if not write:
            async with self._readers() as session:
                await self._connected(session)
                yield session
            return
        if self._write_lock is None:
            async with self._writers() as session:
                await self._connected(session)
                yield session
            return
        async with self._write_lock, self._writers() as session:
            yield session

    async def _connected(self, session: AsyncSession) -> None:
        """On PostgreSQL, the session's connection taken now, to time the pool's wait."""
        if self.on_pool_wait is not None and not self.is_sqlite:
            began = time.perf_counter()
            await session.connection()
            self.on_pool_wait(time.perf_counter() - began)

    async def dispose(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        await self.engine.dispose()
        if self.write_engine is not self.engine:
            await self.write_engine.dispose()
        for connection in (self._sqlite_reader, self._sqlite_writer):
            if connection is not None:
                connection.close()


# asyncpg's errors for a connection that is gone (raised by reads, which bypass SQLAlchemy).
# InternalClientError is what a connection says when the server's "terminating connection"
# arrived between two statements and left its protocol mid-operation: it cannot be used again.
DISCONNECTED = (
    OSError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
)
MAX_COMPILED = 1000  # statements x lengths of their list parameters


class Rows:
    """What a read function is given (``Database.read``): its statements' rows, as named
    tuples of the selected columns' keys, converted as SQLAlchemy would convert them."""

    def __init__(self, database: Database, connection: Any) -> None:
        self._database = database
        self._connection = connection  # sqlite3.Connection or asyncpg.Connection

    async def all(self, statement: Executable, **params: Any) -> list[Any]:
        compiled = self._database.compiled(statement, _sizes(params))
        args = compiled.arguments(params)
        if isinstance(self._connection, sqlite3.Connection):
            raw = self._connection.execute(compiled.sql, args).fetchall()
            if compiled.converters is None:
                compiled.describe(None)
        else:  # asyncpg caches the prepared statement on each connection
            if compiled.converters is None:
                compiled.describe(await self._connection.prepare(compiled.sql))
            raw = await self._connection.fetch(compiled.sql, *args)
        return compiled.rows(raw)

    async def first(self, statement: Executable, **params: Any) -> Any | None:
        rows = await self.all(statement, **params)
        return rows[0] if rows else None

    @property
    def on_postgresql(self) -> bool:
        """For the few statements written for one backend (see ``products.rules.issue``)."""
        return not isinstance(self._connection, sqlite3.Connection)

    async def scalar(self, statement: Executable, **params: Any) -> Any:
        row = await self.first(statement, **params)
        return None if row is None else row[0]


class Transaction(Rows):
    """What a write use-case is given (``Database.transaction``): reads as in ``Rows`` (a
    statement with RETURNING too), and writes. Driver errors of a constraint surface as
    SQLAlchemy's ``IntegrityError``, whichever the backend."""

    def __init__(
        self, database: Database, connection: Any, *, commit: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(database, connection)
        self._commit = commit
        self._staged: dict[type[DeclarativeBase], list[dict[str, Any]]] = {}

    @asynccontextmanager
    async def one_waiter(self, key: Hashable) -> AsyncIterator[None]:
        """Run the statement that locks a hot row (named ``key``: a product its issuers bump)
        as the only transaction of this process waiting for it; the next one is let in once
        this one holds the lock, and waits for it in the database while this one commits.

        On PostgreSQL, every waiter for a row lock wakes at each commit and the waiters fight
        over the lock manager: with 32 issuers of one product the hand-over took half the row's
        time (bench/README.md). The row lock still does the locking, across processes too.
        SQLite has one writer already."""
        if not self.on_postgresql:
            yield
            return
        async with self._database.waiter_lock(key):
            yield

    def stage(self, model: type[DeclarativeBase], rows: Sequence[dict[str, Any]]) -> None:
        """Rows of ``model`` to insert just before the commit, with every row staged for that
        model in this transaction, in one statement (the outbox of changes: a use-case that
        records three changes pays for one insert)."""
        self._staged.setdefault(model, []).extend(rows)

    async def commit(self) -> None:
        staged, self._staged = self._staged, {}
        for model, rows in staged.items():
            await self.insert(model, rows)
        await self._commit()

    async def execute(self, statement: Executable, **params: Any) -> int:
        """An INSERT, UPDATE or DELETE without RETURNING; the number of rows it touched."""
        compiled = self._database.compiled(statement, _sizes(params))
        args = compiled.arguments(params)
        with _integrity(compiled.sql):
            if isinstance(self._connection, sqlite3.Connection):
                return self._connection.execute(compiled.sql, args).rowcount
            status: str = await self._connection.execute(compiled.sql, *args)
        return int(status.rpartition(" ")[2])

    async def insert(
        self, model: type[DeclarativeBase], rows: Sequence[dict[str, Any]]
    ) -> list[Any]:
        """New rows of ``model``, with the Python-side defaults of its columns filled in as the
        ORM fills them (ids, timestamps, statuses), in one statement run for every row; the
        rows as written, as attribute namespaces."""
        table = model.__table__
        full = [_with_defaults(table, row) for row in rows]  # type: ignore[arg-type]
        if not full:
            return []
        compiled = self._database.compiled(_insert_all(table), ())  # type: ignore[arg-type]
        args = [compiled.arguments(row) for row in full]
        with _integrity(compiled.sql):
            if isinstance(self._connection, sqlite3.Connection):
                self._connection.executemany(compiled.sql, args)
            elif len(args) == 1:  # asyncpg's executemany costs a pipeline set-up
                await self._connection.execute(compiled.sql, *args[0])
            else:
                await self._connection.executemany(compiled.sql, args)
        return [SimpleNamespace(**row) for row in full]

    async def insert_new(
        self, model: type[DeclarativeBase], row: dict[str, Any], *, unique: tuple[str, ...]
    ) -> Any | None:
        """``row`` of ``model`` (defaults filled in as by ``insert``), unless a row with the
        same ``unique`` columns (a unique constraint) exists or is being inserted by another
        transaction: then nothing changes and the answer is None. One statement (``ON CONFLICT
        DO NOTHING``): no error to recover from, no savepoint."""
        table = table_of(model)
        full = _with_defaults(table, row)
        key = (table, unique, self._database.engine.dialect.name)
        statement = _INSERT_NEW.get(key)
        if statement is None:
            dialect_insert = pg_insert if key[2] == "postgresql" else sqlite_insert
            statement = _INSERT_NEW[key] = (
                dialect_insert(table)
                .values(_column_values(table))
                .on_conflict_do_nothing(index_elements=list(unique))
                .returning(*table.primary_key.columns)
            )
        inserted = await self.first(statement, **full)
        return None if inserted is None else SimpleNamespace(**full)


_INSERT_NEW: dict[tuple[Table, tuple[str, ...], str], Any] = {}


@contextmanager
def _integrity(sql: str) -> Iterator[None]:
    try:
        yield
    except (sqlite3.IntegrityError, asyncpg.exceptions.IntegrityConstraintViolationError) as exc:
        raise IntegrityError(sql, None, exc) from exc


_INSERTS: dict[Table, Any] = {}


def _insert_all(table: Table) -> Any:
    """``INSERT INTO table (every column) VALUES (...)``, built once per table."""
    statement = _INSERTS.get(table)
    if statement is None:
        statement = _INSERTS[table] = insert(table).values(_column_values(table))
    return statement


def _column_values(table: Table) -> dict[str, BindParameter[Any]]:
    """A parameter for every column, named by the column, but those the database fills in: a
    counted key, and a server default with no Python one (``changes.seq`` and ``txid``)."""
    return {
        column.key: bindparam(column.key, type_=column.type)
        for column in table.c
        if column is not table.autoincrement_column
        and (column.default is not None or column.server_default is None)
    }


class _DefaultContext:
    """What a column's default function may ask of its statement (``TimestampMixin``)."""

    def __init__(self, row: dict[str, Any]) -> None:
        self._row = row

    def get_current_parameters(self) -> dict[str, Any]:
        return self._row


def with_defaults(model: type[DeclarativeBase], row: dict[str, Any]) -> dict[str, Any]:
    """``row`` of ``model`` with the Python-side defaults of its other columns, as ``insert``
    writes it: for a row written by a statement of one's own."""
    return _with_defaults(table_of(model), row)


def _with_defaults(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    full = dict(row)
    for column in table.c:
        if column.key in full:
            continue
        default = column.default
        if default is None:
            full[column.key] = None
        elif default.is_callable:
            full[column.key] = default.arg(_DefaultContext(full))  # type: ignore[attr-defined]
        else:
            full[column.key] = default.arg  # type: ignore[attr-defined]
    return full


def _sizes(params: dict[str, Any]) -> tuple[int, ...]:
    return tuple(len(value) for value in params.values() if isinstance(value, list))


Processor = Callable[[Any], Any] | None


@dataclass(slots=True)
class _Compiled:
    """A statement compiled for one dialect (and for given lengths of its list parameters)."""

    sql: str
    # The positional arguments: (parameter, index in a list parameter or None, bind processor,
    # the value a literal of the statement carries or _REQUIRED).
    params: tuple[tuple[str, int | None, Processor, Any], ...]
    columns: tuple[Any, ...]  # the selected (or returned) columns' types, for this dialect
    make: Callable[[Any], Any]
    dialect: Dialect
    # (column index, conversion) of the columns that have one, once the driver described them
    converters: tuple[tuple[int, Callable[[Any], Any]], ...] | None = None

    @classmethod
    def of(cls, statement: Any, sizes: tuple[int, ...], dialect: Dialect) -> "_Compiled":
        binds = _bind_params(statement)
        required = {p.key for p in binds if p.required}
        if lists := [p for p in binds if p.expanding]:  # a placeholder each: IN ($3, $4, $5)
            statement = statement.params(
                dict.fromkeys(required)
                | {p.key: [None] * n for p, n in zip(lists, sizes, strict=True)}
            )
        compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        if prefetch := [*compiled.insert_prefetch, *compiled.update_prefetch]:
            # defaults that SQLAlchemy's execution would compute (an onupdate timestamp)
            raise ValueError(f"give {', '.join(c.key for c in prefetch)} a value in the statement")
        params = []
        for name in compiled.positiontup or ():
            base, index = name, None
            if name not in compiled.binds:  # an element of a list parameter: "ids_3"
                base, _, number = name.rpartition("_")
                index = int(number) - 1
            bind = compiled.binds[base]
            kind = bind.type.dialect_impl(dialect)
            value = _REQUIRED if base in required else bind.effective_value
            params.append((base, index, kind.bind_processor(dialect), value))
        columns = list(statement.exported_columns)
        keys = [c.key or f"column_{i}" for i, c in enumerate(columns)]
        types = tuple(c.type.dialect_impl(dialect) for c in columns)
        return cls(compiled.string, tuple(params), types, _row_type("Row", keys)._make, dialect)

    def describe(self, prepared: Any) -> None:
        """How each column's value is converted, as SQLAlchemy would: some conversions depend
        on the type the driver reports (asyncpg's numerics), so they are chosen on first use,
        from the driver's description of the statement (``prepared``; sqlite3 has none)."""
        oids = [a.type.oid for a in prepared.get_attributes()] if prepared else None
        processors = (
            kind.result_processor(self.dialect, oids[i] if oids else None)
            for i, kind in enumerate(self.columns)
        )
        self.converters = tuple((i, p) for i, p in enumerate(processors) if p is not None)

    def rows(self, raw: Iterable[Sequence[Any]]) -> list[Any]:
        """The driver's rows as named tuples, converted: only the columns that have a
        conversion are touched (most of a row's text and numbers have none)."""
        make, converters = self.make, self.converters
        if not converters:
            return [make(values) for values in raw]
        rows = []
        for row in raw:
            values = list(row)
            for i, process in converters:
                value = values[i]
                if value is not None:
                    values[i] = process(value)
            rows.append(make(values))
        return rows

    def arguments(self, values: dict[str, Any]) -> list[Any]:
        arguments = []
        for name, index, process, literal in self.params:
            if literal is not _REQUIRED:
                value = values.get(name, literal)
            else:
                value = values[name] if index is None else values[name][index]
            arguments.append(value if process is None or value is None else process(value))
        return arguments


_REQUIRED = object()  # a parameter the caller must give


def _bind_params(statement: Any) -> list[BindParameter[Any]]:
    return [e for e in visitors.iterate(statement) if isinstance(e, BindParameter)]


def table_of(model: type[DeclarativeBase]) -> Table:
    """A model's table, for Core statements (``update(table_of(Product))``)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


async def _json_codecs(connection: asyncpg.Connection) -> None:
    """JSON in and out as SQLAlchemy's asyncpg dialect sets it up on its connections: the
    statements' bind and result conversions are SQLAlchemy's, and expect the same."""
    await connection.set_type_codec(
        "json",
        encoder=str.encode,
        decoder=lambda value: json.loads(value.decode()),
        schema="pg_catalog",
        format="binary",
    )
    await connection.set_type_codec(
        "jsonb",
        encoder=lambda value: b"\x01" + value.encode(),
        decoder=lambda value: json.loads(value[1:].decode()),
        schema="pg_catalog",
        format="binary",
    )


def part(row: Any, prefix: str, keys: Iterable[str], **known: object) -> SimpleNamespace:
    """The row of a joined table within ``row``, whose statement selected its columns as
    ``<prefix><key>`` (``products.c.name.label("product_name")``), plus ``known`` values."""
    return SimpleNamespace(**known, **{key: getattr(row, prefix + key) for key in keys})


def joined(row: Any, **related: object) -> SimpleNamespace:
    """A row read with ``Rows``, with its related rows attached as attributes, so that schemas
    built ``from_attributes`` read it as they read an ORM object: a copy that the caller may
    change (a row's columns are read-only)."""
    return SimpleNamespace(**row._asdict(), **related)


def attach(row: Any, **related: object) -> Any:
    """``joined`` without the copy of the row's columns: the row read with ``Rows`` itself,
    with ``related`` as new attributes, for a read that only renders it."""
    row.__dict__.update(related)
    return row


def _sqlite_connection(url: URL, *, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection of ``Database.read`` (waits for nothing: WAL) or ``Database.transaction``
    (no busy timeout: SQLite would sleep on the loop; see ``_begin_immediate``), used on the
    loop's thread one statement at a time, with no transaction control by the driver."""
    connection = sqlite3.connect(
        url.database or ":memory:",
        check_same_thread=False,
        isolation_level=None,
        timeout=busy_timeout_ms / 1000,
    )
    _sqlite_pragmas(connection, busy_timeout_ms=busy_timeout_ms)
    return connection


async def _begin_immediate(connection: sqlite3.Connection) -> None:
    """Take SQLite's write lock; another process (the CLI, a second server) may hold it: wait
    for it without blocking the loop, up to the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(SQLITE_BUSY_RETRY_SECONDS)


def _sqlite_commit(connection: sqlite3.Connection) -> Callable[[], Awaitable[None]]:
    async def commit() -> None:
        connection.execute("COMMIT")

    return commit


def _sqlite_pragmas(dbapi_connection: Any, *, busy_timeout_ms: int) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    cursor.close()


def _sqlite_engine(url: URL, *, begin: str) -> AsyncEngine:
    """The ORM sessions' engine on SQLite: aiosqlite, each connection on a thread of its own,
    where SQLite may wait for another process's write lock (``busy_timeout``) without holding
    the event loop. The driver controls no transaction: the "begin" event says how to BEGIN
    (SQLAlchemy's documented recipe for SQLite's transactions)."""
    engine = create_async_engine(url)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        _sqlite_pragmas(dbapi_connection, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS)

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine


SelectT = TypeVar("SelectT", bound=AnySelect)
EndpointT = TypeVar("EndpointT", bound=Callable[..., Any])
RowT = TypeVar("RowT", bound=DeclarativeBase)


def lock_for_update(statement: SelectT) -> SelectT:
    """Row lock on PostgreSQL; a no-op on SQLite, where write transactions are serialised.

    ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: inserting a row whose foreign key points at the
    locked row (an order line, an item) takes ``FOR KEY SHARE`` on it, which ``FOR UPDATE`` would
    wait on, so two such transactions would deadlock. The locked rows never change their keys.
    """
    return statement.with_for_update(key_share=True)


def lock_for_share(statement: SelectT) -> SelectT:
    """Shared row lock on PostgreSQL (``FOR SHARE``); a no-op on SQLite, as above.

    Holders of the shared lock run side by side; ``lock_for_update`` and any UPDATE of the row
    wait for them, and they for it: for a rule that reads a row which must not change until the
    transaction ends, without serialising the transactions that read it.
    """
    return statement.with_for_update(read=True)


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


def is_read_only(endpoint: Callable[..., Any]) -> bool:
    """Whether ``endpoint`` (or the function it wraps) was marked ``reads_only``."""
    return inspect.unwrap(endpoint) in READ_ONLY_ENDPOINTS


def writes(request: Request) -> bool:
    """Whether the request may change data (a lookup sent as POST does not: ``reads_only``)."""
    if request.method in READ_METHODS:
        return False
    endpoint = request.scope.get("endpoint")
    return endpoint is None or not is_read_only(endpoint)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    database: Database = request.app.state.database
    async with database.session(write=writes(request)) as session:
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


class UtcDay(FunctionElement[str]):
    """A timestamp's day in UTC as ``YYYY-MM-DD`` text, on SQLite (which stores UTC text) and
    on PostgreSQL (``timestamptz``)."""

    type = String()
    name = "utc_day"
    inherit_cache = True


@compiles(UtcDay, "sqlite")
def _utc_day_on_sqlite(element: UtcDay, compiler: SQLCompiler, **kw: Any) -> str:
    return f"date({compiler.process(element.clauses, **kw)})"


@compiles(UtcDay, "postgresql")
def _utc_day_on_postgresql(element: UtcDay, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


class NotIndexed(FunctionElement[Any]):
    """A column that SQLite's planner may not look up through an index in this condition
    (SQLite's unary ``+``); PostgreSQL, which keeps statistics, decides for itself.

    For ``project_id = ? AND id IN (...)``: without statistics SQLite takes the project's index
    for the more selective side and reads every row of the project to find the few ids, where
    the primary key finds each id at once (tests/test_query_plans.py holds the plans)."""

    name = "not_indexed"
    inherit_cache = True

    def __init__(self, column: ColumnElement[Any]) -> None:
        super().__init__(column)
        self.type = column.type  # binds compared with it convert as the column's


@compiles(NotIndexed, "sqlite")
def _not_indexed_on_sqlite(element: NotIndexed, compiler: SQLCompiler, **kw: Any) -> str:
    return f"+{compiler.process(element.clauses, **kw)}"


@compiles(NotIndexed)
def _not_indexed_elsewhere(element: NotIndexed, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))
