"""Re-seal stored secrets under the active key, a batch at a time (see the package)."""

from collections.abc import Callable

from tessera.auth.tokens import signing_key_aad
from tessera.chain.keys import wallet_aad
from tessera.crypto import Sealed, SecretBox
from tessera.db import Database
from tessera.keyring import repository
from tessera.keyring.repository import (
    CheckinKeySecret,
    SecretT,
    SigningKeySecret,
    WalletSecret,
    WebhookSecret,
)
from tessera.keyring.schemas import Resealed
from tessera.models import (
    Base,
    CheckinKey,
    ProjectWallet,
    SigningKey,
    UserWallet,
    WebhookEndpoint,
)
from tessera.ticket_keys.service import checkin_key_aad
from tessera.webhooks.service import secret_aad

BATCH = 500


async def reseal_all(database: Database, box: SecretBox) -> Resealed:
    """Re-seal every secret not sealed with the active key; one transaction per batch."""
    return Resealed(
        active_key_id=box.active_key_id,
        user_wallets=await _reseal(database, box, UserWallet, WalletSecret, _wallet_aad),
        project_wallets=await _reseal(database, box, ProjectWallet, WalletSecret, _wallet_aad),
        signing_keys=await _reseal(
            database, box, SigningKey, SigningKeySecret, lambda row: signing_key_aad(row.kid)
        ),
        webhook_secrets=await _reseal(
            database, box, WebhookEndpoint, WebhookSecret, lambda row: secret_aad(row.id)
        ),
        checkin_keys=await _reseal(
            database, box, CheckinKey, CheckinKeySecret, lambda row: checkin_key_aad(row.id)
        ),
    )


def _wallet_aad(row: WalletSecret) -> bytes:
    return wallet_aad(row.public_key)


async def _reseal(
    database: Database,
    box: SecretBox,
    model: type[Base],
    into: type[SecretT],
    aad: Callable[[SecretT], bytes],
) -> int:
    """Every secret of ``model`` (read as ``into``) sealed again, a batch at a time; how
    many."""
    total = 0
    while True:
        async with database.transaction() as tx:
            rows = await repository.sealed_with_another_key(
                tx, model, into, box.active_key_id, limit=BATCH
            )
            resealed = []
            for row in rows:
                plaintext = box.open(Sealed(row.secret_key_id, row.secret_blob), aad=aad(row))
                resealed.append((row, box.seal(plaintext, aad=aad(row))))
            await repository.reseal(tx, model, resealed)
            await tx.commit()
        total += len(rows)
        if len(rows) < BATCH:
            return total
