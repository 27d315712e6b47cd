"""Event and attendee use-cases."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from tessera.auth.principal import Principal
from tessera.changes.schemas import EventType
from tessera.changes.service import record
from tessera.db import Database, Rows, Transaction, rerun_on_conflict
from tessera.errors import (
    EventDatesOutOfOrder,
    EventInUse,
    EventNotFound,
    InvalidInput,
    ReferenceIdTaken,
)
from tessera.events import repository
from tessera.events.schemas import (
    AttendeeRegister,
    AttendeeRegistered,
    EventCreate,
    EventUpdate,
)
from tessera.models.base import utcnow
from tessera.schemas import PageParams
from tessera.users.repository import UserRow, get_user_row
from tessera.users.reputation_repository import move_reputation
from tessera.users.rules import require_activated

FIRST_CHECK_IN_REPUTATION = 1


async def _reject_taken_reference(
    rows: Rows, project_id: uuid.UUID, reference_id: str | None, *, but: uuid.UUID | None
) -> None:
    if reference_id is None:
        return
    if await repository.reference_taken(rows, project_id, reference_id, but=but):
        raise ReferenceIdTaken(f"reference_id already used by another event: {reference_id!r}")


def _require_dates_in_order(start_date: int, end_date: int) -> None:
    if end_date < start_date:
        raise InvalidInput("end_date: must not be before start_date")


@rerun_on_conflict
async def create_event(
    database: Database, principal: Principal, *, body: EventCreate
) -> repository.EventRow:
    """Create an event; ``end_date`` may not be before ``start_date``; ``reference_id`` is
    unique within the project."""
    _require_dates_in_order(body.start_date, body.end_date)
    async with database.transaction() as tx:
        await _reject_taken_reference(tx, principal.project_id, body.reference_id, but=None)
        try:
            event = await repository.add_event(
                tx, {"project_id": principal.project_id, **body.model_dump()}
            )
        except IntegrityError as exc:  # a concurrent request took the reference id
            raise ReferenceIdTaken(f"reference_id already used: {body.reference_id!r}") from exc
        await tx.commit()
    return event


@rerun_on_conflict
async def update_event(
    database: Database, principal: Principal, *, body: EventUpdate
) -> repository.EventRow:
    """Change the given fields of an event named by ``id`` or ``reference_id`` (its row locked:
    a date sent alone is checked against the other one as stored)."""
    project_id = principal.project_id
    async with database.transaction() as tx:
        if body.id is not None:
            event = await repository.get_event_row(tx, project_id, body.id, lock=True)
        else:
            event = await repository.get_event_by_id_or_reference(
                tx, project_id, str(body.reference_id), lock=True
            )
        changes = body.changes()
        if body.start_date is not None and body.end_date is not None:
            _require_dates_in_order(body.start_date, body.end_date)
        else:
            # One date sent: out of order with the other, stored one, is a conflict with state.
            start = event.start_date if body.start_date is None else body.start_date
            end = event.end_date if body.end_date is None else body.end_date
            if end < start:
                raise EventDatesOutOfOrder(
                    f"the event would end ({end}) before it starts ({start}): send both dates"
                )
        if "reference_id" in changes:
            await _reject_taken_reference(tx, project_id, body.reference_id, but=event.id)
        written: dict[str, Any] = changes | {"updated_at": utcnow()}
        updated = event._replace(**written)
        try:
            await repository.update_event(tx, updated)
        except IntegrityError as exc:  # a concurrent request took the reference id
            raise ReferenceIdTaken(f"reference_id already used: {updated.reference_id!r}") from exc
        await tx.commit()
    return updated


async def get_event(
    database: Database, principal: Principal, *, id_or_reference: str
) -> repository.EventRow:
    """The project's event by id or reference id, as a row that ``EventRead`` reads."""
    row = await database.read(repository.read_event, principal.project_id, id_or_reference)
    if row is None:
        raise EventNotFound
    return row


async def list_events(
    database: Database, principal: Principal, *, paging: PageParams
) -> tuple[list[repository.EventRow], int]:
    """A page of the project's events, oldest first, and their total."""
    return await database.read(repository.read_events, principal.project_id, paging)


@rerun_on_conflict
async def delete_event(database: Database, principal: Principal, *, id_or_reference: str) -> None:
    """Delete an event with its attendees and its unused products.

    Refused (409, nothing deleted) while a product of the event has issued items or sales.
    """
    async with database.transaction() as tx:
        event = await repository.get_event_by_id_or_reference(
            tx, principal.project_id, id_or_reference
        )
        if await repository.event_in_use(tx, event.id):
            raise EventInUse
        await repository.delete_event(tx, event.id)
        await tx.commit()


async def list_attendees(
    database: Database, principal: Principal, *, event_id: uuid.UUID
) -> repository.EventAttendees:
    """The project's event and its attendees with their users, as ``AttendeeList`` reads
    them."""
    return await database.read(repository.read_attendees, principal.project_id, event_id)


@dataclass(frozen=True, slots=True)
class Registration:
    """What ``register_attendee`` did: the attendee as answered, and the check-in the record
    had before this call when the call set one (None: it had none, or none was sent)."""

    attendee: AttendeeRegistered
    checked_in_before: int | None


async def check_in(
    tx: Transaction,
    attendee_id: uuid.UUID,
    user: UserRow,
    event_id: uuid.UUID,
    checked_in_at: int,
    now: datetime,
) -> int | None:
    """The attendee checked in at ``checked_in_at`` (its row locked); the check-in time it had
    before (None: this is their first, which adds 1 to the user's reputation)."""
    before = await repository.lock_check_in(tx, attendee_id)
    if before is None:
        await move_reputation(
            tx, user, delta=FIRST_CHECK_IN_REPUTATION, reason=f"check-in:{event_id}"
        )
    if before != checked_in_at:
        await repository.set_checked_in(tx, attendee_id, checked_in_at, now)
    return before


@rerun_on_conflict
async def register_attendee(
    database: Database, principal: Principal, *, body: AttendeeRegister
) -> Registration:
    """Create the attendee record (``registered_at`` defaults to now) or update only the given
    timestamps. A check-in sent for a person already checked in moves the time to the one sent
    (the spec's "set or update"). The first check-in of a user at an event adds 1 to their
    reputation; a check-in that changes the time is an ``attendee.checked_in`` change. (The
    door, API scanner or console, checks in by ticket: ``tessera.checkins``.)"""
    async with database.transaction() as tx:
        event = await repository.get_event_row(tx, principal.project_id, body.event_id)
        user = await get_user_row(tx, principal.project_id, body.user())
        require_activated(principal, user, "be registered as an attendee")
        now = utcnow()
        # The pair's record, there or not, locked as the door locks it (docs/design.md, Locks).
        await repository.lock_attendees(tx, [(event.id, user.id)])
        new = await repository.add_attendee(
            tx,
            {
                "project_id": principal.project_id,
                "event_id": event.id,
                "user_id": user.id,
                "registered_at": body.registered_at or int(now.timestamp()),
                "created_at": now,
            },
        )
        if new is not None:
            attendee_id = new.id
        else:
            attendee_id = await repository.attendee_id_of(tx, event.id, user.id)
            if body.registered_at is not None:
                await repository.set_registered(tx, attendee_id, body.registered_at, now)
        checked_in, before = False, None
        if body.checked_in_at is not None:
            before = await check_in(tx, attendee_id, user, event.id, body.checked_in_at, now)
            checked_in = before != body.checked_in_at
        # Read back inside the transaction: one transaction per registration, not two.
        attendee = await repository.read_registered(tx, attendee_id, user=user, event=event)
        registered = AttendeeRegistered.model_validate(attendee)
        if new is not None or body.registered_at is not None:
            await record(tx, principal.project_id, EventType.ATTENDEE_REGISTERED, [registered])
        if checked_in:
            await record(tx, principal.project_id, EventType.ATTENDEE_CHECKED_IN, [registered])
        await tx.commit()
    return Registration(registered, before)
