"""The rules of a product's items, each written once: locks, issuing, redemption, transfer.

Every path that gives a user an item (the items endpoint, a completed order, a transfer in) goes
through ``check_recipients`` inside the caller's transaction, with the product row locked
(``issue`` locks it as it bumps the counter, a transfer with ``lock_product``): on PostgreSQL the
lock serialises issuers of one product, so stock, per-account counts and the next ``item_id`` are
read and bumped without races; on SQLite the write lock does the same. A change of the product
(``check_update``) takes the same lock (``lock_product``), so stock cannot drop below the items
being issued. Redemption share-locks the product (``share_product``: redemptions of one product run
side by side, while a change of its ``redemption_quantity`` waits for them and they for it), then
locks the item (``lock_item``); a transfer locks the product, then the item.

The rules run in a ``Transaction`` (Core statements on the raw driver) and work on rows: the
product, items and users as the statements below read them.
"""

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, func, select, update

from tessera.auth.principal import Principal
from tessera.db import Transaction, joined, lock_for_share, lock_for_update, table_of
from tessera.errors import (
    CollectionFull,
    ItemFullyRedeemed,
    ItemNotOwnedBySender,
    ItemsIssuedWithoutNft,
    NftSettingsFixed,
    PerAccountLimitReached,
    ProductInactive,
    ProductItemNotFound,
    ProductNotFound,
    ProductNotTransferable,
    ProductOutOfStock,
    RedemptionQuantityBelowCount,
    ReputationTooLow,
    StockBelowIssued,
    TransferToSelf,
)
from tessera.jobs.queue import JobKind
from tessera.models import NftStatus, Product, ProductItem
from tessera.models.base import utcnow
from tessera.products.tasks import queue_nft
from tessera.users.rules import require_activated

_PRODUCTS, _ITEMS = table_of(Product), table_of(ProductItem)
# Built once (see users.repository).
_LOCK_PRODUCT = lock_for_update(
    select(_PRODUCTS).where(
        _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
    )
)
_SHARE_PRODUCT = lock_for_share(
    select(_PRODUCTS).where(
        _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
    )
)
_LOCK_ITEM = lock_for_update(
    select(_ITEMS).where(
        _ITEMS.c.product_id == bindparam("product_id"), _ITEMS.c.id == bindparam("id")
    )
)
_HELD = (
    select(_ITEMS.c.owner_id, func.count())
    .where(
        _ITEMS.c.product_id == bindparam("product_id"),
        _ITEMS.c.owner_id.in_(bindparam("owners", expanding=True)),
    )
    .group_by(_ITEMS.c.owner_id)
)
# Issuing takes the product's row lock with the bump of its counter, in one statement, and
# returns the product as it now is; the checks follow, and a refusal rolls the bump back. The
# lock is held for as few round trips as the rules allow (this, the per-account count if any,
# the items' insert, the commit): issuers of one product (and its redemptions, which share-lock
# it) queue on it. The product's updated_at stays: issuing changes a counter, not the product.
_ISSUE = (
    update(_PRODUCTS)
    .where(_PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id"))
    .values(
        issued_count=_PRODUCTS.c.issued_count + bindparam("count"),
        updated_at=_PRODUCTS.c.updated_at,
    )
    .returning(*_PRODUCTS.c)
)


async def lock_product(tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID) -> Any:
    """The project's product, locked until the transaction ends (404 otherwise)."""
    row = await tx.first(_LOCK_PRODUCT, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return joined(row)


async def share_product(tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID) -> Any:
    """The project's product, share-locked until the transaction ends (404 otherwise): it cannot
    change meanwhile, while others that share-lock it go on."""
    row = await tx.first(_SHARE_PRODUCT, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return joined(row)


async def lock_products(
    tx: Transaction, project_id: uuid.UUID, product_ids: Iterable[uuid.UUID]
) -> None:
    """Lock the project's products, in one order (by id) so that two transactions that lock
    several never wait on each other (404 for one that is not there)."""
    for product_id in sorted(product_ids, key=str):
        await lock_product(tx, project_id, product_id)


async def lock_item(tx: Transaction, product: Any, item_id: uuid.UUID) -> Any:
    """An item of ``product`` (already locked, or share-locked: products are always locked
    first), locked, with its ``product``."""
    row = await tx.first(_LOCK_ITEM, product_id=product.id, id=item_id)
    if row is None:
        raise ProductItemNotFound
    return joined(row, product=product)


def is_fully_redeemed(redemption_count: int, product: Any) -> bool:
    """An item can be redeemed ``redemption_quantity`` times in all."""
    return bool(redemption_count >= product.redemption_quantity)


async def check_recipients(
    tx: Transaction, principal: Principal, product: Any, recipients: Sequence[Any]
) -> None:
    """``active``, the project's activation rule, ``max_per_account`` and ``min_rep_balance``
    for users about to receive items (a user listed n times receives n items)."""
    if not product.active:
        raise ProductInactive
    for user in _unique(recipients):
        require_activated(principal, user, "receive items")
    if product.max_per_account is not None:
        wanted = Counter(user.id for user in recipients)
        counts = await tx.all(_HELD, product_id=product.id, owners=list(wanted))
        held: dict[uuid.UUID, int] = {owner_id: count for owner_id, count in counts}
        for user in _unique(recipients):
            total = held.get(user.id, 0) + wanted[user.id]
            if total > product.max_per_account:
                raise PerAccountLimitReached(
                    f"max_per_account is {product.max_per_account}: {user.email} holds "
                    f"{held.get(user.id, 0)} and would hold {total}"
                )
    for user in _unique(recipients):
        if user.reputation < product.min_rep_balance:
            raise ReputationTooLow(
                f"min_rep_balance is {product.min_rep_balance}: {user.email} has {user.reputation}"
            )


async def issue(
    tx: Transaction,
    principal: Principal,
    product_id: uuid.UUID,
    recipients: Sequence[Any],
    *,
    order_item_id: uuid.UUID | None = None,
) -> list[Any]:
    """Issue one item per recipient of the project's product (404 otherwise), with the next
    sequential ``item_id``s: ``stock`` and, for NFT products, ``max_items`` bound the items ever
    issued; each recipient must pass ``check_recipients``. All or nothing: the caller's
    transaction must end if this raises. The items, with ``product`` and ``owner``."""
    count = len(recipients)
    bumped = await tx.first(_ISSUE, project_id=principal.project_id, id=product_id, count=count)
    if bumped is None:
        raise ProductNotFound
    product = joined(bumped)
    issued = product.issued_count - count  # before this issue
    if product.stock is not None and issued + count > product.stock:
        left = product.stock - issued
        raise ProductOutOfStock(f"product is out of stock: {left} left, {count} requested")
    if product.mint_nft and product.max_items is not None:
        if issued + count > product.max_items:
            raise CollectionFull(
                f"the NFT collection holds at most {product.max_items} items "
                f"({issued} issued, {count} requested)"
            )
    await check_recipients(tx, principal, product, recipients)

    first = issued + 1
    now = utcnow()
    rows = await tx.insert(
        ProductItem,
        [
            {
                "id": uuid.uuid4(),
                "project_id": product.project_id,
                "product_id": product.id,
                "item_id": first + offset,
                "owner_id": user.id,
                "order_item_id": order_item_id,
                "redemption_count": 0,
                "nft_status": NftStatus.QUEUED if product.mint_nft else None,
                "created_at": now,
                "updated_at": now,
            }
            for offset, user in enumerate(recipients)
        ],
    )
    items = []
    for row, user in zip(rows, recipients, strict=True):
        row.product, row.owner = product, user
        items.append(row)
    if product.mint_nft:
        await queue_nft(tx, JobKind.MINT, items)
    return items


def check_redeemable(product: Any, item: Any) -> None:
    if is_fully_redeemed(item.redemption_count, product):
        raise ItemFullyRedeemed


def check_transferable(product: Any) -> None:
    """Checked first, before the item and the users are looked up."""
    if not product.is_transferable:
        raise ProductNotTransferable


async def check_transfer(
    tx: Transaction, principal: Principal, product: Any, item: Any, sender: Any, recipient: Any
) -> None:
    """Then a transfer needs the sender owning the item, another user as recipient, an item not
    fully redeemed, a sender the activation rule lets send, and a recipient who passes the
    issuing rules."""
    if item.owner_id != sender.id:
        raise ItemNotOwnedBySender
    if recipient.id == sender.id:
        raise TransferToSelf
    check_redeemable(product, item)
    require_activated(principal, sender, "send a transfer")
    await check_recipients(tx, principal, product, [recipient])


def _unique(users: Sequence[Any]) -> list[Any]:
    return list({user.id: user for user in users}.values())


# The settings of a product's NFT collection, fixed once it is queued or created.
NFT_SETTINGS = ("mint_nft", "chain", "metadata_uri", "max_items")
_HIGHEST_REDEMPTION = select(func.max(_ITEMS.c.redemption_count)).where(
    _ITEMS.c.product_id == bindparam("product_id")
)


def changed_fields(product: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``changes`` whose value is not the product's: clients often send a whole
    product back, and a stored value sent again is no change."""
    return {name: value for name, value in changes.items() if getattr(product, name) != value}


def check_nft_settings(product: Any, changed: dict[str, Any]) -> None:
    """Once the product's NFT collection is queued or created, its settings stay; ``mint_nft``
    switches on only while no item was issued (each would lack its NFT)."""
    if product.mint_nft and product.nft_status is not None:
        if fixed := [name for name in NFT_SETTINGS if name in changed]:
            raise NftSettingsFixed(
                f"{', '.join(fixed)} cannot change once the product's NFT collection exists or "
                f"is queued (collection status: {product.nft_status})"
            )
    if changed.get("mint_nft") and product.issued_count:
        raise ItemsIssuedWithoutNft(
            "mint_nft cannot be switched on: items were already issued without an NFT "
            f"({product.issued_count})"
        )


async def check_update(tx: Transaction, product: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """The changes to ``product`` (locked: ``lock_product``) that keep its items valid, as
    ``changed_fields``; 409 for ``stock`` below the items issued, ``redemption_quantity`` below
    the highest ``redemption_count`` of an item (no redemption is under way: they share-lock the
    product), or a change ``check_nft_settings`` refuses."""
    changed = changed_fields(product, changes)
    check_nft_settings(product, changed)
    stock = changed.get("stock")
    if stock is not None and stock < product.issued_count:
        raise StockBelowIssued(
            f"stock cannot be {stock}, below the items already issued ({product.issued_count})"
        )
    quantity = changed.get("redemption_quantity")
    if quantity is not None and quantity < product.redemption_quantity:
        highest = await tx.scalar(_HIGHEST_REDEMPTION, product_id=product.id) or 0
        if quantity < highest:
            raise RedemptionQuantityBelowCount(
                f"redemption_quantity cannot be {quantity}, below the redemption_count of an "
                f"item already redeemed ({highest})"
            )
    return changed
