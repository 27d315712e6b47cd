"""Ticket statements: an item as its ticket needs it, found by the product's key or by its id
(the item a secret or page token names), its version counted up, and what its page shows."""

import uuid
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import and_, bindparam, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.models import Attendee, Event, Product, ProductItem, Project, User
from tessera.products.item_repository import item_of_product

_ITEMS, _PRODUCTS = table_of(ProductItem), table_of(Product)
_EVENTS, _ATTENDEES, _USERS = table_of(Event), table_of(Attendee), table_of(User)
_PROJECTS = table_of(Project)


class TicketItem(NamedTuple):
    """An item as its ticket needs it."""

    id: uuid.UUID
    item_id: int
    ticket_version: int
    project_id: uuid.UUID
    product_id: uuid.UUID
    owner_id: uuid.UUID
    seat_area: str | None
    seat_row: str | None
    seat_number: str | None


class TicketPageRow(NamedTuple):
    """What a ticket's page shows: the item, its product, the product's event (None without
    one), its holder's name (never the email) and the holder's check-in there; its project's
    name (what a wallet pass shows) and when each of those rows last changed."""

    item_id: int
    redemption_count: int
    redeemed_at: int | None
    product_name: str
    product_type: str
    redemption_quantity: int
    first_name: str | None
    last_name: str | None
    event_name: str | None
    event_location: str | None
    event_address: str | None
    event_start_date: int | None
    event_end_date: int | None
    checked_in_at: int | None
    seat_id: uuid.UUID | None  # a seated product's item: its seat
    seat_area: str | None
    seat_row: str | None
    seat_number: str | None
    project_name: str
    # When each part last changed: the latest is when what the ticket shows last changed (a
    # wallet pass's Last-Modified).
    item_updated_at: datetime
    product_updated_at: datetime
    holder_updated_at: datetime
    event_updated_at: datetime | None
    project_updated_at: datetime  # its name (and, on a wallet pass, its logo)

    @property
    def changed_at(self) -> datetime:
        return last_change(
            self.item_updated_at,
            self.product_updated_at,
            self.holder_updated_at,
            self.event_updated_at,
            self.project_updated_at,
        )


_COLUMNS = (
    _ITEMS.c.id,
    _ITEMS.c.item_id,
    _ITEMS.c.ticket_version,
    _ITEMS.c.project_id,
    _ITEMS.c.product_id,
    _ITEMS.c.owner_id,
    _ITEMS.c.seat_area,
    _ITEMS.c.seat_row,
    _ITEMS.c.seat_number,
)
_BY_ID = select(*_COLUMNS).where(_ITEMS.c.id == bindparam("id"))
_BY_IDS = select(*_COLUMNS).where(_ITEMS.c.id.in_(bindparam("ids", expanding=True)))
# What a ticket shows comes from these rows: the latest of their changes is the ticket's.
CHANGED_AT = (
    _ITEMS.c.updated_at.label("item_updated_at"),
    _PRODUCTS.c.updated_at.label("product_updated_at"),
    _USERS.c.updated_at.label("holder_updated_at"),
    _EVENTS.c.updated_at.label("event_updated_at"),
    _PROJECTS.c.updated_at.label("project_updated_at"),
)
# The item at that version only: a transfer or reissue between finding the item and reading its
# page (a new holder, perhaps) finds nothing rather than the new holder's ticket.
_PAGE = (
    select(
        _ITEMS.c.item_id,
        _ITEMS.c.redemption_count,
        _ITEMS.c.redeemed_at,
        _PRODUCTS.c.name.label("product_name"),
        _PRODUCTS.c.type.label("product_type"),
        _PRODUCTS.c.redemption_quantity,
        _USERS.c.first_name,
        _USERS.c.last_name,
        _EVENTS.c.name.label("event_name"),
        _EVENTS.c.location.label("event_location"),
        _EVENTS.c.address.label("event_address"),
        _EVENTS.c.start_date.label("event_start_date"),
        _EVENTS.c.end_date.label("event_end_date"),
        _ATTENDEES.c.checked_in_at,
        _ITEMS.c.seat_id,
        _ITEMS.c.seat_area,
        _ITEMS.c.seat_row,
        _ITEMS.c.seat_number,
        _PROJECTS.c.name.label("project_name"),
        *CHANGED_AT,
    )
    .select_from(
        _ITEMS.join(_PRODUCTS, _PRODUCTS.c.id == _ITEMS.c.product_id)
        .join(_PROJECTS, _PROJECTS.c.id == _ITEMS.c.project_id)
        .join(_USERS, _USERS.c.id == _ITEMS.c.owner_id)
        .outerjoin(_EVENTS, _EVENTS.c.id == _PRODUCTS.c.event_id)
        .outerjoin(
            _ATTENDEES,
            and_(
                _ATTENDEES.c.event_id == _PRODUCTS.c.event_id,
                _ATTENDEES.c.user_id == _ITEMS.c.owner_id,
            ),
        )
    )
    .where(_ITEMS.c.id == bindparam("id"), _ITEMS.c.ticket_version == bindparam("version"))
)
_PAPER = select(_PROJECTS.c.paper).where(_PROJECTS.c.id == bindparam("id"))
_NEXT_VERSION = (
    update(_ITEMS)
    .where(_ITEMS.c.id == bindparam("id"))
    .values(ticket_version=_ITEMS.c.ticket_version + 1, updated_at=bindparam("now"))
)


def last_change(*times: datetime | None) -> datetime:
    """The latest of ``times`` (None: a part the ticket lacks, such as an event)."""
    return max(time for time in times if time is not None)


async def ticket_item(rows: Rows, item_id: uuid.UUID) -> TicketItem | None:
    """The item of that id (any project's: the caller checks whose it is)."""
    return await rows.first(_BY_ID, TicketItem, id=item_id)


async def ticket_items(rows: Rows, ids: list[uuid.UUID]) -> dict[uuid.UUID, TicketItem]:
    """The items of those ids (any project's), by id."""
    found = await rows.all(_BY_IDS, TicketItem, ids=list(set(ids)))
    return {item.id: item for item in found}


async def ticket_item_of_product(
    rows: Rows, project_id: uuid.UUID, product_id: uuid.UUID, key: int | uuid.UUID
) -> TicketItem:
    """The project's product's item by its number or its id (404 for either missing)."""
    item = await ticket_item(rows, await item_of_product(rows, project_id, product_id, key))
    assert item is not None  # just found
    return item


async def ticket_page(rows: Rows, item: TicketItem) -> TicketPageRow | None:
    """What the item's page shows, in one statement; None once its version has moved on."""
    return await rows.first(_PAGE, TicketPageRow, id=item.id, version=item.ticket_version)


async def paper_of(rows: Rows, project_id: uuid.UUID) -> str:
    """The paper the project's tickets print on ("a4" or "letter")."""
    return str(await rows.scalar(_PAPER, id=project_id) or "a4")


async def next_version(tx: Transaction, item_id: uuid.UUID, now: datetime) -> None:
    """The item's ticket counts up: its earlier secret and page stop working."""
    await tx.execute(_NEXT_VERSION, id=item_id, now=now)
