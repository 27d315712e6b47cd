"""Event queries."""

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import joinedload

from tessera.db import Rows, Transaction, get_in_project, lock_for_update, table_of
from tessera.errors import EventNotFound
from tessera.models import Attendee, Event, OrderItem, Product
from tessera.schemas import PageParams
from tessera.users.repository import UserRow


class EventRow(NamedTuple):
    """An event's row (``events``), as ``EventRead`` reads it."""

    project_id: uuid.UUID
    name: str
    description: str | None
    start_date: int
    end_date: int
    location: str
    address: str
    reference_id: str | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class AttendeeRow(NamedTuple):
    """An attendee's row (``attendees``)."""

    project_id: uuid.UUID
    event_id: uuid.UUID
    user_id: uuid.UUID
    registered_at: int | None
    checked_in_at: int | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class RegisteredAttendee(NamedTuple):
    """An attendee with its user and its event: ``AttendeeRegistered``'s fields."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    event_id: uuid.UUID
    user: UserRow
    registered_at: int | None
    checked_in_at: int | None
    event: EventRow


_EVENTS = table_of(Event)
_ATTENDEES = table_of(Attendee)
_ATTENDEE = select(_ATTENDEES).where(_ATTENDEES.c.id == bindparam("id"))
_ATTENDEE_OF = select(_ATTENDEES.c.id).where(
    _ATTENDEES.c.event_id == bindparam("event_id"), _ATTENDEES.c.user_id == bindparam("user_id")
)
_REGISTERED = (
    update(_ATTENDEES)
    .where(_ATTENDEES.c.id == bindparam("id"))
    .values(registered_at=bindparam("registered_at"), updated_at=bindparam("updated_at"))
)
_CHECKED_IN_AT = select(_ATTENDEES.c.checked_in_at).where(
    _ATTENDEES.c.event_id == bindparam("event_id"), _ATTENDEES.c.user_id == bindparam("user_id")
)
_CHECK_IN_OF = lock_for_update(
    select(_ATTENDEES.c.checked_in_at).where(_ATTENDEES.c.id == bindparam("id"))
)
_CHECKED_IN = (
    update(_ATTENDEES)
    .where(_ATTENDEES.c.id == bindparam("id"))
    .values(checked_in_at=bindparam("checked_in_at"), updated_at=bindparam("updated_at"))
)
# Built once (see users.repository): the event by one column of the project's events.
_EVENT_BY = {
    column: select(_EVENTS).where(
        _EVENTS.c.project_id == bindparam("project_id"), _EVENTS.c[column] == bindparam("value")
    )
    for column in ("id", "reference_id")
}


def _id_then_reference(id_or_reference: str) -> Iterator[tuple[str, object]]:
    """Where an "id or reference" path segment looks: an id of the project's event first,
    else the caller's ``reference_id``."""
    try:
        yield "id", uuid.UUID(id_or_reference)
    except ValueError:
        pass
    yield "reference_id", id_or_reference


async def get_event(session: AsyncSession, project_id: uuid.UUID, event_id: uuid.UUID) -> Event:
    return await get_in_project(
        session, Event, project_id, Event.id == event_id, not_found=EventNotFound
    )


async def get_event_by_id_or_reference(
    session: AsyncSession, project_id: uuid.UUID, id_or_reference: str
) -> Event:
    for column, value in _id_then_reference(id_or_reference):
        event = await session.scalar(
            select(Event).where(Event.project_id == project_id, getattr(Event, column) == value)
        )
        if event is not None:
            return event
    raise EventNotFound


async def get_event_row(rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID) -> EventRow:
    """The project's event as a row (404 otherwise)."""
    row = await rows.first(_EVENT_BY["id"], EventRow, project_id=project_id, value=event_id)
    if row is None:
        raise EventNotFound
    return row


async def read_event(rows: Rows, project_id: uuid.UUID, id_or_reference: str) -> EventRow | None:
    """The event's row by id or reference (a read for ``Database.read``), or None."""
    for column, value in _id_then_reference(id_or_reference):
        row = await rows.first(_EVENT_BY[column], EventRow, project_id=project_id, value=value)
        if row is not None:
            return row
    return None


async def reference_taken(
    session: AsyncSession, project_id: uuid.UUID, reference_id: str, *, but: uuid.UUID | None
) -> bool:
    """Whether another event of the project (than ``but``) has the ``reference_id``."""
    statement = select(Event.id).where(
        Event.project_id == project_id, Event.reference_id == reference_id
    )
    if but is not None:
        statement = statement.where(Event.id != but)
    return await session.scalar(statement) is not None


async def list_events(
    session: AsyncSession, project_id: uuid.UUID, paging: PageParams
) -> tuple[list[Event], int]:
    """A page of the project's events, oldest first, and their total."""
    project = Event.project_id == project_id
    total = await session.scalar(select(func.count()).select_from(Event).where(project))
    events = await session.scalars(
        select(Event)
        .where(project)
        .order_by(Event.created_at, Event.id)
        .limit(paging.limit)
        .offset(paging.offset)
    )
    return list(events), total or 0


async def count_attendance(
    session: AsyncSession, event_ids: list[uuid.UUID]
) -> dict[uuid.UUID, tuple[int, int]]:
    """Attendees and check-ins per event, in one grouped count."""
    if not event_ids:
        return {}
    rows = await session.execute(
        select(Attendee.event_id, func.count(), func.count(Attendee.checked_in_at))
        .where(Attendee.event_id.in_(event_ids))
        .group_by(Attendee.event_id)
    )
    return {event_id: (registered, checked_in) for event_id, registered, checked_in in rows}


async def event_in_use(session: AsyncSession, event_id: uuid.UUID) -> bool:
    """Whether a product of the event has issued items or sales."""
    in_use = await session.scalar(
        select(
            exists().where(
                Product.event_id == event_id,
                or_(
                    Product.issued_count > 0,
                    exists().where(OrderItem.product_id == Product.id),
                ),
            )
        )
    )
    return bool(in_use)


async def delete_event(session: AsyncSession, event_id: uuid.UUID) -> None:
    """Delete the event with its attendees and its products."""
    await session.execute(delete(Attendee).where(Attendee.event_id == event_id))
    await session.execute(delete(Product).where(Product.event_id == event_id))
    await session.execute(delete(Event).where(Event.id == event_id))


async def attendees_of(session: AsyncSession, event_id: uuid.UUID) -> list[Attendee]:
    """The event's attendees with their users, oldest registration record first."""
    attendees = await session.scalars(
        select(Attendee)
        .where(Attendee.event_id == event_id)
        .options(joinedload(Attendee.user))
        .order_by(Attendee.created_at, Attendee.id)
    )
    return list(attendees)


async def add_attendee(tx: Transaction, attendee: dict[str, Any]) -> AttendeeRow | None:
    """Write the user's attendee record at the event, unless one exists or is being written by
    another transaction (then None, and nothing is written)."""
    return await tx.insert_new(Attendee, attendee, AttendeeRow, unique=("event_id", "user_id"))


async def attendee_id_of(rows: Rows, event_id: uuid.UUID, user_id: uuid.UUID) -> uuid.UUID:
    """The id of the user's attendee record at the event (one that exists)."""
    attendee_id: uuid.UUID = await rows.scalar(_ATTENDEE_OF, event_id=event_id, user_id=user_id)
    return attendee_id


async def set_registered(
    tx: Transaction, attendee_id: uuid.UUID, registered_at: int, now: datetime
) -> None:
    await tx.execute(_REGISTERED, id=attendee_id, registered_at=registered_at, updated_at=now)


async def lock_check_in(tx: Transaction, attendee_id: uuid.UUID) -> int | None:
    """The attendee's check-in time (None: not checked in), its row locked until the
    transaction ends: of two check-ins at once, one is the first."""
    checked_in_at: int | None = await tx.scalar(_CHECK_IN_OF, id=attendee_id)
    return checked_in_at


async def checked_in_at(rows: Rows, event_id: uuid.UUID, user_id: uuid.UUID) -> int | None:
    """The user's check-in time at the event (None: not checked in, or no record)."""
    at: int | None = await rows.scalar(_CHECKED_IN_AT, event_id=event_id, user_id=user_id)
    return at


async def set_checked_in(
    tx: Transaction, attendee_id: uuid.UUID, checked_in_at: int | None, now: datetime
) -> None:
    await tx.execute(_CHECKED_IN, id=attendee_id, checked_in_at=checked_in_at, updated_at=now)


async def read_registered(
    rows: Rows, attendee_id: uuid.UUID, *, user: UserRow, event: EventRow
) -> RegisteredAttendee:
    """The attendee record with its user and event, as ``AttendeeRegistered`` reads it."""
    attendee = await rows.first(_ATTENDEE, AttendeeRow, id=attendee_id)
    assert attendee is not None  # written in this transaction
    return RegisteredAttendee(
        attendee.id,
        attendee.created_at,
        attendee.updated_at,
        attendee.event_id,
        user,
        attendee.registered_at,
        attendee.checked_in_at,
        event,
    )
