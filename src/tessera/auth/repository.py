"""Credential queries: API keys, token clients, signing keys, identity bindings, and the
project rules a credential carries (``require_activation``, ``ticket_emails``). Keys, clients,
signing keys and bindings are read whole, in their table's column order (``IdMixin``'s ``id``
comes last)."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update

from tessera.auth.principal import Permission
from tessera.db import Rows, Transaction, lock_for_update, table_of
from tessera.errors import ApiKeyNotFound, ClientNotFound
from tessera.models import ApiKey, IdentityBinding, OAuthClient, Project, SigningKey
from tessera.models.base import UTCDateTime
from tessera.models.project import KeyPermission


class ApiKeyRow(NamedTuple):
    project_id: uuid.UUID
    prefix: str
    key_hash: str
    permission: KeyPermission
    name: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    id: uuid.UUID


class ClientRow(NamedTuple):
    project_id: uuid.UUID
    client_id: str
    secret_hash: str
    permission: Permission
    created_at: datetime
    revoked_at: datetime | None
    rotated_at: datetime | None
    id: uuid.UUID


class SigningKeyRow(NamedTuple):
    kid: str
    algorithm: str
    public_jwk: str
    secret_key_id: str
    secret_blob: bytes
    created_at: datetime


class BindingRow(NamedTuple):
    project_id: uuid.UUID
    issuer: str
    subject: str
    permission: Permission
    created_at: datetime
    id: uuid.UUID


class KeyCheck(NamedTuple):
    """An API key as its check reads it (``_KEY_BY_PREFIX``)."""

    id: uuid.UUID
    project_id: uuid.UUID
    key_hash: str
    permission: KeyPermission
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


_KEYS, _CLIENTS, _PROJECTS = table_of(ApiKey), table_of(OAuthClient), table_of(Project)
_SIGNING_KEYS, _BINDINGS = table_of(SigningKey), table_of(IdentityBinding)

_NOW = bindparam("now", type_=UTCDateTime())

_API_KEYS = (
    select(_KEYS)
    .where(_KEYS.c.project_id == bindparam("project_id"))
    .order_by(_KEYS.c.created_at, _KEYS.c.id)
)
_KEY_OF_PROJECT = (_KEYS.c.project_id == bindparam("project_id"), _KEYS.c.id == bindparam("id"))
# Revoking again keeps the first time.
_REVOKE_KEY = (
    update(_KEYS)
    .where(*_KEY_OF_PROJECT)
    .values(revoked_at=func.coalesce(_KEYS.c.revoked_at, _NOW))
    .returning(*_KEYS.c)
)
# What checking a key needs of it and of its project, found by the key's prefix.
_KEY_BY_PREFIX = (
    select(
        _KEYS.c.id,
        _KEYS.c.project_id,
        _KEYS.c.key_hash,
        _KEYS.c.permission,
        _KEYS.c.expires_at,
        _KEYS.c.revoked_at,
        _PROJECTS.c.require_activation,
        _PROJECTS.c.ticket_emails,
    )
    .join(_PROJECTS, _PROJECTS.c.id == _KEYS.c.project_id)
    .where(_KEYS.c.prefix == bindparam("prefix"))
)
_SET_LAST_USED = (
    update(_KEYS).where(_KEYS.c.id == bindparam("key_id")).values(last_used_at=bindparam("used_at"))
)

_CLIENTS_OF_PROJECT = (
    select(_CLIENTS)
    .where(_CLIENTS.c.project_id == bindparam("project_id"))
    .order_by(_CLIENTS.c.created_at, _CLIENTS.c.id)
)
_CLIENT_OF_PROJECT = (
    _CLIENTS.c.project_id == bindparam("project_id"),
    _CLIENTS.c.client_id == bindparam("client_id"),
)
_LOCK_CLIENT = lock_for_update(select(_CLIENTS).where(*_CLIENT_OF_PROJECT))
# Revoking again keeps the first time.
_REVOKE_CLIENT = (
    update(_CLIENTS)
    .where(*_CLIENT_OF_PROJECT)
    .values(revoked_at=func.coalesce(_CLIENTS.c.revoked_at, _NOW))
    .returning(*_CLIENTS.c)
)
_NEW_SECRET = (
    update(_CLIENTS)
    .where(_CLIENTS.c.id == bindparam("id"))
    .values(secret_hash=bindparam("secret_hash"), rotated_at=bindparam("rotated_at"))
    .returning(*_CLIENTS.c)
)
_CLIENT_BY_ID = select(_CLIENTS).where(_CLIENTS.c.client_id == bindparam("client_id"))
_CLIENT_STATE = select(_CLIENTS.c.revoked_at, _CLIENTS.c.rotated_at).where(*_CLIENT_OF_PROJECT)

_SIGNING_KEY = select(_SIGNING_KEYS).where(_SIGNING_KEYS.c.kid == bindparam("kid"))
_NEWEST_SIGNING_KEY = select(_SIGNING_KEYS).order_by(_SIGNING_KEYS.c.created_at.desc()).limit(1)
_SIGNING_KEYS_SINCE = (
    select(_SIGNING_KEYS)
    .where(_SIGNING_KEYS.c.created_at > bindparam("since"))
    .order_by(_SIGNING_KEYS.c.created_at.desc())
)

_BINDING_OF = (
    _BINDINGS.c.issuer == bindparam("issuer"),
    _BINDINGS.c.subject == bindparam("subject"),
)
_BINDING = select(_BINDINGS).where(*_BINDING_OF)
_MOVE_BINDING = (
    update(_BINDINGS)
    .where(*_BINDING_OF)
    .values(project_id=bindparam("project_id"), permission=bindparam("permission"))
    .returning(*_BINDINGS.c)
)

_PROJECT_RULES = select(_PROJECTS.c.require_activation, _PROJECTS.c.ticket_emails).where(
    _PROJECTS.c.id == bindparam("project_id")
)


# API keys.


async def add_api_key(tx: Transaction, row: dict[str, Any]) -> ApiKeyRow:
    """A new key (its Python-side defaults filled in), as written."""
    [written] = await tx.insert(ApiKey, [row], ApiKeyRow)
    return written


async def list_api_keys(rows: Rows, project_id: uuid.UUID) -> list[ApiKeyRow]:
    """The project's keys, the oldest first."""
    return await rows.all(_API_KEYS, ApiKeyRow, project_id=project_id)


async def revoke_api_key(
    tx: Transaction, project_id: uuid.UUID, key_id: uuid.UUID, now: datetime
) -> ApiKeyRow:
    """The project's key revoked at ``now`` unless it was before (``ApiKeyNotFound``
    otherwise), as it is now."""
    key = await tx.first(_REVOKE_KEY, ApiKeyRow, project_id=project_id, id=key_id, now=now)
    if key is None:
        raise ApiKeyNotFound
    return key


async def key_by_prefix(rows: Rows, prefix: str) -> KeyCheck | None:
    return await rows.first(_KEY_BY_PREFIX, KeyCheck, prefix=prefix)


async def set_last_used(tx: Transaction, used: dict[uuid.UUID, datetime]) -> None:
    """When each key was last used, in one round trip."""
    await tx.execute_many(
        _SET_LAST_USED, [{"key_id": key_id, "used_at": at} for key_id, at in used.items()]
    )


# Token clients.


async def add_client(tx: Transaction, row: dict[str, Any]) -> ClientRow:
    """A new token client, as written."""
    [written] = await tx.insert(OAuthClient, [row], ClientRow)
    return written


async def list_clients(rows: Rows, project_id: uuid.UUID) -> list[ClientRow]:
    return await rows.all(_CLIENTS_OF_PROJECT, ClientRow, project_id=project_id)


async def lock_client(tx: Transaction, project_id: uuid.UUID, client_id: str) -> ClientRow:
    """The project's token client, locked (``ClientNotFound`` otherwise)."""
    client = await tx.first(_LOCK_CLIENT, ClientRow, project_id=project_id, client_id=client_id)
    if client is None:
        raise ClientNotFound
    return client


async def revoke_client(
    tx: Transaction, project_id: uuid.UUID, client_id: str, now: datetime
) -> ClientRow:
    """The project's token client revoked at ``now`` unless it was before (``ClientNotFound``
    otherwise), as it is now."""
    client = await tx.first(
        _REVOKE_CLIENT, ClientRow, project_id=project_id, client_id=client_id, now=now
    )
    if client is None:
        raise ClientNotFound
    return client


async def set_client_secret(
    tx: Transaction, client_id: uuid.UUID, secret_hash: str, rotated_at: datetime
) -> ClientRow:
    """The client (by its row's id) with a new secret, as it is now."""
    client = await tx.first(
        _NEW_SECRET, ClientRow, id=client_id, secret_hash=secret_hash, rotated_at=rotated_at
    )
    assert client is not None  # locked by the caller
    return client


async def client_by_id(rows: Rows, client_id: str) -> ClientRow | None:
    """The client of any project (the client credentials name no project)."""
    return await rows.first(_CLIENT_BY_ID, ClientRow, client_id=client_id)


async def client_state(rows: Rows, project_id: uuid.UUID, client_id: str) -> ClientState | None:
    return await rows.first(_CLIENT_STATE, ClientState, project_id=project_id, client_id=client_id)


# The token issuer's signing keys.


async def add_signing_key(tx: Transaction, row: dict[str, Any]) -> SigningKeyRow:
    [written] = await tx.insert(SigningKey, [row], SigningKeyRow)
    return written


async def signing_key(rows: Rows, kid: str) -> SigningKeyRow | None:
    return await rows.first(_SIGNING_KEY, SigningKeyRow, kid=kid)


async def newest_signing_key(rows: Rows) -> SigningKeyRow | None:
    return await rows.first(_NEWEST_SIGNING_KEY, SigningKeyRow)


async def signing_keys_since(rows: Rows, since: datetime) -> list[SigningKeyRow]:
    """The keys created after ``since``, newest first."""
    return await rows.all(_SIGNING_KEYS_SINCE, SigningKeyRow, since=since)


# External identities bound to projects.


async def bind_identity(
    tx: Transaction,
    *,
    project_id: uuid.UUID,
    issuer: str,
    subject: str,
    permission: Permission,
) -> BindingRow:
    """The subject of ``issuer`` bound to the project, whether it was bound (elsewhere) or not:
    a new binding, or the one there moved (``ON CONFLICT DO NOTHING``, then the move)."""
    row = dict(project_id=project_id, issuer=issuer, subject=subject, permission=permission)
    binding = await tx.insert_new(IdentityBinding, row, BindingRow, unique=("issuer", "subject"))
    if binding is None:
        binding = await tx.first(_MOVE_BINDING, BindingRow, **row)
        assert binding is not None  # it was there: bindings are never deleted but with projects
    return binding


async def identity_binding(rows: Rows, issuer: str, subject: str) -> BindingRow | None:
    return await rows.first(_BINDING, BindingRow, issuer=issuer, subject=subject)


# The project a credential acts for.


async def project_rules(rows: Rows, project_id: uuid.UUID) -> ProjectRules | None:
    """The project's rules, or None when there is no such project."""
    return await rows.first(_PROJECT_RULES, ProjectRules, project_id=project_id)
