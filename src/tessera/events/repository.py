"""Event queries."""

import uuid
from collections.abc import Iterator
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.db import Rows, get_in_project, lock_for_update, table_of
from tessera.errors import EventNotFound
from tessera.models import Attendee, Event

_EVENTS = Event.__table__
_ATTENDEES = table_of(Attendee)
ATTENDEE = select(_ATTENDEES).where(_ATTENDEES.c.id == bindparam("id"))
ATTENDEE_OF = select(_ATTENDEES.c.id).where(
    _ATTENDEES.c.event_id == bindparam("event_id"), _ATTENDEES.c.user_id == bindparam("user_id")
)
REGISTERED = (
    update(_ATTENDEES)
    .where(_ATTENDEES.c.id == bindparam("id"))
    .values(registered_at=bindparam("registered_at"), updated_at=bindparam("updated_at"))
)
CHECK_IN_OF = lock_for_update(
    select(_ATTENDEES.c.checked_in_at).where(_ATTENDEES.c.id == bindparam("id"))
)
CHECKED_IN = (
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


async def get_event_row(rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID) -> Any:
    """The project's event as a row (404 otherwise)."""
    row = await rows.first(_EVENT_BY["id"], project_id=project_id, value=event_id)
    if row is None:
        raise EventNotFound
    return row


async def read_event(rows: Rows, project_id: uuid.UUID, id_or_reference: str) -> Any | None:
    """The event's row by id or reference (a read for ``Database.read``), or None."""
    for column, value in _id_then_reference(id_or_reference):
        row = await rows.first(_EVENT_BY[column], project_id=project_id, value=value)
        if row is not None:
            return row
    return None
