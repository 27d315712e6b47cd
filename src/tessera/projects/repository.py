"""Project queries: the project itself and its wallets."""

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.errors import ProjectNotFound
from tessera.models import Project, ProjectWallet


async def get_project(session: AsyncSession, project_id: uuid.UUID) -> Project:
    project = await session.get(Project, project_id)
    if project is None:
        raise ProjectNotFound
    return project


async def list_wallets(session: AsyncSession, project_id: uuid.UUID) -> list[ProjectWallet]:
    wallets = await session.scalars(
        select(ProjectWallet)
        .where(ProjectWallet.project_id == project_id)
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


async def all_wallet_addresses(session: AsyncSession) -> list[str]:
    """Every project wallet of the database (the dev chain funds them all)."""
    return list(await session.scalars(select(ProjectWallet.address)))
