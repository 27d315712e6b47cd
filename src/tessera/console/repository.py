"""The console's own tables: operator accounts and console sessions."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, or_, select, update

from tessera.db import Rows, Transaction, lock_for_update, table_of
from tessera.models import ApiKey, ConsoleSession, Operator
from tessera.models.base import utcnow


class OperatorRow(NamedTuple):
    email: str
    password_hash: str
    failed_sign_ins: int
    locked_until: datetime | None
    created_at: datetime
    id: uuid.UUID


_SESSIONS, _OPERATORS, _KEYS = table_of(ConsoleSession), table_of(Operator), table_of(ApiKey)

_OPERATOR_TO_SIGN_IN = lock_for_update(
    select(_OPERATORS).where(_OPERATORS.c.email == bindparam("email"))
)
_SIGN_INS = (
    update(_OPERATORS)
    .where(_OPERATORS.c.id == bindparam("id"))
    .values(
        failed_sign_ins=bindparam("failed_sign_ins"),
        locked_until=bindparam("locked_until"),
        password_hash=bindparam("password_hash"),
    )
)
# A live session: not expired, and an owner's only while the key it signed in with is valid.
_SESSION = (
    select(
        _SESSIONS.c.token_hash,
        _SESSIONS.c.csrf_token,
        _SESSIONS.c.operator_id,
        _OPERATORS.c.email.label("operator_email"),
        _SESSIONS.c.project_id,
    )
    .select_from(
        _SESSIONS.outerjoin(_OPERATORS, _OPERATORS.c.id == _SESSIONS.c.operator_id).outerjoin(
            _KEYS, _KEYS.c.id == _SESSIONS.c.api_key_id
        )
    )
    .where(
        _SESSIONS.c.token_hash == bindparam("token_hash"),
        _SESSIONS.c.expires_at > bindparam("now"),
        or_(
            _SESSIONS.c.operator_id.is_not(None),
            and_(
                _KEYS.c.revoked_at.is_(None),
                or_(_KEYS.c.expires_at.is_(None), _KEYS.c.expires_at > bindparam("now")),
            ),
        ),
    )
)
_END = delete(_SESSIONS).where(_SESSIONS.c.token_hash == bindparam("token_hash"))
_PURGE = delete(_SESSIONS).where(_SESSIONS.c.expires_at <= bindparam("now"))


class SessionRow(NamedTuple):
    """A live console session and who it signs in (``_SESSION``)."""

    token_hash: str
    csrf_token: str
    operator_id: uuid.UUID | None
    operator_email: str | None
    project_id: uuid.UUID | None


async def add_operator(tx: Transaction, row: dict[str, Any]) -> OperatorRow | None:
    """A new operator, as written; None when one with this email exists."""
    return await tx.insert_new(Operator, row, OperatorRow, unique=("email",))


async def operator_to_sign_in(tx: Transaction, email: str) -> OperatorRow | None:
    """The operator, locked: two sign-ins at once count their failures one after the other."""
    return await tx.first(_OPERATOR_TO_SIGN_IN, OperatorRow, email=email)


async def set_sign_ins(
    tx: Transaction,
    operator_id: uuid.UUID,
    *,
    failed_sign_ins: int,
    locked_until: datetime | None,
    password_hash: str,
) -> None:
    """The operator's failed sign-ins in a row, lock and password hash (rehashed, or as it
    was)."""
    await tx.execute(
        _SIGN_INS,
        id=operator_id,
        failed_sign_ins=failed_sign_ins,
        locked_until=locked_until,
        password_hash=password_hash,
    )


async def add_session(tx: Transaction, row: dict[str, Any]) -> None:
    await tx.insert(ConsoleSession, [row])


async def read_session(rows: Rows, token_hash: str) -> SessionRow | None:
    """The live session of this token's keyed hash (a read for ``Database.read``), or None."""
    return await rows.first(_SESSION, SessionRow, token_hash=token_hash, now=utcnow())


async def end_session(tx: Transaction, token_hash: str) -> None:
    await tx.execute(_END, token_hash=token_hash)


async def purge_sessions(tx: Transaction, now: datetime) -> None:
    """Forget the sessions expired at ``now``."""
    await tx.execute(_PURGE, now=now)
