"""Re-seal stored secrets under the active key, a batch at a time (see the package); open one
(``open_secret``), as re-sealing and a backup's verification (``tessera.backup``) do."""

from collections.abc import Callable
from typing import Any

from tessera.auth.tokens import signing_key_aad
from tessera.chain.keys import wallet_aad
from tessera.db import Database
from tessera.keyring import repository
from tessera.keyring.repository import (
    CheckinKeySecret,
    SealedRow,
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
from tessera.toolkit.crypto import Sealed, SecretBox
from tessera.webhooks.service import secret_aad

BATCH = 500


async def reseal_all(database: Database, box: SecretBox) -> Resealed:
    """Re-seal every secret not sealed with the active key; one transaction per batch."""
    return Resealed(
        active_key_id=box.active_key_id,
        user_wallets=await _reseal(database, box, UserWallet, WalletSecret),
        project_wallets=await _reseal(database, box, ProjectWallet, WalletSecret),
        signing_keys=await _reseal(database, box, SigningKey, SigningKeySecret),
        webhook_secrets=await _reseal(database, box, WebhookEndpoint, WebhookSecret),
        checkin_keys=await _reseal(database, box, CheckinKey, CheckinKeySecret),
    )


def _wallet_aad(row: WalletSecret) -> bytes:
    return wallet_aad(row.public_key)


def _signing_key_aad(row: SigningKeySecret) -> bytes:
    return signing_key_aad(row.kid)


def _webhook_aad(row: WebhookSecret) -> bytes:
    return secret_aad(row.id)


def _checkin_key_aad(row: CheckinKeySecret) -> bytes:
    return checkin_key_aad(row.id)


# The associated data each kind of secret (``repository.SEALED``) is sealed with, from its row.
AAD: dict[type[Base], Callable[[Any], bytes]] = {
    UserWallet: _wallet_aad,
    ProjectWallet: _wallet_aad,
    SigningKey: _signing_key_aad,
    WebhookEndpoint: _webhook_aad,
    CheckinKey: _checkin_key_aad,
}


def open_secret(box: SecretBox, model: type[Base], row: SealedRow) -> bytes:
    """The secret of a row of ``model`` (read as its ``SEALED`` row type), opened with the key
    whose id it carries: ``KeyError`` when the ring has no such key, ``InvalidTag`` when the
    ring's key of that id is not the one that sealed it (or the row was tampered with)."""
    return box.open(Sealed(row.secret_key_id, row.secret_blob), aad=AAD[model](row))


async def _reseal(
    database: Database, box: SecretBox, model: type[Base], into: type[SecretT]
) -> int:
    """Every secret of ``model`` (read as ``into``) sealed again, a batch at a time; how
    many."""
    total = 0
    while True:
        async with database.transaction() as tx:
            rows = await repository.sealed_with_another_key(
                tx, model, into, box.active_key_id, limit=BATCH
            )
            resealed = [
                (row, box.seal(open_secret(box, model, row), aad=AAD[model](row))) for row in rows
            ]
            await repository.reseal(tx, model, resealed)
            await tx.commit()
        total += len(rows)
        if len(rows) < BATCH:
            return total
