"""The change feed's reads, which each backend spells its own way (``tessera.changes``).

On PostgreSQL transaction ids are handed out when transactions begin, not when they commit: a
change is final once its transaction's id is below the oldest one still running (``HORIZON``),
and a snapshot (its text) tells which changes above that were already committed when it was
taken. On SQLite one transaction writes at a time: ``seq`` is commit order, every change read
is final.
"""

import uuid
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import (
    ColumnElement,
    String,
    bindparam,
    cast,
    false,
    func,
    literal_column,
    select,
    tuple_,
)
from sqlalchemy.types import UserDefinedType

from tessera.db.compiled import table_of
from tessera.db.queue import HORIZON, Final
from tessera.db.rows import Rows
from tessera.db.sql import AnySelect
from tessera.models import Change

RowT = TypeVar("RowT", bound=tuple[Any, ...])

MAX_SEQ = 10**18 - 1  # above any seq, and within a cursor's 18 digits


class _Snapshot(UserDefinedType[str]):
    """PostgreSQL's ``pg_snapshot``, sent as its text."""

    cache_ok = True

    def get_col_spec(self, **_: Any) -> str:
        return "pg_snapshot"


_CHANGES = table_of(Change)
# Whether the snapshot given saw the change committed (PostgreSQL).
_SEEN = func.pg_visible_in_snapshot(
    literal_column("(changes.txid::text)::xid8"),
    cast(bindparam("snapshot", type_=String()), _Snapshot()),
)


def _after(seen: ColumnElement[bool], *final: ColumnElement[bool]) -> AnySelect:
    """A project's changes after the place ``(txid, seq)``, in commit order, each with ``seen``."""
    return (
        select(
            _CHANGES.c.seq,
            _CHANGES.c.txid,
            _CHANGES.c.id,
            _CHANGES.c.type,
            _CHANGES.c.created_at,
            _CHANGES.c.data,
            seen.label("seen"),
        )
        .where(
            _CHANGES.c.project_id == bindparam("project_id"),
            tuple_(_CHANGES.c.txid, _CHANGES.c.seq) > tuple_(bindparam("txid"), bindparam("seq")),
            *final,
        )
        .order_by(_CHANGES.c.txid, _CHANGES.c.seq)
        .limit(bindparam("limit"))
    )


_AFTER_FINAL = _after(false(), Final(_CHANGES.c.txid))
_AFTER_FINAL_SEEN = _after(_SEEN, Final(_CHANGES.c.txid))  # PostgreSQL: ``end`` gave a snapshot


async def changes_after(
    rows: Rows,
    into: type[RowT],
    /,
    *,
    project_id: uuid.UUID,
    txid: int,
    seq: int,
    limit: int,
    seen_by: str | None,
) -> list[RowT]:
    """Up to ``limit`` of the project's final changes after ``(txid, seq)``, in commit order,
    as ``into`` (``seq, txid, id, type, created_at, data, seen``). ``seen`` says whether the
    snapshot ``seen_by`` (from ``end``; PostgreSQL) saw the change committed; without one, it
    is false."""
    places = {"project_id": project_id, "txid": txid, "seq": seq, "limit": limit}
    if seen_by is None:
        return await rows.all(_AFTER_FINAL, into, **places)
    return await rows.all(_AFTER_FINAL_SEEN, into, **places, snapshot=seen_by)


class FeedEnd(NamedTuple):
    """The place after which only changes committed from now on come, and on PostgreSQL the
    snapshot that tells which changes above it were already committed."""

    txid: int
    seq: int
    snapshot: str | None


class _Horizon(NamedTuple):
    txid: int
    snapshot: str


_END_PG = select(
    (HORIZON - 1).label("txid"),
    literal_column("pg_current_snapshot()::text", type_=String()).label("snapshot"),
)
_END_SQLITE = select(func.coalesce(func.max(_CHANGES.c.seq), 0))


async def end(rows: Rows) -> FeedEnd:
    """Where a reader starts to see only what commits from now on. On SQLite the place after
    the last change is enough."""
    if rows.on_postgresql:
        horizon = await rows.first(_END_PG, _Horizon)
        assert horizon is not None
        return FeedEnd(horizon.txid, MAX_SEQ, horizon.snapshot)
    last: int = await rows.scalar(_END_SQLITE)
    return FeedEnd(0, last, None)
