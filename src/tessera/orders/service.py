"""Orders: the source of sales. Completing an order issues its items under the issuing rules."""

import secrets
import uuid
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.auth.principal import Principal
from tessera.db import Database
from tessera.errors import (
    OrderNotFound,
    OrderNotPending,
    OrderNumberTaken,
    ProductInactive,
    ProductNotFound,
)
from tessera.models import Order, OrderItem, OrderStatus, Product, ProductItem, User
from tessera.models.base import utcnow
from tessera.orders import repository
from tessera.orders.schemas import OrderCreate, OrderRead
from tessera.products import repository as products
from tessera.products import rules
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
    user = await get_user(session, principal.project_id, body.user.ref())
    wanted = {line.product_id for line in body.items}
    by_id = await products.products_by_id(session, principal.project_id, wanted)
    if missing := wanted - by_id.keys():
        raise ProductNotFound(f"product not found: {', '.join(sorted(str(m) for m in missing))}")
    for product in by_id.values():
        if not product.active:
            raise ProductInactive(f"product is not active: {product.id}")

    now = utcnow()
    order = Order(
        id=uuid.uuid4(),
        project_id=principal.project_id,
        order_number=body.order_number or f"TS-{secrets.token_hex(5).upper()}",
        user_id=user.id,
        status=OrderStatus.PENDING,
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
            unit_price=Decimal(by_id[line.product_id].price),
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
    return OrderView(order, lines, by_id, items)


async def complete_order(
    session: AsyncSession, principal: Principal, *, order_id: uuid.UUID
) -> OrderView:
    """Complete a pending order: its items are issued now, or nothing changes (409)."""
    order = await repository.get_order(session, principal.project_id, order_id, lock=True)
    _require_pending(order, "completed")
    user = await session.get(User, order.user_id)
    assert user is not None  # an order keeps its user (foreign key)
    items = await _complete(session, principal, order, order.lines, user)
    await session.commit()
    return await _view(session, principal, order, items)


async def cancel_order(
    session: AsyncSession, principal: Principal, *, order_id: uuid.UUID
) -> OrderView:
    """Cancel a pending order. Completed orders stay completed (their items are issued)."""
    order = await repository.get_order(session, principal.project_id, order_id, lock=True)
    _require_pending(order, "cancelled")
    order.status = OrderStatus.CANCELLED
    order.updated_at = utcnow()
    await session.commit()
    return await _view(session, principal, order, [])


async def get_order(database: Database, principal: Principal, *, order_id: uuid.UUID) -> OrderRead:
    order = await database.read(repository.read_order, principal.project_id, order_id)
    if order is None:
        raise OrderNotFound
    return order


def _require_pending(order: Order, action: str) -> None:
    if order.status != OrderStatus.PENDING:
        raise OrderNotPending(f"only a pending order can be {action}; this one is {order.status}")


async def _complete(
    session: AsyncSession, principal: Principal, order: Order, lines: list[OrderItem], user: User
) -> list[ProductItem]:
    items: list[ProductItem] = []
    # Lock products in one order (by id) so that two orders never wait on each other.
    for line in sorted(lines, key=lambda line: (str(line.product_id), line.position)):
        product = await rules.lock_product(session, principal.project_id, line.product_id)
        items += await rules.issue(session, product, [user] * line.quantity, order_item_id=line.id)
    order.status = OrderStatus.COMPLETED
    order.updated_at = utcnow()
    return items


async def _view(
    session: AsyncSession, principal: Principal, order: Order, items: list[ProductItem]
) -> OrderView:
    ids = {line.product_id for line in order.lines}
    by_id = await products.products_by_id(session, principal.project_id, ids)
    return OrderView(order, list(order.lines), by_id, items)
