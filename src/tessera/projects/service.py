"""Projects: creation with a project wallet, their credentials (API keys, identities), wallets."""

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from tessera.auth import api_keys, tokens
from tessera.auth.principal import Permission, Principal
from tessera.auth.tokens import TokenIssuer
from tessera.auth.tokens import bind_identity as bind
from tessera.chain.keys import new_custodial_key
from tessera.chain.registry import Chains
from tessera.config import Chain
from tessera.crypto import SecretBox
from tessera.models import ApiKey, IdentityBinding, OAuthClient, Project, ProjectWallet
from tessera.models.base import new_id
from tessera.projects import repository
from tessera.projects.schemas import ApiKeyCreated, ClientCreated, ProjectCreated
from tessera.wallets.schemas import WalletBalance
from tessera.wallets.service import read_balances


async def create_project(
    session: AsyncSession, *, name: str, box: SecretBox, hash_key: bytes, ss58_prefix: int
) -> ProjectCreated:
    """A project with its custodial project wallet, a ``write`` API key and a token client."""
    project = Project(id=new_id(), name=name)
    session.add(project)
    key = new_custodial_key(box, ss58_prefix=ss58_prefix)
    session.add(ProjectWallet(project_id=project.id, **key.columns()))
    await session.flush()
    api_key = await api_keys.create_api_key(
        session, project_id=project.id, permission="write", hash_key=hash_key, name="default"
    )
    client = await tokens.create_client(
        session, project_id=project.id, permission="write", hash_key=hash_key
    )
    await session.commit()
    return ProjectCreated(
        project_id=project.id,
        api_key=api_key.api_key,
        client_id=client.client_id,
        client_secret=client.client_secret,
    )


async def set_project_rules(
    session: AsyncSession,
    *,
    project_id: uuid.UUID,
    require_activation: bool | None = None,
    ticket_emails: bool | None = None,
) -> Project:
    """Change the rules given (None: unchanged) of an existing project (404 otherwise)."""
    project = await repository.get_project(session, project_id)
    if require_activation is not None:
        project.require_activation = require_activation
    if ticket_emails is not None:
        project.ticket_emails = ticket_emails
    await session.commit()
    return project


async def issue_api_key(
    session: AsyncSession,
    *,
    project_id: uuid.UUID,
    permission: Permission,
    hash_key: bytes,
    expires_in: int | None = None,
    name: str | None = None,
) -> ApiKeyCreated:
    """A new API key of an existing project (404 otherwise); the key is shown only here."""
    await repository.get_project(session, project_id)
    issued = await api_keys.create_api_key(
        session,
        project_id=project_id,
        permission=permission,
        hash_key=hash_key,
        expires_in=expires_in,
        name=name,
    )
    await session.commit()
    return ApiKeyCreated(
        id=issued.row.id,
        api_key=issued.api_key,
        permission=permission,
        expires_at=issued.row.expires_at,
    )


async def list_api_keys(session: AsyncSession, *, project_id: uuid.UUID) -> list[ApiKey]:
    await repository.get_project(session, project_id)
    return await api_keys.list_api_keys(session, project_id=project_id)


async def revoke_api_key(
    session: AsyncSession, *, project_id: uuid.UUID, key_id: uuid.UUID
) -> ApiKey:
    """Revoke a key of the project at once (revoking a revoked key keeps its first time)."""
    key = await api_keys.revoke_api_key(session, project_id=project_id, key_id=key_id)
    await session.commit()
    return key


async def create_token_client(
    session: AsyncSession, *, project_id: uuid.UUID, permission: Permission, hash_key: bytes
) -> ClientCreated:
    """A new token client of an existing project (404 otherwise); the secret is shown only here."""
    await repository.get_project(session, project_id)
    client = await tokens.create_client(
        session, project_id=project_id, permission=permission, hash_key=hash_key
    )
    await session.commit()
    return ClientCreated(
        client_id=client.client_id, client_secret=client.client_secret, permission=permission
    )


async def list_token_clients(session: AsyncSession, *, project_id: uuid.UUID) -> list[OAuthClient]:
    await repository.get_project(session, project_id)
    return await tokens.list_clients(session, project_id=project_id)


async def revoke_token_client(
    session: AsyncSession, *, project_id: uuid.UUID, client_id: str
) -> OAuthClient:
    client = await tokens.revoke_client(session, project_id=project_id, client_id=client_id)
    await session.commit()
    return client


async def rotate_token_client(
    session: AsyncSession, *, project_id: uuid.UUID, client_id: str, hash_key: bytes
) -> ClientCreated:
    client, secret = await tokens.rotate_client(
        session, project_id=project_id, client_id=client_id, hash_key=hash_key
    )
    await session.commit()
    return ClientCreated(
        client_id=client.client_id, client_secret=secret, permission=client.permission
    )


async def issue_token(
    session: AsyncSession,
    issuer: TokenIssuer,
    *,
    project_id: uuid.UUID,
    scope: Permission,
    ttl: int | None = None,
) -> str:
    """A bearer token of Tessera's own issuer for an existing project (404 otherwise)."""
    await repository.get_project(session, project_id)
    token, _ = await issuer.mint(
        session, project_id=project_id, scope=scope, subject="cli", ttl=ttl
    )
    return token


async def bind_identity(
    session: AsyncSession,
    *,
    project_id: uuid.UUID,
    issuer: str,
    subject: str,
    permission: Permission,
) -> IdentityBinding:
    """Bind an external OIDC subject to a project (moving it if it was bound elsewhere)."""
    await repository.get_project(session, project_id)
    binding = await bind(
        session, project_id=project_id, issuer=issuer, subject=subject, permission=permission
    )
    await session.commit()
    return binding


async def list_wallets(session: AsyncSession, principal: Principal) -> list[ProjectWallet]:
    return await repository.list_wallets(session, principal.project_id)


async def wallet_balances(
    session: AsyncSession, principal: Principal, *, chains: Chains, chain: Chain | None
) -> list[WalletBalance]:
    """Native balances of the project's wallets on ``chain`` (default: the first configured)."""
    wallets = await repository.list_wallets(session, principal.project_id)
    return await read_balances(chains, chain, wallets)
