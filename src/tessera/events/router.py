import uuid
from typing import Annotated

from fastapi import Path, Query, Response

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.events import service
from tessera.events.repository import EventAttendees, EventRow
from tessera.events.schemas import (
    AttendeeList,
    AttendeeRegister,
    AttendeeRegistered,
    EventCreate,
    EventList,
    EventRead,
    EventUpdate,
)
from tessera.schemas import PageParams, Pagination
from tessera.web.routes import project_router

router = project_router("/events", tags=["events"])


@router.post(
    "/create", status_code=201, response_model=EventRead, responses=responses(400, 401, 403, 409)
)
async def create_event(
    principal: WriteAccess, database: DatabaseDep, body: EventCreate
) -> EventRow:
    """Create an event (dates in Unix seconds; ``reference_id`` unique in the project)."""
    return await service.create_event(database, principal, body=body)


@router.put("/update", response_model=EventRead, responses=responses(400, 401, 403, 404, 409))
async def update_event(
    principal: WriteAccess, database: DatabaseDep, body: EventUpdate
) -> EventRow:
    """Update the given fields of the event named by ``id`` or ``reference_id``."""
    return await service.update_event(database, principal, body=body)


@router.get("", response_model=EventList, responses=responses(400, 401))
async def list_events(
    principal: ReadAccess, database: DatabaseDep, paging: Annotated[PageParams, Query()]
) -> EventList:
    """The project's events, oldest first (``page`` from 1, ``limit`` 1-100, default 20)."""
    events, total = await service.list_events(database, principal, paging=paging)
    return EventList(
        events=[EventRead.model_validate(e) for e in events],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )


@router.post(
    "/attendees/register",
    response_model=AttendeeRegistered,
    responses=responses(400, 401, 403, 404),
)
async def register_event_attendee(
    principal: WriteAccess, database: DatabaseDep, body: AttendeeRegister
) -> AttendeeRegistered:
    """Register a user to an event, or update the registration / check-in timestamps."""
    registration = await service.register_attendee(database, principal, body=body)
    return registration.attendee


@router.get(
    "/{event_id}/attendees", response_model=AttendeeList, responses=responses(400, 401, 404)
)
async def fetch_event_attendees(
    principal: ReadAccess, database: DatabaseDep, event_id: uuid.UUID
) -> EventAttendees:
    """The event and every attendee registered to it (oldest registration record first)."""
    return await service.list_attendees(database, principal, event_id=event_id)


@router.get("/{IdOrReferenceId}", response_model=EventRead, responses=responses(400, 401, 404))
async def get_event(
    principal: ReadAccess,
    database: DatabaseDep,
    id_or_reference: Annotated[str, Path(alias="IdOrReferenceId", min_length=1, max_length=255)],
) -> EventRow:
    """An event by its id or by the caller's ``reference_id``."""
    return await service.get_event(database, principal, id_or_reference=id_or_reference)


@router.delete("/{IdOrReferenceId}", status_code=204, responses=responses(400, 401, 403, 404, 409))
async def delete_event(
    principal: WriteAccess,
    database: DatabaseDep,
    id_or_reference: Annotated[str, Path(alias="IdOrReferenceId", min_length=1, max_length=255)],
) -> Response:
    """Delete an event, its attendees and its unused products (409 while items or sales exist)."""
    await service.delete_event(database, principal, id_or_reference=id_or_reference)
    return Response(status_code=204)
