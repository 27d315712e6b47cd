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

from sqlalchemy.ext.asyncio import AsyncSession

from tessera.auth import repository
from tessera.auth.principal import Permission, Principal
from tessera.crypto import hashes_match, keyed_hash
from tessera.db import Database
from tessera.errors import CredentialInvalid
from tessera.models import ApiKey
from tessera.models.base import new_id, utcnow

log = logging.getLogger("tessera.auth")

KEY_SCHEME = "tsk"
API_KEY_START = f"{KEY_SCHEME}_"  # how a key sent as a bearer credential is told from a JWT


@dataclass(frozen=True, slots=True)
class IssuedApiKey:
    row: ApiKey
    api_key: str  # the only time the full key exists outside the caller


async def create_api_key(
    session: AsyncSession,
    *,
    project_id: uuid.UUID,
    permission: Permission,
    hash_key: bytes,
    expires_in: int | None = None,
    name: str | None = None,
) -> IssuedApiKey:
    """Issue a key for a project; the caller commits."""
    prefix = secrets.token_hex(6)
    plaintext = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiKey(
        id=new_id(),
        project_id=project_id,
        prefix=prefix,
        key_hash=keyed_hash(hash_key, plaintext),
        permission=permission,
        name=name,
        expires_at=utcnow() + timedelta(seconds=expires_in) if expires_in else None,
    )
    session.add(row)
    await session.flush()
    return IssuedApiKey(row, plaintext)


async def list_api_keys(session: AsyncSession, *, project_id: uuid.UUID) -> list[ApiKey]:
    return await repository.list_api_keys(session, project_id)


async def revoke_api_key(
    session: AsyncSession, *, project_id: uuid.UUID, key_id: uuid.UUID
) -> ApiKey:
    key = await repository.lock_api_key(session, project_id, key_id)
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        await session.flush()
    return key


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


async def access_for_api_key(session: AsyncSession, raw_key: str, *, digest: str) -> KeyAccess:
    """Check a key against its row: ``digest`` is ``keyed_hash(hash_key, raw_key)``."""
    row = await repository.key_by_prefix(session, parse_api_key(raw_key))
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
    )
    return KeyAccess(principal, row.id, row.expires_at)


class UsageRecorder:
    """Remembers when each API key was last used and writes it in batches."""

    def __init__(self) -> None:
        self._pending: dict[uuid.UUID, datetime] = {}

    def touch(self, key_id: uuid.UUID) -> None:
        self._pending[key_id] = utcnow()

    async def flush(self, session: AsyncSession) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        for key_id, used_at in pending.items():
            await repository.set_last_used(session, key_id, used_at)
        await session.commit()

    async def run(self, database: Database, interval: float, stop: asyncio.Event) -> None:
        """Write what was used every ``interval`` seconds, and once more when ``stop`` is set
        (never cancelled half-way through a write)."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
            try:
                async with database.session() as session:
                    await self.flush(session)
            except Exception:
                log.exception("could not record API key usage")
