"""Order queries."""

import uuid
from typing import Any

from sqlalchemy import bindparam, func, select

from tessera.db import AnySelect, Row, Rows, Transaction, joined, lock_for_update, part
from tessera.errors import OrderNotFound
from tessera.models import Order, OrderItem, Product, ProductItem, User
from tessera.orders.schemas import OrderFilter, OrderList, OrderSummary, order_view
from tessera.products.repository import products_by_id
from tessera.schemas import Pagination

_ORDERS, _LINES = Order.__table__, OrderItem.__table__
_PRODUCTS, _ITEMS, _USERS = Product.__table__, ProductItem.__table__, User.__table__
# Built once (see users.repository).
_ORDER = select(_ORDERS).where(
    _ORDERS.c.project_id == bindparam("project_id"), _ORDERS.c.id == bindparam("id")
)
_LINES_OF = select(_LINES).where(_LINES.c.order_id == bindparam("id")).order_by(_LINES.c.position)
_LOCK_ORDER = lock_for_update(_ORDER)
# An order (every order has a line) with its lines, what the answer shows of their products,
# and the items issued for each line with what it shows of their owners: one row per item, or
# per line without items.
_LINE_KEYS = ("id", "product_id", "position", "quantity", "unit_price", "created_at")
_PRODUCT_KEYS = ("name", "type", "redemption_quantity")
_ITEM_KEYS = tuple(_ITEMS.c.keys())
_OWNER_KEYS = ("email", "first_name", "last_name")
_ORDER_READ = (
    select(
        _ORDERS,
        *(_LINES.c[key].label(f"line_{key}") for key in _LINE_KEYS),
        *(_PRODUCTS.c[key].label(f"product_{key}") for key in _PRODUCT_KEYS),
        *(_ITEMS.c[key].label(f"item__{key}") for key in _ITEM_KEYS),
        *(_USERS.c[key].label(f"owner__{key}") for key in _OWNER_KEYS),
    )
    .join(_LINES, _LINES.c.order_id == _ORDERS.c.id)
    .join(_PRODUCTS, _PRODUCTS.c.id == _LINES.c.product_id)
    .outerjoin(_ITEMS, _ITEMS.c.order_item_id == _LINES.c.id)
    .outerjoin(_USERS, _USERS.c.id == _ITEMS.c.owner_id)  # every item has its owner
    .where(_ORDERS.c.project_id == bindparam("project_id"), _ORDERS.c.id == bindparam("id"))
    .order_by(_LINES.c.position, _ITEMS.c.item_id)
)


async def lock_order(
    tx: Transaction, project_id: uuid.UUID, order_id: uuid.UUID
) -> tuple[Any, list[Any]]:
    """The project's order, locked until the transaction ends, and its lines (404 otherwise)."""
    order = await tx.first(_LOCK_ORDER, project_id=project_id, id=order_id)
    if order is None:
        raise OrderNotFound
    return joined(order), await tx.all(_LINES_OF, id=order_id)


async def read_order(rows: Rows, project_id: uuid.UUID, order_id: uuid.UUID) -> Row | None:
    """The order with its lines, their products and the items issued for them, with their
    owners (a read for ``Database.read``), in one statement, as ``OrderRead`` reads it; or
    None."""
    found = await rows.all(_ORDER_READ, project_id=project_id, id=order_id)
    if not found:
        return None
    order = part(found[0], "", _ORDERS.c.keys())
    lines = {row.line_id: part(row, "line_", _LINE_KEYS) for row in found}
    products = {
        row.line_product_id: part(row, "product_", _PRODUCT_KEYS, id=row.line_product_id)
        for row in found
    }
    items = [
        part(
            row,
            "item__",
            _ITEM_KEYS,
            product=products[row.line_product_id],
            owner=part(row, "owner__", _OWNER_KEYS, id=row.item__owner_id),
        )
        for row in found
        if row.item__id is not None
    ]
    items.sort(key=lambda item: (item.product_id, item.item_id))  # as the answer lists them
    return order_view(order, list(lines.values()), products, items)


def _orders_of_project(
    by_status: bool, by_user: bool, by_product: bool
) -> tuple[AnySelect, AnySelect]:
    """The total and a page (oldest first) of the project's orders, narrowed by status, user
    and/or a product of their lines."""
    criteria = [_ORDERS.c.project_id == bindparam("project_id")]
    if by_status:
        criteria.append(_ORDERS.c.status == bindparam("status"))
    if by_user:
        criteria.append(_ORDERS.c.user_id == bindparam("user_id"))
    if by_product:
        with_product = select(_LINES.c.order_id).where(
            _LINES.c.product_id == bindparam("product_id")
        )
        criteria.append(_ORDERS.c.id.in_(with_product))
    total = select(func.count()).select_from(_ORDERS).where(*criteria)
    page = (
        select(_ORDERS)
        .where(*criteria)
        .order_by(_ORDERS.c.created_at, _ORDERS.c.id)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return total, page


# Built once per combination of filters (see users.repository).
_ORDER_LISTS = {
    (by_status, by_user, by_product): _orders_of_project(by_status, by_user, by_product)
    for by_status in (False, True)
    for by_user in (False, True)
    for by_product in (False, True)
}
_LINES_OF_ORDERS = (
    select(_LINES)
    .where(_LINES.c.order_id.in_(bindparam("ids", expanding=True)))
    .order_by(_LINES.c.position)
)


async def read_orders(rows: Rows, project_id: uuid.UUID, query: OrderFilter) -> OrderList:
    """A page of the project's orders, oldest first, each with its lines (a read for
    ``Database.read``); ``status``, ``user_id`` and ``product_id`` narrow it."""
    filters = (query.status is not None, query.user_id is not None, query.product_id is not None)
    total, page = _ORDER_LISTS[filters]
    values = {
        "project_id": project_id,
        "status": query.status,
        "user_id": query.user_id,
        "product_id": query.product_id,
    }
    count = await rows.scalar(total, **values)
    orders = await rows.all(page, **values, limit=query.limit, offset=query.offset)
    lines: dict[uuid.UUID, list[Any]] = {order.id: [] for order in orders}
    if orders:
        for line in await rows.all(_LINES_OF_ORDERS, ids=list(lines)):
            lines[line.order_id].append(line)
    product_ids = {line.product_id for some in lines.values() for line in some}
    products = await products_by_id(rows, project_id, product_ids) if product_ids else {}
    return OrderList(
        orders=[OrderSummary.of(order, lines[order.id], products) for order in orders],
        pagination=Pagination(page=query.page, limit=query.limit, total=count),
    )
