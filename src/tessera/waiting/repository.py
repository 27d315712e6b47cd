"""Waiting list entries, their offers' claim links and the stock kept for them: the rows and
statements (built once, see users.repository)."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, case, func, or_, select, update

from tessera.db import Joined, Rows, Transaction, lock_for_update, table_of
from tessera.models import ClaimLink, EntryStatus, Product, WaitingEntry
from tessera.models.waiting import IN_LINE
from tessera.schemas import PageParams

_ENTRIES, _PRODUCTS, _LINKS = table_of(WaitingEntry), table_of(Product), table_of(ClaimLink)


class EntryRow(NamedTuple):
    """An entry's whole row (``waiting_list_entries``)."""

    project_id: uuid.UUID
    product_id: uuid.UUID
    email: str
    first_name: str | None
    quantity: int
    status: EntryStatus
    base_url: str
    link_id: uuid.UUID | None
    offered_at: int | None
    offer_expires_at: int | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class Place(NamedTuple):
    position: int | None  # None out of line


class PlacedEntry(NamedTuple):
    """An entry and its place in line: ``_RANKED``'s rows, read by ``PLACED``."""

    row: EntryRow
    place: Place


PLACED = Joined(PlacedEntry)


class WaitedProduct(NamedTuple):
    """What the waiting list needs of a product."""

    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    event_id: uuid.UUID | None
    seat_category: str | None
    active: bool
    stock: int | None
    issued_count: int
    waiting_list_offer_seconds: int | None
    waiting_list_kept: int


class Due(NamedTuple):
    project_id: uuid.UUID
    product_id: uuid.UUID


_IN_LINE = _ENTRIES.c.status.in_(IN_LINE)
_ORDER = (_ENTRIES.c.created_at, _ENTRIES.c.id)
_OF_PRODUCT = and_(
    _ENTRIES.c.project_id == bindparam("project_id"),
    _ENTRIES.c.product_id == bindparam("product_id"),
)
_PRODUCT = select(*(_PRODUCTS.c[name] for name in WaitedProduct._fields)).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("product_id")
)
_LOCK_PRODUCT = lock_for_update(_PRODUCT)
_KEEP = (
    update(_PRODUCTS)
    .where(_PRODUCTS.c.id == bindparam("product_id"))
    .values(
        waiting_list_kept=_PRODUCTS.c.waiting_list_kept + bindparam("change"),
        updated_at=_PRODUCTS.c.updated_at,  # a counter, not a change of the product
    )
)
# Every entry of a product with its place in line: the entries in line before it, and itself.
_RANKED = (
    select(
        _ENTRIES,
        case(
            (
                _IN_LINE,
                func.sum(case((_IN_LINE, 1), else_=0)).over(order_by=_ORDER),
            ),
            else_=None,
        ).label("place__position"),
    )
    .where(_OF_PRODUCT)
    .subquery()
)
_RANKED_ORDER = (_RANKED.c.created_at, _RANKED.c.id)
_PLACED = select(_RANKED).where(_RANKED.c.id == bindparam("id"))
_PAGE = (
    select(_RANKED).order_by(*_RANKED_ORDER).limit(bindparam("limit")).offset(bindparam("offset"))
)
_PAGE_OF_STATUS = (
    select(_RANKED)
    .where(_RANKED.c.status == bindparam("status"))
    .order_by(*_RANKED_ORDER)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_TOTAL = select(func.count()).select_from(_ENTRIES).where(_OF_PRODUCT)
_BY_STATUS = (
    select(_ENTRIES.c.status, func.count().label("entries"))
    .where(_OF_PRODUCT)
    .group_by(_ENTRIES.c.status)
)
_TOTAL_OF_STATUS = _TOTAL.where(_ENTRIES.c.status == bindparam("status"))
_ENTRY = select(_ENTRIES).where(_OF_PRODUCT, _ENTRIES.c.id == bindparam("id"))
_LOCK_ENTRY = lock_for_update(_ENTRY)
# The first waiting entries that ``free`` items could serve, in line.
_SERVABLE = lock_for_update(
    select(_ENTRIES)
    .where(
        _OF_PRODUCT,
        _ENTRIES.c.status == EntryStatus.WAITING,
        _ENTRIES.c.quantity <= bindparam("free"),
    )
    .order_by(*_ORDER)
    .limit(bindparam("free"))
)
_LAPSED = lock_for_update(
    select(_ENTRIES)
    .where(
        _OF_PRODUCT,
        _ENTRIES.c.status == EntryStatus.OFFERED,
        _ENTRIES.c.offer_expires_at <= bindparam("now"),
    )
    .order_by(*_ORDER)
)
_WAITING = select(_ENTRIES.c.id).where(
    _ENTRIES.c.product_id == bindparam("product_id"), _ENTRIES.c.status == EntryStatus.WAITING
)
_OF_LINK = select(_ENTRIES).where(_ENTRIES.c.link_id == bindparam("link_id"))
_LOCK_OF_LINK = lock_for_update(_OF_LINK)
_SET = (
    update(_ENTRIES)
    .where(_ENTRIES.c.id == bindparam("row_id"))
    .values(
        status=bindparam("status"),
        link_id=bindparam("link_id"),
        offered_at=bindparam("offered_at"),
        offer_expires_at=bindparam("offer_expires_at"),
        updated_at=bindparam("now"),
    )
    .returning(*_ENTRIES.c)
)
_LOCK_LINK = lock_for_update(select(_LINKS.c.id).where(_LINKS.c.id == bindparam("id")))
_REVOKE = (
    update(_LINKS)
    .where(_LINKS.c.id == bindparam("id"))
    .values(revoked_at=bindparam("now"), updated_at=bindparam("now"))
    .returning(_LINKS.c.hold_id)
)
# Products whose line may move without a request: an offer has lapsed, or a seated product's
# seats may have come back as a hold expired.
_DUE = (
    select(_ENTRIES.c.project_id, _ENTRIES.c.product_id)
    .distinct()
    .join(_PRODUCTS, _PRODUCTS.c.id == _ENTRIES.c.product_id)
    .where(
        or_(
            and_(
                _ENTRIES.c.status == EntryStatus.OFFERED,
                _ENTRIES.c.offer_expires_at <= bindparam("now"),
            ),
            and_(_ENTRIES.c.status == EntryStatus.WAITING, _PRODUCTS.c.seat_category.is_not(None)),
        )
    )
    .limit(bindparam("limit"))
)


async def product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, *, lock: bool = False
) -> WaitedProduct | None:
    """The project's product (locked until the transaction ends, with ``lock``), or None."""
    statement = _LOCK_PRODUCT if lock else _PRODUCT
    return await rows.first(statement, WaitedProduct, project_id=project_id, product_id=product_id)


async def keep(tx: Transaction, product_id: uuid.UUID, change: int) -> None:
    """Raise (or lower) the stock kept for the product's open offers by ``change``."""
    if change:
        await tx.execute(_KEEP, product_id=product_id, change=change)


async def add_entry(tx: Transaction, values: dict[str, Any]) -> EntryRow:
    """Write the entry; a live entry of the same email and product raises IntegrityError."""
    [written] = await tx.insert(WaitingEntry, [values], EntryRow)
    return written


async def placed(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, entry_id: uuid.UUID
) -> PlacedEntry | None:
    """The entry with its place in line, or None."""
    return await rows.first(
        _PLACED, PLACED, project_id=project_id, product_id=product_id, id=entry_id
    )


async def page(
    rows: Rows,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    paging: PageParams,
    status: EntryStatus | None,
) -> tuple[list[PlacedEntry], int]:
    """A page of the product's entries in line order, with their places, and their total."""
    keys: dict[str, Any] = {"project_id": project_id, "product_id": product_id}
    if status is not None:
        keys["status"] = status
    total = await rows.scalar(_TOTAL if status is None else _TOTAL_OF_STATUS, **keys)
    found = await rows.all(
        _PAGE if status is None else _PAGE_OF_STATUS,
        PLACED,
        **keys,
        limit=paging.limit,
        offset=paging.offset,
    )
    return found, int(total)


class StatusCount(NamedTuple):
    status: EntryStatus
    entries: int


async def counts(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID
) -> dict[EntryStatus, int]:
    """How many of the product's entries are in each status (absent: none)."""
    found = await rows.all(_BY_STATUS, StatusCount, project_id=project_id, product_id=product_id)
    return {row.status: row.entries for row in found}


async def entry(
    rows: Rows,
    project_id: uuid.UUID,
    product_id: uuid.UUID,
    entry_id: uuid.UUID,
    *,
    lock: bool = False,
) -> EntryRow | None:
    """The product's entry (locked until the transaction ends, with ``lock``), or None."""
    return await rows.first(
        _LOCK_ENTRY if lock else _ENTRY,
        EntryRow,
        project_id=project_id,
        product_id=product_id,
        id=entry_id,
    )


async def servable(
    tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID, free: int
) -> list[EntryRow]:
    """The first waiting entries of at most ``free`` tickets each, at most ``free`` of them
    (each takes one at least), in line and locked."""
    return await tx.all(
        _SERVABLE, EntryRow, project_id=project_id, product_id=product_id, free=free
    )


async def lapsed(
    tx: Transaction, project_id: uuid.UUID, product_id: uuid.UUID, now: int
) -> list[EntryRow]:
    """The product's offers open until ``now`` or before, unclaimed, locked."""
    return await tx.all(_LAPSED, EntryRow, project_id=project_id, product_id=product_id, now=now)


async def anyone_waiting(rows: Rows, product_id: uuid.UUID) -> bool:
    return await rows.scalar(_WAITING.limit(1), product_id=product_id) is not None


async def entry_of_link(tx: Transaction, link_id: uuid.UUID, *, lock: bool) -> EntryRow | None:
    """The entry a claim link offers stock to (locked, with ``lock``), or None for a link of
    no offer."""
    return await tx.first(_LOCK_OF_LINK if lock else _OF_LINK, EntryRow, link_id=link_id)


async def set_entry(tx: Transaction, entry: EntryRow, now: datetime, **values: Any) -> EntryRow:
    """The entry with ``values`` (of ``status``, ``link_id`` and the offer's times) written."""
    current = {
        "status": entry.status,
        "link_id": entry.link_id,
        "offered_at": entry.offered_at,
        "offer_expires_at": entry.offer_expires_at,
    }
    written = await tx.first(_SET, EntryRow, row_id=entry.id, now=now, **(current | values))
    assert written is not None  # the entry is locked
    return written


async def add_link(tx: Transaction, link: dict[str, Any]) -> None:
    """Write an offer's claim link (with its ``id``)."""
    await tx.insert(ClaimLink, [link])


class RevokedLink(NamedTuple):
    hold_id: uuid.UUID | None


async def lock_link(tx: Transaction, link_id: uuid.UUID) -> None:
    """Lock an offer's claim link (a claim through it locks it first, docs/design.md)."""
    await tx.scalar(_LOCK_LINK, id=link_id)


async def revoke_link(tx: Transaction, link_id: uuid.UUID, now: datetime) -> RevokedLink:
    """Revoke an offer's claim link: what it kept seats with."""
    revoked = await tx.first(_REVOKE, RevokedLink, id=link_id, now=now)
    assert revoked is not None  # an entry's link stays
    return revoked


async def due(rows: Rows, now: int, limit: int) -> list[Due]:
    """Products (at most ``limit``) whose line may move without a request."""
    return await rows.all(_DUE, Due, now=now, limit=limit)
