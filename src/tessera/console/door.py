"""The console's door view: a keyboard-wedge scanner types a ticket's secret into the focused
field and presses Enter, and the page checks the ticket in through the API's use-case
(``checkins.service.scan``, as ``POST /v1/checkins``, for this event only). Its answer is shown
in large type, in colour and in words; below it the last scans at this door, refused ones too,
with Undo for an ok scan still inside ``TESSERA_CHECKIN_ANNUL_SECONDS``.

A person without their ticket is named by email, reference id or item id instead: the door
checks in their item of this event (one with a use left first) through the same use-case
(``scan_item``), so the console and the API follow one rule; a person who holds none is
"unknown", as a ticket that is none would be. Every page carries a fresh nonce, so a form sent
twice (a reload, a double Enter) counts once.
"""

import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, NamedTuple

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import StringConstraints

from tessera.checkins import repository as checkins
from tessera.checkins import service as scanning
from tessera.checkins.repository import DoorScan, ItemAtEvent
from tessera.checkins.router import status_of
from tessera.checkins.service import Scanned
from tessera.config import Settings, SettingsDep
from tessera.console.forms import Field
from tessera.console.service import ConsoleUser
from tessera.console.web import PosterDep, UserDep, back_to, page, problem, project_of
from tessera.db import Database, DatabaseDep, Rows
from tessera.errors import AppError, CheckinNotFound
from tessera.events import repository as events
from tessera.events.repository import EventRow
from tessera.models.base import utcnow
from tessera.projects.repository import ProjectRow
from tessera.schemas import Input, normalize_email
from tessera.ticket_keys import codes as codes
from tessera.tickets.repository import ticket_item
from tessera.users.repository import UserRow, find_user_row
from tessera.users.schemas import UserRef

router = APIRouter(prefix="/console", include_in_schema=False)

LAST_SCANS = 20
Nonce = Annotated[str, StringConstraints(max_length=128)]


class DoorForm(Input):
    who: Field = ""
    nonce: Nonce = ""


class UndoForm(Input):
    nonce: Nonce = ""


class Result(NamedTuple):
    """What the door says of a scan: a tone (its colour: ``ok``, ``warn``, ``bad``), a label in
    words (so that colour is never the only sign), and lines about the ticket."""

    tone: str
    label: str
    lines: list[str]


class Named(NamedTuple):
    """What a typed email, reference id or item id names: the item to check in, and the person
    (None when nobody in the project is named)."""

    person: UserRow | None
    item: ItemAtEvent | None


class Line(NamedTuple):
    """A row of the door's last scans."""

    scan: DoorScan
    outcome: str
    holder: str
    ticket: str
    undo: bool


LABELS = {
    "ok": "OK",
    "already_checked_in": "ALREADY CHECKED IN",
    "wrong_event": "WRONG EVENT",
    "unknown": "UNKNOWN",
    "invalid": "INVALID",
    "revoked": "REVOKED",
    "held_outside": "HELD OUTSIDE",
}
TONES = {"ok": "ok", "already_checked_in": "warn"}  # the others are "bad"


def _at(seconds: int) -> str:
    return f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%d %H:%M:%S} UTC"


def _name(email: str | None, first_name: str | None, last_name: str | None) -> str:
    if email is None:
        return ""
    name = " ".join(part for part in (first_name, last_name) if part)
    return f"{name} ({email})" if name else email


def _holder(scan: DoorScan) -> str:
    return _name(scan.holder_email, scan.holder_first_name, scan.holder_last_name)


def _ticket(scan: DoorScan) -> str:
    if scan.item_number is None:
        return ""
    return f"{scan.product_name}, item {scan.item_number}"


def _label(status: str, answer: dict[str, object]) -> str:
    label = LABELS.get(status, status.upper())
    at = answer.get("checked_in_at")
    if status == "already_checked_in" and isinstance(at, int):
        return f"{label} at {_at(at)}"
    return label


def _sentence(message: str) -> str:
    """A use-case's message as a line of its own ("NFT" stays as it is)."""
    return message[:1].upper() + message[1:]


def _uses_left(count: int, quantity: int) -> str:
    left = max(quantity - count, 0)
    return f"{left} of {quantity} {'use' if quantity == 1 else 'uses'} left"


def _result(scanned: Scanned, scan: DoorScan | None, nobody: str | None) -> Result:
    """The answer of a scan as the door shows it; ``nobody``: what to say of an unknown one
    (a typed name that found no ticket), else the use-case's message."""
    body = scanned.body
    status = str(body.get("status") or body.get("reason"))
    tone = TONES.get(status, "bad")
    lines = []
    if status == "ok":
        holder = body["holder"]
        lines.append(_name(holder["email"], holder["first_name"], holder["last_name"]))
        product = f"{scan.product_name}, " if scan is not None else ""
        lines.append(
            f"{product}item {body['item_id']} · "
            f"{_uses_left(body['redemption_count'], body['redemption_quantity'])}"
        )
        return Result(tone, LABELS["ok"], lines)
    if status == "unknown" and nobody is not None:
        lines.append(nobody)
    else:
        lines.append(_sentence(str(body["message"])))
    if scan is not None and scan.item_number is not None:
        lines.extend([_holder(scan), _ticket(scan)])
    return Result(tone, _label(status, body), lines)


def _lines(scans: list[DoorScan], window: timedelta) -> list[Line]:
    now = utcnow()
    lines = []
    for scan in scans:
        outcome = _label(scan.status, scan.answer)
        if scan.annulled_at is not None:
            outcome = f"{outcome}, annulled at {_at(int(scan.annulled_at.timestamp()))}"
        # Inside the window as ``annul`` counts it.
        undo = scan.status == "ok" and scan.annulled_at is None
        lines.append(
            Line(
                scan,
                outcome,
                _holder(scan),
                _ticket(scan),
                undo and now - scan.created_at <= window,
            )
        )
    return lines


def _door_path(project: ProjectRow, event: EventRow) -> str:
    return f"/console/projects/{project.id}/events/{event.id}/door"


async def _door_event(
    database: Database,
    user: ConsoleUser,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
) -> tuple[ProjectRow, EventRow]:
    project = await project_of(database, user, project_id)
    event = await database.read(events.get_event_row, project.id, event_id)
    return project, event


async def _door(
    request: Request,
    database: Database,
    settings: Settings,
    project: ProjectRow,
    event: EventRow,
    result: Result | None,
    status: int,
) -> Response:
    """The door page: the result of the last action, the field for the next scan (with a fresh
    nonce), and the last scans at this door."""
    window = timedelta(seconds=settings.checkin_annul_seconds)
    scans = await database.read(
        checkins.recent_scans_at_door, project.id, event.id, limit=LAST_SCANS
    )
    conflicts = await database.read(
        checkins.conflicts_at_door, project.id, event.id, limit=LAST_SCANS
    )
    context = {
        "conflicts": _lines(conflicts, timedelta(0)),
        "project": project,
        "event": event,
        "result": result,
        "nonce": secrets.token_urlsafe(18),
        "scans": _lines(scans, window),
        "window_minutes": max(1, round(window.total_seconds() / 60)),
    }
    return page(request, "door.html", context, status)


@router.get("/projects/{project_id}/events/{event_id}/door", response_class=HTMLResponse)
async def door_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: UserDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
) -> Response:
    try:
        project, event = await _door_event(database, user, project_id, event_id)
    except AppError as error:
        return problem(request, error, "Not found")
    return await _door(request, database, settings, project, event, None, 200)


async def _named(rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, text: str) -> Named:
    """The project's item an item id names (whichever event it is for: the use-case says), else
    the item of this event held by the person an email or reference id names."""
    refs = []
    if "@" in text:
        refs.append(UserRef("email", normalize_email(text)))
    try:
        item_id = uuid.UUID(text)
    except ValueError:
        pass
    else:
        found = await ticket_item(rows, item_id)
        if found is not None and found.project_id == project_id:
            return Named(None, ItemAtEvent(found.product_id, found.id))
    refs.append(UserRef("reference_id", text))
    for ref in refs:
        person = await find_user_row(rows, project_id, ref)
        if person is not None:
            return Named(
                person, await checkins.item_at_event(rows, project_id, event_id, person.id)
            )
    return Named(None, None)


@router.post("/projects/{project_id}/events/{event_id}/door", response_class=HTMLResponse)
async def check_in(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    form: Annotated[DoorForm, Form()],
) -> Response:
    try:
        project, event = await _door_event(database, user, project_id, event_id)
    except AppError as error:
        return problem(request, error, "Not found")
    text, nonce = form.who.strip(), form.nonce
    if not text or not nonce:
        said = "Scan a ticket, or type an email, a reference id or an item id"
        if not nonce:
            said = "This form has no scan id: reload the page and scan again"
        return await _door(
            request,
            database,
            settings,
            project,
            event,
            Result("bad", "NOT CHECKED IN", [said]),
            400,
        )
    principal = user.principal(project)
    nobody = None
    if codes.is_secret_shaped(text):
        scanned = await scanning.scan(
            database,
            principal,
            hash_key=settings.hash_key_bytes,
            secret=text,
            nonce=nonce,
            event_id=event.id,
            source="console",
        )
    else:
        named = await database.read(_named, project.id, event.id, text)
        if named.item is not None:
            scanned = await scanning.scan_item(
                database,
                principal,
                product_id=named.item.product_id,
                item_id=named.item.id,
                nonce=nonce,
                event_id=event.id,
                source="console",
            )
        else:
            # Named no ticket: the use-case records it as the unknown scan it is (as a secret,
            # the text names nothing).
            scanned = await scanning.scan(
                database,
                principal,
                hash_key=settings.hash_key_bytes,
                secret=text,
                nonce=nonce,
                event_id=event.id,
                source="console",
            )
            nobody = "No ticket of this event for this email, reference id or item id"
            if named.person is not None:
                person = named.person
                holder = _name(person.email, person.first_name, person.last_name)
                nobody = f"{holder} holds no ticket of this event"
    scan = await database.read(checkins.door_scan, project.id, event.id, nonce)
    result = _result(scanned, scan, nobody)
    return await _door(request, database, settings, project, event, result, status_of(scanned))


@router.post("/projects/{project_id}/events/{event_id}/door/undo", response_class=HTMLResponse)
async def undo_check_in(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    user: PosterDep,
    project_id: uuid.UUID,
    event_id: uuid.UUID,
    form: Annotated[UndoForm, Form()],
) -> Response:
    """Annul an ok scan at this door within the window (``checkins.service.annul``)."""
    try:
        project, event = await _door_event(database, user, project_id, event_id)
    except AppError as error:
        return problem(request, error, "Not found")
    try:
        scan = await database.read(checkins.door_scan, project.id, event.id, form.nonce)
        if scan is None:  # not a scan at this door
            raise CheckinNotFound
        window = timedelta(seconds=settings.checkin_annul_seconds)
        await scanning.annul(database, user.principal(project), nonce=form.nonce, window=window)
    except AppError as error:
        refused = Result("bad", "NOT UNDONE", [_sentence(error.message)])
        return await _door(request, database, settings, project, event, refused, error.status_code)
    undone = f"Check-in undone: {_holder(scan)}, {_ticket(scan)}."
    return back_to(_door_path(project, event), undone)
