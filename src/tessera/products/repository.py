"""Product and sales queries and writes: the products' rows and their locks (the rules that take
them are in ``products.rules``), the NFT jobs' rows and the console's product pages. The items'
are in ``item_repository``."""

import uuid
from collections.abc import Collection
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
from tessera.db.related import with_related
from tessera.errors import ProductNotFound
from tessera.events.repository import EventRow
from tessera.models import (
    Event,
    Job,
    NftStatus,
    Order,
    OrderItem,
    OrderStatus,
    Product,
    ProductItem,
    User,
)
from tessera.products.rows import (
    DaySold,
    EventChoice,
    NftProgress,
    ProductCounts,
    ProductEventRow,
    ProductReadRow,
    ProductRow,
    ProductView,
    SalePage,
    SaleRow,
    event_of,
    product_view,
)
from tessera.products.schemas import (
    ProductUpdate,
)
from tessera.schemas import PageParams, Pagination

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
