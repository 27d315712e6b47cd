"""Seats and holds: their rows, the statements that read and lock them, and their writes. The
rules that decide on them are in ``seats.rules``; the locks are taken in the order docs/design.md
gives (a hold's row before its seats, seats in id order)."""

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, false, func, or_, select, tuple_, update

from tessera.db import Rows, Transaction, lock_for_update, table_of
from tessera.models import (
    EntryStatus,
    HoldStatus,
    Product,
    ProductItem,
    Seat,
    SeatHold,
    WaitingEntry,
)

_SEATS, _HOLDS = table_of(Seat), table_of(SeatHold)
_PRODUCTS, _ITEMS = table_of(Product), table_of(ProductItem)
_IN_CHUNKS = 5_000  # ids in one statement (SQLite takes at most 32,766 parameters)


class SeatRow(NamedTuple):
    """A seat's whole row (``seats``)."""

    project_id: uuid.UUID
    event_id: uuid.UUID
    area: str
    row: str
    number: str
    category: str | None
    x: float | None
    y: float | None
    area_position: int
    row_position: int
    seat_position: int
    blocked: bool
    hold_id: uuid.UUID | None
    held_until: int | None
    item_id: uuid.UUID | None
    id: uuid.UUID


class HoldRow(NamedTuple):
    """A hold's whole row (``seat_holds``)."""

    project_id: uuid.UUID
    product_id: uuid.UUID
    event_id: uuid.UUID
    status: HoldStatus
    expires_at: int
    order_item_id: uuid.UUID | None
    created_at: datetime
    id: uuid.UUID


class SeatedProduct(NamedTuple):
    """What the seats need of a product."""

    id: uuid.UUID
    name: str
    event_id: uuid.UUID | None
    seat_category: str | None
    active: bool
    stock: int | None
    issued_count: int


_PLACE = (_SEATS.c.area_position, _SEATS.c.row_position, _SEATS.c.seat_position)
_EVENT_SEATS = (
    select(_SEATS)
    .where(
        _SEATS.c.project_id == bindparam("project_id"), _SEATS.c.event_id == bindparam("event_id")
    )
    .order_by(*_PLACE)
)
_CATEGORY_SEATS = _EVENT_SEATS.where(_SEATS.c.category == bindparam("category"))
_AVAILABLE = and_(
    _SEATS.c.item_id.is_(None),
    _SEATS.c.blocked == false(),
    or_(_SEATS.c.hold_id.is_(None), _SEATS.c.held_until <= bindparam("now")),
)
# The available seats of a category after a place in the plan, a page at a time (the best
# seats are looked for from the front, and are most often found in the first page).
_AVAILABLE_AFTER = (
    _CATEGORY_SEATS.where(_AVAILABLE)
    .where(
        tuple_(*_PLACE)
        > tuple_(bindparam("area_after"), bindparam("row_after"), bindparam("seat_after"))
    )
    .limit(bindparam("limit"))
)
_CATEGORY_COUNT = select(func.count()).where(
    _SEATS.c.project_id == bindparam("project_id"),
    _SEATS.c.event_id == bindparam("event_id"),
    _SEATS.c.category == bindparam("category"),
)
_AVAILABLE_COUNT = _CATEGORY_COUNT.where(_AVAILABLE)
_SEATS_IN = (
    select(_SEATS)
    .where(
        _SEATS.c.project_id == bindparam("project_id"),
        _SEATS.c.id.in_(bindparam("ids", expanding=True)),
    )
    .order_by(_SEATS.c.id)
)
_LOCK_SEATS_IN = lock_for_update(_SEATS_IN)
_LOCK_EVENT_SEATS = lock_for_update(_EVENT_SEATS.order_by(None).order_by(_SEATS.c.id))
_LOCK_HELD = lock_for_update(
    select(_SEATS).where(_SEATS.c.hold_id == bindparam("hold_id")).order_by(_SEATS.c.id)
)
_TAKE = (
    update(_SEATS)
    .where(_SEATS.c.id.in_(bindparam("ids", expanding=True)))
    .values(hold_id=bindparam("hold_id"), held_until=bindparam("held_until"))
)
_FREE = (
    update(_SEATS)
    .where(_SEATS.c.hold_id == bindparam("hold"))
    .values(hold_id=None, held_until=None)
)
_KEEP = update(_SEATS).where(_SEATS.c.hold_id == bindparam("hold_id")).values(held_until=None)
_BLOCK = update(_SEATS).where(_SEATS.c.id == bindparam("id")).values(blocked=bindparam("blocked"))
_DELETE_SEATS = delete(_SEATS).where(_SEATS.c.id.in_(bindparam("ids", expanding=True)))
_SOLD = (
    update(_SEATS)
    .where(_SEATS.c.id == bindparam("row_id"))
    .values(item_id=bindparam("item_id"), hold_id=None, held_until=None)
)
_ITEM_SEAT = (
    update(_ITEMS)
    .where(_ITEMS.c.id == bindparam("row_id"))
    .values(
        seat_id=bindparam("seat_id"),
        seat_area=bindparam("seat_area"),
        seat_row=bindparam("seat_row"),
        seat_number=bindparam("seat_number"),
        updated_at=_ITEMS.c.updated_at,  # written in this transaction: as it was written
    )
)
_HOLD = select(_HOLDS).where(
    _HOLDS.c.project_id == bindparam("project_id"), _HOLDS.c.id == bindparam("id")
)
_LOCK_HOLD = lock_for_update(_HOLD)
_HOLDS_OF_LINES = (
    select(_HOLDS)
    .where(
        _HOLDS.c.order_item_id.in_(bindparam("lines", expanding=True)),
        _HOLDS.c.status == HoldStatus.HELD,
    )
    .order_by(_HOLDS.c.id)
)
_LIVE_HOLDS = select(func.count()).where(
    _HOLDS.c.product_id == bindparam("product_id"),
    _HOLDS.c.status == HoldStatus.HELD,
    or_(_HOLDS.c.order_item_id.is_not(None), _HOLDS.c.expires_at > bindparam("now")),
)
_HOLD_STATUS = (
    update(_HOLDS)
    .where(_HOLDS.c.id == bindparam("id"))
    .values(status=bindparam("status"), order_item_id=bindparam("order_item_id"))
)
_WAITING = table_of(WaitingEntry)
_WAITING_FOR = select(func.coalesce(func.sum(_WAITING.c.quantity), 0)).where(
    _WAITING.c.product_id == bindparam("product_id"),
    _WAITING.c.status == EntryStatus.WAITING,
)
_PRODUCT = select(*(_PRODUCTS.c[name] for name in SeatedProduct._fields)).where(
    _PRODUCTS.c.project_id == bindparam("project_id"), _PRODUCTS.c.id == bindparam("id")
)
_SEATED_PRODUCTS = select(*(_PRODUCTS.c[name] for name in SeatedProduct._fields)).where(
    _PRODUCTS.c.project_id == bindparam("project_id"),
    _PRODUCTS.c.event_id == bindparam("event_id"),
    _PRODUCTS.c.seat_category.is_not(None),
)


async def event_seats(rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID) -> list[SeatRow]:
    """The event's seats in the plan's order."""
    return await rows.all(_EVENT_SEATS, SeatRow, project_id=project_id, event_id=event_id)


async def category_seats(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, category: str
) -> list[SeatRow]:
    return await rows.all(
        _CATEGORY_SEATS, SeatRow, project_id=project_id, event_id=event_id, category=category
    )


async def count_category(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, category: str
) -> int:
    """How many seats of ``category`` the event's plan has."""
    count = await rows.scalar(
        _CATEGORY_COUNT, project_id=project_id, event_id=event_id, category=category
    )
    return int(count or 0)


async def available_seats(
    rows: Rows,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    category: str,
    *,
    now: int,
    after: tuple[int, int, int],
    limit: int,
) -> list[SeatRow]:
    """The first ``limit`` of the event's seats of ``category`` that are available at
    ``now``, after the place ``after`` (area, row and seat positions), in the plan's order."""
    area, row, seat = after
    return await rows.all(
        _AVAILABLE_AFTER,
        SeatRow,
        project_id=project_id,
        event_id=event_id,
        category=category,
        now=now,
        area_after=area,
        row_after=row,
        seat_after=seat,
        limit=limit,
    )


async def count_available(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, category: str, *, now: int
) -> int:
    """How many of the event's seats of ``category`` are available at ``now``."""
    count = await rows.scalar(
        _AVAILABLE_COUNT, project_id=project_id, event_id=event_id, category=category, now=now
    )
    return int(count or 0)


async def seats_by_id(
    rows: Rows, project_id: uuid.UUID, ids: Collection[uuid.UUID], *, lock: bool = False
) -> list[SeatRow]:
    """The project's seats of ``ids`` (those that exist), in id order; with ``lock``, locked."""
    statement = _LOCK_SEATS_IN if lock else _SEATS_IN
    return await rows.all(statement, SeatRow, project_id=project_id, ids=list(ids))


async def lock_event_seats(
    tx: Transaction, project_id: uuid.UUID, event_id: uuid.UUID
) -> list[SeatRow]:
    """All the event's seats, locked in id order."""
    return await tx.all(_LOCK_EVENT_SEATS, SeatRow, project_id=project_id, event_id=event_id)


async def lock_held(tx: Transaction, hold_id: uuid.UUID) -> list[SeatRow]:
    """The seats ``hold_id`` keeps, locked in id order."""
    return await tx.all(_LOCK_HELD, SeatRow, hold_id=hold_id)


async def insert_seats(tx: Transaction, rows: Sequence[dict[str, Any]]) -> list[SeatRow]:
    return await tx.insert(Seat, rows, SeatRow) if rows else []


async def update_seats(tx: Transaction, rows: Sequence[dict[str, Any]]) -> None:
    """Each of ``rows`` (an ``id`` and the same columns in each), on seats the caller locked."""
    await tx.update_each(Seat, rows)


async def delete_seats(tx: Transaction, ids: Sequence[uuid.UUID]) -> None:
    for start in range(0, len(ids), _IN_CHUNKS):
        await tx.execute(_DELETE_SEATS, ids=list(ids[start : start + _IN_CHUNKS]))


async def take_seats(
    tx: Transaction, ids: Sequence[uuid.UUID], hold_id: uuid.UUID, held_until: int
) -> None:
    """The seats (locked, available) kept by ``hold_id`` until ``held_until``."""
    await tx.execute(_TAKE, ids=list(ids), hold_id=hold_id, held_until=held_until)


async def free_seats(tx: Transaction, hold_id: uuid.UUID) -> None:
    """The seats ``hold_id`` keeps (or kept, once expired) are free of it."""
    await tx.execute(_FREE, hold=hold_id)


async def keep_seats(tx: Transaction, hold_id: uuid.UUID) -> None:
    """The seats ``hold_id`` keeps, kept with no end (a pending order's)."""
    await tx.execute(_KEEP, hold_id=hold_id)


async def block_seat(tx: Transaction, seat_id: uuid.UUID, *, blocked: bool) -> None:
    await tx.execute(_BLOCK, id=seat_id, blocked=blocked)


async def sell_seats(tx: Transaction, sold: Sequence[tuple[SeatRow, uuid.UUID]]) -> None:
    """Each seat (locked) sold to its item: the seat names the item and the item its seat."""
    await tx.execute_many(
        _SOLD, [{"row_id": seat.id, "item_id": item_id} for seat, item_id in sold]
    )
    await tx.execute_many(
        _ITEM_SEAT,
        [
            {
                "row_id": item_id,
                "seat_id": seat.id,
                "seat_area": seat.area,
                "seat_row": seat.row,
                "seat_number": seat.number,
            }
            for seat, item_id in sold
        ],
    )


async def get_hold(
    rows: Rows, project_id: uuid.UUID, hold_id: uuid.UUID, *, lock: bool = False
) -> HoldRow | None:
    statement = _LOCK_HOLD if lock else _HOLD
    return await rows.first(statement, HoldRow, project_id=project_id, id=hold_id)


async def holds_of_lines(tx: Transaction, line_ids: Collection[uuid.UUID]) -> list[HoldRow]:
    """The live holds given to the order lines ``line_ids``, in id order (not locked: the
    caller locks each where it takes its seats, after the product's row)."""
    if not line_ids:
        return []
    return await tx.all(_HOLDS_OF_LINES, HoldRow, lines=list(line_ids))


async def live_holds(rows: Rows, product_id: uuid.UUID, *, now: int) -> int:
    """How many holds keep seats for the product at ``now`` (a pending order's too)."""
    return int(await rows.scalar(_LIVE_HOLDS, product_id=product_id, now=now) or 0)


async def waiting_for(rows: Rows, product_id: uuid.UUID) -> int:
    """Seats the product's waiting list waits for (its entries not offered any yet)."""
    return int(await rows.scalar(_WAITING_FOR, product_id=product_id) or 0)


async def insert_hold(tx: Transaction, values: dict[str, Any]) -> HoldRow:
    [hold] = await tx.insert(SeatHold, [values], HoldRow)
    return hold


async def set_hold(
    tx: Transaction,
    hold: HoldRow,
    *,
    status: HoldStatus,
    order_item_id: uuid.UUID | None = None,
) -> None:
    """The hold's status; ``order_item_id``: the line it is given to (kept if None)."""
    line = order_item_id if order_item_id is not None else hold.order_item_id
    await tx.execute(_HOLD_STATUS, id=hold.id, status=status, order_item_id=line)


async def seated_product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID
) -> SeatedProduct | None:
    return await rows.first(_PRODUCT, SeatedProduct, project_id=project_id, id=product_id)


async def seated_products(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID
) -> list[SeatedProduct]:
    """The event's seated products."""
    return await rows.all(_SEATED_PRODUCTS, SeatedProduct, project_id=project_id, event_id=event_id)
