"""Item queries and writes: their rows and locks (the rules that take them are in
``products.rules``), issuing, redemptions, transfers, and the items as the API lists them."""

import uuid
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import (
    and_,
    bindparam,
    func,
    select,
    update,
)

from tessera.db import (
    AnySelect,
    Rows,
    Transaction,
    lock_for_update,
    table_of,
)
from tessera.db.issuing import issue_items
from tessera.errors import ProductItemNotFound, ProductNotFound
from tessera.models import (
    Event,
    ItemTransfer,
    Order,
    OrderItem,
    Product,
    ProductItem,
    Redemption,
    User,
    UserWallet,
)
from tessera.products.item_schemas import ItemFilter, ItemList, ItemTransferList, ProductItemRead
from tessera.products.repository import get_product_row, products_by_id
from tessera.products.rows import (
    OWNED_ITEM,
    HeldRow,
    HolderRow,
    Item,
    ItemKeyRow,
    ItemRow,
    OwnerRow,
    ProductRow,
    Recipient,
    RedemptionRow,
    TransferRow,
    owned_item,
)
from tessera.schemas import PageParams, Pagination
from tessera.users.repository import get_user_row
from tessera.users.schemas import UserRef

_PRODUCTS, _EVENTS, _ITEMS = table_of(Product), table_of(Event), table_of(ProductItem)
_LINES, _ORDERS, _USERS = table_of(OrderItem), table_of(Order), table_of(User)


# Built once (see users.repository).
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
        Item(ItemRow(**row), product, user) for row, user in zip(rows, recipients, strict=True)
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


async def write_redemption(tx: Transaction, item: ItemRow) -> None:
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


async def write_transfer(tx: Transaction, item: ItemRow) -> None:
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
        select(_ITEMS, *(_USERS.c[key].label(f"owner__{key}") for key in _OWNER_KEYS[1:]))
        .select_from(_ITEMS_AND_OWNERS)
        .where(*criteria)
        .order_by(_ITEMS.c.item_id)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return total, page


# One item of a product, by item_id or by id, with its owner.
_ITEM_AND_OWNER = {
    field: select(_ITEMS, *(_USERS.c[key].label(f"owner__{key}") for key in _OWNER_KEYS[1:]))
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
    found = await rows.all(page, OWNED_ITEM, **filters, limit=query.limit, offset=query.offset)
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
    found = await rows.first(_ITEM_AND_OWNER[field], OWNED_ITEM, product_id=product_id, key=key)
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
            ProductItemRead.of(Item(row, product=products[row.product_id], owner=user))
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
