"""A project's check-in keys: the newest live one signs its tickets' secrets, every live one
verifies them, a retired one nothing.

A project's first key is made with the project (``projects.service.create_project``); a
project from before keys were made that way gets its own from ``tessera db upgrade``
(``key_every_project``). ``rotate`` adds a new key that signs from then on, while the earlier
ones keep verifying the secrets already handed out; ``retire`` stops a key verifying (every
secret it signed is then refused, ``revoked``), and retiring the last live one makes its
successor at once. A process keeps each project's signing key for ``SIGNER_SECONDS``: a
rotation reaches every process within that time, and a secret signed meanwhile with the
previous key verifies as long as that key is live.

No key is ever made under a lock of the project's row: a use-case's transaction holds a
key-share lock on that row through its inserts, and asking it for more (``FOR UPDATE``) while
other use-cases hold theirs is the deadlock every new project's first burst of orders met.
A project that still has no live key (one made by a process of the previous release while it
was being upgraded) gets one where it is first needed: in a transaction of its own
(``Signers.of``, under an advisory lock, so that processes make one), or, for a secret an
email carries, in the use-case's transaction (``Signers.within``, a plain insert: two such
transactions at once may each make one, and both keys then verify).
"""

import hashlib
import os
import time
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tessera.db import Database, Rows, Transaction, rerun_on_conflict, serialize
from tessera.errors import CheckinKeyNotFound, ProjectNotFound
from tessera.models.base import new_id, utcnow
from tessera.ticket_keys import codes as codes
from tessera.ticket_keys import repository
from tessera.ticket_keys.repository import CheckinKeyRow
from tessera.ticket_keys.schemas import CheckinKeyRead, PublicCheckinKey
from tessera.toolkit.crypto import Sealed, SecretBox

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

    @rerun_on_conflict
    async def of(self, database: Database, project_id: uuid.UUID) -> Signer:
        """The project's signer, outside any transaction of the caller's; a project without a
        live key gets one in a transaction of its own."""
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
        an email's). A project without a live key gets one in ``tx``, without a lock (see the
        module docstring), kept only once it is known to be committed (the next time it is
        read)."""
        kept = self._kept_for(project_id)
        if kept is not None:
            return kept
        row = await repository.signing_key(tx, project_id)
        if row is None:
            made = await new_key(tx, self.box, project_id)
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


def _first_key_lock(project_id: uuid.UUID) -> int:
    """The advisory lock under which a project's first key is made (``serialize``): 64 bits of
    the project's id, apart from other locks by a tag."""
    digest = hashlib.blake2b(b"checkin key\0" + project_id.bytes, digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def _first_key(tx: Transaction, box: SecretBox, project_id: uuid.UUID) -> CheckinKeyRow:
    """The project's signing key, made now unless another process made one meanwhile (``tx``
    is a transaction of its own)."""
    await serialize(tx, _first_key_lock(project_id))
    row = await repository.signing_key(tx, project_id)
    if row is not None:
        return row
    if not await repository.project_exists(tx, project_id):
        raise ProjectNotFound
    return await new_key(tx, box, project_id)


async def new_key(tx: Transaction, box: SecretBox, project_id: uuid.UUID) -> CheckinKeyRow:
    """A new live key of the project, which signs from the commit on (the newest live key
    signs): the project's first, when the project is made, or a rotation's."""
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


async def key_every_project(database: Database, box: SecretBox) -> int:
    """A first key for each project that has no live one (projects made before a project's
    first key was made with it), each in a transaction of its own; how many were made.
    ``tessera db upgrade`` runs it after the migrations."""
    made = 0
    for project_id in await database.read(repository.projects_without_live_key):
        async with database.transaction() as tx:
            await serialize(tx, _first_key_lock(project_id))
            if await repository.signing_key(tx, project_id) is None:
                await new_key(tx, box, project_id)
                made += 1
            await tx.commit()
    return made


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


@rerun_on_conflict
async def rotate(database: Database, box: SecretBox, project_id: uuid.UUID) -> CheckinKeyRead:
    """A new key that signs from now on; the earlier ones keep verifying."""
    async with database.transaction() as tx:
        if not await repository.project_exists(tx, project_id):
            raise ProjectNotFound
        row = await new_key(tx, box, project_id)
        await tx.commit()
    return _read(row, signing=True)


@rerun_on_conflict
async def retire(
    database: Database, box: SecretBox, project_id: uuid.UUID, kid: str
) -> CheckinKeyRead:
    """The live key ``kid`` verifies nothing from now on (404 for no such live key).
    Retiring the signing key makes the next live one sign; retiring the last live one makes
    a new one, in the same transaction, so that a project always has a key to sign with."""
    async with database.transaction() as tx:
        row = await repository.retire(tx, project_id, kid.lower(), utcnow())
        if row is None:
            raise CheckinKeyNotFound
        if await repository.signing_key(tx, project_id) is None:
            await new_key(tx, box, project_id)
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
