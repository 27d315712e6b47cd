"""Check-in statements: the scans (``checkins``), found by nonce, written, annulled; the
redemption a scan made, taken back; the console's door: the scans at an event's door and the
item of an event a person holds."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, or_, select, update
from sqlalchemy.orm import aliased

from tessera.db import Rows, Transaction, table_of
from tessera.models import Attendee, Checkin, Event, Product, ProductItem, Redemption, User

_SCANS, _REDEMPTIONS = table_of(Checkin), table_of(Redemption)
_ITEMS, _PRODUCTS, _USERS = table_of(ProductItem), table_of(Product), table_of(User)
_EVENTS, _ATTENDEES = table_of(Event), table_of(Attendee)


class ScanRow(NamedTuple):
    """A scan's whole row (``checkins``)."""

    project_id: uuid.UUID
    nonce: str
    status: str
    answer: dict[str, Any]
    source: str
    event_id: uuid.UUID | None
    item_id: uuid.UUID | None
    attendee_id: uuid.UUID | None
    redemption_id: uuid.UUID | None
    checked_in_at: int | None
    previous_checked_in_at: int | None
    previous_redeemed_at: int | None
    created_at: datetime
    annulled_at: datetime | None
    device: str | None
    scanned_at: datetime | None
    conflict_of: uuid.UUID | None
    id: uuid.UUID


_OF_NONCE = select(_SCANS).where(
    _SCANS.c.project_id == bindparam("project_id"), _SCANS.c.nonce == bindparam("nonce")
)
_ANNUL = (
    update(_SCANS)
    .where(_SCANS.c.id == bindparam("id"), _SCANS.c.annulled_at.is_(None))
    .values(annulled_at=bindparam("now"))
)
# The scan that took the item's last use: its newest ok scan not annulled.
_LAST_OK = (
    select(_SCANS)
    .where(
        _SCANS.c.item_id == bindparam("item_id"),
        _SCANS.c.status == "ok",
        _SCANS.c.annulled_at.is_(None),
    )
    .order_by(_SCANS.c.created_at.desc(), _SCANS.c.id.desc())
    .limit(1)
)
_FORGET_REDEMPTION = delete(_REDEMPTIONS).where(_REDEMPTIONS.c.id == bindparam("id"))
_RECENT = (
    select(_SCANS)
    .where(_SCANS.c.project_id == bindparam("project_id"))
    .order_by(_SCANS.c.created_at.desc(), _SCANS.c.id.desc())
    .limit(bindparam("limit"))
)


async def scan_of_nonce(rows: Rows, project_id: uuid.UUID, nonce: str) -> ScanRow | None:
    return await rows.first(_OF_NONCE, ScanRow, project_id=project_id, nonce=nonce)


_OF_NONCES = select(_SCANS).where(
    _SCANS.c.project_id == bindparam("project_id"),
    _SCANS.c.nonce.in_(bindparam("nonces", expanding=True)),
)


async def scans_of_nonces(
    rows: Rows, project_id: uuid.UUID, nonces: list[str]
) -> dict[str, ScanRow]:
    """The project's scans of those nonces, by nonce."""
    found = await rows.all(_OF_NONCES, ScanRow, project_id=project_id, nonces=list(set(nonces)))
    return {scan.nonce: scan for scan in found}


async def last_ok_scan(rows: Rows, item_id: uuid.UUID) -> ScanRow | None:
    return await rows.first(_LAST_OK, ScanRow, item_id=item_id)


class UseRow(NamedTuple):
    """An ok scan (not annulled): it holds one of its item's uses."""

    id: uuid.UUID
    item_id: uuid.UUID
    nonce: str
    scanned_at: datetime | None
    created_at: datetime
    redemption_id: uuid.UUID | None


_USES = select(
    _SCANS.c.id,
    _SCANS.c.item_id,
    _SCANS.c.nonce,
    _SCANS.c.scanned_at,
    _SCANS.c.created_at,
    _SCANS.c.redemption_id,
).where(
    _SCANS.c.item_id.in_(bindparam("ids", expanding=True)),
    _SCANS.c.status == "ok",
    _SCANS.c.annulled_at.is_(None),
)
_DISPLACED = (
    update(_SCANS)
    .where(_SCANS.c.id == bindparam("scan_id"))
    .values(
        status=bindparam("status"),
        answer=bindparam("answer"),
        conflict_of=bindparam("conflict_of"),
        redemption_id=None,
    )
)


_EARLIEST_USE_OF = select(func.min(func.coalesce(_SCANS.c.scanned_at, _SCANS.c.created_at))).where(
    _SCANS.c.attendee_id == bindparam("attendee_id"),
    _SCANS.c.status == "ok",
    _SCANS.c.annulled_at.is_(None),
)


async def earliest_use_of(rows: Rows, attendee_id: uuid.UUID) -> int | None:
    """When the earliest ok scan (not annulled) that checked the attendee in was made, in Unix
    seconds."""
    made: datetime | None = await rows.scalar(_EARLIEST_USE_OF, attendee_id=attendee_id)
    return None if made is None else int(made.timestamp())


async def uses_of(rows: Rows, item_ids: list[uuid.UUID]) -> list[UseRow]:
    """The ok scans (not annulled) of those items."""
    return await rows.all(_USES, UseRow, ids=item_ids) if item_ids else []


async def add_scans(tx: Transaction, scans: list[dict[str, Any]]) -> set[uuid.UUID]:
    """The scans, in the order given (a conflict's scan before the scans that name it), each
    unless a scan of its nonce exists or is being written by another transaction; the ids of
    those written."""
    written: set[uuid.UUID] = await tx.insert_each_new(
        Checkin, scans, unique=("project_id", "nonce")
    )
    return written


async def displace(tx: Transaction, displaced: list[dict[str, Any]]) -> None:
    """Ok scans whose use an earlier scan took over: refused now (``status``, ``answer``), a
    conflict with that scan (``conflict_of``), holding no redemption."""
    await tx.execute_many(_DISPLACED, displaced)


async def add_scan(tx: Transaction, values: dict[str, Any]) -> ScanRow | None:
    """The scan, unless a scan of its nonce exists or is being written by another transaction
    (then None, and nothing is written)."""
    return await tx.insert_new(Checkin, values, ScanRow, unique=("project_id", "nonce"))


async def annul(tx: Transaction, scan_id: uuid.UUID, now: datetime) -> bool:
    """The scan annulled now; False when it already was."""
    return bool(await tx.execute(_ANNUL, id=scan_id, now=now))


async def forget_redemption(tx: Transaction, redemption_id: uuid.UUID) -> None:
    await tx.execute(_FORGET_REDEMPTION, id=redemption_id)


async def recent_scans(rows: Rows, project_id: uuid.UUID, *, limit: int) -> list[ScanRow]:
    """The project's last scans, newest first (the console's door)."""
    return await rows.all(_RECENT, ScanRow, project_id=project_id, limit=limit)


class DoorScan(NamedTuple):
    """A scan as the console's door lists it: its item's number and product, and who holds the
    item now (none for a scan that named no item)."""

    nonce: str
    status: str
    answer: dict[str, Any]
    source: str
    created_at: datetime
    annulled_at: datetime | None
    item_number: int | None
    product_name: str | None
    holder_email: str | None
    holder_first_name: str | None
    holder_last_name: str | None
    device: str | None
    scanned_at: datetime | None
    conflict_with: str | None  # the nonce of the scan that had used the ticket first


class ItemAtEvent(NamedTuple):
    product_id: uuid.UUID
    id: uuid.UUID


_WINNER = aliased(_SCANS, name="winner")
_DOOR = select(
    _SCANS.c.nonce,
    _SCANS.c.status,
    _SCANS.c.answer,
    _SCANS.c.source,
    _SCANS.c.created_at,
    _SCANS.c.annulled_at,
    _ITEMS.c.item_id.label("item_number"),
    _PRODUCTS.c.name.label("product_name"),
    _USERS.c.email.label("holder_email"),
    _USERS.c.first_name.label("holder_first_name"),
    _USERS.c.last_name.label("holder_last_name"),
    _SCANS.c.device,
    _SCANS.c.scanned_at,
    _WINNER.c.nonce.label("conflict_with"),
).select_from(
    _SCANS.outerjoin(_ITEMS, _ITEMS.c.id == _SCANS.c.item_id)
    .outerjoin(_PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id)
    .outerjoin(_USERS, _USERS.c.id == _ITEMS.c.owner_id)
    .outerjoin(_WINNER, _WINNER.c.id == _SCANS.c.conflict_of)
)
# At an event's door: the scans that asked for the event, and those that asked for none (an API
# scanner's) of a ticket of the event. A ticket of the event refused at another event's door is
# that door's.
_AT_DOOR = and_(
    _SCANS.c.project_id == bindparam("project_id"),
    or_(
        _SCANS.c.event_id == bindparam("event_id"),
        and_(_SCANS.c.event_id.is_(None), _PRODUCTS.c.event_id == bindparam("event_id")),
    ),
)
_RECENT_AT_DOOR = (
    _DOOR.where(_AT_DOOR)
    .order_by(_SCANS.c.created_at.desc(), _SCANS.c.id.desc())
    .limit(bindparam("limit"))
)
_CONFLICTS_AT_DOOR = _RECENT_AT_DOOR.where(_SCANS.c.conflict_of.is_not(None))
_DOOR_OF_NONCE = _DOOR.where(_AT_DOOR, _SCANS.c.nonce == bindparam("nonce"))
# The person's item of a product of the event: one with a use left first, then the oldest.
_ITEM_AT_EVENT = (
    select(_ITEMS.c.product_id, _ITEMS.c.id)
    .select_from(_ITEMS.join(_PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id))
    .where(
        _PRODUCTS.c.project_id == bindparam("project_id"),
        _PRODUCTS.c.event_id == bindparam("event_id"),
        _ITEMS.c.owner_id == bindparam("owner_id"),
    )
    .order_by(
        _ITEMS.c.redemption_count >= _PRODUCTS.c.redemption_quantity,
        _ITEMS.c.created_at,
        _ITEMS.c.id,
    )
    .limit(1)
)


async def recent_scans_at_door(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, *, limit: int
) -> list[DoorScan]:
    """The last scans at the event's door, newest first, refused ones too."""
    return await rows.all(
        _RECENT_AT_DOOR, DoorScan, project_id=project_id, event_id=event_id, limit=limit
    )


async def conflicts_at_door(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, *, limit: int
) -> list[DoorScan]:
    """The tickets admitted twice offline at the event's door (the scans that lost), newest
    first."""
    return await rows.all(
        _CONFLICTS_AT_DOOR, DoorScan, project_id=project_id, event_id=event_id, limit=limit
    )


async def door_scan(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, nonce: str
) -> DoorScan | None:
    """The scan of ``nonce``, if it was at the event's door."""
    return await rows.first(
        _DOOR_OF_NONCE, DoorScan, project_id=project_id, event_id=event_id, nonce=nonce
    )


async def item_at_event(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, owner_id: uuid.UUID
) -> ItemAtEvent | None:
    """The item of a product of the event that the user holds (one not fully redeemed first),
    or None: what the door checks in when a person is named instead of a ticket."""
    return await rows.first(
        _ITEM_AT_EVENT, ItemAtEvent, project_id=project_id, event_id=event_id, owner_id=owner_id
    )


class DoorEventRow(NamedTuple):
    id: uuid.UUID
    name: str
    start_date: int
    end_date: int
    location: str


class SyncedTicketRow(NamedTuple):
    """A ticket of the event as a door keeps it offline."""

    item_id: int
    id: uuid.UUID
    ticket_version: int
    product_id: uuid.UUID
    first_name: str | None
    last_name: str | None
    redemption_count: int
    redemption_quantity: int
    checked_in_at: int | None
    seat_id: uuid.UUID | None
    seat_area: str | None
    seat_row: str | None
    seat_number: str | None


class ListedScan(NamedTuple):
    """A scan at an event's door, and the nonce of the scan it conflicts with."""

    nonce: str
    status: str
    source: str
    device: str | None
    item_id: uuid.UUID | None
    event_id: uuid.UUID | None
    checked_in_at: int | None
    scanned_at: datetime | None
    created_at: datetime
    annulled_at: datetime | None
    conflict_with: str | None


_DOOR_EVENTS = (
    select(
        _EVENTS.c.id, _EVENTS.c.name, _EVENTS.c.start_date, _EVENTS.c.end_date, _EVENTS.c.location
    )
    .where(_EVENTS.c.project_id == bindparam("project_id"))
    .order_by(_EVENTS.c.start_date, _EVENTS.c.id)
)
_SYNCED = (
    select(
        _ITEMS.c.item_id,
        _ITEMS.c.id,
        _ITEMS.c.ticket_version,
        _ITEMS.c.product_id,
        _USERS.c.first_name,
        _USERS.c.last_name,
        _ITEMS.c.redemption_count,
        _PRODUCTS.c.redemption_quantity,
        _ATTENDEES.c.checked_in_at,
        _ITEMS.c.seat_id,
        _ITEMS.c.seat_area,
        _ITEMS.c.seat_row,
        _ITEMS.c.seat_number,
    )
    .select_from(
        _ITEMS.join(_PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id)
        .join(_USERS, _USERS.c.id == _ITEMS.c.owner_id)
        .outerjoin(
            _ATTENDEES,
            and_(
                _ATTENDEES.c.event_id == _PRODUCTS.c.event_id,
                _ATTENDEES.c.user_id == _ITEMS.c.owner_id,
            ),
        )
    )
    .where(
        _PRODUCTS.c.project_id == bindparam("project_id"),
        _PRODUCTS.c.event_id == bindparam("event_id"),
    )
    .order_by(_ITEMS.c.product_id, _ITEMS.c.item_id)
)
# What changed since: a new, reissued, transferred or redeemed item, its holder's name, their
# check-in at the event.
_SYNCED_SINCE = _SYNCED.where(
    or_(
        _ITEMS.c.updated_at >= bindparam("since"),
        _USERS.c.updated_at >= bindparam("since"),
        _ATTENDEES.c.updated_at >= bindparam("since"),
    )
)
_AT_EVENT_FROM = _SCANS.outerjoin(_ITEMS, _ITEMS.c.id == _SCANS.c.item_id).outerjoin(
    _PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id
)
_AT_EVENT = (
    select(
        _SCANS.c.nonce,
        _SCANS.c.status,
        _SCANS.c.source,
        _SCANS.c.device,
        _SCANS.c.item_id,
        _SCANS.c.event_id,
        _SCANS.c.checked_in_at,
        _SCANS.c.scanned_at,
        _SCANS.c.created_at,
        _SCANS.c.annulled_at,
        _WINNER.c.nonce.label("conflict_with"),
    )
    .select_from(_AT_EVENT_FROM.outerjoin(_WINNER, _WINNER.c.id == _SCANS.c.conflict_of))
    .where(_AT_DOOR)
    .order_by(_SCANS.c.created_at, _SCANS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_CONFLICT = _SCANS.c.conflict_of.is_not(None)
# A page of the scans at the event's door (or of its conflicts only), and how many there are.
_SCANS_AT_EVENT = {
    False: (select(func.count()).select_from(_AT_EVENT_FROM).where(_AT_DOOR), _AT_EVENT),
    True: (
        select(func.count()).select_from(_AT_EVENT_FROM).where(_AT_DOOR, _CONFLICT),
        _AT_EVENT.where(_CONFLICT),
    ),
}


async def door_events(rows: Rows, project_id: uuid.UUID) -> list[DoorEventRow]:
    return await rows.all(_DOOR_EVENTS, DoorEventRow, project_id=project_id)


async def synced_tickets(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, since: datetime | None
) -> list[SyncedTicketRow]:
    """The event's tickets, or those changed at or after ``since``."""
    if since is None:
        return await rows.all(_SYNCED, SyncedTicketRow, project_id=project_id, event_id=event_id)
    return await rows.all(
        _SYNCED_SINCE, SyncedTicketRow, project_id=project_id, event_id=event_id, since=since
    )


async def scans_at_event(
    rows: Rows,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    *,
    conflicts: bool,
    limit: int,
    offset: int,
) -> tuple[int, list[ListedScan]]:
    """How many scans were made at the event's door (its conflicts only), and a page of them,
    oldest first."""
    total, page = _SCANS_AT_EVENT[conflicts]
    where = {"project_id": project_id, "event_id": event_id}
    count = await rows.scalar(total, **where)
    found = await rows.all(page, ListedScan, **where, limit=limit, offset=offset)
    return count, found
