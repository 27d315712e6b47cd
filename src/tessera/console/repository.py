"""The console's own tables: operator accounts and console sessions."""

import uuid
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import and_, bindparam, delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.db import Rows, Transaction, table_of
from tessera.models import ApiKey, ConsoleSession, Operator
from tessera.models.base import utcnow

_OPERATOR_TO_SIGN_IN = (
    select(Operator).where(Operator.email == bindparam("email")).with_for_update()
)

_SESSIONS, _OPERATORS, _KEYS = table_of(ConsoleSession), table_of(Operator), table_of(ApiKey)
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


async def operator_to_sign_in(session: AsyncSession, email: str) -> Operator | None:
    """The operator, locked: two sign-ins at once count their failures one after the other."""
    operator: Operator | None = await session.scalar(_OPERATOR_TO_SIGN_IN, {"email": email})
    return operator


async def read_session(rows: Rows, token_hash: str) -> SessionRow | None:
    """The live session of this token's keyed hash (a read for ``Database.read``), or None."""
    return await rows.first(_SESSION, SessionRow, token_hash=token_hash, now=utcnow())


async def end_session(tx: Transaction, token_hash: str) -> None:
    await tx.execute(_END, token_hash=token_hash)


async def purge_sessions(tx: Transaction, now: datetime) -> None:
    """Forget the sessions expired at ``now``."""
    await tx.execute(_PURGE, now=now)
