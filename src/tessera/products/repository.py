"""Product, item and sales queries (the locks are in ``products.rules``)."""

import uuid
from collections.abc import Collection, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import and_, bindparam, func, select

from tessera.db import AnySelect, NotIndexed, Row, Rows, attach, joined, part
from tessera.errors import ProductItemNotFound, ProductNotFound
from tessera.models import Event, ItemTransfer, Order, OrderItem, Product, ProductItem, User
from tessera.products.schemas import (
    ItemFilter,
    ItemList,
    ItemTransferList,
    ProductItemRead,
    ProductRead,
)
from tessera.schemas import PageParams, Pagination
from tessera.users.repository import get_user_row
from tessera.users.schemas import UserRef

_PRODUCTS, _EVENTS = Product.__table__, Event.__table__
# Built once (see users.repository).
_PRODUCT = select(_PRODUCTS).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
# Products as ``ProductRead`` reads them: the columns it reads, with their events (the event's
# columns as ``event__<key>``) in the same statement for one product, and on PostgreSQL for a
# page, where reading the page's events apart would cost a second round trip. On SQLite, where a
# statement costs none, a page reads its events apart, each once: its rows then carry 21
# columns instead of 32, mostly repeated or empty.
_PRODUCT_READ = [c for c in _PRODUCTS.c if c.key in ProductRead.model_fields]
_EVENT_KEYS = tuple(_EVENTS.c.keys())
_PRODUCTS_AND_EVENTS = (
    select(*_PRODUCT_READ, *(_EVENTS.c[key].label(f"event__{key}") for key in _EVENT_KEYS))
    .outerjoin(_EVENTS, _EVENTS.c.id == _PRODUCTS.c.event_id)
    .where(_PRODUCTS.c.project_id == bindparam("project_id"))
)
_PRODUCT_AND_EVENT = _PRODUCTS_AND_EVENTS.where(_PRODUCTS.c.id == bindparam("id"))


def _page(statement: AnySelect) -> AnySelect:
    return (
        statement.order_by(_PRODUCTS.c.created_at, _PRODUCTS.c.id)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )


_PRODUCT_PAGE_AND_EVENTS = _page(_PRODUCTS_AND_EVENTS)
_PRODUCT_PAGE = _page(
    select(*_PRODUCT_READ).where(_PRODUCTS.c.project_id == bindparam("project_id"))
)
# By their ids, through the primary key (``NotIndexed``: not the project's index).
_EVENTS_IN = select(_EVENTS).where(
    NotIndexed(_EVENTS.c.project_id) == bindparam("project_id"),
    _EVENTS.c.id.in_(bindparam("ids", expanding=True)),
)
_PRODUCTS_IN = select(_PRODUCTS).where(
    NotIndexed(_PRODUCTS.c.project_id) == bindparam("project_id"),
    _PRODUCTS.c.id.in_(bindparam("ids", expanding=True)),
)
_ITEMS = ProductItem.__table__
_PRODUCT_OF_ITEM = select(_ITEMS.c.product_id).where(
    _ITEMS.c.project_id == bindparam("project_id"), _ITEMS.c.id == bindparam("id")
)
_PRODUCT_NAME = select(_PRODUCTS.c.name).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
_LINES, _ORDERS, _USERS = OrderItem.__table__, Order.__table__, User.__table__
_SALES_TOTAL = select(func.count()).where(_LINES.c.product_id == bindparam("id"))
# A page of the product's sales with its name, and on each line the number of sales (a scalar
# subquery, counted once: one round trip, one snapshot); the product of another project has none.
# (The number as ``count() OVER ()`` made the page join every sale: twice as slow.)
_SALES_PAGE = (
    select(
        _SALES_TOTAL.scalar_subquery().label("total"),
        _LINES.c.id,
        _ORDERS.c.order_number,
        _ORDERS.c.status.label("order_status"),
        _PRODUCTS.c.name.label("product_name"),
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
    .join(_PRODUCTS, _PRODUCTS.c.id == _LINES.c.product_id)
    .where(
        _LINES.c.product_id == bindparam("id"),
        _PRODUCTS.c.project_id == bindparam("project_id"),
    )
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


def _with_events(page: Sequence[Any]) -> list[Any]:
    """Products read with their events (``_PRODUCTS_AND_EVENTS``) as ``ProductRead`` reads
    them: each with its event (or None), one row however many products share it."""
    events: dict[uuid.UUID, Any] = {}
    for row in page:
        if row.event__id is not None and row.event__id not in events:
            events[row.event__id] = part(row, "event__", _EVENT_KEYS)
    return [attach(row, event=events.get(row.event__id)) for row in page]


async def read_product(rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID) -> Any | None:
    """The product with its event (a read for ``Database.read``), or None."""
    row = await rows.first(_PRODUCT_AND_EVENT, project_id=project_id, id=product_id)
    return None if row is None else _with_events([row])[0]


async def read_products(rows: Rows, project_id: uuid.UUID, paging: PageParams) -> list[Row]:
    """A page of the project's products, oldest first, with their events (see
    ``_PRODUCT_READ``)."""
    page_of = {"project_id": project_id, "limit": paging.limit, "offset": paging.offset}
    if rows.on_postgresql:
        return _with_events(await rows.all(_PRODUCT_PAGE_AND_EVENTS, **page_of))
    page = await rows.all(_PRODUCT_PAGE, **page_of)
    ids = list({product.event_id for product in page if product.event_id is not None})
    found = await rows.all(_EVENTS_IN, project_id=project_id, ids=ids) if ids else []
    events = {event.id: event for event in found}
    return [attach(product, event=events.get(product.event_id)) for product in page]


async def read_sales(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, paging: PageParams
) -> Row | None:
    """A page of the product's order lines (oldest first) with their order's status and buyer,
    as ``SaleList`` reads it, or None when the project has no such product."""
    page = await rows.all(
        _SALES_PAGE, project_id=project_id, id=product_id, limit=paging.limit, offset=paging.offset
    )
    if page:
        total = page[0].total
    else:  # no such product, no sale yet, or a page past the last sale
        if await rows.scalar(_PRODUCT_NAME, project_id=project_id, id=product_id) is None:
            return None
        total = await rows.scalar(_SALES_TOTAL, id=product_id)
    return SimpleNamespace(
        sales=page, pagination=Pagination(page=paging.page, limit=paging.limit, total=total)
    )


# Items, holdings and transfers: each item with its owner as ``ItemOwner`` reads it.
_TRANSFERS = ItemTransfer.__table__
_OWNER_KEYS = ("id", "email", "first_name", "last_name")
_ITEMS_AND_OWNERS = _ITEMS.join(_USERS, _USERS.c.id == _ITEMS.c.owner_id)


def _owner(row: Any, prefix: str) -> dict[str, Any]:
    """The ``ItemOwner`` fields of a row that selected them under ``prefix``."""
    return vars(part(row, prefix, _OWNER_KEYS))


def _items_of_product(by_owner_id: bool, by_owner_email: bool) -> tuple[AnySelect, AnySelect]:
    """The total and a page (by ``item_id``, with owners) of a product's items, narrowed to
    the owner with the given id and/or email."""
    criteria = [_ITEMS.c.product_id == bindparam("product_id")]
    if by_owner_id:
        criteria.append(_ITEMS.c.owner_id == bindparam("owner_id"))
    if by_owner_email:
        criteria.append(_USERS.c.email == bindparam("owner_email"))
    counted = _ITEMS_AND_OWNERS if by_owner_email else _ITEMS
    total = select(func.count()).select_from(counted).where(*criteria)
    page = (
        select(_ITEMS, *(_USERS.c[key].label(f"owner_{key}") for key in _OWNER_KEYS[1:]))
        .select_from(_ITEMS_AND_OWNERS)
        .where(*criteria)
        .order_by(_ITEMS.c.item_id)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return total, page


# Built once per combination of filters (see users.repository).
_PRODUCT_ITEMS = {
    (by_id, by_email): _items_of_product(by_id, by_email)
    for by_id in (False, True)
    for by_email in (False, True)
}
_HELD_BY = (_ITEMS.c.project_id == bindparam("project_id"), _ITEMS.c.owner_id == bindparam("id"))
_HOLDINGS_TOTAL = select(func.count()).where(*_HELD_BY)
_HOLDINGS_PAGE = (
    select(_ITEMS)
    .where(*_HELD_BY)
    .order_by(_ITEMS.c.created_at, _ITEMS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
# The product, and its item by sequential item_id or by id: no row, no product; no item id, no
# such item in it.
_ITEM_OF_PRODUCT = {
    field: select(_PRODUCTS.c.id, _ITEMS.c.id.label("item"))
    .select_from(
        _PRODUCTS.outerjoin(
            _ITEMS, and_(_ITEMS.c.product_id == _PRODUCTS.c.id, column == bindparam("key"))
        )
    )
    .where(_PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id"))
    for field, column in (("item_id", _ITEMS.c.item_id), ("id", _ITEMS.c.id))
}
_SENDERS, _RECIPIENTS = _USERS.alias("sender"), _USERS.alias("recipient")
_TRANSFER_TOTAL = select(func.count()).where(_TRANSFERS.c.item_id == bindparam("item"))
_TRANSFER_PAGE = (
    select(
        _TRANSFERS.c.id,
        _TRANSFERS.c.transferred_at,
        *(_SENDERS.c[key].label(f"from_{key}") for key in _OWNER_KEYS),
        *(_RECIPIENTS.c[key].label(f"to_{key}") for key in _OWNER_KEYS),
    )
    .select_from(
        _TRANSFERS.join(_SENDERS, _SENDERS.c.id == _TRANSFERS.c.from_user_id).join(
            _RECIPIENTS, _RECIPIENTS.c.id == _TRANSFERS.c.to_user_id
        )
    )
    .where(_TRANSFERS.c.item_id == bindparam("item"))
    .order_by(_TRANSFERS.c.created_at, _TRANSFERS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)


async def read_product_items(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, query: ItemFilter
) -> ItemList:
    """A page of the product's items by ``item_id``, with their owners; with ``owner_id`` and/or
    ``owner_email`` only the items of that owner (both given, both must name it). 404 when the
    project has no such product."""
    product = await get_product_row(rows, project_id, product_id)
    total, page = _PRODUCT_ITEMS[query.owner_id is not None, query.owner_email is not None]
    filters = {
        "product_id": product_id,
        "owner_id": query.owner_id,
        "owner_email": query.owner_email,
    }
    count = await rows.scalar(total, **filters)
    found = await rows.all(page, **filters, limit=query.limit, offset=query.offset)
    return ItemList(
        items=[
            ProductItemRead.of(attach(row, product=product, owner=_owner(row, "owner_")))
            for row in found
        ],
        pagination=Pagination(page=query.page, limit=query.limit, total=count),
    )


async def read_holdings(
    rows: Rows, project_id: uuid.UUID, ref: UserRef, paging: PageParams
) -> ItemList:
    """A page of the items the user ``ref`` names owns now, of every product of the project,
    oldest first. 404 when the project has no such user."""
    user = await get_user_row(rows, project_id, ref)
    count = await rows.scalar(_HOLDINGS_TOTAL, project_id=project_id, id=user.id)
    found = await rows.all(
        _HOLDINGS_PAGE, project_id=project_id, id=user.id, limit=paging.limit, offset=paging.offset
    )
    ids = {row.product_id for row in found}
    products = await products_by_id(rows, project_id, ids) if ids else {}
    return ItemList(
        items=[
            ProductItemRead.of(attach(row, product=products[row.product_id], owner=user))
            for row in found
        ],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=count),
    )


async def read_item_transfers(
    rows: Rows,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    key: int | uuid.UUID,
    paging: PageParams,
) -> ItemTransferList:
    """A page of the transfers of the product's item (named by ``item_id`` when ``key`` is an
    integer, else by ``id``), oldest first. 404 when the project has no such product, or the
    product no such item."""
    field = "item_id" if isinstance(key, int) else "id"
    found = await rows.first(_ITEM_OF_PRODUCT[field], project_id=project_id, id=product_id, key=key)
    if found is None:
        raise ProductNotFound
    if found.item is None:
        raise ProductItemNotFound
    count = await rows.scalar(_TRANSFER_TOTAL, item=found.item)
    page = await rows.all(_TRANSFER_PAGE, item=found.item, limit=paging.limit, offset=paging.offset)
    return ItemTransferList.model_validate(
        {
            "transfers": [
                {
                    "id": row.id,
                    "from_user": _owner(row, "from_"),
                    "to_user": _owner(row, "to_"),
                    "transferred_at": row.transferred_at,
                }
                for row in page
            ],
            "pagination": Pagination(page=paging.page, limit=paging.limit, total=count),
        }
    )
