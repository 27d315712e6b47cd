"""A project's check-in keys: the newest live one signs its tickets' secrets, every live one
verifies them, a retired one nothing.

The first key is made when a project's first secret is (its row locked meanwhile, so that two
processes make one). ``rotate`` adds a new key that signs from then on, while the earlier ones
keep verifying the secrets already handed out; ``retire`` stops a key verifying (every secret
it signed is then refused, ``revoked``). A process keeps each project's signing key for
``SIGNER_SECONDS``: a rotation reaches every process within that time, and a secret signed
meanwhile with the previous key verifies as long as that key is live.
"""

import os
import time
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tessera import ticket_codes as codes
from tessera.crypto import Sealed, SecretBox
from tessera.db import Database, Rows, Transaction
from tessera.errors import CheckinKeyNotFound, ProjectNotFound
from tessera.models.base import new_id, utcnow
from tessera.ticket_keys import repository
from tessera.ticket_keys.repository import CheckinKeyRow
from tessera.ticket_keys.schemas import CheckinKeyRead, PublicCheckinKey

SIGNER_SECONDS = 10.0


def checkin_key_aad(key_id: uuid.UUID) -> bytes:
    """What a sealed check-in key is bound to: its row."""
    return b"tessera checkin key\0" + key_id.bytes


@dataclass(frozen=True, slots=True)
class Signer:
    """A project's signing key, opened."""

    kid: str
    key: Ed25519PrivateKey

    def secret(self, item_id: uuid.UUID, version: int) -> str:
        return codes.signed_secret(self.key, self.kid, item_id, version)


class Signers:
    """Each project's signer, opened once and kept ``SIGNER_SECONDS`` (one per process)."""

    def __init__(self, box: SecretBox) -> None:
        self.box = box
        self._kept: dict[uuid.UUID, tuple[Signer, float]] = {}

    async def of(self, database: Database, project_id: uuid.UUID) -> Signer:
        kept = self._kept_for(project_id)
        if kept is not None:
            return kept
        row = await database.read(repository.signing_key, project_id)
        if row is None:
            async with database.transaction() as tx:
                row = await _first_key(tx, self.box, project_id)
                await tx.commit()
        return self._keep(project_id, row)

    async def within(self, tx: Transaction, project_id: uuid.UUID) -> Signer:
        """The project's signer, read in ``tx`` (a write transaction that hands out secrets:
        an email's); a first key is made in it, and kept only once it is known to be
        committed (the next time it is read)."""
        kept = self._kept_for(project_id)
        if kept is not None:
            return kept
        row = await repository.signing_key(tx, project_id)
        if row is None:
            made = await _first_key(tx, self.box, project_id)
            return Signer(made.kid, self._open(made))
        return self._keep(project_id, row)

    def _kept_for(self, project_id: uuid.UUID) -> Signer | None:
        kept = self._kept.get(project_id)
        if kept is not None and time.monotonic() - kept[1] < SIGNER_SECONDS:
            return kept[0]
        return None

    def _keep(self, project_id: uuid.UUID, row: CheckinKeyRow) -> Signer:
        signer = Signer(row.kid, self._open(row))
        self._kept[project_id] = (signer, time.monotonic())
        return signer

    def forget(self, project_id: uuid.UUID) -> None:
        self._kept.pop(project_id, None)

    def _open(self, row: CheckinKeyRow) -> Ed25519PrivateKey:
        sealed = Sealed(row.secret_key_id, row.secret_blob)
        seed = self.box.open(sealed, aad=checkin_key_aad(row.id))
        return Ed25519PrivateKey.from_private_bytes(seed)


async def _first_key(tx: Transaction, box: SecretBox, project_id: uuid.UUID) -> CheckinKeyRow:
    """The project's signing key, made now unless another process made one meanwhile."""
    if not await repository.lock_project(tx, project_id):
        raise ProjectNotFound
    row = await repository.signing_key(tx, project_id)
    return row if row is not None else await _new_key(tx, box, project_id)


async def _new_key(tx: Transaction, box: SecretBox, project_id: uuid.UUID) -> CheckinKeyRow:
    while True:
        key = Ed25519PrivateKey.generate()
        key_id = new_id()
        sealed = box.seal(key.private_bytes_raw(), aad=checkin_key_aad(key_id))
        row = await repository.add_key(
            tx,
            {
                "id": key_id,
                "project_id": project_id,
                "kid": os.urandom(codes.KID_BYTES).hex(),
                "public_key": key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw),
                "secret_key_id": sealed.key_id,
                "secret_blob": sealed.blob,
                "created_at": utcnow(),
            },
        )
        if row is not None:  # else that kid is the project's already (one in 4 billion)
            return row


@dataclass(frozen=True, slots=True)
class ProjectKeys:
    """A project's public keys by kid: the live ones verify its secrets; a secret that one of
    the retired ones signed is revoked."""

    live: dict[str, bytes]
    retired: dict[str, bytes]


async def project_keys(rows: Rows, project_id: uuid.UUID) -> ProjectKeys:
    keys = await repository.all_keys(rows, project_id)
    return ProjectKeys(
        live={row.kid: row.public_key for row in keys if row.retired_at is None},
        retired={row.kid: row.public_key for row in keys if row.retired_at is not None},
    )


def shown(keys: dict[str, bytes]) -> list[PublicCheckinKey]:
    return [PublicCheckinKey.of(kid, public_key) for kid, public_key in keys.items()]


async def rotate(database: Database, box: SecretBox, project_id: uuid.UUID) -> CheckinKeyRead:
    """A new key that signs from now on; the earlier ones keep verifying."""
    async with database.transaction() as tx:
        if not await repository.lock_project(tx, project_id):
            raise ProjectNotFound
        row = await _new_key(tx, box, project_id)
        await tx.commit()
    return _read(row, signing=True)


async def retire(database: Database, project_id: uuid.UUID, kid: str) -> CheckinKeyRead:
    """The live key ``kid`` verifies nothing from now on (404 for no such live key). Retiring
    the signing key makes the next live one sign, or a new one on the next secret."""
    async with database.transaction() as tx:
        row = await repository.retire(tx, project_id, kid.lower(), utcnow())
        if row is None:
            raise CheckinKeyNotFound
        await tx.commit()
    return _read(row, signing=False)


async def list_keys(database: Database, project_id: uuid.UUID) -> list[CheckinKeyRead]:
    rows = await database.read(repository.all_keys, project_id)
    signing = next((row.id for row in rows if row.retired_at is None), None)
    return [_read(row, signing=row.id == signing) for row in rows]


def _read(row: CheckinKeyRow, *, signing: bool) -> CheckinKeyRead:
    public = PublicCheckinKey.of(row.kid, row.public_key)
    return CheckinKeyRead(
        kid=public.kid,
        public_key=public.public_key,
        created_at=row.created_at,
        retired_at=row.retired_at,
        signing=signing,
    )
