"""Re-seal stored secrets under the active key, a batch at a time (see the package)."""

from collections.abc import Callable

from tessera.auth.tokens import signing_key_aad
from tessera.chain.keys import wallet_aad
from tessera.crypto import Sealed, SecretBox
from tessera.db import Database
from tessera.keyring import repository
from tessera.keyring.repository import SealedT
from tessera.keyring.schemas import Resealed
from tessera.models import ProjectWallet, SigningKey, UserWallet, WebhookEndpoint
from tessera.webhooks.service import secret_aad

BATCH = 500


async def reseal_all(database: Database, box: SecretBox) -> Resealed:
    """Re-seal every secret not sealed with the active key; one transaction per batch."""
    return Resealed(
        active_key_id=box.active_key_id,
        user_wallets=await _reseal(
            database, box, UserWallet, lambda row: wallet_aad(row.public_key)
        ),
        project_wallets=await _reseal(
            database, box, ProjectWallet, lambda row: wallet_aad(row.public_key)
        ),
        signing_keys=await _reseal(database, box, SigningKey, lambda row: signing_key_aad(row.kid)),
        webhook_secrets=await _reseal(
            database, box, WebhookEndpoint, lambda row: secret_aad(row.id)
        ),
    )


async def _reseal(
    database: Database, box: SecretBox, model: type[SealedT], aad: Callable[[SealedT], bytes]
) -> int:
    """Every secret of ``model`` sealed again, a batch at a time; how many."""
    total = 0
    while True:
        async with database.session() as session:
            rows = await repository.sealed_with_another_key(
                session, model, box.active_key_id, limit=BATCH
            )
            for row in rows:
                # the statement's ``!=`` passes over a wallet without a secret (user-controlled)
                assert row.secret_key_id is not None and row.secret_blob is not None
                plaintext = box.open(Sealed(row.secret_key_id, row.secret_blob), aad=aad(row))
                sealed = box.seal(plaintext, aad=aad(row))
                row.secret_key_id, row.secret_blob = sealed.key_id, sealed.blob
            await session.commit()
        total += len(rows)
        if len(rows) < BATCH:
            return total
