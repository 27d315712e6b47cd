"""Event queries."""

import hashlib
import uuid
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, exists, func, or_, select, update

from tessera.db import Rows, Transaction, lock_for_update, serialize_each, table_of
from tessera.errors import EventNotFound
from tessera.models import Attendee, Event, OrderItem, Product, User
from tessera.schemas import PageParams
from tessera.users.repository import USER_FIELDS, UserBaseRow, UserRow


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


class AttendeeUserRow(NamedTuple):
    """An attendee and its user (``USER_FIELDS``, each ``user_``): ``_ATTENDEES_OF``'s rows."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    event_id: uuid.UUID
    registered_at: int | None
    checked_in_at: int | None
    user_id: uuid.UUID
    user_is_activated: bool
    user_activated_on: datetime | None
    user_first_name: str | None
    user_last_name: str | None
    user_email: str
    user_reference_id: str | None


class ListedAttendee(NamedTuple):
    """An attendee with its user: ``AttendeeRead``'s fields."""

    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    event_id: uuid.UUID
    user: UserBaseRow
    registered_at: int | None
    checked_in_at: int | None


class EventAttendees(NamedTuple):
    """An event and its attendees: ``AttendeeList``'s fields."""

    event: EventRow
    attendees: list[ListedAttendee]


class AttendanceRow(NamedTuple):
    """An event's attendees and check-ins (``_ATTENDANCE``)."""

    event_id: uuid.UUID
    registered: int
    checked_in: int


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
# Built once (see users.repository): the event by one column of the project's events, and
# the same with its row locked (for a change that checks what is stored).
_EVENT_BY = {
    column: select(_EVENTS).where(
        _EVENTS.c.project_id == bindparam("project_id"), _EVENTS.c[column] == bindparam("value")
    )
    for column in ("id", "reference_id")
}
_EVENT_LOCKED = {column: lock_for_update(statement) for column, statement in _EVENT_BY.items()}
_EDITABLE = ("name", "description", "start_date", "end_date", "location", "address")
_UPDATE_EVENT = (
    update(_EVENTS)
    .where(_EVENTS.c.id == bindparam("id"))
    .values({column: bindparam(column) for column in (*_EDITABLE, "reference_id", "updated_at")})
)
# Another event of the project with the reference id: any (key False), or other than ``but``.
_REFERENCE_OF = select(_EVENTS.c.id).where(
    _EVENTS.c.project_id == bindparam("project_id"),
    _EVENTS.c.reference_id == bindparam("reference_id"),
)
_REFERENCE_TAKEN = {
    False: _REFERENCE_OF,
    True: _REFERENCE_OF.where(_EVENTS.c.id != bindparam("but")),
}
_EVENT_TOTAL = select(func.count()).where(_EVENTS.c.project_id == bindparam("project_id"))
_EVENT_PAGE = (
    select(_EVENTS)
    .where(_EVENTS.c.project_id == bindparam("project_id"))
    .order_by(_EVENTS.c.created_at, _EVENTS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_ATTENDANCE = (
    select(
        _ATTENDEES.c.event_id,
        func.count().label("registered"),
        func.count(_ATTENDEES.c.checked_in_at).label("checked_in"),
    )
    .where(_ATTENDEES.c.event_id.in_(bindparam("event_ids", expanding=True)))
    .group_by(_ATTENDEES.c.event_id)
)
_PRODUCTS, _LINES, _USERS = table_of(Product), table_of(OrderItem), table_of(User)
_IN_USE = select(
    exists().where(
        _PRODUCTS.c.event_id == bindparam("event_id"),
        or_(_PRODUCTS.c.issued_count > 0, exists().where(_LINES.c.product_id == _PRODUCTS.c.id)),
    )
)
_DELETE_ATTENDEES = delete(_ATTENDEES).where(_ATTENDEES.c.event_id == bindparam("event_id"))
_DELETE_PRODUCTS = delete(_PRODUCTS).where(_PRODUCTS.c.event_id == bindparam("event_id"))
_DELETE_EVENT = delete(_EVENTS).where(_EVENTS.c.id == bindparam("id"))
_ATTENDEES_OF = (
    select(
        _ATTENDEES.c.id,
        _ATTENDEES.c.created_at,
        _ATTENDEES.c.updated_at,
        _ATTENDEES.c.event_id,
        _ATTENDEES.c.registered_at,
        _ATTENDEES.c.checked_in_at,
        *(column.label(f"user_{column.key}") for column in USER_FIELDS),
    )
    .join_from(_ATTENDEES, _USERS, _USERS.c.id == _ATTENDEES.c.user_id)
    .where(_ATTENDEES.c.event_id == bindparam("event_id"))
    .order_by(_ATTENDEES.c.created_at, _ATTENDEES.c.id)
)
_USER_AT = AttendeeUserRow._fields.index("user_id")  # where its user starts


def _id_then_reference(id_or_reference: str) -> Iterator[tuple[str, object]]:
    """Where an "id or reference" path segment looks: an id of the project's event first,
    else the caller's ``reference_id``."""
    try:
        yield "id", uuid.UUID(id_or_reference)
    except ValueError:
        pass
    yield "reference_id", id_or_reference


async def get_event_row(
    rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID, *, lock: bool = False
) -> EventRow:
    """The project's event as a row (404 otherwise); with ``lock``, its row locked until the
    transaction ends."""
    statement = (_EVENT_LOCKED if lock else _EVENT_BY)["id"]
    row = await rows.first(statement, EventRow, project_id=project_id, value=event_id)
    if row is None:
        raise EventNotFound
    return row


async def read_event(
    rows: Rows, project_id: uuid.UUID, id_or_reference: str, *, lock: bool = False
) -> EventRow | None:
    """The event's row by id or reference (a read for ``Database.read``), or None; with
    ``lock``, its row locked until the transaction ends."""
    statements = _EVENT_LOCKED if lock else _EVENT_BY
    for column, value in _id_then_reference(id_or_reference):
        row = await rows.first(statements[column], EventRow, project_id=project_id, value=value)
        if row is not None:
            return row
    return None


async def get_event_by_id_or_reference(
    rows: Rows, project_id: uuid.UUID, id_or_reference: str, *, lock: bool = False
) -> EventRow:
    """As ``read_event``, but 404 when the project has no such event."""
    row = await read_event(rows, project_id, id_or_reference, lock=lock)
    if row is None:
        raise EventNotFound
    return row


async def reference_taken(
    rows: Rows, project_id: uuid.UUID, reference_id: str, *, but: uuid.UUID | None
) -> bool:
    """Whether another event of the project (than ``but``) has the ``reference_id``."""
    values = {"project_id": project_id, "reference_id": reference_id}
    if but is not None:
        values["but"] = but
    return await rows.scalar(_REFERENCE_TAKEN[but is not None], **values) is not None


async def add_event(tx: Transaction, event: dict[str, Any]) -> EventRow:
    """Write a new event; a reference id the project uses already raises IntegrityError."""
    [row] = await tx.insert(Event, [event], EventRow)
    return row


async def update_event(tx: Transaction, event: EventRow) -> None:
    """Write ``event``'s editable fields and ``updated_at``; a reference id the project uses
    already raises IntegrityError."""
    await tx.execute(_UPDATE_EVENT, **event._asdict())


async def read_events(
    rows: Rows, project_id: uuid.UUID, paging: PageParams
) -> tuple[list[EventRow], int]:
    """A page of the project's events, oldest first, and their total (a read for
    ``Database.read``)."""
    total = await rows.scalar(_EVENT_TOTAL, project_id=project_id)
    events = await rows.all(
        _EVENT_PAGE, EventRow, project_id=project_id, limit=paging.limit, offset=paging.offset
    )
    return events, total or 0


async def count_attendance(
    rows: Rows, event_ids: list[uuid.UUID]
) -> dict[uuid.UUID, tuple[int, int]]:
    """Attendees and check-ins per event, in one grouped count."""
    if not event_ids:
        return {}
    found = await rows.all(_ATTENDANCE, AttendanceRow, event_ids=event_ids)
    return {row.event_id: (row.registered, row.checked_in) for row in found}


async def event_in_use(rows: Rows, event_id: uuid.UUID) -> bool:
    """Whether a product of the event has issued items or sales."""
    return bool(await rows.scalar(_IN_USE, event_id=event_id))


async def delete_event(tx: Transaction, event_id: uuid.UUID) -> None:
    """Delete the event with its attendees and its products."""
    await tx.execute(_DELETE_ATTENDEES, event_id=event_id)
    await tx.execute(_DELETE_PRODUCTS, event_id=event_id)
    await tx.execute(_DELETE_EVENT, id=event_id)


async def read_attendees(rows: Rows, project_id: uuid.UUID, event_id: uuid.UUID) -> EventAttendees:
    """The project's event (404 otherwise) and its attendees with their users, oldest
    registration record first (a read for ``Database.read``)."""
    event = await get_event_row(rows, project_id, event_id)
    found = await rows.all(_ATTENDEES_OF, AttendeeUserRow, event_id=event.id)
    attendees = [
        ListedAttendee(
            row.id,
            row.created_at,
            row.updated_at,
            row.event_id,
            UserBaseRow._make(row[_USER_AT:]),
            row.registered_at,
            row.checked_in_at,
        )
        for row in found
    ]
    return EventAttendees(event, attendees)


async def add_attendee(tx: Transaction, attendee: dict[str, Any]) -> AttendeeRow | None:
    """Write the user's attendee record at the event, unless one exists or is being written by
    another transaction (then None, and nothing is written)."""
    return await tx.insert_new(Attendee, attendee, AttendeeRow, unique=("event_id", "user_id"))


_LOCK_ATTENDEES = lock_for_update(
    select(_ATTENDEES)
    .where(
        _ATTENDEES.c.event_id == bindparam("event_id"),
        _ATTENDEES.c.user_id.in_(bindparam("user_ids", expanding=True)),
    )
    .order_by(_ATTENDEES.c.user_id)
)


def attendee_key(event_id: uuid.UUID, user_id: uuid.UUID) -> int:
    """The advisory lock of a user's attendee record at an event, whether it exists or not."""
    digest = hashlib.blake2b(b"attendee\0" + event_id.bytes + user_id.bytes, digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


async def lock_attendees(
    tx: Transaction, wanted: Collection[tuple[uuid.UUID, uuid.UUID]]
) -> dict[tuple[uuid.UUID, uuid.UUID], AttendeeRow]:
    """The attendee records of the (event, user) pairs ``wanted``, those there are and those
    there are not yet, locked until the transaction ends (advisory locks of the pairs, in one
    order; then the rows there are, in (event, user) order), by pair: no other transaction
    writes one of them meanwhile (docs/design.md, Locks)."""
    await serialize_each(tx, [attendee_key(event_id, user_id) for event_id, user_id in wanted])
    return await _lock_rows(tx, wanted)


async def _lock_rows(
    tx: Transaction, wanted: Collection[tuple[uuid.UUID, uuid.UUID]]
) -> dict[tuple[uuid.UUID, uuid.UUID], AttendeeRow]:
    by_event: dict[uuid.UUID, list[uuid.UUID]] = {}
    for event_id, user_id in sorted(set(wanted)):
        by_event.setdefault(event_id, []).append(user_id)
    locked: dict[tuple[uuid.UUID, uuid.UUID], AttendeeRow] = {}
    for event_id, user_ids in by_event.items():
        found = await tx.all(_LOCK_ATTENDEES, AttendeeRow, event_id=event_id, user_ids=user_ids)
        locked.update({(row.event_id, row.user_id): row for row in found})
    return locked


async def add_attendees(
    tx: Transaction, attendees: Sequence[AttendeeRow]
) -> dict[tuple[uuid.UUID, uuid.UUID], AttendeeRow]:
    """Those attendee records written, in (event, user) order, except where another
    transaction wrote one of the pair meanwhile; then all of the pairs' records locked (in the
    same order), by pair: a record whose id is not the one given was not written here."""
    ordered = sorted(attendees, key=lambda row: (row.event_id, row.user_id))
    await tx.insert_each_new(
        Attendee, [row._asdict() for row in ordered], unique=("event_id", "user_id")
    )
    return await _lock_rows(tx, [(row.event_id, row.user_id) for row in ordered])


async def write_check_ins(tx: Transaction, check_ins: Sequence[AttendeeRow]) -> None:
    """The check-in times of those attendees (locked), as they now are."""
    await tx.update_each(
        Attendee,
        [
            {"id": a.id, "checked_in_at": a.checked_in_at, "updated_at": a.updated_at}
            for a in check_ins
        ],
    )


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
