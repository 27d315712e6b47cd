"""Product, item and sales queries (the locks are in ``products.rules``)."""

import uuid
from collections.abc import Collection

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from tessera.db import get_in_project
from tessera.errors import ProductNotFound
from tessera.models import Order, OrderItem, Product, ProductItem, Redemption, User
from tessera.schemas import PageParams


async def get_product(
    session: AsyncSession, project_id: uuid.UUID, product_id: uuid.UUID, *, with_event: bool = False
) -> Product:
    return await get_in_project(
        session,
        Product,
        project_id,
        Product.id == product_id,
        not_found=ProductNotFound,
        options=[selectinload(Product.event)] if with_event else [],
    )


async def list_products(
    session: AsyncSession, project_id: uuid.UUID, *, paging: PageParams
) -> list[Product]:
    products = await session.scalars(
        select(Product)
        .where(Product.project_id == project_id)
        .options(selectinload(Product.event))
        .order_by(Product.created_at, Product.id)
        .limit(paging.limit)
        .offset(paging.offset)
    )
    return list(products)


async def products_by_id(
    session: AsyncSession, project_id: uuid.UUID, ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, Product]:
    products = await session.scalars(
        select(Product).where(Product.project_id == project_id, Product.id.in_(ids))
    )
    return {product.id: product for product in products}


async def list_sales(
    session: AsyncSession, product: Product, *, paging: PageParams
) -> tuple[list[tuple[OrderItem, Order, User]], int]:
    """A page of the product's order lines (oldest first) with their order and buyer."""
    total = await session.scalar(
        select(func.count()).select_from(OrderItem).where(OrderItem.product_id == product.id)
    )
    rows = await session.execute(
        select(OrderItem, Order, User)
        .join(Order, OrderItem.order_id == Order.id)
        .join(User, Order.user_id == User.id)
        .where(OrderItem.product_id == product.id)
        .order_by(OrderItem.created_at, OrderItem.id)
        .limit(paging.limit)
        .offset(paging.offset)
    )
    return [(line, order, user) for line, order, user in rows], total or 0


async def items_of_lines(
    session: AsyncSession, line_ids: Collection[uuid.UUID]
) -> list[ProductItem]:
    """The items issued for order lines, with product and owner loaded."""
    items = await session.scalars(
        select(ProductItem)
        .where(ProductItem.order_item_id.in_(line_ids))
        .options(selectinload(ProductItem.product), selectinload(ProductItem.owner))
        .order_by(ProductItem.product_id, ProductItem.item_id)
    )
    return list(items)


async def find_redemption(
    session: AsyncSession, item: ProductItem, nonce: str
) -> Redemption | None:
    return await session.scalar(
        select(Redemption).where(Redemption.item_id == item.id, Redemption.nonce == nonce)
    )
