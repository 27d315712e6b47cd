"""Event queries."""

import uuid
from collections.abc import Iterator
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.db import Rows, get_in_project
from tessera.errors import EventNotFound
from tessera.models import Event

_EVENTS = Event.__table__
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
