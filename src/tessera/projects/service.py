"""Projects: creation with a project wallet, their credentials (API keys, identities), wallets.
Each use-case owns its transaction (or read) and commits once."""

import uuid

from tessera.auth import repository as auth_repository
from tessera.auth import service as api_keys
from tessera.auth import tokens
from tessera.auth.principal import Permission, Principal
from tessera.auth.repository import ApiKeyRow, BindingRow, ClientRow
from tessera.auth.tokens import TokenIssuer
from tessera.chain.keys import new_custodial_key
from tessera.chain.registry import Chains
from tessera.config import Chain
from tessera.db import Database, Rows, rerun_on_conflict
from tessera.models.base import new_id, utcnow
from tessera.models.project import KeyPermission, Paper
from tessera.projects import repository
from tessera.projects.repository import ProjectRow, ProjectWalletRow
from tessera.projects.schemas import ApiKeyCreated, ClientCreated, ProjectCreated
from tessera.ticket_keys import service as ticket_keys
from tessera.toolkit.crypto import SecretBox
from tessera.wallets.schemas import WalletBalance
from tessera.wallets.service import read_balances


@rerun_on_conflict
async def create_project(
    database: Database, *, name: str, box: SecretBox, hash_key: bytes, ss58_prefix: int
) -> ProjectCreated:
    """A project with its custodial project wallet, its first check-in key, a ``write`` API key
    and a token client."""
    project_id = new_id()
    key = new_custodial_key(box, ss58_prefix=ss58_prefix)
    async with database.transaction() as tx:
        await repository.add_project(tx, {"id": project_id, "name": name})
        await repository.add_wallet(tx, {"project_id": project_id, **key.columns()})
        # Its first check-in key now: never later, in a use-case's transaction (ticket_keys).
        await ticket_keys.new_key(tx, box, project_id)
        api_key = await api_keys.create_api_key(
            tx, project_id=project_id, permission="write", hash_key=hash_key, name="default"
        )
        client = await tokens.create_client(
            tx, project_id=project_id, permission="write", hash_key=hash_key
        )
        await tx.commit()
    return ProjectCreated(
        project_id=project_id,
        api_key=api_key.api_key,
        client_id=client.client_id,
        client_secret=client.client_secret,
    )


@rerun_on_conflict
async def set_project_rules(
    database: Database,
    *,
    project_id: uuid.UUID,
    require_activation: bool | None = None,
    ticket_emails: bool | None = None,
    paper: Paper | None = None,
    ticket_pdf_in_emails: bool | None = None,
) -> ProjectRow:
    """Change the rules given (None: unchanged) of an existing project (404 otherwise)."""
    given = (require_activation, ticket_emails, paper, ticket_pdf_in_emails)
    if all(rule is None for rule in given):
        return await database.read(repository.get_project, project_id)
    async with database.transaction() as tx:
        project = await repository.set_rules(
            tx,
            project_id,
            require_activation=require_activation,
            ticket_emails=ticket_emails,
            paper=paper,
            ticket_pdf_in_emails=ticket_pdf_in_emails,
            now=utcnow(),
        )
        await tx.commit()
    return project


@rerun_on_conflict
async def issue_api_key(
    database: Database,
    *,
    project_id: uuid.UUID,
    permission: KeyPermission,
    hash_key: bytes,
    expires_in: int | None = None,
    name: str | None = None,
) -> ApiKeyCreated:
    """A new API key of an existing project (404 otherwise); the key is shown only here."""
    async with database.transaction() as tx:
        await repository.get_project(tx, project_id)
        issued = await api_keys.create_api_key(
            tx,
            project_id=project_id,
            permission=permission,
            hash_key=hash_key,
            expires_in=expires_in,
            name=name,
        )
        await tx.commit()
    return ApiKeyCreated(
        id=issued.row.id,
        api_key=issued.api_key,
        permission=permission,
        expires_at=issued.row.expires_at,
    )


async def list_api_keys(database: Database, *, project_id: uuid.UUID) -> list[ApiKeyRow]:
    """The keys of an existing project (404 otherwise), the oldest first."""
    return await database.read(_api_keys, project_id)


async def _api_keys(rows: Rows, project_id: uuid.UUID) -> list[ApiKeyRow]:
    await repository.get_project(rows, project_id)
    return await api_keys.list_api_keys(rows, project_id=project_id)


@rerun_on_conflict
async def revoke_api_key(
    database: Database, *, project_id: uuid.UUID, key_id: uuid.UUID
) -> ApiKeyRow:
    """Revoke a key of the project at once (revoking a revoked key keeps its first time)."""
    async with database.transaction() as tx:
        key = await api_keys.revoke_api_key(tx, project_id=project_id, key_id=key_id)
        await tx.commit()
    return key


@rerun_on_conflict
async def create_token_client(
    database: Database, *, project_id: uuid.UUID, permission: Permission, hash_key: bytes
) -> ClientCreated:
    """A new token client of an existing project (404 otherwise); the secret is shown only here."""
    async with database.transaction() as tx:
        await repository.get_project(tx, project_id)
        client = await tokens.create_client(
            tx, project_id=project_id, permission=permission, hash_key=hash_key
        )
        await tx.commit()
    return ClientCreated(
        client_id=client.client_id, client_secret=client.client_secret, permission=permission
    )


async def list_token_clients(database: Database, *, project_id: uuid.UUID) -> list[ClientRow]:
    """The token clients of an existing project (404 otherwise), the oldest first."""
    return await database.read(_token_clients, project_id)


async def _token_clients(rows: Rows, project_id: uuid.UUID) -> list[ClientRow]:
    await repository.get_project(rows, project_id)
    return await tokens.list_clients(rows, project_id=project_id)


@rerun_on_conflict
async def revoke_token_client(
    database: Database, *, project_id: uuid.UUID, client_id: str
) -> ClientRow:
    async with database.transaction() as tx:
        client = await tokens.revoke_client(tx, project_id=project_id, client_id=client_id)
        await tx.commit()
    return client


@rerun_on_conflict
async def rotate_token_client(
    database: Database, *, project_id: uuid.UUID, client_id: str, hash_key: bytes
) -> ClientCreated:
    async with database.transaction() as tx:
        client, secret = await tokens.rotate_client(
            tx, project_id=project_id, client_id=client_id, hash_key=hash_key
        )
        await tx.commit()
    return ClientCreated(
        client_id=client.client_id, client_secret=secret, permission=client.permission
    )


async def issue_token(
    database: Database,
    issuer: TokenIssuer,
    *,
    project_id: uuid.UUID,
    scope: Permission,
    ttl: int | None = None,
) -> str:
    """A bearer token of Tessera's own issuer for an existing project (404 otherwise)."""
    await database.read(repository.get_project, project_id)
    token, _ = await issuer.mint(
        database, project_id=project_id, scope=scope, subject="cli", ttl=ttl
    )
    return token


@rerun_on_conflict
async def bind_identity(
    database: Database,
    *,
    project_id: uuid.UUID,
    issuer: str,
    subject: str,
    permission: Permission,
) -> BindingRow:
    """Bind an external OIDC subject to a project (moving it if it was bound elsewhere)."""
    async with database.transaction() as tx:
        await repository.get_project(tx, project_id)
        binding = await auth_repository.bind_identity(
            tx, project_id=project_id, issuer=issuer, subject=subject, permission=permission
        )
        await tx.commit()
    return binding


async def list_wallets(database: Database, principal: Principal) -> list[ProjectWalletRow]:
    return await database.read(repository.list_wallets, principal.project_id)


async def wallet_balances(
    database: Database, principal: Principal, *, chains: Chains, chain: Chain | None
) -> list[WalletBalance]:
    """Native balances of the project's wallets on ``chain`` (default: the first configured)."""
    # The read ends before the chain is called: no pooled connection waits on the network.
    wallets = await database.read(repository.list_wallets, principal.project_id)
    return await read_balances(chains, chain, wallets)
