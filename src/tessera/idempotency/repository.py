"""Statements of the Idempotency-Key records."""

from sqlalchemy import bindparam, delete, select, update

from tessera.db import lock_for_update, table_of
from tessera.models import IdempotencyKey

_KEYS = table_of(IdempotencyKey)
FOUND = lock_for_update(
    select(_KEYS).where(
        _KEYS.c.project_id == bindparam("project_id"),
        _KEYS.c.scope == bindparam("scope"),
        _KEYS.c.key == bindparam("key"),
    )
)
TAKE_OVER = (
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
ANSWERED = (
    update(_KEYS)
    .where(_KEYS.c.id == bindparam("id"))
    .values(status_code=bindparam("status"), headers=bindparam("headers"), body=bindparam("body"))
)
FORGET = delete(_KEYS).where(_KEYS.c.id == bindparam("id"))
EXPIRED = delete(_KEYS).where(_KEYS.c.expires_at <= bindparam("now"))
