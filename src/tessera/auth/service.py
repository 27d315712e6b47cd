"""API keys: ``tsk_<prefix>_<secret>``. Shown once; stored as prefix + HMAC of the whole key.

The prefix finds the row in one indexed query; the hash is compared in constant time. Last use is
recorded in memory and written in batches (``UsageRecorder``) so that a read request never writes.
"""

import asyncio
import contextlib
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from tessera.auth import repository
from tessera.auth.principal import Principal
from tessera.auth.repository import ApiKeyRow
from tessera.db import Database, Rows, Transaction
from tessera.errors import CredentialInvalid
from tessera.models.base import new_id, utcnow
from tessera.models.project import KeyPermission
from tessera.toolkit.crypto import hashes_match, keyed_hash

log = logging.getLogger("tessera.auth")

KEY_SCHEME = "tsk"
API_KEY_START = f"{KEY_SCHEME}_"  # how a key sent as a bearer credential is told from a JWT


@dataclass(frozen=True, slots=True)
class IssuedApiKey:
    row: ApiKeyRow
    api_key: str  # the only time the full key exists outside the caller


async def create_api_key(
    tx: Transaction,
    *,
    project_id: uuid.UUID,
    permission: KeyPermission,
    hash_key: bytes,
    expires_in: int | None = None,
    name: str | None = None,
) -> IssuedApiKey:
    """Issue a key for a project; the caller commits."""
    prefix = secrets.token_hex(6)
    plaintext = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    row = await repository.add_api_key(
        tx,
        {
            "id": new_id(),
            "project_id": project_id,
            "prefix": prefix,
            "key_hash": keyed_hash(hash_key, plaintext),
            "permission": permission,
            "name": name,
            "expires_at": utcnow() + timedelta(seconds=expires_in) if expires_in else None,
        },
    )
    return IssuedApiKey(row, plaintext)


async def list_api_keys(rows: Rows, *, project_id: uuid.UUID) -> list[ApiKeyRow]:
    return await repository.list_api_keys(rows, project_id)


async def revoke_api_key(tx: Transaction, *, project_id: uuid.UUID, key_id: uuid.UUID) -> ApiKeyRow:
    """The project's key revoked (revoking a revoked key keeps its first time)."""
    return await repository.revoke_api_key(tx, project_id, key_id, utcnow())


@dataclass(frozen=True, slots=True)
class KeyAccess:
    """What a valid API key grants, and until when."""

    principal: Principal
    key_id: uuid.UUID
    expires_at: datetime | None


def parse_api_key(raw_key: str) -> str:
    """The key's prefix; CredentialInvalid when it is not shaped like a Tessera key."""
    scheme, _, rest = raw_key.partition("_")
    prefix, _, secret = rest.partition("_")
    if scheme != KEY_SCHEME or not prefix or not secret or len(raw_key) > 128:
        raise CredentialInvalid
    return prefix


async def access_for_api_key(rows: Rows, raw_key: str, *, digest: str) -> KeyAccess:
    """Check a key against its row: ``digest`` is ``keyed_hash(hash_key, raw_key)``."""
    row = await repository.key_by_prefix(rows, parse_api_key(raw_key))
    if row is None or not hashes_match(row.key_hash, digest):
        raise CredentialInvalid
    if row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= utcnow()):
        raise CredentialInvalid
    principal = Principal(
        row.project_id,
        row.permission == "write",
        f"api_key:{row.id}",
        row.require_activation,
        row.ticket_emails,
        door_only=row.permission == "checkin",
    )
    return KeyAccess(principal, row.id, row.expires_at)


class UsageRecorder:
    """Remembers when each API key was last used and writes it in batches."""

    def __init__(self) -> None:
        self._pending: dict[uuid.UUID, datetime] = {}

    def touch(self, key_id: uuid.UUID) -> None:
        self._pending[key_id] = utcnow()

    async def flush(self, database: Database) -> None:
        """Write what was used since the last time, in one transaction."""
        pending, self._pending = self._pending, {}
        if not pending:
            return
        async with database.transaction() as tx:
            await repository.set_last_used(tx, pending)
            await tx.commit()

    async def run(self, database: Database, interval: float, stop: asyncio.Event) -> None:
        """Write what was used every ``interval`` seconds, and once more when ``stop`` is set
        (never cancelled half-way through a write)."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
            try:
                await self.flush(database)
            except Exception:
                log.exception("could not record API key usage")
