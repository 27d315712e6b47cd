"""Reconciliation statements: a product's items and the wallets involved, the last check of each
product, the repair's jobs, and the products the scheduled check and the CLI visit."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, exists, or_, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.models import (
    Job,
    JobStatus,
    NftStatus,
    Product,
    ProductItem,
    ProjectWallet,
    Reconciliation,
    UserWallet,
)

_ITEMS, _WALLETS, _PRODUCTS = table_of(ProductItem), table_of(UserWallet), table_of(Product)
_RECONCILIATIONS, _JOBS = table_of(Reconciliation), table_of(Job)
_PROJECT_WALLETS = table_of(ProjectWallet)


class ItemNft(NamedTuple):
    """An item's NFT state, with the public key of the wallet the database says it sits in."""

    id: uuid.UUID
    item_id: int
    owner_id: uuid.UUID
    nft_status: NftStatus | None
    nft_transfer_status: NftStatus | None
    nft_held_by: str | None
    updated_at: datetime
    nft_wallet_key: bytes | None


class WalletRow(NamedTuple):
    id: uuid.UUID
    user_id: uuid.UUID
    public_key: bytes
    custody: str


class LastCheck(NamedTuple):
    """A product's last reconciliation (``reconciliations``)."""

    product_id: uuid.UUID
    project_id: uuid.UUID
    checked_at: datetime
    items_checked: int
    findings: list[dict[str, Any]]


class LiveJob(NamedTuple):
    id: uuid.UUID
    kind: str
    status: JobStatus
    payload: dict[str, Any]


_ITEM_NFTS = (
    select(
        _ITEMS.c.id,
        _ITEMS.c.item_id,
        _ITEMS.c.owner_id,
        _ITEMS.c.nft_status,
        _ITEMS.c.nft_transfer_status,
        _ITEMS.c.nft_held_by,
        _ITEMS.c.updated_at,
        _WALLETS.c.public_key.label("nft_wallet_key"),
    )
    .select_from(_ITEMS.outerjoin(_WALLETS, _WALLETS.c.id == _ITEMS.c.nft_wallet_id))
    .where(_ITEMS.c.product_id == bindparam("product_id"))
    .order_by(_ITEMS.c.item_id)
)
_WALLETS_BY_KEY = select(
    _WALLETS.c.id, _WALLETS.c.user_id, _WALLETS.c.public_key, _WALLETS.c.custody
).where(
    _WALLETS.c.project_id == bindparam("project_id"),
    _WALLETS.c.public_key.in_(bindparam("keys", expanding=True)),
)
_PROJECT_WALLET_KEY = (
    select(_PROJECT_WALLETS.c.public_key)
    .where(_PROJECT_WALLETS.c.project_id == bindparam("project_id"))
    .order_by(_PROJECT_WALLETS.c.created_at, _PROJECT_WALLETS.c.id)
    .limit(1)
)
_LAST = select(_RECONCILIATIONS).where(_RECONCILIATIONS.c.product_id == bindparam("product_id"))
_FORGET = delete(_RECONCILIATIONS).where(_RECONCILIATIONS.c.product_id == bindparam("product_id"))
_LAST_OF_PROJECT = select(_RECONCILIATIONS).where(
    _RECONCILIATIONS.c.project_id == bindparam("project_id")
)
_ALL_FINDINGS = select(_RECONCILIATIONS.c.findings)
KEYS_PER_QUERY = 500


async def item_nfts(rows: Rows, product_id: uuid.UUID) -> list[ItemNft]:
    """The product's items by ``item_id``, each with where the database says its NFT sits."""
    return await rows.all(_ITEM_NFTS, ItemNft, product_id=product_id)


async def wallets_by_key(
    rows: Rows, project_id: uuid.UUID, keys: Sequence[bytes]
) -> list[WalletRow]:
    """The project's users' wallets among ``keys`` (public keys)."""
    found: list[WalletRow] = []
    unique = sorted(set(keys))
    for start in range(0, len(unique), KEYS_PER_QUERY):
        chunk = unique[start : start + KEYS_PER_QUERY]
        found += await rows.all(_WALLETS_BY_KEY, WalletRow, project_id=project_id, keys=chunk)
    return found


async def project_wallet_key(rows: Rows, project_id: uuid.UUID) -> bytes | None:
    """The public key of the project's wallet, the owner of its collections."""
    key: bytes | None = await rows.scalar(_PROJECT_WALLET_KEY, project_id=project_id)
    return key


async def last_check(rows: Rows, product_id: uuid.UUID) -> LastCheck | None:
    return await rows.first(_LAST, LastCheck, product_id=product_id)


async def last_checks(rows: Rows, project_id: uuid.UUID) -> list[LastCheck]:
    """The last reconciliation of each of the project's products that has one."""
    return await rows.all(_LAST_OF_PROJECT, LastCheck, project_id=project_id)


class Found(NamedTuple):
    findings: list[dict[str, Any]]


async def all_findings(rows: Rows) -> list[list[dict[str, Any]]]:
    """The findings of every product's last reconciliation (``/metrics``)."""
    return [row.findings for row in await rows.all(_ALL_FINDINGS, Found)]


async def write_check(tx: Transaction, check: LastCheck) -> None:
    """``check`` replaces the product's last reconciliation."""
    await tx.execute(_FORGET, product_id=check.product_id)
    await tx.insert(Reconciliation, [check._asdict()])


# The repair's jobs: the live one of a kind for a subject, a stuck row's latest.
_LIVE = (
    select(_JOBS.c.id, _JOBS.c.kind, _JOBS.c.status, _JOBS.c.payload)
    .where(
        _JOBS.c.project_id == bindparam("project_id"),
        _JOBS.c.subject == bindparam("subject"),
        _JOBS.c.kind == bindparam("kind"),
        or_(_JOBS.c.status == JobStatus.QUEUED, _JOBS.c.status == JobStatus.RUNNING),
    )
    .order_by(_JOBS.c.created_at.desc())
    .limit(1)
)
_LATEST = (
    select(_JOBS.c.id, _JOBS.c.kind, _JOBS.c.status, _JOBS.c.payload)
    .where(
        _JOBS.c.project_id == bindparam("project_id"),
        _JOBS.c.subject == bindparam("subject"),
        _JOBS.c.kind.in_(bindparam("kinds", expanding=True)),
    )
    .order_by(_JOBS.c.created_at.desc())
)
_REQUEUE = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("id"), _JOBS.c.status == JobStatus.FAILED)
    .values(
        status=JobStatus.QUEUED,
        attempts=0,
        run_after=bindparam("now"),
        last_error=None,
        updated_at=bindparam("now"),
    )
)
_DUE_NOW = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("id"), _JOBS.c.status == JobStatus.QUEUED)
    .values(run_after=bindparam("now"), updated_at=bindparam("now"))
)


async def live_job(rows: Rows, project_id: uuid.UUID, kind: str, subject: str) -> LiveJob | None:
    """The queued or running job of ``kind`` for ``subject``, if there is one."""
    return await rows.first(_LIVE, LiveJob, project_id=project_id, subject=subject, kind=kind)


async def latest_job(
    rows: Rows, project_id: uuid.UUID, subject: str, kinds: Sequence[str], row_id: uuid.UUID
) -> LiveJob | None:
    """The newest job of one of ``kinds`` for ``subject`` that serves the row ``row_id`` (its
    payload names it: collections share a subject per project and chain)."""
    jobs = await rows.all(
        _LATEST, LiveJob, project_id=project_id, subject=subject, kinds=list(kinds)
    )
    wanted = str(row_id)
    return next((job for job in jobs if wanted in job.payload.values()), None)


async def requeue(tx: Transaction, job_id: uuid.UUID, now: datetime) -> bool:
    """A failed job queued again with fresh attempts; whether it was failed."""
    return bool(await tx.execute(_REQUEUE, id=job_id, now=now))


async def make_due(tx: Transaction, job_id: uuid.UUID, now: datetime) -> None:
    """A queued job (waiting for its backoff) due at once."""
    await tx.execute(_DUE_NOW, id=job_id, now=now)


# The scheduled check: products with NFT activity since a moment, not checked since another.
_ACTIVE = exists().where(
    _ITEMS.c.product_id == _PRODUCTS.c.id, _ITEMS.c.updated_at > bindparam("active_since")
)
_DUE_CHECKS = (
    select(_PRODUCTS.c.id, _PRODUCTS.c.project_id)
    .where(
        _PRODUCTS.c.mint_nft.is_(True),
        _PRODUCTS.c.nft_status.is_not(None),
        or_(_PRODUCTS.c.updated_at > bindparam("active_since"), _ACTIVE),
        ~exists().where(
            and_(
                _RECONCILIATIONS.c.product_id == _PRODUCTS.c.id,
                _RECONCILIATIONS.c.checked_at > bindparam("checked_since"),
            )
        ),
    )
    .order_by(_PRODUCTS.c.updated_at)
)


class DueCheck(NamedTuple):
    id: uuid.UUID
    project_id: uuid.UUID


async def due_checks(
    rows: Rows, *, active_since: datetime, checked_since: datetime
) -> list[DueCheck]:
    """The ``mint_nft`` products with NFT activity since ``active_since`` (the product or one
    of its items changed) that no check has visited since ``checked_since``."""
    return await rows.all(
        _DUE_CHECKS, DueCheck, active_since=active_since, checked_since=checked_since
    )


# `tessera chain reconcile`: every product of a project that has NFTs to compare.
_NFT_PRODUCTS = (
    select(_PRODUCTS.c.id)
    .where(
        _PRODUCTS.c.project_id == bindparam("project_id"),
        _PRODUCTS.c.mint_nft.is_(True),
        _PRODUCTS.c.nft_status.is_not(None),
    )
    .order_by(_PRODUCTS.c.created_at, _PRODUCTS.c.id)
)


class ProductId(NamedTuple):
    id: uuid.UUID


async def nft_products(rows: Rows, project_id: uuid.UUID) -> list[uuid.UUID]:
    """The project's ``mint_nft`` products whose collection is created or on its way (queued,
    submitted, or failed: a reconciliation reports it stuck), oldest first."""
    return [row.id for row in await rows.all(_NFT_PRODUCTS, ProductId, project_id=project_id)]
