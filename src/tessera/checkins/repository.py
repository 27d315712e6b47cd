"""Check-in statements: the scans (``checkins``), found by nonce, written, annulled; the
redemption a scan made, taken back."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.models import Checkin, Redemption

_SCANS, _REDEMPTIONS = table_of(Checkin), table_of(Redemption)


class ScanRow(NamedTuple):
    """A scan's whole row (``checkins``)."""

    project_id: uuid.UUID
    nonce: str
    status: str
    status_code: int
    answer: dict[str, Any]
    source: str
    event_id: uuid.UUID | None
    item_id: uuid.UUID | None
    attendee_id: uuid.UUID | None
    redemption_id: uuid.UUID | None
    checked_in_at: int | None
    previous_checked_in_at: int | None
    previous_redeemed_at: int | None
    created_at: datetime
    annulled_at: datetime | None
    id: uuid.UUID


_OF_NONCE = select(_SCANS).where(
    _SCANS.c.project_id == bindparam("project_id"), _SCANS.c.nonce == bindparam("nonce")
)
_ANNUL = (
    update(_SCANS)
    .where(_SCANS.c.id == bindparam("id"), _SCANS.c.annulled_at.is_(None))
    .values(annulled_at=bindparam("now"))
)
_FORGET_REDEMPTION = delete(_REDEMPTIONS).where(_REDEMPTIONS.c.id == bindparam("id"))
_RECENT = (
    select(_SCANS)
    .where(_SCANS.c.project_id == bindparam("project_id"))
    .order_by(_SCANS.c.created_at.desc(), _SCANS.c.id.desc())
    .limit(bindparam("limit"))
)


async def scan_of_nonce(rows: Rows, project_id: uuid.UUID, nonce: str) -> ScanRow | None:
    return await rows.first(_OF_NONCE, ScanRow, project_id=project_id, nonce=nonce)


async def add_scan(tx: Transaction, values: dict[str, Any]) -> ScanRow | None:
    """The scan, unless a scan of its nonce exists or is being written by another transaction
    (then None, and nothing is written)."""
    return await tx.insert_new(Checkin, values, ScanRow, unique=("project_id", "nonce"))


async def annul(tx: Transaction, scan_id: uuid.UUID, now: datetime) -> bool:
    """The scan annulled now; False when it already was."""
    return bool(await tx.execute(_ANNUL, id=scan_id, now=now))


async def forget_redemption(tx: Transaction, redemption_id: uuid.UUID) -> None:
    await tx.execute(_FORGET_REDEMPTION, id=redemption_id)


async def recent_scans(rows: Rows, project_id: uuid.UUID, *, limit: int) -> list[ScanRow]:
    """The project's last scans, newest first (the console's door)."""
    return await rows.all(_RECENT, ScanRow, project_id=project_id, limit=limit)
