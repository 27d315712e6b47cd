"""The rules for a user receiving a product item, in one place.

Every path that gives a user an item (the items endpoint, a completed order, a transfer in) goes
through here, inside the caller's transaction, after ``lock_product``: on PostgreSQL the product
row lock serialises issuers of one product, so stock, per-account counts and the next
``item_id`` are read and bumped without races; on SQLite the write lock does the same.
"""

import uuid
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from tessera.db import lock_for_update
from tessera.errors import (
    CollectionFull,
    PerAccountLimitReached,
    ProductInactive,
    ProductNotFound,
    ProductOutOfStock,
    ReputationTooLow,
)
from tessera.jobs.queue import MINT, enqueue, item_subject
from tessera.models import Product, ProductItem, User
from tessera.models.base import utcnow


async def lock_product(
    session: AsyncSession, project_id: uuid.UUID, product_id: uuid.UUID
) -> Product:
    product = await session.scalar(
        lock_for_update(
            select(Product).where(Product.project_id == project_id, Product.id == product_id)
        ).execution_options(populate_existing=True)
    )
    if product is None:
        raise ProductNotFound
    return product


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
    """Issue one item per recipient with the next sequential ``item_id``s (product locked)."""
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
            item.nft_status = "queued"
            enqueue(
                session,
                project_id=product.project_id,
                kind=MINT,
                subject=item_subject(item.id),
                payload={"product_item_id": str(item.id), "nft_id": item.item_id},
            )
    session.add_all(items)
    await session.flush()
    return items


def _unique(users: Sequence[User]) -> list[User]:
    return list({user.id: user for user in users}.values())
