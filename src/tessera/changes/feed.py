"""Reading the outbox in commit order, a page at a time, from an opaque cursor.

A change's place is ``(txid, seq)`` (see ``tessera.models.change.Change``). On PostgreSQL the
ids of transactions are handed out when they begin, not when they commit, so a page shows only
the changes of transactions below the oldest one still running (the snapshot's ``xmin``): every
one of those has ended, and none can add a row behind the cursor. A change therefore waits for
the transactions that began before it to end, in any database of the server (transaction ids
are the cluster's): one left open (idle in transaction, a prepared two-phase transaction, another
application's long batch) holds every project's feed back until it ends. On SQLite one
transaction writes at a time: ``seq`` is commit order.
"""

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    bindparam,
    cast,
    delete,
    func,
    literal_column,
    select,
    tuple_,
)
from sqlalchemy.types import UserDefinedType

from tessera.db import Database, Rows, table_of
from tessera.errors import InvalidInput
from tessera.models import Change, WebhookDelivery
from tessera.models.base import utcnow
from tessera.schemas import SnakeModel

MAX_SEQ = 10**18 - 1  # above any seq, and within a cursor's 18 digits
# A cursor is the place itself, ``<txid>.<seq>`` in decimals: any text of this pattern is a
# cursor (18 digits stay below PostgreSQL's bigint), so the OpenAPI's pattern says all there is.
CURSOR_PATTERN = r"^[0-9]{1,18}\.[0-9]{1,18}$"
_CURSOR = re.compile(CURSOR_PATTERN)


class Place(NamedTuple):
    """After which change a reader goes on: the ``(txid, seq)`` of the last one it had."""

    txid: int
    seq: int

    def cursor(self) -> str:
        return f"{self.txid}.{self.seq}"

    @classmethod
    def of_cursor(cls, cursor: str) -> "Place":
        if not _CURSOR.fullmatch(cursor):
            raise InvalidInput("after: not a cursor that Tessera gave")
        txid, seq = cursor.split(".")
        return cls(int(txid), int(seq))


START = Place(0, 0)  # before every change


class ChangeRead(SnakeModel):
    id: uuid.UUID
    type: str
    created_at: datetime
    data: dict[str, Any]

    @classmethod
    def of(cls, row: Any) -> "ChangeRead":
        return cls(id=row.id, type=row.type, created_at=row.created_at, data=json.loads(row.data))


class ChangeList(SnakeModel):
    events: list[ChangeRead]
    cursor: str


_CHANGES = table_of(Change)
# The oldest transaction still running, PostgreSQL: rows below it are final.
HORIZON: ColumnElement[int] = literal_column(
    "(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint"
)
_AFTER = (
    select(
        _CHANGES.c.seq,
        _CHANGES.c.txid,
        _CHANGES.c.id,
        _CHANGES.c.type,
        _CHANGES.c.created_at,
        _CHANGES.c.data,
    )
    .where(
        _CHANGES.c.project_id == bindparam("project_id"),
        tuple_(_CHANGES.c.txid, _CHANGES.c.seq) > tuple_(bindparam("txid"), bindparam("seq")),
    )
    .order_by(_CHANGES.c.txid, _CHANGES.c.seq)
    .limit(bindparam("limit"))
)
_AFTER_FINAL = _AFTER.where(_CHANGES.c.txid < HORIZON)


# The same, each change saying whether a snapshot (an endpoint's start) saw it committed.
class _Snapshot(UserDefinedType[str]):
    """PostgreSQL's ``pg_snapshot``, sent as its text."""

    cache_ok = True

    def get_col_spec(self, **_: Any) -> str:
        return "pg_snapshot"


_SEEN = func.pg_visible_in_snapshot(
    literal_column("(changes.txid::text)::xid8"),
    cast(bindparam("snapshot", type_=String()), _Snapshot()),
)
_AFTER_FINAL_SEEN = _AFTER_FINAL.add_columns(_SEEN.label("seen"))
_END_PG: Select[int, str] = select(
    (HORIZON - 1).label("txid"),
    literal_column("pg_current_snapshot()::text", type_=String()).label("snapshot"),
)
_END_SQLITE = select(func.coalesce(func.max(_CHANGES.c.seq), 0))


async def read_after(
    rows: Rows, project_id: uuid.UUID, after: Place, limit: int, *, seen_by: str | None = None
) -> list[Any]:
    """Up to ``limit`` of the project's changes after ``after``, in commit order. With
    ``seen_by`` (a snapshot from ``end``; PostgreSQL), each row's ``seen`` says whether that
    snapshot saw it committed."""
    places = {"project_id": project_id, "txid": after.txid, "seq": after.seq, "limit": limit}
    if not rows.on_postgresql:
        return await rows.all(_AFTER, **places)
    if seen_by is None:
        return await rows.all(_AFTER_FINAL, **places)
    return await rows.all(_AFTER_FINAL_SEEN, **places, snapshot=seen_by)


def place_of(row: Any) -> Place:
    return Place(row.txid, row.seq)


async def read_page(rows: Rows, project_id: uuid.UUID, after: Place, limit: int) -> ChangeList:
    found = await read_after(rows, project_id, after, limit)
    last = place_of(found[-1]) if found else after
    return ChangeList(events=[ChangeRead.of(row) for row in found], cursor=last.cursor())


async def end(rows: Rows) -> tuple[Place, str | None]:
    """Where a reader starts to see only what commits from now on (a new webhook endpoint):
    a place, and on PostgreSQL the snapshot that tells the changes above that place which were
    already committed (``read_after(seen_by=...)``). On SQLite the place after the last change
    is enough."""
    if rows.on_postgresql:
        row = await rows.first(_END_PG)
        assert row is not None
        return Place(row[0], MAX_SEQ), row[1]
    return Place(0, await rows.scalar(_END_SQLITE)), None


_DELIVERIES = table_of(WebhookDelivery)
_PURGE_CHANGES = delete(_CHANGES).where(_CHANGES.c.created_at < bindparam("before"))
_PURGE_DELIVERIES = delete(_DELIVERIES).where(_DELIVERIES.c.created_at < bindparam("before"))


PURGE_SECONDS = 3600.0


def purge_chore(retention_days: int) -> tuple[float, Callable[[Database], Awaitable[int]]]:
    """The worker's hourly chore: forget the changes and delivery attempts older than
    ``retention_days`` (``TESSERA_CHANGES_RETENTION_DAYS``); how many changes."""

    async def purge_changes(database: Database) -> int:
        before = utcnow() - timedelta(days=retention_days)
        async with database.transaction() as tx:
            await tx.execute(_PURGE_DELIVERIES, before=before)
            purged = await tx.execute(_PURGE_CHANGES, before=before)
            await tx.commit()
        return purged

    return PURGE_SECONDS, purge_changes
