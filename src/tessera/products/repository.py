"""Product, item and sales queries (the locks are in ``products.rules``)."""

import uuid
from collections.abc import Collection
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, func, select

from tessera.db import Rows, joined
from tessera.errors import ProductNotFound
from tessera.models import Event, Order, OrderItem, Product, ProductItem, User
from tessera.products.schemas import SaleList, SaleRead
from tessera.schemas import PageParams, Pagination

_PRODUCTS, _EVENTS = Product.__table__, Event.__table__
# Built once (see users.repository).
_PRODUCT = select(_PRODUCTS).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
_PRODUCT_PAGE = (
    select(_PRODUCTS)
    .where(_PRODUCTS.c.project_id == bindparam("project_id"))
    .order_by(_PRODUCTS.c.created_at, _PRODUCTS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_PRODUCTS_IN = select(_PRODUCTS).where(
    _PRODUCTS.c.project_id == bindparam("project_id"),
    _PRODUCTS.c.id.in_(bindparam("ids", expanding=True)),
)
_ITEMS = ProductItem.__table__
_PRODUCT_OF_ITEM = select(_ITEMS.c.product_id).where(
    _ITEMS.c.project_id == bindparam("project_id"), _ITEMS.c.id == bindparam("id")
)
_EVENTS_BY_ID = select(_EVENTS).where(_EVENTS.c.id.in_(bindparam("ids", expanding=True)))
_PRODUCT_NAME = select(_PRODUCTS.c.name).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
_LINES, _ORDERS, _USERS = OrderItem.__table__, Order.__table__, User.__table__
_SALES_TOTAL = select(func.count()).where(_LINES.c.product_id == bindparam("id"))
_SALES_PAGE = (
    select(
        _LINES.c.id,
        _ORDERS.c.order_number,
        _ORDERS.c.status.label("order_status"),
        _LINES.c.quantity,
        _LINES.c.unit_price,
        _USERS.c.id.label("user_id"),
        _USERS.c.email.label("user_email"),
        _USERS.c.first_name.label("user_first_name"),
        _USERS.c.last_name.label("user_last_name"),
        _LINES.c.created_at,
    )
    .join(_ORDERS, _LINES.c.order_id == _ORDERS.c.id)
    .join(_USERS, _ORDERS.c.user_id == _USERS.c.id)
    .where(_LINES.c.product_id == bindparam("id"))
    .order_by(_LINES.c.created_at, _LINES.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)


async def get_product_row(rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID) -> Any:
    """The project's product as a row (404 otherwise)."""
    row = await rows.first(_PRODUCT, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return joined(row)


async def products_by_id(
    rows: Rows, project_id: uuid.UUID, ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, Any]:
    found = await rows.all(_PRODUCTS_IN, project_id=project_id, ids=list(ids))
    return {product.id: product for product in found}


async def product_of_item(
    rows: Rows, project_id: uuid.UUID, item_id: uuid.UUID
) -> uuid.UUID | None:
    """The product of the project's item (a read for ``Database.read``), or None."""
    product_id: uuid.UUID | None = await rows.scalar(
        _PRODUCT_OF_ITEM, project_id=project_id, id=item_id
    )
    return product_id


async def _with_events(rows: Rows, products: list[Any]) -> list[SimpleNamespace]:
    """Products as ``ProductRead`` reads them: each with its event (or None)."""
    ids = list({row.event_id for row in products if row.event_id is not None})
    events = {event.id: event for event in await rows.all(_EVENTS_BY_ID, ids=ids)} if ids else {}
    return [joined(row, event=events.get(row.event_id)) for row in products]


async def read_product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID
) -> SimpleNamespace | None:
    """The product with its event (a read for ``Database.read``), or None."""
    row = await rows.first(_PRODUCT, project_id=project_id, id=product_id)
    return None if row is None else (await _with_events(rows, [row]))[0]


async def read_products(
    rows: Rows, project_id: uuid.UUID, paging: PageParams
) -> list[SimpleNamespace]:
    """A page of the project's products, oldest first, with their events."""
    page = await rows.all(
        _PRODUCT_PAGE, project_id=project_id, limit=paging.limit, offset=paging.offset
    )
    return await _with_events(rows, page)


async def read_sales(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, paging: PageParams
) -> SaleList | None:
    """A page of the product's order lines (oldest first) with their order's status and buyer,
    or None when the project has no such product."""
    name = await rows.scalar(_PRODUCT_NAME, project_id=project_id, id=product_id)
    if name is None:
        return None
    total = await rows.scalar(_SALES_TOTAL, id=product_id)
    page = await rows.all(_SALES_PAGE, id=product_id, limit=paging.limit, offset=paging.offset)
    return SaleList(
        sales=[SaleRead.model_validate({**row._asdict(), "product_name": name}) for row in page],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )
