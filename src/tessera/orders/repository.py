"""Order queries."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update

from tessera.db import AnySelect, Joined, Rows, Transaction, lock_for_update, table_of
from tessera.errors import OrderNotFound
from tessera.models import Order, OrderItem, OrderStatus, Product, ProductItem, User
from tessera.models.base import utcnow
from tessera.orders.schemas import OrderFilter, OrderList, OrderSummary, OrderView, order_view
from tessera.products.repository import products_by_id
from tessera.products.rows import ItemRow, OwnerNames, OwnerRow
from tessera.schemas import Pagination


class OrderRow(NamedTuple):
    """An order's row (``orders``)."""

    project_id: uuid.UUID
    order_number: str
    user_id: uuid.UUID
    status: OrderStatus
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class LineRow(NamedTuple):
    """An order line's row (``order_items``)."""

    order_id: uuid.UUID
    product_id: uuid.UUID
    position: int
    quantity: int
    unit_price: Decimal
    created_at: datetime
    id: uuid.UUID


class OrderLine(NamedTuple):
    """A line as the answer shows it (``_LINE_KEYS``)."""

    id: uuid.UUID
    product_id: uuid.UUID
    position: int
    quantity: int
    unit_price: Decimal
    created_at: datetime


class LineProduct(NamedTuple):
    """What the answer shows of a line's product (``ItemProduct``)."""

    id: uuid.UUID
    name: str
    type: str
    redemption_quantity: int


class IssuedItem(NamedTuple):
    """An item issued for a line (``product_items``), with its product and its owner, as
    ``item_view`` reads it."""

    row: ItemRow
    product: LineProduct
    owner: OwnerRow


class OrderReadRow(NamedTuple):
    """A join: ``_ORDER_READ``'s rows: the order, a line, its product, and an item issued for
    the line (a row of ``None``s without items) with its owner's names."""

    order: OrderRow
    line: OrderLine
    product: LineProduct
    item: ItemRow
    owner: OwnerNames


ORDER_READ = Joined(OrderReadRow)


_ORDERS, _LINES = table_of(Order), OrderItem.__table__
_PRODUCTS, _ITEMS, _USERS = Product.__table__, ProductItem.__table__, User.__table__
# Built once (see users.repository).
_ORDER = select(_ORDERS).where(
    _ORDERS.c.project_id == bindparam("project_id"), _ORDERS.c.id == bindparam("id")
)
_LINES_OF = select(_LINES).where(_LINES.c.order_id == bindparam("id")).order_by(_LINES.c.position)
_LOCK_ORDER = lock_for_update(_ORDER)
_STATUS = (
    update(_ORDERS)
    .where(_ORDERS.c.id == bindparam("id"))
    .values(status=bindparam("status"), updated_at=bindparam("updated_at"))
)
# An order (every order has a line) with its lines, what the answer shows of their products,
# and the items issued for each line with what it shows of their owners: one row per item, or
# per line without items.
_ORDER_READ = (
    select(
        _ORDERS,
        *(_LINES.c[key].label(f"line__{key}") for key in OrderLine._fields),
        *(_PRODUCTS.c[key].label(f"product__{key}") for key in LineProduct._fields),
        *(_ITEMS.c[key].label(f"item__{key}") for key in ItemRow._fields),
        *(_USERS.c[key].label(f"owner__{key}") for key in OwnerNames._fields),
    )
    .join(_LINES, _LINES.c.order_id == _ORDERS.c.id)
    .join(_PRODUCTS, _PRODUCTS.c.id == _LINES.c.product_id)
    .outerjoin(_ITEMS, _ITEMS.c.order_item_id == _LINES.c.id)
    .outerjoin(_USERS, _USERS.c.id == _ITEMS.c.owner_id)  # every item has its owner
    .where(_ORDERS.c.project_id == bindparam("project_id"), _ORDERS.c.id == bindparam("id"))
    .order_by(_LINES.c.position, _ITEMS.c.item_id)
)


async def add_order(tx: Transaction, values: dict[str, Any]) -> OrderRow:
    """A new order of ``values`` (the other columns as their defaults), as written."""
    [order] = await tx.insert(Order, [values], OrderRow)
    return order


async def add_lines(tx: Transaction, lines: Sequence[dict[str, Any]]) -> None:
    """An order's lines, each with all its columns (``with_defaults``)."""
    await tx.insert(OrderItem, lines)


async def lock_order(
    tx: Transaction, project_id: uuid.UUID, order_id: uuid.UUID
) -> tuple[OrderRow, list[LineRow]]:
    """The project's order, locked until the transaction ends, and its lines (404 otherwise)."""
    order = await tx.first(_LOCK_ORDER, OrderRow, project_id=project_id, id=order_id)
    if order is None:
        raise OrderNotFound
    return order, await tx.all(_LINES_OF, LineRow, id=order_id)


async def set_status(tx: Transaction, order: OrderRow, status: OrderStatus) -> OrderRow:
    """The order in ``status`` from now on, written."""
    changed = order._replace(status=status, updated_at=utcnow())
    await tx.execute(_STATUS, id=order.id, status=status, updated_at=changed.updated_at)
    return changed


async def read_order(rows: Rows, project_id: uuid.UUID, order_id: uuid.UUID) -> OrderView | None:
    """The order with its lines, their products and the items issued for them, with their
    owners (a read for ``Database.read``), in one statement, as ``OrderRead`` reads it; or
    None."""
    found = await rows.all(_ORDER_READ, ORDER_READ, project_id=project_id, id=order_id)
    if not found:
        return None
    lines = {row.line.id: row.line for row in found}
    products = {row.product.id: row.product for row in found}
    items = [
        IssuedItem(row.item, row.product, OwnerRow(row.item.owner_id, *row.owner))
        for row in found
        if row.item.id is not None
    ]
    items.sort(key=lambda item: (item.row.product_id, item.row.item_id))  # as the answer lists
    return order_view(found[0].order, list(lines.values()), products, items)


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
    orders = await rows.all(page, OrderRow, **values, limit=query.limit, offset=query.offset)
    lines: dict[uuid.UUID, list[LineRow]] = {order.id: [] for order in orders}
    if orders:
        for line in await rows.all(_LINES_OF_ORDERS, LineRow, ids=list(lines)):
            lines[line.order_id].append(line)
    product_ids = {line.product_id for some in lines.values() for line in some}
    products = await products_by_id(rows, project_id, product_ids) if product_ids else {}
    return OrderList(
        orders=[OrderSummary.of(order, lines[order.id], products) for order in orders],
        pagination=Pagination(page=query.page, limit=query.limit, total=count),
    )
