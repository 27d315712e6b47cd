"""The tables that keep a sealed secret, read a batch at a time for re-sealing."""

from typing import TypeVar

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.db import AnySelect
from tessera.models import Base, ProjectWallet, SigningKey, UserWallet, WebhookEndpoint

SealedT = TypeVar("SealedT", UserWallet, ProjectWallet, SigningKey, WebhookEndpoint)

_SEALED_WITH_ANOTHER_KEY: dict[type[Base], AnySelect] = {
    model: select(model)
    .where(model.secret_key_id != bindparam("active_key_id"))
    .limit(bindparam("limit"))
    for model in (UserWallet, ProjectWallet, SigningKey, WebhookEndpoint)
}


async def sealed_with_another_key(
    session: AsyncSession, model: type[SealedT], active_key_id: str, *, limit: int
) -> list[SealedT]:
    """Up to ``limit`` rows of ``model`` whose secret is not sealed with ``active_key_id``."""
    statement = _SEALED_WITH_ANOTHER_KEY[model]
    found: list[SealedT] = list(
        await session.scalars(statement, {"active_key_id": active_key_id, "limit": limit})
    )
    return found
