"""Work that several workers share, taken from a table: the claim of due rows, and which rows
of an outbox are final, each backend its way.

A claim locks the rows it takes with ``SKIP LOCKED`` on PostgreSQL, so that workers running side
by side take different rows instead of waiting on each other; SQLite, one writer at a time, has
no row locks and needs none. An outbox row is final when no reader can still see a row appear
before it: on PostgreSQL once every transaction older than the one that wrote it has ended
(transaction ids are handed out when transactions begin, see ``tessera.changes.service``); on
SQLite as soon as it is committed.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Boolean, ColumnElement, Table, Update, literal_column, select, update
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from tessera.db.sql import skip_locked

# The oldest transaction still running, PostgreSQL: the rows written below it are final.
HORIZON: ColumnElement[int] = literal_column(
    "(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint"
)


def claim(
    table: Table,
    *,
    due: Sequence[ColumnElement[bool]],
    order_by: Sequence[ColumnElement[Any]],
    limit: int,
    values: Mapping[str, Any],
) -> Update:
    """``UPDATE table SET values`` on up to ``limit`` rows that are ``due``, the first in
    ``order_by`` that no other worker holds, returning them whole: a lease or a status that
    makes them this worker's. Build it once (a module constant), with bound parameters."""
    [key] = table.primary_key.columns
    taken = skip_locked(select(key).where(*due).order_by(*order_by).limit(limit))
    return (
        update(table)
        .where(key.in_(taken.scalar_subquery()))
        .values(dict(values))
        .returning(*table.c)
    )


class Final(FunctionElement[bool]):
    """Whether the outbox row written by transaction ``txid`` (a column holding the writer's
    ``pg_current_xact_id()``) is final: on PostgreSQL, ``txid`` is below the oldest
    transaction still running (the current snapshot's ``xmin``); on SQLite, always."""

    type = Boolean()
    name = "final"
    inherit_cache = True


@compiles(Final, "postgresql")
def _final_on_postgresql(element: Final, compiler: SQLCompiler, **kw: Any) -> str:
    txid = compiler.process(element.clauses, **kw)
    return f"({txid} < {compiler.process(HORIZON, **kw)})"


@compiles(Final, "sqlite")
def _final_on_sqlite(element: Final, compiler: SQLCompiler, **kw: Any) -> str:
    return "1"
