"""Re-seal stored secrets under the active key, so that an old key can leave the key ring.

Rotation: put a new key first in ``TESSERA_SECRET_KEYS`` (keep the old ones after it), restart,
run ``tessera secrets rotate``, then drop the old keys. Sealed values are opened with the key
whose id they carry and sealed again with the active key, with the same associated data.
"""

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.auth.tokens import signing_key_aad
from tessera.chain.keys import wallet_aad
from tessera.crypto import Sealed, SecretBox
from tessera.db import Database
from tessera.models import ProjectWallet, SigningKey, UserWallet, WebhookEndpoint
from tessera.schemas import SnakeModel
from tessera.webhooks.service import secret_aad

BATCH = 500


class Resealed(SnakeModel):
    active_key_id: str
    user_wallets: int
    project_wallets: int
    signing_keys: int
    webhook_secrets: int


async def reseal_all(database: Database, box: SecretBox) -> Resealed:
    """Re-seal every secret not sealed with the active key; one transaction per batch."""
    counts = []
    tables: list[tuple[Any, Callable[[Any], bytes]]] = [
        (UserWallet, lambda row: wallet_aad(row.public_key)),
        (ProjectWallet, lambda row: wallet_aad(row.public_key)),
        (SigningKey, lambda row: signing_key_aad(row.kid)),
        (WebhookEndpoint, lambda row: secret_aad(row.id)),
    ]
    for model, aad in tables:
        total = 0
        while True:
            async with database.session() as session:
                done = await _reseal_batch(session, box, model, aad)
                await session.commit()
            total += done
            if done < BATCH:
                break
        counts.append(total)
    users, projects, signing, webhooks = counts
    return Resealed(
        active_key_id=box.active_key_id,
        user_wallets=users,
        project_wallets=projects,
        signing_keys=signing,
        webhook_secrets=webhooks,
    )


async def _reseal_batch(
    session: AsyncSession, box: SecretBox, model: Any, aad: Callable[[Any], bytes]
) -> int:
    rows = list(
        await session.scalars(
            select(model).where(model.secret_key_id != box.active_key_id).limit(BATCH)
        )
    )
    for row in rows:
        plaintext = box.open(Sealed(row.secret_key_id, row.secret_blob), aad=aad(row))
        sealed = box.seal(plaintext, aad=aad(row))
        row.secret_key_id, row.secret_blob = sealed.key_id, sealed.blob
    return len(rows)
