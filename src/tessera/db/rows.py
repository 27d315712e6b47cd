"""Reads (``Rows``) and write transactions (``Transaction``) on the raw driver."""

import asyncio
import sqlite3
import typing
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterator,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Generic, Protocol, TypeVar, overload

import asyncpg
from sqlalchemy import Dialect, Executable, Table, bindparam, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase

from tessera.db.compiled import (
    Compiled,
    bulk_insert,
    bulk_update,
    column_values,
    insert_all,
    sizes_of,
    table_of,
    with_table_defaults,
)


class Compiler(Protocol):
    """What reads and writes need of their database (``Database``): its statements compiled
    once, and the locks of the waiters for a hot row."""

    @property
    def dialect_name(self) -> str: ...

    @property
    def dialect(self) -> Dialect: ...

    def compiled(self, statement: Executable, sizes: tuple[tuple[str, int], ...]) -> Compiled: ...

    def waiter_lock(self, key: Hashable) -> asyncio.Lock: ...


RowT = TypeVar("RowT", bound=tuple[Any, ...])


class Joined(Generic[RowT]):
    """How a join's rows are read: as ``into``, a ``NamedTuple`` of the joined tables' rows,
    each a ``NamedTuple`` of its columns declared once (``OwnedItemRow(item: ItemRow, owner:
    OwnerNames)``). The statement gives each part's columns in order: the first part's by their
    names, every other part's as ``<part>__<column>``. A part a left join did not find is a row
    of ``None``s. Made once, beside the statement, as its row types are."""

    def __init__(self, into: type[RowT]) -> None:
        hints = typing.get_type_hints(into)
        names: tuple[str, ...] = into._fields  # type: ignore[attr-defined]  # a NamedTuple's
        self.into, self.__name__ = into, into.__name__
        self.parts = tuple((hints[name], len(hints[name]._fields)) for name in names)
        self._fields = tuple(
            column if at == 0 else f"{name}__{column}"
            for at, name in enumerate(names)
            for column in hints[name]._fields
        )

    def _make(self, values: Sequence[Any]) -> RowT:
        made, at = [], 0
        for part, width in self.parts:
            made.append(part._make(values[at : at + width]))
            at += width
        return self.into._make(made)  # type: ignore[attr-defined, no-any-return]


class Rows:
    """What a read function is given (``Database.read``): its statements' rows, converted as
    SQLAlchemy would convert them, each a ``NamedTuple`` whose fields are the statement's
    columns in order (``await rows.all(STATEMENT, UserRow, project_id=...)``), checked on the
    statement's first use with that row type: a row type that names a column wrongly fails
    there, not when a field is read."""

    def __init__(self, database: Compiler, connection: Any) -> None:
        self._database = database
        self._connection = connection  # sqlite3.Connection or asyncpg.Connection

    async def all(
        self, statement: Executable, into: type[RowT] | Joined[RowT], /, **params: Any
    ) -> list[RowT]:
        compiled, raw = await self._fetch(statement, params)
        if into not in compiled.checked:
            compiled.check(into)
            compiled.checked.add(into)
        return compiled.rows(raw, into._make)  # type: ignore[union-attr]  # a NamedTuple's

    async def first(
        self, statement: Executable, into: type[RowT] | Joined[RowT], /, **params: Any
    ) -> RowT | None:
        rows = await self.all(statement, into, **params)
        return rows[0] if rows else None

    async def scalar(self, statement: Executable, /, **params: Any) -> Any:
        """The first column of the first row (converted), or None without a row."""
        compiled, raw = await self._fetch(statement, params)
        return compiled.rows(raw[:1], tuple)[0][0] if raw else None

    @property
    def on_postgresql(self) -> bool:
        """For the db package's statements written for one backend (``db.issuing``)."""
        return not isinstance(self._connection, sqlite3.Connection)

    async def _fetch(
        self, statement: Executable, params: dict[str, Any]
    ) -> tuple[Compiled, list[Any]]:
        compiled = self._database.compiled(statement, sizes_of(params))
        args = compiled.arguments(params)
        if isinstance(self._connection, sqlite3.Connection):
            raw = self._connection.execute(compiled.sql, args).fetchall()
            if compiled.converters is None:
                compiled.describe(None)
        else:  # asyncpg caches the prepared statement on each connection
            if compiled.converters is None:
                compiled.describe(await self._connection.prepare(compiled.sql))
            raw = await self._connection.fetch(compiled.sql, *args)
        return compiled, raw


class Transaction(Rows):
    """What a write use-case is given (``Database.transaction``): reads as in ``Rows`` (a
    statement with RETURNING too), and writes. Driver errors of a constraint surface as
    SQLAlchemy's ``IntegrityError``, whichever the backend."""

    def __init__(
        self, database: Compiler, connection: Any, *, commit: Callable[[], Awaitable[None]]
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
        compiled = self._database.compiled(statement, sizes_of(params))
        args = compiled.arguments(params)
        with _integrity(compiled.sql):
            if isinstance(self._connection, sqlite3.Connection):
                return self._connection.execute(compiled.sql, args).rowcount
            status: str = await self._connection.execute(compiled.sql, *args)
        return int(status.rpartition(" ")[2])

    async def execute_many(self, statement: Executable, rows: Sequence[dict[str, Any]]) -> None:
        """An INSERT, UPDATE or DELETE run once for each of ``rows`` (its parameters), in one
        round trip (no list parameters)."""
        if not rows:
            return
        compiled = self._database.compiled(statement, ())
        args = [compiled.arguments(row) for row in rows]
        with _integrity(compiled.sql):
            if isinstance(self._connection, sqlite3.Connection):
                self._connection.executemany(compiled.sql, args)
            else:
                await self._connection.executemany(compiled.sql, args)

    @overload
    async def insert(
        self, model: type[DeclarativeBase], rows: Sequence[dict[str, Any]], /
    ) -> None: ...

    @overload
    async def insert(
        self, model: type[DeclarativeBase], rows: Sequence[dict[str, Any]], into: type[RowT], /
    ) -> list[RowT]: ...

    async def insert(
        self,
        model: type[DeclarativeBase],
        rows: Sequence[dict[str, Any]],
        into: type[RowT] | None = None,
        /,
    ) -> list[RowT] | None:
        """New rows of ``model``, with the Python-side defaults of its columns filled in as the
        ORM fills them (ids, timestamps, statuses), in one statement run for every row; with
        ``into`` (a ``NamedTuple`` of the table's columns), the rows as written."""
        table = table_of(model)
        full = [with_table_defaults(table, row) for row in rows]
        if len(full) > 1 and not isinstance(self._connection, sqlite3.Connection):
            bulk = bulk_insert(table, self._database.dialect)
            with _integrity(bulk.sql):
                await self._connection.execute(bulk.sql, *bulk.arguments(full))
        elif full:
            compiled = self._database.compiled(insert_all(table), ())
            args = [compiled.arguments(row) for row in full]
            with _integrity(compiled.sql):
                if isinstance(self._connection, sqlite3.Connection):
                    self._connection.executemany(compiled.sql, args)
                else:
                    await self._connection.execute(compiled.sql, *args[0])
        return None if into is None else [_written(into, row) for row in full]

    @overload
    async def insert_new(
        self, model: type[DeclarativeBase], row: dict[str, Any], *, unique: tuple[str, ...]
    ) -> bool: ...

    @overload
    async def insert_new(
        self,
        model: type[DeclarativeBase],
        row: dict[str, Any],
        into: type[RowT],
        *,
        unique: tuple[str, ...],
    ) -> RowT | None: ...

    async def insert_new(
        self,
        model: type[DeclarativeBase],
        row: dict[str, Any],
        into: type[RowT] | None = None,
        *,
        unique: tuple[str, ...],
    ) -> RowT | bool | None:
        """``row`` of ``model`` (defaults filled in as by ``insert``), unless a row with the
        same ``unique`` columns (a unique constraint) exists or is being inserted by another
        transaction: then nothing changes. One statement (``ON CONFLICT DO NOTHING``): no error
        to recover from, no savepoint. Whether it was written; with ``into``, the row as
        written, or None."""
        table = table_of(model)
        full = with_table_defaults(table, row)
        inserted = await self.scalar(self._insert_new(table, unique), **full) is not None
        if into is None:
            return inserted
        return _written(into, full) if inserted else None

    async def insert_each_new(
        self,
        model: type[DeclarativeBase],
        rows: Sequence[dict[str, Any]],
        *,
        unique: tuple[str, ...],
    ) -> set[Any]:
        """Each of ``rows`` as ``insert_new`` writes one (nothing where a row with the same
        ``unique`` columns exists or is being written), in the order given, in one statement
        (PostgreSQL; SQLite, where a statement costs no round trip: one each); the primary keys
        of those written."""
        table = table_of(model)
        full = [with_table_defaults(table, row) for row in rows]
        if not full:
            return set()
        if isinstance(self._connection, sqlite3.Connection):
            statement = self._insert_new(table, unique)
            written = [await self.scalar(statement, **row) for row in full]
            return {key for key in written if key is not None}
        bulk = bulk_insert(table, self._database.dialect, unique=unique)
        with _integrity(bulk.sql):
            found = await self._connection.fetch(bulk.sql, *bulk.arguments(full))
        [primary] = table.primary_key.columns
        process = primary.type.dialect_impl(self._database.dialect).result_processor(
            self._database.dialect, None
        )
        return {row[0] if process is None else process(row[0]) for row in found}

    async def update_each(
        self, model: type[DeclarativeBase], rows: Sequence[dict[str, Any]]
    ) -> None:
        """Each of ``rows`` (its ``id``, and the same columns in each) written on the row of
        that id, which the caller holds locked: one statement (PostgreSQL), or one each."""
        if not rows:
            return
        table = table_of(model)
        names = tuple(sorted(key for key in rows[0] if key != "id"))
        if isinstance(self._connection, sqlite3.Connection):
            statement = _UPDATE_EACH.get((table, names))
            if statement is None:
                statement = _UPDATE_EACH[(table, names)] = (
                    update(table)
                    .where(table.c.id == bindparam("row_id"))
                    .values({name: bindparam(name, type_=table.c[name].type) for name in names})
                )
            await self.execute_many(
                statement, [{"row_id": row["id"]} | {n: row[n] for n in names} for row in rows]
            )
            return
        bulk = bulk_update(table, self._database.dialect, names)
        with _integrity(bulk.sql):
            await self._connection.execute(bulk.sql, *bulk.arguments(rows))

    def _insert_new(self, table: Table, unique: tuple[str, ...]) -> Any:
        key = (table, unique, self._database.dialect_name)
        statement = _INSERT_NEW.get(key)
        if statement is None:
            dialect_insert = pg_insert if key[2] == "postgresql" else sqlite_insert
            statement = _INSERT_NEW[key] = (
                dialect_insert(table)
                .values(column_values(table))
                .on_conflict_do_nothing(index_elements=list(unique))
                .returning(*table.primary_key.columns)
            )
        return statement

    async def add_to(
        self,
        model: type[DeclarativeBase],
        rows: Sequence[dict[str, Any]],
        *,
        unique: tuple[str, ...],
        column: str,
    ) -> None:
        """Each of ``rows`` of ``model`` inserted, or, where a row with the same ``unique``
        columns exists, its ``column`` added to that row's: counters that any number of
        transactions add to (``INSERT ... ON CONFLICT DO UPDATE``)."""
        table = table_of(model)
        key = (table, unique, column, self._database.dialect_name)
        statement = _ADD_TO.get(key)
        if statement is None:
            dialect_insert = pg_insert if key[3] == "postgresql" else sqlite_insert
            inserted = dialect_insert(table).values(column_values(table))
            statement = _ADD_TO[key] = inserted.on_conflict_do_update(
                index_elements=list(unique),
                set_={column: table.c[column] + inserted.excluded[column]},
            )
        for row in rows:
            await self.execute(statement, **with_table_defaults(table, row))


def _written(into: type[RowT], row: dict[str, Any]) -> RowT:
    """A row as written, as ``into``, whose fields must be the table's columns."""
    return into(**row)


_INSERT_NEW: dict[tuple[Table, tuple[str, ...], str], Any] = {}
_UPDATE_EACH: dict[tuple[Table, tuple[str, ...]], Any] = {}
_ADD_TO: dict[tuple[Table, tuple[str, ...], str, str], Any] = {}


@contextmanager
def _integrity(sql: str) -> Iterator[None]:
    try:
        yield
    except (sqlite3.IntegrityError, asyncpg.exceptions.IntegrityConstraintViolationError) as exc:
        raise IntegrityError(sql, None, exc) from exc
