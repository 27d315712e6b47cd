"""The console's events pages: a project's events (list, create, edit) and an event's
attendees (its door view is ``console.door``).

Every change goes through the API's use-cases (``tessera.events.service``) with the project's
write principal, so the rules are theirs. Dates are typed in ``datetime-local`` fields and read
as UTC (the pages say so), then stored as Unix seconds as the API stores them.
"""

import math
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import StringConstraints, ValidationError

from tessera.console.forms import Field
from tessera.console.web import PosterDep, UserDep, back_to, page, problem, project_of
from tessera.db import DatabaseDep
from tessera.errors import AppError, InvalidInput, validation_messages
from tessera.events import repository, service
from tessera.events.repository import EventRow
from tessera.events.schemas import EventCreate, EventUpdate
from tessera.projects.repository import ProjectRow
from tessera.schemas import MAX_PAGE, Input, PageParams

router = APIRouter(prefix="/console", include_in_schema=False)

T = TypeVar("T", EventCreate, EventUpdate)

PAGE_SIZE = 50
# The form's words for the fields of EventCreate/EventUpdate, in the problems it lists.
LABELS = {
    "name": "Name",
    "start_date": "Start",
    "end_date": "End",
    "location": "Location",
    "address": "Address",
    "description": "Description",
    "reference_id": "Reference id",
}


class EventForm(Input):
    name: Field = ""
    start: Field = ""
    end: Field = ""
    location: Field = ""
    address: Field = ""
    # As long as the API allows, so that an event made through the API can be edited here.
    description: Annotated[str, StringConstraints(max_length=5000)] = ""
    reference_id: Field = ""


def _unix(text: str) -> int:
    """Unix seconds of a ``datetime-local`` value, read as UTC (an explicit offset is kept)."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def _local(seconds: int) -> str:
    """Unix seconds as a ``datetime-local`` value in UTC (seconds only when there are some)."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M" if moment.second == 0 else "%Y-%m-%dT%H:%M:%S")


def _in_words(line: str) -> str:
    """A "field: why" line with the form's labels for the API's field names."""
    field, sep, why = line.partition(": ")
    if sep and field in LABELS:
        line = f"{LABELS[field]}: {why}"
    for name in ("start_date", "end_date", "reference_id"):
        line = line.replace(name, LABELS[name].lower())
    return line


def _values(form: EventForm) -> tuple[dict[str, Any], list[str]]:
    """The API's fields from the form (an empty description or reference id is none), and
    the problems with the dates, which the schema cannot name in the form's words."""
    values: dict[str, Any] = {
        "name": form.name,
        "location": form.location,
        "address": form.address,
        # Browsers send a textarea's line breaks as CRLF, whatever was stored.
        "description": form.description.replace("\r\n", "\n") or None,
        "reference_id": form.reference_id or None,
    }
    problems = []
    for field, text in (("start_date", form.start), ("end_date", form.end)):
        if not text.strip():
            problems.append(f"{LABELS[field]}: required")
            continue
        try:
            values[field] = _unix(text)
        except (ValueError, OverflowError):
            problems.append(f"{LABELS[field]}: not a date and time (as 2030-06-01T18:30, UTC)")
    return values, problems


def _validated(schema: type[T], values: dict[str, Any], problems: list[str]) -> T:
    """``schema`` built from ``values``, or InvalidInput listing every problem."""
    try:
        body = schema.model_validate(values)
    except ValidationError as error:
        dates = {"start_date", "end_date"} - values.keys()  # refused already, in words
        # The form always sends a value: the "or none" branch of EventUpdate's fields is noise,
        # and the field's name is the line's name.
        left = [
            {**e, "loc": e["loc"][:1]}
            for e in error.errors()
            if e["type"] != "none_required" and not (e["loc"] and e["loc"][0] in dates)
        ]
        raise InvalidInput(*problems, *validation_messages(left)) from None
    if problems:
        raise InvalidInput(*problems)
    return body


def _create_body(form: EventForm) -> EventCreate:
    values, problems = _values(form)
    return _validated(EventCreate, values, problems)


def _refused(request: Request, error: AppError, heading: str) -> Response:
    """A use-case's refusal as a page; its "field: why" lines in the form's words."""
    if isinstance(error, InvalidInput):
        error = InvalidInput(*(_in_words(line) for line in error.problems))
    return problem(request, error, heading)


def _update_body(event: EventRow, form: EventForm) -> EventUpdate | None:
    """The fields the form changes (None when it changes none)."""
    values, problems = _values(form)
    changed = {k: v for k, v in values.items() if v != getattr(event, k)}
    if not changed and not problems:
        return None
    return _validated(EventUpdate, {"id": event.id} | changed, problems)


def _form_of(event: EventRow) -> dict[str, str]:
    """The edit form's values: what is stored, as the form shows it."""
    return {
        "name": event.name,
        "start": _local(event.start_date),
        "end": _local(event.end_date),
        "location": event.location,
        "address": event.address,
        "description": event.description or "",
        "reference_id": event.reference_id or "",
    }


def _events_path(project: ProjectRow, event_id: uuid.UUID | None = None) -> str:
    path = f"/console/projects/{project.id}/events"
    return path if event_id is None else f"{path}/{event_id}"


@router.get("/projects/{project_id}/events", response_class=HTMLResponse)
async def events_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    page_number: Annotated[int, Query(alias="page")] = 1,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
    except AppError as error:
        return problem(request, error, "Not found")
    # Out of bounds means the nearest page.
    paging = PageParams(page=max(1, min(page_number, MAX_PAGE)), limit=PAGE_SIZE)
    found, total = await service.list_events(database, user.principal(project), paging=paging)
    attendance = await database.read(repository.count_attendance, [event.id for event in found])
    return page(
        request,
        "events.html",
        {
            "project": project,
            "events": [(event, attendance.get(event.id, (0, 0))) for event in found],
            "page_number": paging.page,
            "pages": max(1, math.ceil(total / PAGE_SIZE)),
            "total": total,
        },
    )


@router.post("/projects/{project_id}/events", response_class=HTMLResponse)
async def create_event(
    request: Request,
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    form: Annotated[EventForm, Form()],
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        body = _create_body(form)
        event = await service.create_event(database, user.principal(project), body=body)
    except AppError as error:
        return _refused(request, error, "The event was not created")
    return back_to(_events_path(project, event.id), "Event created.")


@router.get("/projects/{project_id}/events/{event_id}", response_class=HTMLResponse)
async def event_page(
    request: Request,
    database: DatabaseDep,
    user: UserDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        event, attendees = await service.list_attendees(
            database, user.principal(project), event_id=event_id
        )
    except AppError as error:
        return problem(request, error, "Not found")
    return page(
        request,
        "events_event.html",
        {"project": project, "event": event, "attendees": attendees, "form": _form_of(event)},
    )


@router.post("/projects/{project_id}/events/{event_id}", response_class=HTMLResponse)
async def update_event(
    request: Request,
    database: DatabaseDep,
    user: PosterDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    form: Annotated[EventForm, Form()],
) -> Response:
    try:
        project = await project_of(database, user, project_id)
        event = await database.read(repository.get_event_row, project.id, event_id)
        body = _update_body(event, form)
        if body is not None:
            await service.update_event(database, user.principal(project), body=body)
    except AppError as error:
        return _refused(request, error, "The event was not saved")
    notice = "Nothing changed." if body is None else "Event saved."
    return back_to(_events_path(project, event_id), notice)
