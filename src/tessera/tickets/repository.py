"""Ticket statements: an item as its ticket needs it, found by the product's key or by its id
(the item a secret or page token names), and its version counted up."""

import uuid
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import and_, bindparam, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.errors import ProductItemNotFound, ProductNotFound
from tessera.models import Product, ProductItem

_ITEMS, _PRODUCTS = table_of(ProductItem), table_of(Product)


class TicketItem(NamedTuple):
    """An item as its ticket needs it."""

    id: uuid.UUID
    item_id: int
    ticket_version: int
    project_id: uuid.UUID
    product_id: uuid.UUID
    owner_id: uuid.UUID


class ProductOfKey(NamedTuple):
    product: uuid.UUID
    item: uuid.UUID | None


_COLUMNS = (
    _ITEMS.c.id,
    _ITEMS.c.item_id,
    _ITEMS.c.ticket_version,
    _ITEMS.c.project_id,
    _ITEMS.c.product_id,
    _ITEMS.c.owner_id,
)
_BY_ID = select(*_COLUMNS).where(_ITEMS.c.id == bindparam("id"))
# The product, and its item of that key (None when it has none): a 404 says which is missing.
_BY_KEY = {
    field: select(_PRODUCTS.c.id.label("product"), _ITEMS.c.id.label("item"))
    .select_from(
        _PRODUCTS.outerjoin(
            _ITEMS, and_(_ITEMS.c.product_id == _PRODUCTS.c.id, column == bindparam("key"))
        )
    )
    .where(_PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id"))
    for field, column in (("item_id", _ITEMS.c.item_id), ("id", _ITEMS.c.id))
}
_NEXT_VERSION = (
    update(_ITEMS)
    .where(_ITEMS.c.id == bindparam("id"))
    .values(ticket_version=_ITEMS.c.ticket_version + 1, updated_at=bindparam("now"))
)


async def ticket_item(rows: Rows, item_id: uuid.UUID) -> TicketItem | None:
    """The item of that id (any project's: the caller checks whose it is)."""
    return await rows.first(_BY_ID, TicketItem, id=item_id)


async def ticket_item_of_product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, key: int | uuid.UUID
) -> TicketItem:
    """The project's product's item by its number or its id (404 for either missing)."""
    field = "item_id" if isinstance(key, int) else "id"
    found = await rows.first(
        _BY_KEY[field], ProductOfKey, project_id=project_id, id=product_id, key=key
    )
    if found is None:
        raise ProductNotFound
    if found.item is None:
        raise ProductItemNotFound
    item = await ticket_item(rows, found.item)
    assert item is not None  # just found
    return item


async def next_version(tx: Transaction, item_id: uuid.UUID, now: datetime) -> None:
    """The item's ticket counts up: its earlier secret and page stop working."""
    await tx.execute(_NEXT_VERSION, id=item_id, now=now)
