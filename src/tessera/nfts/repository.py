"""The NFT jobs' statements: the items and wallets a batch needs, and its writes (built once)."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update

from tessera.chain.keys import CUSTODIAL
from tessera.db import Rows, Transaction, lock_for_update, table_of
from tessera.models import NftStatus, Product, ProductItem, ProjectWallet, User, UserWallet
from tessera.models.base import UTCDateTime, utcnow
from tessera.nfts.schemas import HeldWallet, JobItem, SigningWallet
from tessera.products.rows import OWNED_ITEM, OwnedItemRow

_ITEMS, _USERS, _WALLETS = table_of(ProductItem), table_of(User), table_of(UserWallet)
_PRODUCTS, _PROJECT_WALLETS = table_of(Product), table_of(ProjectWallet)
_NOW = bindparam("now", type_=UTCDateTime())


_FIRST_CUSTODIAL = (
    select(_WALLETS.c.id)
    .where(_WALLETS.c.user_id == _USERS.c.id, _WALLETS.c.custody == CUSTODIAL)
    .order_by(_WALLETS.c.created_at)
    .limit(1)
    .scalar_subquery()
)
_CHOSEN = (
    select(_WALLETS.c.id).where(_WALLETS.c.id == _USERS.c.receiving_wallet_id).scalar_subquery()
)
_RECEIVING = _WALLETS.alias("receiving")
_JOB_ITEMS = (
    select(
        _ITEMS.c.id,
        _ITEMS.c.project_id,
        _ITEMS.c.product_id,
        _ITEMS.c.item_id,
        _ITEMS.c.owner_id,
        _ITEMS.c.created_at,
        _ITEMS.c.nft_status,
        _ITEMS.c.nft_transfer_status,
        _ITEMS.c.nft_extrinsic_id,
        _ITEMS.c.nft_transfer_extrinsic_id,
        _ITEMS.c.nft_wallet_id,
        _RECEIVING.c.id.label("wallet_id"),
        _RECEIVING.c.public_key.label("wallet_key"),
    )
    .select_from(
        _ITEMS.join(_USERS, _USERS.c.id == _ITEMS.c.owner_id).outerjoin(
            _RECEIVING, _RECEIVING.c.id == func.coalesce(_CHOSEN, _FIRST_CUSTODIAL)
        )
    )
    .where(_ITEMS.c.id.in_(bindparam("ids", expanding=True)))
)
_PROJECT_WALLET = (
    select(
        _PROJECT_WALLETS.c.id,
        _PROJECT_WALLETS.c.public_key,
        _PROJECT_WALLETS.c.address,
        _PROJECT_WALLETS.c.secret_key_id,
        _PROJECT_WALLETS.c.secret_blob,
    )
    .where(_PROJECT_WALLETS.c.project_id == bindparam("project_id"))
    .order_by(_PROJECT_WALLETS.c.created_at, _PROJECT_WALLETS.c.id)
    .limit(1)
)
_HELD_WALLETS = select(
    _WALLETS.c.id,
    _WALLETS.c.user_id,
    _WALLETS.c.public_key,
    _WALLETS.c.address,
    _WALLETS.c.custody,
    _WALLETS.c.secret_key_id,
    _WALLETS.c.secret_blob,
).where(
    _WALLETS.c.project_id == bindparam("project_id"),
    _WALLETS.c.public_key.in_(bindparam("keys", expanding=True)),
)
_RECORDED_COLLECTIONS = select(_PRODUCTS.c.nft_collection_id).where(
    _PRODUCTS.c.project_id == bindparam("project_id"),
    _PRODUCTS.c.chain == bindparam("chain"),
    _PRODUCTS.c.nft_collection_id.is_not(None),
)
_SHOWN_ITEMS = (
    select(
        _ITEMS,
        _USERS.c.email.label("owner__email"),
        _USERS.c.first_name.label("owner__first_name"),
        _USERS.c.last_name.label("owner__last_name"),
    )
    .join(_USERS, _USERS.c.id == _ITEMS.c.owner_id)
    .where(_ITEMS.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(_ITEMS.c.item_id)
)
# Signed into an extrinsic: its mint (or transfer) is submitted; its reason to wait is gone.
_SUBMITTED = {
    column: update(_ITEMS)
    .where(_ITEMS.c.id.in_(bindparam("ids", expanding=True)))
    .values(
        {
            f"{column}_status": NftStatus.SUBMITTED,
            f"{column}_extrinsic_id": bindparam("extrinsic_id"),
            f"{column}_tx_hash": bindparam("tx_hash"),
            f"{column}_block": None,
            f"{column}_block_hash": None,
            f"{column}_reason": None,
            "updated_at": _NOW,
        }
    )
    for column in ("nft", "nft_transfer")
}
_WAITING = {
    column: update(_ITEMS)
    .where(_ITEMS.c.id.in_(bindparam("ids", expanding=True)))
    .values(
        {
            f"{column}_status": NftStatus.QUEUED,
            f"{column}_reason": bindparam("reason"),
            "updated_at": _NOW,
        }
    )
    for column in ("nft", "nft_transfer")
}
_UPDATES: dict[tuple[str, ...], Any] = {}


async def job_items(rows: Rows, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, JobItem]:
    """The items (those that exist) with their receiving wallets, by id."""
    found = await rows.all(_JOB_ITEMS, JobItem, ids=list(ids))
    return {row.id: row for row in found}


async def project_wallet(rows: Rows, project_id: uuid.UUID) -> SigningWallet:
    """The wallet that pays for the project's collections, mints and sponsored fees."""
    wallet = await rows.first(_PROJECT_WALLET, SigningWallet, project_id=project_id)
    if wallet is None:
        raise RuntimeError(f"project {project_id} has no project wallet")
    return wallet


async def held_wallets(
    rows: Rows, project_id: uuid.UUID, keys: Sequence[bytes]
) -> dict[bytes, HeldWallet]:
    """The project's user wallets of those public keys, by key."""
    if not keys:
        return {}
    found = await rows.all(_HELD_WALLETS, HeldWallet, project_id=project_id, keys=list(keys))
    return {row.public_key: row for row in found}


async def recorded_collections(rows: Rows, project_id: uuid.UUID, chain: str) -> set[int]:
    """The NFT collections the project's products record on ``chain``."""
    found = await rows.all(_RECORDED_COLLECTIONS, _Collection, project_id=project_id, chain=chain)
    return {row.nft_collection_id for row in found}


class _Collection(NamedTuple):
    nft_collection_id: int


async def shown_items(rows: Rows, ids: Sequence[uuid.UUID]) -> list[OwnedItemRow]:
    """The items with what the API shows of their owners, by ``item_id``."""
    return await rows.all(_SHOWN_ITEMS, OWNED_ITEM, ids=list(ids)) if ids else []


# Items locked in id order before a statement that writes many of them: an UPDATE locks rows in
# the order it finds them, and a door's upload locks the same items in id order (docs/design.md,
# Locks).
_LOCK_IN_ORDER = lock_for_update(
    select(_ITEMS.c.id)
    .where(_ITEMS.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(_ITEMS.c.id)
)


class ItemId(NamedTuple):
    id: uuid.UUID


async def _lock_in_order(tx: Transaction, ids: Sequence[uuid.UUID]) -> None:
    if len(ids) > 1:
        await tx.all(_LOCK_IN_ORDER, ItemId, ids=sorted(set(ids)))


async def mark_submitted(
    tx: Transaction,
    ids: Sequence[uuid.UUID],
    extrinsic_id: uuid.UUID,
    tx_hash: str,
    now: datetime,
    *,
    transfer: bool = False,
) -> None:
    """The items' mint (or on-chain transfer) rides the extrinsic now."""
    if ids:
        await _lock_in_order(tx, ids)
        statement = _SUBMITTED["nft_transfer" if transfer else "nft"]
        await tx.execute(
            statement, ids=list(ids), extrinsic_id=extrinsic_id, tx_hash=tx_hash, now=now
        )


async def mark_waiting(
    tx: Transaction,
    ids: Sequence[uuid.UUID],
    reason: str | None,
    now: datetime,
    *,
    transfer: bool = False,
) -> None:
    """The items' mint (or on-chain transfer) is queued again, waiting for ``reason``."""
    if ids:
        await _lock_in_order(tx, ids)
        statement = _WAITING["nft_transfer" if transfer else "nft"]
        await tx.execute(statement, ids=list(ids), reason=reason and reason[:500], now=now)


async def write_items(tx: Transaction, rows: Sequence[dict[str, Any]]) -> None:
    """Each of ``rows`` (``id`` and the same columns in each) written on its item, in id order
    (docs/design.md, Locks), in one round trip (``updated_at``: now, unless given)."""
    if not rows:
        return
    rows = sorted(rows, key=lambda row: row["id"])
    if "updated_at" not in rows[0]:
        now = utcnow()
        rows = [row | {"updated_at": now} for row in rows]
    names = tuple(sorted(key for key in rows[0] if key != "id"))
    statement = _UPDATES.get(names)
    if statement is None:
        statement = _UPDATES[names] = (
            update(_ITEMS)
            .where(_ITEMS.c.id == bindparam("row_id"))
            .values({name: bindparam(name, type_=_ITEMS.c[name].type) for name in names})
        )
    await tx.execute_many(
        statement, [{"row_id": row["id"], **{n: row[n] for n in names}} for row in rows]
    )
