"""The Idempotency-Key records."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, select, update

from tessera.db import Transaction, lock_for_update, table_of
from tessera.models import IdempotencyKey


class KeyRow(NamedTuple):
    project_id: uuid.UUID
    scope: str
    key: str
    fingerprint: str
    status_code: int | None
    headers: str | None
    body: bytes | None
    running_until: datetime
    expires_at: datetime
    created_at: datetime
    id: uuid.UUID


_KEYS = table_of(IdempotencyKey)
_FOUND = lock_for_update(
    select(_KEYS).where(
        _KEYS.c.project_id == bindparam("project_id"),
        _KEYS.c.scope == bindparam("scope"),
        _KEYS.c.key == bindparam("key"),
    )
)
_TAKE_OVER = (
    update(_KEYS)
    .where(_KEYS.c.id == bindparam("id"))
    .values(
        fingerprint=bindparam("fingerprint"),
        status_code=None,
        headers=None,
        body=None,
        running_until=bindparam("running_until"),
        expires_at=bindparam("expires_at"),
        created_at=bindparam("now"),
    )
)
_ANSWERED = (
    update(_KEYS)
    .where(_KEYS.c.id == bindparam("id"))
    .values(status_code=bindparam("status"), headers=bindparam("headers"), body=bindparam("body"))
)
_FORGET = delete(_KEYS).where(_KEYS.c.id == bindparam("id"))
_EXPIRED = delete(_KEYS).where(_KEYS.c.expires_at <= bindparam("now"))


async def create(tx: Transaction, row: dict[str, Any]) -> uuid.UUID | None:
    """A new record, unless one with its key exists or is being written (then None)."""
    created = await tx.insert_new(
        IdempotencyKey, row, KeyRow, unique=("project_id", "scope", "key")
    )
    return None if created is None else created.id


async def lock_record(
    tx: Transaction, *, project_id: uuid.UUID, scope: str, key: str
) -> KeyRow | None:
    return await tx.first(_FOUND, KeyRow, project_id=project_id, scope=scope, key=key)


async def take_over(
    tx: Transaction,
    record: uuid.UUID,
    *,
    now: datetime,
    fingerprint: str,
    running_until: datetime,
    expires_at: datetime,
) -> None:
    """The record starts again, for another run of its request."""
    await tx.execute(
        _TAKE_OVER,
        id=record,
        now=now,
        fingerprint=fingerprint,
        running_until=running_until,
        expires_at=expires_at,
    )


async def set_answer(
    tx: Transaction, record: uuid.UUID, *, status: int, headers: str, body: bytes
) -> None:
    await tx.execute(_ANSWERED, id=record, status=status, headers=headers, body=body)


async def delete_record(tx: Transaction, record: uuid.UUID) -> None:
    await tx.execute(_FORGET, id=record)


async def delete_expired(tx: Transaction, now: datetime) -> int:
    return await tx.execute(_EXPIRED, now=now)
