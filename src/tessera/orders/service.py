"""Orders: the source of sales. Completing an order issues its items under the issuing rules."""

import secrets
import uuid
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from sqlalchemy.orm.attributes import set_committed_value

from tessera.auth.principal import Principal
from tessera.db import lock_for_update
from tessera.errors import (
    OrderNotFound,
    OrderNotPending,
    OrderNumberTaken,
    ProductInactive,
    ProductNotFound,
)
from tessera.models import Order, OrderItem, Product, ProductItem, User
from tessera.models.base import utcnow
from tessera.orders.schemas import OrderCreate
from tessera.products import issuance
from tessera.users.repository import get_user


@dataclass(frozen=True, slots=True)
class OrderView:
    order: Order
    lines: list[OrderItem]
    products: dict[uuid.UUID, Product]
    items: list[ProductItem]


async def create_order(
    session: AsyncSession, principal: Principal, *, body: OrderCreate
) -> OrderView:
    """Record an order at today's prices; a completed order issues its items (all or nothing)."""
    identifier = body.user.identifier()
    assert identifier is not None
    user = await get_user(session, principal.project_id, identifier)
    wanted = {line.product_id for line in body.items}
    products = {
        p.id: p
        for p in await session.scalars(
            select(Product).where(
                Product.project_id == principal.project_id, Product.id.in_(wanted)
            )
        )
    }
    if missing := wanted - products.keys():
        raise ProductNotFound(f"product not found: {', '.join(sorted(str(m) for m in missing))}")
    for product in products.values():
        if not product.active:
            raise ProductInactive(f"product is not active: {product.id}")

    now = utcnow()
    order = Order(
        id=uuid.uuid4(),
        project_id=principal.project_id,
        order_number=body.order_number or f"TS-{secrets.token_hex(5).upper()}",
        user_id=user.id,
        status="pending",
        created_at=now,
        updated_at=now,
    )
    lines = [
        OrderItem(
            id=uuid.uuid4(),
            order_id=order.id,
            product_id=line.product_id,
            position=position,
            quantity=line.quantity,
            unit_price=Decimal(products[line.product_id].price),
            created_at=now,
        )
        for position, line in enumerate(body.items)
    ]
    session.add(order)
    session.add_all(lines)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise OrderNumberTaken(f"order_number already used: {order.order_number}") from exc
    items: list[ProductItem] = []
    if body.status == "completed":
        items = await _complete(session, principal, order, lines, user)
    await session.commit()
    return OrderView(order, lines, products, items)


async def complete_order(
    session: AsyncSession, principal: Principal, *, order_id: uuid.UUID
) -> OrderView:
    """Complete a pending order: its items are issued now, or nothing changes (409)."""
    order = await _locked_order(session, principal, order_id)
    if order.status != "pending":
        raise OrderNotPending(f"only a pending order can be completed; this one is {order.status}")
    user = await session.get(User, order.user_id)
    assert user is not None
    items = await _complete(session, principal, order, order.lines, user)
    await session.commit()
    return await _view(session, order, items)


async def cancel_order(
    session: AsyncSession, principal: Principal, *, order_id: uuid.UUID
) -> OrderView:
    """Cancel a pending order. Completed orders stay completed (their items are issued)."""
    order = await _locked_order(session, principal, order_id)
    if order.status != "pending":
        raise OrderNotPending(f"only a pending order can be cancelled; this one is {order.status}")
    order.status = "cancelled"
    order.updated_at = utcnow()
    await session.commit()
    return await _view(session, order, [])


async def get_order(
    session: AsyncSession, principal: Principal, *, order_id: uuid.UUID
) -> OrderView:
    order = await session.scalar(
        select(Order)
        .where(Order.project_id == principal.project_id, Order.id == order_id)
        .options(selectinload(Order.lines))
    )
    if order is None:
        raise OrderNotFound
    items = list(
        await session.scalars(
            select(ProductItem)
            .where(ProductItem.order_item_id.in_([line.id for line in order.lines]))
            .options(selectinload(ProductItem.product), selectinload(ProductItem.owner))
            .order_by(ProductItem.product_id, ProductItem.item_id)
        )
    )
    return await _view(session, order, items)


async def _complete(
    session: AsyncSession, principal: Principal, order: Order, lines: list[OrderItem], user: User
) -> list[ProductItem]:
    items: list[ProductItem] = []
    # Lock products in one order (by id) so that two orders never wait on each other.
    for line in sorted(lines, key=lambda line: (str(line.product_id), line.position)):
        product = await issuance.lock_product(session, principal.project_id, line.product_id)
        items += await issuance.issue(
            session, product, [user] * line.quantity, order_item_id=line.id
        )
    order.status = "completed"
    order.updated_at = utcnow()
    return items


async def _locked_order(session: AsyncSession, principal: Principal, order_id: uuid.UUID) -> Order:
    order = await session.scalar(
        lock_for_update(
            select(Order).where(Order.project_id == principal.project_id, Order.id == order_id)
        ).execution_options(populate_existing=True)
    )
    if order is None:
        raise OrderNotFound
    lines = list(
        await session.scalars(
            select(OrderItem).where(OrderItem.order_id == order.id).order_by(OrderItem.position)
        )
    )
    set_committed_value(order, "lines", lines)
    return order


async def _view(session: AsyncSession, order: Order, items: list[ProductItem]) -> OrderView:
    ids = {line.product_id for line in order.lines}
    products = {p.id: p for p in await session.scalars(select(Product).where(Product.id.in_(ids)))}
    return OrderView(order, list(order.lines), products, items)
