"""The rules of a product's items, each written once: locks, issuing, redemption, transfer.

Every path that gives a user an item (the items endpoint, a completed order, a transfer in) goes
through ``check_recipients`` inside the caller's transaction, after ``lock_product``: on
PostgreSQL the product row lock serialises issuers of one product, so stock, per-account counts
and the next ``item_id`` are read and bumped without races; on SQLite the write lock does the
same. Redemption and transfer lock the item too (``lock_item``).
"""

import uuid
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from tessera.db import get_in_project
from tessera.errors import (
    CollectionFull,
    ItemFullyRedeemed,
    ItemNotOwnedBySender,
    PerAccountLimitReached,
    ProductInactive,
    ProductItemNotFound,
    ProductNotFound,
    ProductNotTransferable,
    ProductOutOfStock,
    ReputationTooLow,
    TransferToSelf,
)
from tessera.jobs.queue import JobKind
from tessera.models import Product, ProductItem, User
from tessera.models.base import utcnow
from tessera.products.tasks import queue_nft


async def lock_product(
    session: AsyncSession, project_id: uuid.UUID, product_id: uuid.UUID
) -> Product:
    """The project's product, locked until the transaction ends (404 otherwise)."""
    return await get_in_project(
        session, Product, project_id, Product.id == product_id, not_found=ProductNotFound, lock=True
    )


async def lock_item(session: AsyncSession, product: Product, item_id: uuid.UUID) -> ProductItem:
    """An item of ``product`` (already locked: products are always locked first), locked."""
    item = await get_in_project(
        session,
        ProductItem,
        product.project_id,
        ProductItem.product_id == product.id,
        ProductItem.id == item_id,
        not_found=ProductItemNotFound,
        lock=True,
    )
    set_committed_value(item, "product", product)
    return item


def is_fully_redeemed(redemption_count: int, product: Product) -> bool:
    """An item can be redeemed ``redemption_quantity`` times in all."""
    return redemption_count >= product.redemption_quantity


async def check_recipients(
    session: AsyncSession, product: Product, recipients: Sequence[User]
) -> None:
    """``active``, ``max_per_account`` and ``min_rep_balance`` for users about to receive items
    (a user listed n times receives n items)."""
    if not product.active:
        raise ProductInactive
    if product.max_per_account is not None:
        wanted = Counter(user.id for user in recipients)
        counts = await session.execute(
            select(ProductItem.owner_id, func.count())
            .where(ProductItem.product_id == product.id, ProductItem.owner_id.in_(wanted))
            .group_by(ProductItem.owner_id)
        )
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
    session: AsyncSession,
    product: Product,
    recipients: Sequence[User],
    *,
    order_item_id: uuid.UUID | None = None,
) -> list[ProductItem]:
    """Issue one item per recipient with the next sequential ``item_id``s (product locked):
    ``stock`` and, for NFT products, ``max_items`` bound the items ever issued; each recipient
    must pass ``check_recipients``. All or nothing."""
    count = len(recipients)
    if product.stock is not None and product.issued_count + count > product.stock:
        left = product.stock - product.issued_count
        raise ProductOutOfStock(f"product is out of stock: {left} left, {count} requested")
    if product.mint_nft and product.max_items is not None:
        if product.issued_count + count > product.max_items:
            raise CollectionFull(
                f"the NFT collection holds at most {product.max_items} items "
                f"({product.issued_count} issued, {count} requested)"
            )
    await check_recipients(session, product, recipients)

    first = product.issued_count + 1
    await session.execute(
        update(Product)
        .where(Product.id == product.id)
        .values(issued_count=Product.issued_count + count, updated_at=product.updated_at)
        .execution_options(synchronize_session=False)
    )
    set_committed_value(product, "issued_count", product.issued_count + count)

    now = utcnow()
    items = []
    for offset, user in enumerate(recipients):
        item = ProductItem(
            id=uuid.uuid4(),
            project_id=product.project_id,
            product_id=product.id,
            item_id=first + offset,
            owner_id=user.id,
            order_item_id=order_item_id,
            redemption_count=0,
            created_at=now,
            updated_at=now,
        )
        set_committed_value(item, "product", product)
        set_committed_value(item, "owner", user)
        items.append(item)
        if product.mint_nft:
            queue_nft(session, JobKind.MINT, item)
    session.add_all(items)
    await session.flush()
    return items


def check_redeemable(product: Product, item: ProductItem) -> None:
    if is_fully_redeemed(item.redemption_count, product):
        raise ItemFullyRedeemed


def check_transferable(product: Product) -> None:
    """Checked first, before the item and the users are looked up."""
    if not product.is_transferable:
        raise ProductNotTransferable


async def check_transfer(
    session: AsyncSession, product: Product, item: ProductItem, sender: User, recipient: User
) -> None:
    """Then a transfer needs the sender owning the item, another user as recipient, an item not
    fully redeemed, and a recipient who passes the issuing rules."""
    if item.owner_id != sender.id:
        raise ItemNotOwnedBySender
    if recipient.id == sender.id:
        raise TransferToSelf
    check_redeemable(product, item)
    await check_recipients(session, product, [recipient])


def _unique(users: Sequence[User]) -> list[User]:
    return list({user.id: user for user in users}.values())
