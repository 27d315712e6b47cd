"""The outbox's statements: changes written, read after a place, and purged once old. The reads
that each backend spells its own way are in ``tessera.db.feed``."""

import uuid
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import bindparam, delete

from tessera.db import Rows, Transaction, table_of
from tessera.db import feed as db_feed
from tessera.db.feed import FeedEnd
from tessera.models import Change, WebhookDelivery


class ChangeRow(NamedTuple):
    seq: int
    txid: int
    id: uuid.UUID
    type: str
    created_at: datetime
    data: str  # the object as the API rendered it, JSON
    seen: bool  # the snapshot read with it (``seen_by``) saw it committed; False without one


async def changes_after(
    rows: Rows,
    project_id: uuid.UUID,
    *,
    txid: int,
    seq: int,
    limit: int,
    seen_by: str | None = None,
) -> list[ChangeRow]:
    """Up to ``limit`` of the project's changes after ``(txid, seq)``, in commit order."""
    return await db_feed.changes_after(
        rows, ChangeRow, project_id=project_id, txid=txid, seq=seq, limit=limit, seen_by=seen_by
    )


async def end(rows: Rows) -> FeedEnd:
    """The place after the changes committed so far, and on PostgreSQL its snapshot."""
    return await db_feed.end(rows)


_CHANGES, _DELIVERIES = table_of(Change), table_of(WebhookDelivery)
_PURGE_CHANGES = delete(_CHANGES).where(_CHANGES.c.created_at < bindparam("before"))
_PURGE_DELIVERIES = delete(_DELIVERIES).where(_DELIVERIES.c.created_at < bindparam("before"))


async def purge(tx: Transaction, before: datetime) -> int:
    """Forget the changes and the delivery attempts made before ``before``; how many changes."""
    await tx.execute(_PURGE_DELIVERIES, before=before)
    return await tx.execute(_PURGE_CHANGES, before=before)
