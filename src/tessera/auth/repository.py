"""Credential queries: API keys, token clients, signing keys, identity bindings, and the
project rules a credential carries (``require_activation``, ``ticket_emails``)."""

import uuid
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.auth.principal import Permission
from tessera.db import get_in_project, table_of
from tessera.errors import ApiKeyNotFound, ClientNotFound
from tessera.models import ApiKey, IdentityBinding, OAuthClient, Project, SigningKey

_API_KEYS = (
    select(ApiKey).where(ApiKey.project_id == bindparam("project_id")).order_by(ApiKey.created_at)
)
# What checking a key needs of it and of its project, found by the key's prefix.
_KEY_BY_PREFIX = (
    select(
        ApiKey.id,
        ApiKey.project_id,
        ApiKey.key_hash,
        ApiKey.permission,
        ApiKey.expires_at,
        ApiKey.revoked_at,
        Project.require_activation,
        Project.ticket_emails,
    )
    .join(Project, Project.id == ApiKey.project_id)
    .where(ApiKey.prefix == bindparam("prefix"))
)
_KEYS = table_of(ApiKey)
# Core, not ORM: the session that records the uses holds no key to keep in step.
_SET_LAST_USED = (
    update(_KEYS).where(_KEYS.c.id == bindparam("key_id")).values(last_used_at=bindparam("used_at"))
)
_CLIENTS = (
    select(OAuthClient)
    .where(OAuthClient.project_id == bindparam("project_id"))
    .order_by(OAuthClient.created_at, OAuthClient.id)
)
_CLIENT_BY_ID = select(OAuthClient).where(OAuthClient.client_id == bindparam("client_id"))
_CLIENT_STATE = select(OAuthClient.revoked_at, OAuthClient.rotated_at).where(
    OAuthClient.project_id == bindparam("project_id"),
    OAuthClient.client_id == bindparam("client_id"),
)
_SIGNING_KEYS = select(SigningKey).order_by(SigningKey.created_at.desc())
_SIGNING_KEYS_SINCE = (
    select(SigningKey)
    .where(SigningKey.created_at > bindparam("since"))
    .order_by(SigningKey.created_at.desc())
)
_BINDING = select(IdentityBinding).where(
    IdentityBinding.issuer == bindparam("issuer"), IdentityBinding.subject == bindparam("subject")
)
_PROJECT_RULES = select(Project.require_activation, Project.ticket_emails).where(
    Project.id == bindparam("project_id")
)


class KeyCheck(NamedTuple):
    """An API key as its check reads it (``_KEY_BY_PREFIX``)."""

    id: uuid.UUID
    project_id: uuid.UUID
    key_hash: str
    permission: Permission
    expires_at: datetime | None
    revoked_at: datetime | None
    require_activation: bool
    ticket_emails: bool


class ProjectRules(NamedTuple):
    """The project's rules that a credential carries (``Principal``)."""

    require_activation: bool
    ticket_emails: bool


class ClientState(NamedTuple):
    """Whether a token client's tokens still hold (``_CLIENT_STATE``)."""

    revoked_at: datetime | None
    rotated_at: datetime | None


async def list_api_keys(session: AsyncSession, project_id: uuid.UUID) -> list[ApiKey]:
    return list(await session.scalars(_API_KEYS, {"project_id": project_id}))


async def lock_api_key(session: AsyncSession, project_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey:
    """The project's key, locked and reloaded (``ApiKeyNotFound`` otherwise)."""
    return await get_in_project(
        session, ApiKey, project_id, ApiKey.id == key_id, not_found=ApiKeyNotFound, lock=True
    )


async def key_by_prefix(session: AsyncSession, prefix: str) -> KeyCheck | None:
    found = (await session.execute(_KEY_BY_PREFIX, {"prefix": prefix})).first()
    return None if found is None else KeyCheck._make(found)


async def set_last_used(session: AsyncSession, key_id: uuid.UUID, used_at: datetime) -> None:
    await session.execute(_SET_LAST_USED, {"key_id": key_id, "used_at": used_at})


async def list_clients(session: AsyncSession, project_id: uuid.UUID) -> list[OAuthClient]:
    return list(await session.scalars(_CLIENTS, {"project_id": project_id}))


async def get_client(session: AsyncSession, project_id: uuid.UUID, client_id: str) -> OAuthClient:
    """The project's token client (``ClientNotFound`` otherwise)."""
    return await get_in_project(
        session,
        OAuthClient,
        project_id,
        OAuthClient.client_id == client_id,
        not_found=ClientNotFound,
    )


async def client_by_id(session: AsyncSession, client_id: str) -> OAuthClient | None:
    """The client of any project (the client credentials name no project)."""
    client: OAuthClient | None = await session.scalar(_CLIENT_BY_ID, {"client_id": client_id})
    return client


async def client_state(
    session: AsyncSession, project_id: uuid.UUID, client_id: str
) -> ClientState | None:
    found = (
        await session.execute(_CLIENT_STATE, {"project_id": project_id, "client_id": client_id})
    ).first()
    return None if found is None else ClientState._make(found)


async def newest_signing_key(session: AsyncSession) -> SigningKey | None:
    key: SigningKey | None = await session.scalar(_SIGNING_KEYS)
    return key


async def signing_keys_since(session: AsyncSession, since: datetime) -> list[SigningKey]:
    """The keys created after ``since``, newest first."""
    return list(await session.scalars(_SIGNING_KEYS_SINCE, {"since": since}))


async def identity_binding(
    session: AsyncSession, issuer: str, subject: str
) -> IdentityBinding | None:
    binding: IdentityBinding | None = await session.scalar(
        _BINDING, {"issuer": issuer, "subject": subject}
    )
    return binding


async def project_rules(session: AsyncSession, project_id: uuid.UUID) -> ProjectRules | None:
    """The project's rules, or None when there is no such project."""
    found = (await session.execute(_PROJECT_RULES, {"project_id": project_id})).first()
    return None if found is None else ProjectRules._make(found)
