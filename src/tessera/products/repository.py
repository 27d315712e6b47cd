"""Product, item and sales queries and writes: the products' rows, their locks (the rules that
take them are in ``products.rules``), issuing, redemptions, transfers, the NFT jobs' rows and the
console's product pages."""

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    String,
    Update,
    and_,
    bindparam,
    case,
    cast,
    func,
    or_,
    select,
    update,
)

from tessera.db import (
    AnySelect,
    NotIndexed,
    Rows,
    Transaction,
    UtcDay,
    lock_for_share,
    lock_for_update,
    table_of,
)
from tessera.db.issuing import issue_items
from tessera.db.related import with_related
from tessera.errors import ProductItemNotFound, ProductNotFound
from tessera.events.repository import EventRow
from tessera.models import (
    Event,
    ItemTransfer,
    Job,
    NftStatus,
    Order,
    OrderItem,
    OrderStatus,
    Product,
    ProductItem,
    Redemption,
    User,
    UserWallet,
)
from tessera.products.rows import (
    DaySold,
    EventChoice,
    HeldRow,
    HolderRow,
    Item,
    ItemKeyRow,
    ItemRow,
    NftProgress,
    OwnedItemRow,
    OwnerRow,
    ProductCounts,
    ProductEventRow,
    ProductReadRow,
    ProductRow,
    ProductView,
    Recipient,
    RedemptionRow,
    SalePage,
    SaleRow,
    TransferRow,
    event_of,
    item_of,
    owned_item,
    product_view,
)
from tessera.products.schemas import (
    ItemFilter,
    ItemList,
    ItemTransferList,
    ProductItemRead,
    ProductUpdate,
)
from tessera.schemas import PageParams, Pagination
from tessera.users.repository import get_user_row
from tessera.users.schemas import UserRef

_PRODUCTS, _EVENTS, _ITEMS = table_of(Product), table_of(Event), table_of(ProductItem)
_LINES, _ORDERS, _USERS = table_of(OrderItem), table_of(Order), table_of(User)


# Built once (see users.repository).
_PRODUCT = select(_PRODUCTS).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
_LOCK_PRODUCT = lock_for_update(_PRODUCT)
_SHARE_PRODUCT = lock_for_share(_PRODUCT)
# Products as ``ProductRead`` reads them: the columns it reads, with their events in the same
# statement for one product, and on PostgreSQL for a page (``db.related.with_related``).
_PRODUCT_READ = [_PRODUCTS.c[key] for key in ProductReadRow._fields]
_PRODUCTS_AND_EVENTS = (
    select(*_PRODUCT_READ, *(_EVENTS.c[key].label(f"event__{key}") for key in EventRow._fields))
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
_PRODUCT_OF_ITEM = select(_ITEMS.c.product_id).where(
    _ITEMS.c.project_id == bindparam("project_id"), _ITEMS.c.id == bindparam("id")
)
_EVENT_ID = attrgetter("event_id")


async def get_product_row(rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID) -> ProductRow:
    """The project's product as a row (404 otherwise)."""
    row = await rows.first(_PRODUCT, ProductRow, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return row


async def lock_product(tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID) -> ProductRow:
    """The project's product, locked until the transaction ends (404 otherwise)."""
    row = await tx.first(_LOCK_PRODUCT, ProductRow, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return row


async def share_product(
    tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID
) -> ProductRow:
    """The project's product, share-locked until the transaction ends (404 otherwise): it cannot
    change meanwhile, while others that share-lock it go on."""
    row = await tx.first(_SHARE_PRODUCT, ProductRow, project_id=project_id, id=product_id)
    if row is None:
        raise ProductNotFound
    return row


async def products_by_id(
    rows: Rows, project_id: uuid.UUID, ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, ProductRow]:
    found = await rows.all(_PRODUCTS_IN, ProductRow, project_id=project_id, ids=list(ids))
    return {product.id: product for product in found}


async def product_of_item(
    rows: Rows, project_id: uuid.UUID, item_id: uuid.UUID
) -> uuid.UUID | None:
    """The product of the project's item (a read for ``Database.read``), or None."""
    product_id: uuid.UUID | None = await rows.scalar(
        _PRODUCT_OF_ITEM, project_id=project_id, id=item_id
    )
    return product_id


async def read_product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID
) -> ProductView | None:
    """The product with its event (a read for ``Database.read``), or None."""
    row = await rows.first(
        _PRODUCT_AND_EVENT, ProductEventRow, project_id=project_id, id=product_id
    )
    if row is None:
        return None
    return product_view(row, None if row.event_id is None else event_of(row))


async def read_products(rows: Rows, project_id: uuid.UUID, paging: PageParams) -> list[ProductView]:
    """A page of the project's products, oldest first, with their events, each read once."""
    found = await with_related(
        rows,
        joined=(_PRODUCT_PAGE_AND_EVENTS, ProductEventRow),
        alone=(_PRODUCT_PAGE, ProductReadRow),
        related_in=(_EVENTS_IN, EventRow),
        key=_EVENT_ID,
        related_of=event_of,
        project_id=project_id,
        limit=paging.limit,
        offset=paging.offset,
    )
    return [product_view(product, event) for product, event in found]


_EDITABLE = (*ProductUpdate.model_fields, "nft_status")
# Every column an update may change, in one statement built once: the row is locked, so the
# columns that do not change are written back as they were read.
_UPDATE_PRODUCT = (
    update(_PRODUCTS)
    .where(_PRODUCTS.c.id == bindparam("id"))
    .values({name: bindparam(name) for name in (*_EDITABLE, "updated_at")})
    .returning(*_PRODUCTS.c)
)


async def insert_product(tx: Transaction, values: dict[str, Any]) -> ProductRow:
    """A new product of ``values`` (the other columns as their defaults), as written."""
    [product] = await tx.insert(Product, [values], ProductRow)
    return product


async def update_product(
    tx: Transaction, product: ProductRow, changed: dict[str, Any], *, now: datetime
) -> ProductRow:
    """``product`` (locked) with the ``changed`` columns written, as it now is."""
    values = {name: getattr(product, name) for name in _EDITABLE} | changed
    row = await tx.first(_UPDATE_PRODUCT, ProductRow, **values, id=product.id, updated_at=now)
    assert row is not None  # the product is locked
    return row


_PRODUCT_NAME = select(_PRODUCTS.c.name).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
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


async def read_sales(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, paging: PageParams
) -> SalePage | None:
    """A page of the product's order lines (oldest first) with their order's status and buyer,
    as ``SaleList`` reads it, or None when the project has no such product."""
    page = await rows.all(
        _SALES_PAGE,
        SaleRow,
        project_id=project_id,
        id=product_id,
        limit=paging.limit,
        offset=paging.offset,
    )
    if page:
        total = page[0].total
    else:  # no such product, no sale yet, or a page past the last sale
        if await rows.scalar(_PRODUCT_NAME, project_id=project_id, id=product_id) is None:
            return None
        total = await rows.scalar(_SALES_TOTAL, id=product_id)
    return SalePage(
        sales=page, pagination=Pagination(page=paging.page, limit=paging.limit, total=total)
    )


_LOCK_ITEM = lock_for_update(
    select(_ITEMS).where(
        _ITEMS.c.product_id == bindparam("product_id"), _ITEMS.c.id == bindparam("id")
    )
)
_ITEM = select(_ITEMS).where(_ITEMS.c.id == bindparam("id"))
# Many items locked at once, in one order: two transactions that lock some of the same wait for
# each other, never deadlock.
_LOCK_ITEMS = lock_for_update(
    select(_ITEMS).where(_ITEMS.c.id.in_(bindparam("ids", expanding=True))).order_by(_ITEMS.c.id)
)
_HELD = (
    select(_ITEMS.c.owner_id, func.count().label("held"))
    .where(
        _ITEMS.c.product_id == bindparam("product_id"),
        _ITEMS.c.owner_id.in_(bindparam("owners", expanding=True)),
    )
    .group_by(_ITEMS.c.owner_id)
)
_HIGHEST_REDEMPTION = select(func.max(_ITEMS.c.redemption_count)).where(
    _ITEMS.c.product_id == bindparam("product_id")
)


async def lock_items(tx: Transaction, ids: list[uuid.UUID]) -> dict[uuid.UUID, ItemRow]:
    """The items locked until the transaction ends, in id order (their products share-locked
    first, as for ``lock_item``), by id."""
    found = await tx.all(_LOCK_ITEMS, ItemRow, ids=sorted(set(ids)))
    return {row.id: row for row in found}


async def lock_item(tx: Transaction, product: ProductRow, item_id: uuid.UUID) -> ItemRow:
    """An item of ``product`` (already locked, or share-locked: products are always locked
    first), locked (404 otherwise)."""
    row = await tx.first(_LOCK_ITEM, ItemRow, product_id=product.id, id=item_id)
    if row is None:
        raise ProductItemNotFound
    return row


async def item_row(rows: Rows, item_id: uuid.UUID) -> ItemRow | None:
    """An item by its id, whichever its project (for the worker's jobs)."""
    return await rows.first(_ITEM, ItemRow, id=item_id)


async def issue(
    tx: Transaction,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    recipients: Sequence[Recipient],
    *,
    order_item_id: uuid.UUID | None,
    new_line: dict[str, Any] | None,
) -> tuple[ProductRow, list[Item]] | None:
    """Take an item number of the project's product for each recipient (locking the product)
    and write their items, for the order line ``order_item_id`` or ``new_line`` (written first,
    with all its columns): the product as bumped and the items; None for no such product."""
    issued = await issue_items(
        tx,
        ProductRow,
        project_id=project_id,
        product_id=product_id,
        owners=[user.id for user in recipients],
        order_item_id=order_item_id,
        new_line=new_line,
    )
    if issued is None:
        return None
    product, rows = issued
    items = [
        Item(**row, product=product, owner=user) for row, user in zip(rows, recipients, strict=True)
    ]
    return product, items


async def held_by(
    tx: Transaction, product_id: uuid.UUID, owners: Collection[uuid.UUID]
) -> dict[uuid.UUID, int]:
    """How many items of the product each of ``owners`` holds (none: absent)."""
    found = await tx.all(_HELD, HeldRow, product_id=product_id, owners=list(owners))
    return {row.owner_id: row.held for row in found}


async def highest_redemption(tx: Transaction, product_id: uuid.UUID) -> int:
    """The highest ``redemption_count`` of the product's items (0 without items)."""
    highest: int | None = await tx.scalar(_HIGHEST_REDEMPTION, product_id=product_id)
    return highest or 0


_REDEMPTIONS, _WALLETS = table_of(Redemption), table_of(UserWallet)
_REDEMPTION = select(_REDEMPTIONS).where(
    _REDEMPTIONS.c.item_id == bindparam("item_id"), _REDEMPTIONS.c.nonce == bindparam("nonce")
)
_REDEEMED = (
    update(_ITEMS)
    .where(_ITEMS.c.id == bindparam("id"))
    .values(
        redemption_count=bindparam("redemption_count"),
        redeemed_at=bindparam("redeemed_at"),
        updated_at=bindparam("updated_at"),
    )
)
_TRANSFERRED = (
    update(_ITEMS)
    .where(_ITEMS.c.id == bindparam("id"))
    .values(
        owner_id=bindparam("owner_id"),
        nft_transfer_status=bindparam("nft_transfer_status"),
        # The new holder gets a ticket of their own: the old secret and page stop working.
        ticket_version=_ITEMS.c.ticket_version + 1,
        updated_at=bindparam("now"),
    )
)
_HOLDER = select(_WALLETS.c.custody, _WALLETS.c.address).where(_WALLETS.c.id == bindparam("id"))


async def find_redemption(tx: Transaction, item_id: uuid.UUID, nonce: str) -> RedemptionRow | None:
    """The item's redemption recorded with ``nonce``, or None."""
    return await tx.first(_REDEMPTION, RedemptionRow, item_id=item_id, nonce=nonce)


async def write_redemption(tx: Transaction, item: Item) -> None:
    """The item's redemption count and times as ``item`` (locked) has them now."""
    await tx.execute(
        _REDEEMED,
        id=item.id,
        redemption_count=item.redemption_count,
        redeemed_at=item.redeemed_at,
        updated_at=item.updated_at,
    )


async def write_redemptions(tx: Transaction, items: Sequence[ItemRow]) -> None:
    """Each item's redemption count and last redemption time as ``items`` (locked) have them
    now, in one round trip."""
    await tx.update_each(
        ProductItem,
        [
            {
                "id": item.id,
                "redemption_count": item.redemption_count,
                "redeemed_at": item.redeemed_at,
                "updated_at": item.updated_at,
            }
            for item in items
        ],
    )


_REDEMPTION_MOVED = (
    update(_REDEMPTIONS)
    .where(_REDEMPTIONS.c.id == bindparam("redemption_id"))
    .values(redeemed_at=bindparam("redeemed_at"))
)


async def move_redemptions(tx: Transaction, moved: Sequence[tuple[uuid.UUID, int]]) -> None:
    """Those redemptions (id, time) happened at another time: a use that an earlier scan took
    over (``checkins.rules``)."""
    await tx.execute_many(
        _REDEMPTION_MOVED,
        [{"redemption_id": redemption_id, "redeemed_at": at} for redemption_id, at in moved],
    )


async def add_redemption(tx: Transaction, values: dict[str, Any]) -> None:
    """The record of a redemption (``redemptions``): the count and time it left the item at."""
    await tx.insert(Redemption, [values])


def stage_redemption(tx: Transaction, values: dict[str, Any]) -> None:
    """``add_redemption``, written with the transaction's other staged rows at its commit (a
    scan's, which nothing reads before then)."""
    tx.stage(Redemption, [values])


async def write_transfer(tx: Transaction, item: Item) -> None:
    """The item's owner and NFT transfer status as ``item`` (locked) has them now."""
    await tx.execute(
        _TRANSFERRED,
        id=item.id,
        owner_id=item.owner_id,
        nft_transfer_status=item.nft_transfer_status,
        now=item.updated_at,
    )


async def add_transfer(tx: Transaction, values: dict[str, Any]) -> None:
    """A transfer's record in the item's history (``item_transfers``)."""
    await tx.insert(ItemTransfer, [values])


async def nft_holder(tx: Transaction, wallet_id: uuid.UUID) -> HolderRow | None:
    """The custody and address of the user wallet an item's NFT sits in."""
    return await tx.first(_HOLDER, HolderRow, id=wallet_id)


# Items, holdings and transfers as the API lists them.
_OWNER_KEYS = ("id", "email", "first_name", "last_name")
_ITEMS_AND_OWNERS = _ITEMS.join(_USERS, _USERS.c.id == _ITEMS.c.owner_id)


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


# One item of a product, by item_id or by id, with its owner.
_ITEM_AND_OWNER = {
    field: select(_ITEMS, *(_USERS.c[key].label(f"owner_{key}") for key in _OWNER_KEYS[1:]))
    .select_from(_ITEMS_AND_OWNERS)
    .where(_ITEMS.c.product_id == bindparam("product_id"), column == bindparam("key"))
    for field, column in (("item_id", _ITEMS.c.item_id), ("id", _ITEMS.c.id))
}
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


_TRANSFERS = table_of(ItemTransfer)
_SENDERS, _RECIPIENTS = _USERS.alias("sender"), _USERS.alias("recipient")
_TRANSFER_TOTAL = select(func.count()).where(_TRANSFERS.c.item_id == bindparam("item"))
_TRANSFER_PAGE = (
    select(
        _TRANSFERS.c.id,
        _TRANSFERS.c.transferred_at,
        _TRANSFERS.c.source,
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
    found = await rows.all(page, OwnedItemRow, **filters, limit=query.limit, offset=query.offset)
    return ItemList(
        items=[ProductItemRead.of(owned_item(row, product)) for row in found],
        pagination=Pagination(page=query.page, limit=query.limit, total=count),
    )


async def read_product_item(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, key: int | uuid.UUID
) -> ProductItemRead:
    """The product's item (by ``item_id`` when ``key`` is an integer, else by ``id``) with its
    owner. 404 when the project has no such product, or the product no such item."""
    product = await get_product_row(rows, project_id, product_id)
    field = "item_id" if isinstance(key, int) else "id"
    found = await rows.first(_ITEM_AND_OWNER[field], OwnedItemRow, product_id=product_id, key=key)
    if found is None:
        raise ProductItemNotFound
    return ProductItemRead.of(owned_item(found, product))


async def read_holdings(
    rows: Rows, project_id: uuid.UUID, ref: UserRef, paging: PageParams
) -> ItemList:
    """A page of the items the user ``ref`` names owns now, of every product of the project,
    oldest first. 404 when the project has no such user."""
    user = await get_user_row(rows, project_id, ref)
    count = await rows.scalar(_HOLDINGS_TOTAL, project_id=project_id, id=user.id)
    found = await rows.all(
        _HOLDINGS_PAGE,
        ItemRow,
        project_id=project_id,
        id=user.id,
        limit=paging.limit,
        offset=paging.offset,
    )
    ids = {row.product_id for row in found}
    products = await products_by_id(rows, project_id, ids) if ids else {}
    return ItemList(
        items=[
            ProductItemRead.of(item_of(row, product=products[row.product_id], owner=user))
            for row in found
        ],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=count),
    )


async def item_of_product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, key: int | uuid.UUID
) -> uuid.UUID:
    """The id of the project's product's item named by ``item_id`` when ``key`` is an integer,
    else by ``id``; 404 when the project has no such product, or the product no such item."""
    field = "item_id" if isinstance(key, int) else "id"
    found = await rows.first(
        _ITEM_OF_PRODUCT[field], ItemKeyRow, project_id=project_id, id=product_id, key=key
    )
    if found is None:
        raise ProductNotFound
    if found.item is None:
        raise ProductItemNotFound
    return found.item


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
    item = await item_of_product(rows, project_id, product_id, key)
    count = await rows.scalar(_TRANSFER_TOTAL, item=item)
    page = await rows.all(
        _TRANSFER_PAGE, TransferRow, item=item, limit=paging.limit, offset=paging.offset
    )
    return ItemTransferList.model_validate(
        {
            "transfers": [
                {
                    "id": row.id,
                    "from_user": OwnerRow(
                        row.from_id, row.from_email, row.from_first_name, row.from_last_name
                    ),
                    "to_user": OwnerRow(
                        row.to_id, row.to_email, row.to_first_name, row.to_last_name
                    ),
                    "transferred_at": row.transferred_at,
                    "source": row.source,
                }
                for row in page
            ],
            "pagination": Pagination(page=paging.page, limit=paging.limit, total=count),
        }
    )


# The NFT jobs (``products.tasks``): their products' and items' rows, and the wallets involved.
_PRODUCT_PROJECT = select(_PRODUCTS.c.project_id).where(_PRODUCTS.c.id == bindparam("id"))
_JOBS = table_of(Job)
_JOB_ERROR = select(_JOBS.c.last_error).where(_JOBS.c.id == bindparam("id"))
_UPDATES: dict[tuple[type[Product] | type[ProductItem], tuple[str, ...]], Update] = {}


async def project_of_product(rows: Rows, product_id: uuid.UUID) -> uuid.UUID:
    """The project of a product (for the worker's jobs, which name the product alone)."""
    project_id: uuid.UUID = await rows.scalar(_PRODUCT_PROJECT, id=product_id)
    return project_id


async def job_error(rows: Rows, job_id: uuid.UUID) -> str | None:
    """The last error of the job."""
    error: str | None = await rows.scalar(_JOB_ERROR, id=job_id)
    return error


def _update(model: type[Product] | type[ProductItem], names: tuple[str, ...]) -> Update:
    """``UPDATE model SET names... WHERE id``, built once for each model and set of columns."""
    statement = _UPDATES.get((model, names))
    if statement is None:
        table = table_of(model)
        statement = _UPDATES[model, names] = (
            update(table)
            .where(table.c.id == bindparam("row_id"))
            .values({name: bindparam(name) for name in names})
        )
    return statement


async def write_columns(
    tx: Transaction,
    model: type[Product] | type[ProductItem],
    row_id: uuid.UUID,
    values: dict[str, Any],
) -> None:
    """Write ``values`` (columns by name) on the product's or item's row ``row_id``."""
    await tx.execute(_update(model, tuple(sorted(values))), row_id=row_id, **values)


_PRODUCT_TOTAL = (
    select(func.count())
    .select_from(_PRODUCTS)
    .where(_PRODUCTS.c.project_id == bindparam("project_id"))
)
_COUNTS = (
    select(
        _PRODUCTS.c.id,
        _PRODUCTS.c.issued_count.label("issued"),
        cast(
            func.coalesce(func.sum(case((_ITEMS.c.redemption_count > 0, 1), else_=0)), 0),
            BigInteger,
        ).label("redeemed"),
        cast(func.coalesce(func.sum(_ITEMS.c.redemption_count), 0), BigInteger).label(
            "redemptions"
        ),
    )
    .select_from(_PRODUCTS.outerjoin(_ITEMS, _ITEMS.c.product_id == _PRODUCTS.c.id))
    .where(
        _PRODUCTS.c.project_id == bindparam("project_id"),
        _PRODUCTS.c.id.in_(bindparam("ids", expanding=True)),
    )
    .group_by(_PRODUCTS.c.id, _PRODUCTS.c.issued_count)
)


def _items_where(condition: ColumnElement[bool]) -> ColumnElement[int]:
    """How many of the product's items meet ``condition`` (0 for none)."""
    return cast(func.coalesce(func.sum(case((condition, 1), else_=0)), 0), BigInteger)


_FUNDS = bindparam("funds", type_=String())  # a LIKE pattern: the reasons to wait for funds
_MINT_WAITS = and_(_ITEMS.c.nft_status == NftStatus.QUEUED, _ITEMS.c.nft_reason.like(_FUNDS))
_TRANSFER_WAITS = and_(
    _ITEMS.c.nft_transfer_status == NftStatus.QUEUED, _ITEMS.c.nft_transfer_reason.like(_FUNDS)
)
# One row however many items: the mints by status, the transfers on chain, and one reason of
# each kind to wait for funds (the greatest, so the same one at each look).
_NFT_PROGRESS = select(
    *(
        _items_where(_ITEMS.c.nft_status == status).label(status.value)
        for status in (
            NftStatus.MINTED,
            NftStatus.SUBMITTED,
            NftStatus.QUEUED,
            NftStatus.FAILED,
            NftStatus.EXTERNAL,
        )
    ),
    _items_where(_MINT_WAITS).label("mints_waiting_for_funds"),
    func.max(case((_MINT_WAITS, _ITEMS.c.nft_reason))).label("mint_funds_reason"),
    _items_where(_ITEMS.c.nft_transfer_status == NftStatus.SUBMITTED).label("transfers_submitted"),
    _items_where(_ITEMS.c.nft_transfer_status == NftStatus.QUEUED).label("transfers_queued"),
    _items_where(_TRANSFER_WAITS).label("transfers_waiting_for_funds"),
    func.max(case((_TRANSFER_WAITS, _ITEMS.c.nft_transfer_reason))).label("transfer_funds_reason"),
).where(
    _ITEMS.c.project_id == bindparam("project_id"),
    _ITEMS.c.product_id == bindparam("product_id"),
)
_EVENT_CHOICES = (
    select(_EVENTS.c.id, _EVENTS.c.name)
    .where(_EVENTS.c.project_id == bindparam("project_id"))
    .order_by(_EVENTS.c.created_at, _EVENTS.c.id)
)
_DAY = UtcDay(_LINES.c.created_at)
# The quantities of the order lines of completed and pending orders, per day, latest first.
_SOLD_PER_DAY = (
    select(_DAY.label("day"), cast(func.sum(_LINES.c.quantity), BigInteger).label("quantity"))
    .select_from(_LINES.join(_ORDERS, _ORDERS.c.id == _LINES.c.order_id))
    .where(
        _ORDERS.c.project_id == bindparam("project_id"),
        _LINES.c.product_id == bindparam("product_id"),
        or_(_ORDERS.c.status == OrderStatus.COMPLETED, _ORDERS.c.status == OrderStatus.PENDING),
    )
    .group_by(_DAY)
    .order_by(_DAY.desc())
    .limit(bindparam("days"))
)


async def count_products(rows: Rows, project_id: uuid.UUID) -> int:
    return int(await rows.scalar(_PRODUCT_TOTAL, project_id=project_id) or 0)


async def read_counts(
    rows: Rows, project_id: uuid.UUID, ids: list[uuid.UUID]
) -> dict[uuid.UUID, ProductCounts]:
    """The items issued and redeemed, and the redemptions, of the project's products ``ids``."""
    if not ids:
        return {}
    found = await rows.all(_COUNTS, ProductCounts, project_id=project_id, ids=ids)
    return {row.id: row for row in found}


async def nft_progress(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, *, funds_reason: str
) -> NftProgress:
    """Where the product's items' NFTs stand; a queued mint or transfer waits for funds when
    its reason starts with ``funds_reason``."""
    progress = await rows.first(
        _NFT_PROGRESS,
        NftProgress,
        project_id=project_id,
        product_id=product_id,
        funds=funds_reason + "%",
    )
    assert progress is not None  # an aggregate without GROUP BY: one row
    return progress


async def event_choices(rows: Rows, project_id: uuid.UUID) -> list[EventChoice]:
    """The project's events, oldest first, to choose a product's event from."""
    return await rows.all(_EVENT_CHOICES, EventChoice, project_id=project_id)


async def sold_per_day(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, *, days: int
) -> list[DaySold]:
    """The quantities of the product sold per day (completed and pending orders), for the
    latest ``days`` days with a sale, latest first."""
    return await rows.all(
        _SOLD_PER_DAY, DaySold, project_id=project_id, product_id=product_id, days=days
    )
