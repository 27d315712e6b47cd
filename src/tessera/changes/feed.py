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
from typing import Any, NamedTuple, Protocol

from tessera.changes import repository
from tessera.changes.repository import ChangeRow
from tessera.db import Database, Rows
from tessera.errors import InvalidInput
from tessera.models.base import utcnow
from tessera.schemas import SnakeModel

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


class ChangeColumns(Protocol):
    """What a change is rendered from: a row of ``changes`` (``ChangeRow``, or any read of its
    columns)."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def type(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def data(self) -> str: ...


class ChangeRead(SnakeModel):
    id: uuid.UUID
    type: str
    created_at: datetime
    data: dict[str, Any]

    @classmethod
    def of(cls, row: ChangeColumns) -> "ChangeRead":
        return cls(id=row.id, type=row.type, created_at=row.created_at, data=json.loads(row.data))


class ChangeList(SnakeModel):
    events: list[ChangeRead]
    cursor: str


async def read_after(
    rows: Rows, project_id: uuid.UUID, after: Place, limit: int, *, seen_by: str | None = None
) -> list[ChangeRow]:
    """Up to ``limit`` of the project's changes after ``after``, in commit order. With
    ``seen_by`` (a snapshot from ``end``; PostgreSQL), each row's ``seen`` says whether that
    snapshot saw it committed."""
    return await repository.changes_after(
        rows, project_id, txid=after.txid, seq=after.seq, limit=limit, seen_by=seen_by
    )


def place_of(row: ChangeRow) -> Place:
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
    found = await repository.end(rows)
    return Place(found.txid, found.seq), found.snapshot


PURGE_SECONDS = 3600.0


def purge_chore(retention_days: int) -> tuple[float, Callable[[Database], Awaitable[int]]]:
    """The worker's hourly chore: forget the changes and delivery attempts older than
    ``retention_days`` (``TESSERA_CHANGES_RETENTION_DAYS``); how many changes."""

    async def purge_changes(database: Database) -> int:
        before = utcnow() - timedelta(days=retention_days)
        async with database.transaction() as tx:
            purged = await repository.purge(tx, before)
            await tx.commit()
        return purged

    return PURGE_SECONDS, purge_changes
