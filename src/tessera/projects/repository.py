"""Project queries: the projects, and their wallets and the wallets' balances. A project is
read whole, in its table's column order; a project wallet without its sealed secret."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.errors import ProjectNotFound
from tessera.models import Project, ProjectWallet, ProjectWalletBalance
from tessera.models.base import UTCDateTime
from tessera.models.project import Paper


class ProjectRow(NamedTuple):
    name: str
    user_count: int
    active_user_count: int
    require_activation: bool
    ticket_emails: bool
    paper: Paper
    ticket_pdf_in_emails: bool
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class ProjectWalletRow(NamedTuple):
    """A project wallet, its public part (``_WALLET_COLUMNS``)."""

    id: uuid.UUID
    project_id: uuid.UUID
    type: str
    custody: str
    public_key: bytes
    address: str
    created_at: datetime
    updated_at: datetime


class BalanceRow(NamedTuple):
    """A project wallet's last balance read on a chain."""

    project_wallet_id: uuid.UUID
    chain: str
    free: str
    read_at: datetime


class WalletBalance(NamedTuple):
    wallet: ProjectWalletRow
    balance: BalanceRow | None  # None: not read on any chain yet


_PROJECTS, _WALLETS = table_of(Project), table_of(ProjectWallet)
_BALANCES = table_of(ProjectWalletBalance)

_PROJECT = select(_PROJECTS).where(_PROJECTS.c.id == bindparam("project_id"))
_PROJECTS_BY_AGE = select(_PROJECTS).order_by(_PROJECTS.c.created_at, _PROJECTS.c.id)
# The rules given (NULL: unchanged); a project that does not exist gives no row.
_SET_RULES = (
    update(_PROJECTS)
    .where(_PROJECTS.c.id == bindparam("project_id"))
    .values(
        require_activation=func.coalesce(
            bindparam("require_activation", type_=_PROJECTS.c.require_activation.type),
            _PROJECTS.c.require_activation,
        ),
        ticket_emails=func.coalesce(
            bindparam("ticket_emails", type_=_PROJECTS.c.ticket_emails.type),
            _PROJECTS.c.ticket_emails,
        ),
        paper=func.coalesce(bindparam("paper", type_=_PROJECTS.c.paper.type), _PROJECTS.c.paper),
        ticket_pdf_in_emails=func.coalesce(
            bindparam("ticket_pdf_in_emails", type_=_PROJECTS.c.ticket_pdf_in_emails.type),
            _PROJECTS.c.ticket_pdf_in_emails,
        ),
        updated_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(*_PROJECTS.c)
)

_WALLET_COLUMNS = [_WALLETS.c[name] for name in ProjectWalletRow._fields]
_WALLETS_OF_PROJECT = (
    select(*_WALLET_COLUMNS)
    .where(_WALLETS.c.project_id == bindparam("project_id"))
    .order_by(_WALLETS.c.created_at, _WALLETS.c.id)
)
# The wallet that pays for the project's collections, mints and sponsored fees: the first.
_PRIMARY_WALLET = _WALLETS_OF_PROJECT.limit(1)
_ALL_WALLET_ADDRESSES = select(_WALLETS.c.address)
_BALANCES_OF_PROJECT = (
    select(_BALANCES)
    .join(_WALLETS, _WALLETS.c.id == _BALANCES.c.project_wallet_id)
    .where(_WALLETS.c.project_id == bindparam("project_id"))
    .order_by(_BALANCES.c.chain)
)


class _Address(NamedTuple):
    address: str


async def add_project(tx: Transaction, row: dict[str, Any]) -> None:
    await tx.insert(Project, [row])


async def add_wallet(tx: Transaction, row: dict[str, Any]) -> None:
    """A project wallet (its columns, the sealed secret's too)."""
    await tx.insert(ProjectWallet, [row])


async def read_project(rows: Rows, project_id: uuid.UUID) -> ProjectRow | None:
    return await rows.first(_PROJECT, ProjectRow, project_id=project_id)


async def get_project(rows: Rows, project_id: uuid.UUID) -> ProjectRow:
    """The project (``ProjectNotFound`` otherwise)."""
    project = await read_project(rows, project_id)
    if project is None:
        raise ProjectNotFound
    return project


async def set_rules(
    tx: Transaction,
    project_id: uuid.UUID,
    *,
    require_activation: bool | None,
    ticket_emails: bool | None,
    paper: Paper | None = None,
    ticket_pdf_in_emails: bool | None = None,
    now: datetime,
) -> ProjectRow:
    """The project with the rules given changed (None: unchanged), as it is now
    (``ProjectNotFound`` otherwise)."""
    project = await tx.first(
        _SET_RULES,
        ProjectRow,
        project_id=project_id,
        require_activation=require_activation,
        ticket_emails=ticket_emails,
        paper=paper,
        ticket_pdf_in_emails=ticket_pdf_in_emails,
        now=now,
    )
    if project is None:
        raise ProjectNotFound
    return project


async def list_wallets(rows: Rows, project_id: uuid.UUID) -> list[ProjectWalletRow]:
    return await rows.all(_WALLETS_OF_PROJECT, ProjectWalletRow, project_id=project_id)


async def primary_wallet(rows: Rows, project_id: uuid.UUID) -> ProjectWalletRow:
    """The wallet that pays for the project's collections, mints and sponsored fees."""
    wallet = await rows.first(_PRIMARY_WALLET, ProjectWalletRow, project_id=project_id)
    if wallet is None:
        raise RuntimeError(f"project {project_id} has no project wallet")
    return wallet


async def all_wallet_addresses(rows: Rows) -> list[str]:
    """Every project wallet of the database (the dev chain funds them all)."""
    return [row.address for row in await rows.all(_ALL_WALLET_ADDRESSES, _Address)]


async def all_projects(rows: Rows) -> list[ProjectRow]:
    """Every project, the oldest first (the operators' console)."""
    return await rows.all(_PROJECTS_BY_AGE, ProjectRow)


async def wallet_balances(rows: Rows, project_id: uuid.UUID) -> list[WalletBalance]:
    """The project's wallets, each with its last balance read on each chain (a wallet not read
    yet once, with None)."""
    wallets = await list_wallets(rows, project_id)
    balances: dict[uuid.UUID, list[BalanceRow]] = {}
    for balance in await rows.all(_BALANCES_OF_PROJECT, BalanceRow, project_id=project_id):
        balances.setdefault(balance.project_wallet_id, []).append(balance)
    found: list[WalletBalance] = []
    for wallet in wallets:
        read: list[BalanceRow | None] = [*balances.get(wallet.id, [])] or [None]
        found.extend(WalletBalance(wallet, balance) for balance in read)
    return found
