"""Order queries."""

import uuid
from typing import Any

from sqlalchemy import bindparam, select

from tessera.db import Rows, Transaction, joined, lock_for_update
from tessera.errors import OrderNotFound
from tessera.models import Order, OrderItem, Product, ProductItem, User
from tessera.orders.schemas import OrderRead

_ORDERS, _LINES = Order.__table__, OrderItem.__table__
_PRODUCTS, _ITEMS, _USERS = Product.__table__, ProductItem.__table__, User.__table__
# Built once (see users.repository).
_ORDER = select(_ORDERS).where(
    _ORDERS.c.project_id == bindparam("project_id"), _ORDERS.c.id == bindparam("id")
)
_LINES_OF = select(_LINES).where(_LINES.c.order_id == bindparam("id")).order_by(_LINES.c.position)
_PRODUCTS_OF = select(_PRODUCTS).where(
    _PRODUCTS.c.id.in_(select(_LINES.c.product_id).where(_LINES.c.order_id == bindparam("id")))
)
_ITEMS_OF = (
    select(_ITEMS)
    .where(
        _ITEMS.c.order_item_id.in_(select(_LINES.c.id).where(_LINES.c.order_id == bindparam("id")))
    )
    .order_by(_ITEMS.c.product_id, _ITEMS.c.item_id)
)
_LOCK_ORDER = lock_for_update(_ORDER)
_USERS_BY_ID = select(_USERS).where(_USERS.c.id.in_(bindparam("ids", expanding=True)))


async def lock_order(
    tx: Transaction, project_id: uuid.UUID, order_id: uuid.UUID
) -> tuple[Any, list[Any]]:
    """The project's order, locked until the transaction ends, and its lines (404 otherwise)."""
    order = await tx.first(_LOCK_ORDER, project_id=project_id, id=order_id)
    if order is None:
        raise OrderNotFound
    return joined(order), await tx.all(_LINES_OF, id=order_id)


async def read_order(rows: Rows, project_id: uuid.UUID, order_id: uuid.UUID) -> OrderRead | None:
    """The order with its lines, their products and the items issued for them (a read for
    ``Database.read``), or None."""
    order = await rows.first(_ORDER, project_id=project_id, id=order_id)
    if order is None:
        return None
    lines = await rows.all(_LINES_OF, id=order_id)
    products = {row.id: row for row in await rows.all(_PRODUCTS_OF, id=order_id)}
    items = await rows.all(_ITEMS_OF, id=order_id)
    owner_ids = list({item.owner_id for item in items})
    owners = (
        {row.id: row for row in await rows.all(_USERS_BY_ID, ids=owner_ids)} if owner_ids else {}
    )
    return OrderRead.of(
        order,
        lines,
        products,
        [
            joined(item, product=products[item.product_id], owner=owners[item.owner_id])
            for item in items
        ],
    )
