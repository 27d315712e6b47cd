"""Project queries: the projects, and their wallets and the wallets' balances."""

import uuid
from typing import NamedTuple

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.errors import ProjectNotFound
from tessera.models import Project, ProjectWallet, ProjectWalletBalance


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


_PROJECTS_BY_AGE = select(Project).order_by(Project.created_at)


async def all_projects(session: AsyncSession) -> list[Project]:
    """Every project, the oldest first (the operators' console)."""
    return list(await session.scalars(_PROJECTS_BY_AGE))


class WalletBalance(NamedTuple):
    wallet: ProjectWallet
    balance: ProjectWalletBalance | None  # None: not read on any chain yet


_WALLET_BALANCES = (
    select(ProjectWallet, ProjectWalletBalance)
    .outerjoin(ProjectWalletBalance, ProjectWalletBalance.project_wallet_id == ProjectWallet.id)
    .where(ProjectWallet.project_id == bindparam("project_id"))
    .order_by(ProjectWallet.created_at, ProjectWalletBalance.chain)
)


async def wallet_balances(session: AsyncSession, project_id: uuid.UUID) -> list[WalletBalance]:
    """The project's wallets, each with its last balance read on each chain (a wallet not read
    yet once, with None)."""
    found = await session.execute(_WALLET_BALANCES, {"project_id": project_id})
    return [WalletBalance(wallet, balance) for wallet, balance in found]
