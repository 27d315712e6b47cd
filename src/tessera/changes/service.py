"""The change feed: ``record``, which the use-cases call in their transaction, and the
outbox read in commit order, a page at a time, from an opaque cursor. ``record(tx, project_id,
EventType.X, objects)`` writes one change per object, rendered as the API renders it, in the
caller's transaction: a change exists exactly when the state it reports was committed.

A change's place is ``(txid, seq)`` (see ``tessera.models.change.Change``). On PostgreSQL the
ids of transactions are handed out when they begin, not when they commit, so a page shows only
the changes of transactions below the oldest one still running (the snapshot's ``xmin``): every
one of those has ended, and none can add a row behind the cursor. A change therefore waits for
the transactions that began before it to end, in any database of the server (transaction ids
are the cluster's): one left open (idle in transaction, a prepared two-phase transaction, another
application's long batch) holds every project's feed back until it ends. On SQLite one
transaction writes at a time: ``seq`` is commit order.
"""

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from pydantic import BaseModel

from tessera.changes import repository
from tessera.changes.repository import ChangeRow
from tessera.changes.schemas import ChangeList, ChangeRead, EventType, Place
from tessera.db import Database, Rows, Transaction, rerun_on_conflict
from tessera.models import Change
from tessera.models.base import new_id, utcnow


async def record(
    tx: Transaction,
    project_id: uuid.UUID,
    type: EventType,
    objects: Sequence[BaseModel],
) -> None:
    """A change of ``type`` for each object, in ``tx``, the use-case's transaction: written with
    its other changes, in one statement, at its commit."""
    if not objects:
        return
    now = utcnow()
    rows = [
        {
            "id": new_id(),
            "project_id": project_id,
            "type": type.value,
            "created_at": now,
            "data": data.model_dump_json(by_alias=True),
        }
        for data in objects
    ]
    tx.stage(Change, rows)


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

    @rerun_on_conflict
    async def purge_changes(database: Database) -> int:
        before = utcnow() - timedelta(days=retention_days)
        async with database.transaction() as tx:
            purged = await repository.purge(tx, before)
            await tx.commit()
        return purged

    return PURGE_SECONDS, purge_changes
