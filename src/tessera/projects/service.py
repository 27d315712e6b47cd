"""Projects: creation (CLI) with a project wallet, a write API key and a token client."""

import uuid
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.auth.api_keys import create_api_key
from tessera.auth.principal import Principal
from tessera.auth.tokens import create_client
from tessera.chain.keys import new_custodial_key
from tessera.crypto import SecretBox
from tessera.models import Project, ProjectWallet


@dataclass(frozen=True, slots=True)
class NewProject:
    project_id: uuid.UUID
    api_key: str
    client_id: str
    client_secret: str


async def create_project(
    session: AsyncSession, *, name: str, box: SecretBox, hash_key: bytes, ss58_prefix: int
) -> NewProject:
    """A project with its custodial project wallet, a ``write`` API key and a token client."""
    project = Project(id=uuid.uuid4(), name=name)
    session.add(project)
    key = new_custodial_key(box, ss58_prefix=ss58_prefix)
    session.add(ProjectWallet(project_id=project.id, **key.columns()))
    await session.flush()
    api_key = await create_api_key(
        session, project_id=project.id, permission="write", hash_key=hash_key, name="default"
    )
    client = await create_client(
        session, project_id=project.id, permission="write", hash_key=hash_key
    )
    await session.commit()
    return NewProject(project.id, api_key.api_key, client.client_id, client.client_secret)


async def list_wallets(session: AsyncSession, principal: Principal) -> list[ProjectWallet]:
    wallets = await session.scalars(
        select(ProjectWallet)
        .where(ProjectWallet.project_id == principal.project_id)
        .order_by(ProjectWallet.created_at, ProjectWallet.id)
    )
    return list(wallets)


async def primary_wallet(session: AsyncSession, project_id: uuid.UUID) -> ProjectWallet:
    """The wallet that pays for the project's collections, mints and sponsored fees."""
    wallet = await session.scalar(
        select(ProjectWallet)
        .where(ProjectWallet.project_id == project_id)
        .order_by(ProjectWallet.created_at, ProjectWallet.id)
        .limit(1)
    )
    if wallet is None:
        raise RuntimeError(f"project {project_id} has no project wallet")
    return wallet
