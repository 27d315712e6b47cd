"""Event queries."""

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.db import get_in_project
from tessera.errors import EventNotFound
from tessera.models import Event


async def get_event(session: AsyncSession, project_id: uuid.UUID, event_id: uuid.UUID) -> Event:
    return await get_in_project(
        session, Event, project_id, Event.id == event_id, not_found=EventNotFound
    )


async def get_event_by_id_or_reference(
    session: AsyncSession, project_id: uuid.UUID, id_or_reference: str
) -> Event:
    """An id of this project's event first, else the caller's ``reference_id``."""
    try:
        event_id = uuid.UUID(id_or_reference)
    except ValueError:
        pass
    else:
        event = await session.scalar(
            select(Event).where(Event.project_id == project_id, Event.id == event_id)
        )
        if event is not None:
            return event
    return await get_in_project(
        session, Event, project_id, Event.reference_id == id_or_reference, not_found=EventNotFound
    )
