"""The console's seat map of an event: its plan drawn on the server as SVG, each seat coloured by
its status now (a legend names them), and a seat chosen on the map blocked or unblocked.

Seats with ``x`` and ``y`` are drawn where the plan puts them; a plan without them is drawn as
a grid, each area's rows one under the other, a row's seats in the order of their numbers. Every
change goes through the API's use-case (``seats.service.block_seat``), so the rules are its own.
"""

import uuid
from typing import Annotated, NamedTuple

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from tessera.console.web import PosterDep, UserDep, back_to, page, problem, project_of
from tessera.db import DatabaseDep
from tessera.errors import AppError
from tessera.events.repository import get_event_row
from tessera.schemas import Input
from tessera.seats import service
from tessera.seats.schemas import SeatBlock, SeatFilter, SeatRead

router = APIRouter(prefix="/console", include_in_schema=False)

STATUSES = ("available", "held", "sold", "blocked")
PITCH = 24  # grid units between seats of a grid drawing
RADIUS = 9


class Drawn(NamedTuple):
    """A seat on the map."""

    seat: SeatRead
    cx: float
    cy: float


class Label(NamedTuple):
    text: str
    x: float
    y: float


class SeatMap(NamedTuple):
    seats: list[Drawn]
    labels: list[Label]
    view_box: str
    counts: dict[str, int]


class BlockForm(Input):
    csrf: str = ""
    blocked: bool


def seat_map(seats: list[SeatRead]) -> SeatMap:
    """Where each seat is drawn: the plan's own ``x``/``y`` when every seat has them, else a
    grid (an area's name above its rows, a row's name at its left)."""
    counts = {status: 0 for status in STATUSES}
    for seat in seats:
        counts[seat.status] += 1
    if seats and all(seat.x is not None and seat.y is not None for seat in seats):
        drawn = [Drawn(seat, float(seat.x or 0), float(seat.y or 0)) for seat in seats]
        labels: list[Label] = []
    else:
        drawn, labels, y = [], [], 0.0
        area, row, column = None, None, 0
        for seat in seats:
            if seat.area != area:
                y += PITCH * (2 if area is not None else 1)
                labels.append(Label(seat.area, 0, y - PITCH / 2))
                area, row = seat.area, None
            if seat.row != row:
                y += PITCH if row is not None else 0
                labels.append(Label(seat.row, 0, y + 4))
                row, column = seat.row, 0
            column += 1
            drawn.append(Drawn(seat, PITCH + column * PITCH, y))
    if not drawn:
        return SeatMap([], [], "0 0 100 40", counts)
    low_x = min(min(d.cx for d in drawn), *(label.x for label in labels)) - PITCH
    low_y = min(min(d.cy for d in drawn), *(label.y for label in labels)) - PITCH
    high_x = max(d.cx for d in drawn) + PITCH
    high_y = max(d.cy for d in drawn) + PITCH
    box = f"{low_x:g} {low_y:g} {high_x - low_x:g} {high_y - low_y:g}"
    return SeatMap(drawn, labels, box, counts)


def _path(project_id: uuid.UUID, event_id: uuid.UUID) -> str:
    return f"/console/projects/{project_id}/events/{event_id}/seats"


@router.get("/projects/{project_id}/events/{event_id}/seats", response_class=HTMLResponse)
async def seats_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    seat: Annotated[uuid.UUID | None, Query()] = None,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        event = await database.read(get_event_row, project.id, event_id)
        listed = await service.list_seats(
            database, user.principal(project), event_id=event_id, query=SeatFilter()
        )
    except AppError as error:
        return problem(request, error, "Not found")
    chosen = next((s for s in listed.seats if s.id == seat), None)
    context = {
        "project": project,
        "event": event,
        "map": seat_map(listed.seats),
        "chosen": chosen,
        "statuses": STATUSES,
        "path": _path(project.id, event_id),
    }
    return page(request, "events_seats.html", context)


@router.post(
    "/projects/{project_id}/events/{event_id}/seats/{seat_id}", response_class=HTMLResponse
)
async def block_seat(
    request: Request,
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    seat_id: uuid.UUID,
    form: Annotated[BlockForm, Form()],
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        seat = await service.block_seat(
            database,
            user.principal(project),
            event_id=event_id,
            seat_id=seat_id,
            body=SeatBlock(blocked=form.blocked),
        )
    except AppError as error:
        return problem(request, error, "The seat was not changed")
    name = f"{seat.area} {seat.row}-{seat.number}"
    notice = f"Seat {name} is {'blocked' if seat.status == 'blocked' else 'available'}."
    return back_to(f"{_path(project_id, event_id)}?seat={seat_id}", notice)
