"""Backend-specific SQL: row locks, advisory locks, functions each backend spells its way."""

from collections.abc import Iterable
from typing import Any, TypeVar

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Select,
    String,
    bindparam,
    func,
    literal_column,
    select,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from tessera.db.rows import Transaction

AnySelect = Select[*tuple[Any, ...]]

SelectT = TypeVar("SelectT", bound=AnySelect)


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


def skip_locked(statement: SelectT) -> SelectT:
    """For claiming work: PostgreSQL skips rows another worker holds; SQLite has one writer."""
    return statement.with_for_update(skip_locked=True)


_XACT_LOCK = select(func.pg_advisory_xact_lock(bindparam("key", type_=BigInteger())))


async def serialize(tx: Transaction, key: int) -> None:
    """Run this transaction's critical section alone across processes, until it ends.

    PostgreSQL takes a transaction-level advisory lock on ``key``; SQLite's write transaction
    already holds the whole database.
    """
    if tx.on_postgresql:
        await tx.scalar(_XACT_LOCK, key=key)


_XACT_LOCKS = select(func.count(func.pg_advisory_xact_lock(literal_column("key")))).select_from(
    func.unnest(bindparam("keys", type_=ARRAY(BigInteger()))).alias("key")
)


async def serialize_each(tx: Transaction, keys: Iterable[int]) -> None:
    """``serialize`` on each of ``keys``, taken in ascending order in one statement (two
    transactions that want some of the same keys never each hold what the other waits for).
    SQLite's write transaction holds everything already."""
    ordered = sorted(set(keys))
    if tx.on_postgresql and ordered:
        await tx.scalar(_XACT_LOCKS, keys=tuple(ordered))  # an array: a tuple, not a list


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
    the primary key finds each id at once (tests/db/test_query_plans.py holds the plans)."""

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
