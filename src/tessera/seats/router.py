import uuid
from typing import Annotated

from fastapi import Query, Response

from tessera.auth.dependencies import ReadAccess, WriteAccess
from tessera.db import DatabaseDep
from tessera.errors import responses
from tessera.seats import service
from tessera.seats.schemas import (
    HoldCreate,
    HoldRead,
    SeatBlock,
    SeatFilter,
    SeatingPlan,
    SeatingRead,
    SeatList,
    SeatRead,
)
from tessera.web.routes import project_router

router = project_router("/events", tags=["seats"])
holds_router = project_router("/seat-holds", tags=["seats"])


@router.put(
    "/{event_id}/seating",
    response_model=SeatingRead,
    responses=responses(400, 401, 403, 404, 409),
)
async def put_seating(
    principal: WriteAccess, database: DatabaseDep, event_id: uuid.UUID, body: SeatingPlan
) -> SeatingRead:
    """Store the event's whole seating plan: areas, their rows (the front row first), each
    row's seats (a ``number`` unique in the row, an optional ``category``, ``x`` and ``y``); at
    most 50,000 seats. A seat keeps its ``id`` by its name; a plan that leaves out a sold or
    held seat is refused (409 naming them). The answer is the plan with every seat's ``id``."""
    return await service.put_plan(database, principal, event_id=event_id, body=body)


@router.get("/{event_id}/seating", response_model=SeatingRead, responses=responses(400, 401, 404))
async def get_seating(
    principal: ReadAccess, database: DatabaseDep, event_id: uuid.UUID
) -> SeatingRead:
    """The event's seating plan, with every seat's ``id`` (no areas: no plan)."""
    return await service.get_plan(database, principal, event_id=event_id)


@router.get("/{event_id}/seats", response_model=SeatList, responses=responses(400, 401, 404))
async def list_seats(
    principal: ReadAccess,
    database: DatabaseDep,
    event_id: uuid.UUID,
    query: Annotated[SeatFilter, Query()],
) -> SeatList:
    """Every seat of the event in the plan's order, with its ``status`` now (``available``,
    ``held``, ``sold`` or ``blocked``); ``product_id``: the seats that product sells;
    ``status``: those of that status."""
    return await service.list_seats(database, principal, event_id=event_id, query=query)


@router.patch(
    "/{event_id}/seats/{seat_id}",
    response_model=SeatRead,
    responses=responses(400, 401, 403, 404, 409),
)
async def block_seat(
    principal: WriteAccess,
    database: DatabaseDep,
    event_id: uuid.UUID,
    seat_id: uuid.UUID,
    body: SeatBlock,
) -> SeatRead:
    """Block a seat (out of sale) or unblock it; a sold or held seat is refused (409)."""
    return await service.block_seat(
        database, principal, event_id=event_id, seat_id=seat_id, body=body
    )


@holds_router.post(
    "", status_code=201, response_model=HoldRead, responses=responses(400, 401, 403, 404, 409)
)
async def create_seat_hold(
    principal: WriteAccess, database: DatabaseDep, body: HoldCreate
) -> HoldRead:
    """Hold seats of a seated product for ``seconds`` (600 by default, at most 3,600): the
    ``seats`` named, or the best ``count`` available (``together``, the default: side by side
    in one row, the front rows first). 409 names the seats that are not available. An order
    line or an items request with the hold's ``hold_id`` sells them."""
    return await service.create_hold(database, principal, body=body)


@holds_router.delete("/{hold_id}", status_code=204, responses=responses(400, 401, 403, 404, 409))
async def release_seat_hold(
    principal: WriteAccess, database: DatabaseDep, hold_id: uuid.UUID
) -> Response:
    """Free the hold's seats now (409 once sold, or while a pending order keeps it)."""
    await service.release_hold(database, principal, hold_id=hold_id)
    return Response(status_code=204)
