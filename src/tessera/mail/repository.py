"""Mail statements: the outbox written by the use-cases (``service``), the sender's claims and
outcomes (``sender``), and what the console and the metrics show. Mails are read whole, in
their table's column order (``IdMixin``'s ``id`` comes last)."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, or_, select, update

from tessera.db import Rows, Transaction, table_of
from tessera.db.queue import claim
from tessera.models import Event, Mail, MailStatus, Project

MAILS_PER_ROUND = 10  # taken to send at once, over one connection


class MailRow(NamedTuple):
    project_id: uuid.UUID
    recipient: str
    subject: str
    text_body: str
    html_body: str
    ticket_pdfs: list[list[str | int]] | None
    cause: str
    status: MailStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    sent_at: datetime | None
    created_at: datetime
    id: uuid.UUID


class MailShown(NamedTuple):
    """A mail as the console lists it: never its bodies (they hold ticket links)."""

    id: uuid.UUID
    recipient: str
    subject: str
    cause: str
    status: MailStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    sent_at: datetime | None
    created_at: datetime


class EventFactsRow(NamedTuple):
    id: uuid.UUID
    name: str
    location: str
    start_date: int
    end_date: int


class _MailsByStatus(NamedTuple):
    status: MailStatus
    mails: int


_MAILS, _EVENTS, _PROJECTS = table_of(Mail), table_of(Event), table_of(Project)
_TICKET_EMAILS = select(_PROJECTS.c.ticket_emails).where(_PROJECTS.c.id == bindparam("id"))
_PDFS_IN_EMAILS = select(_PROJECTS.c.ticket_pdf_in_emails).where(_PROJECTS.c.id == bindparam("id"))
_DUE = (
    or_(_MAILS.c.status == MailStatus.QUEUED, _MAILS.c.status == MailStatus.SENDING),
    _MAILS.c.next_attempt_at <= bindparam("now"),
)
# Whether any mail is due, read before any write: an idle round takes no write lock.
_ANY_DUE = select(_MAILS.c.id).where(*_DUE).limit(1)
# Taken to send is marked sending under a lease (``next_attempt_at``), in one statement: no two
# senders take one mail. Right before the message goes to the server it is marked sent
# (``_HAND_OVER``): a sender that dies after that leaves it sent, never sent again (at most
# once, docs/email.md); one that dies before leaves it to be taken again when the lease ends.
_TAKE = claim(
    _MAILS,
    due=_DUE,
    order_by=(_MAILS.c.next_attempt_at,),
    limit=MAILS_PER_ROUND,
    values={"status": MailStatus.SENDING, "next_attempt_at": bindparam("lease_until")},
)
_MINE = and_(
    _MAILS.c.status == MailStatus.SENDING, _MAILS.c.next_attempt_at == bindparam("lease_until")
)
_HAND_OVER = (
    update(_MAILS).where(_MAILS.c.id == bindparam("id"), _MINE).values(status=MailStatus.SENT)
)
# An outcome is written only on a mail this sender took (or handed over) and not settled since.
_TAKEN = (
    _MAILS.c.id == bindparam("id"),
    or_(_MINE, _MAILS.c.status == MailStatus.SENT),
    _MAILS.c.sent_at.is_(None),
)
_SETTLE = (
    update(_MAILS)
    .where(*_TAKEN)
    .values(
        status=bindparam("status"),
        attempts=bindparam("attempts"),
        last_error=bindparam("last_error"),
        sent_at=bindparam("sent_at"),
        # Settled, the mail is not sent again: its ticket links are not kept.
        text_body="",
        html_body="",
        ticket_pdfs=None,
    )
)
_BACK = (
    update(_MAILS)
    .where(*_TAKEN)
    .values(
        status=MailStatus.QUEUED,
        attempts=bindparam("attempts"),
        next_attempt_at=bindparam("next_attempt_at"),
        last_error=bindparam("last_error"),
    )
)
_OF_PROJECT = _MAILS.c.project_id == bindparam("project_id")
_RECENT = (
    select(*(_MAILS.c[name] for name in MailShown._fields))
    .where(_OF_PROJECT)
    .order_by(_MAILS.c.created_at.desc(), _MAILS.c.id.desc())
    .limit(bindparam("limit"))
)
_BY_STATUS = select(_MAILS.c.status, func.count().label("mails")).group_by(_MAILS.c.status)
_PURGE = delete(_MAILS).where(
    _MAILS.c.status.in_([MailStatus.SENT, MailStatus.FAILED]),
    _MAILS.c.created_at < bindparam("before"),
)
_EVENT_FACTS = select(
    _EVENTS.c.id, _EVENTS.c.name, _EVENTS.c.location, _EVENTS.c.start_date, _EVENTS.c.end_date
).where(
    _EVENTS.c.project_id == bindparam("project_id"),
    _EVENTS.c.id.in_(bindparam("ids", expanding=True)),
)


# The use-cases'.


async def ticket_emails(rows: Rows, project_id: uuid.UUID) -> bool:
    """Whether the project emails tickets (where no credential carries it: a claim)."""
    return bool(await rows.scalar(_TICKET_EMAILS, id=project_id))


async def pdfs_in_emails(rows: Rows, project_id: uuid.UUID) -> bool:
    """Whether the project's ticket emails carry each ticket's PDF."""
    return bool(await rows.scalar(_PDFS_IN_EMAILS, id=project_id))


async def add_mail(tx: Transaction, values: dict[str, Any]) -> bool:
    """A mail to send, unless the project has one of its ``cause`` already (then nothing is
    written: one cause, one mail); whether it was written."""
    return await tx.insert_new(Mail, values, unique=("project_id", "cause"))


async def event_facts(
    rows: Rows, project_id: uuid.UUID, event_ids: set[uuid.UUID]
) -> list[EventFactsRow]:
    """What an email tells of each of the project's events ``event_ids``."""
    if not event_ids:
        return []
    return await rows.all(_EVENT_FACTS, EventFactsRow, project_id=project_id, ids=list(event_ids))


# The sender's.


async def any_due(rows: Rows, now: datetime) -> bool:
    return await rows.scalar(_ANY_DUE, now=now) is not None


async def take_due(tx: Transaction, now: datetime, lease_until: datetime) -> list[MailRow]:
    """Up to ``MAILS_PER_ROUND`` due mails, oldest due first, marked sending until
    ``lease_until`` (their ``next_attempt_at``; on PostgreSQL skipping those another sender is
    taking)."""
    return await tx.all(_TAKE, MailRow, now=now, lease_until=lease_until)


async def hand_over(tx: Transaction, mail: MailRow) -> bool:
    """The mail, taken by this sender (``mail.next_attempt_at`` its lease), marked sent: it is
    about to go to the server. False when the lease was lost (another sender has it)."""
    return bool(await tx.execute(_HAND_OVER, id=mail.id, lease_until=mail.next_attempt_at))


async def settle(
    tx: Transaction,
    mail: MailRow,
    *,
    status: MailStatus,
    attempts: int,
    last_error: str | None,
    sent_at: datetime | None,
) -> bool:
    """A taken mail's outcome: taken by the server (``sent_at``), failed for good, or sent
    with no word of it (``sent``, no ``sent_at``), its bodies emptied; whether the mail was
    still the caller's."""
    return bool(
        await tx.execute(
            _SETTLE,
            id=mail.id,
            lease_until=mail.next_attempt_at,
            status=status,
            attempts=attempts,
            last_error=last_error,
            sent_at=sent_at,
        )
    )


async def put_back(
    tx: Transaction, mail: MailRow, *, attempts: int, next_attempt_at: datetime, last_error: str
) -> bool:
    """A taken mail that the server did not take: queued again until ``next_attempt_at``;
    whether it was still the caller's."""
    return bool(
        await tx.execute(
            _BACK,
            id=mail.id,
            lease_until=mail.next_attempt_at,
            attempts=attempts,
            next_attempt_at=next_attempt_at,
            last_error=last_error,
        )
    )


async def purge(tx: Transaction, before: datetime) -> int:
    """Forget the mails sent or failed that were written before ``before``."""
    return await tx.execute(_PURGE, before=before)


# The console's and the metrics'.


async def recent_mails(rows: Rows, project_id: uuid.UUID, *, limit: int) -> list[MailShown]:
    """The project's newest mails, newest first."""
    return await rows.all(_RECENT, MailShown, project_id=project_id, limit=limit)


async def mails_by_status(rows: Rows) -> dict[MailStatus, int]:
    """Every project's mails by status."""
    return {row.status: row.mails for row in await rows.all(_BY_STATUS, _MailsByStatus)}
