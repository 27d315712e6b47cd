"""What an email says: its subject and its plain-text and HTML bodies, rendered from the
package's templates (``templates/mail``, Jinja2; the HTML ones autoescaped, so that a product
or a person named ``<b>`` reads as typed). Nothing here reads the database or sends."""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "mail"
SUBJECT_LENGTH = 255

_templates = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(enabled_extensions=("html",), default=False),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_templates.filters["date"] = lambda ts: datetime.fromtimestamp(ts, UTC).strftime(
    "%d %B %Y, %H:%M UTC"
)


class Kind(StrEnum):
    """Why a ticket email is sent: the change that gave the user the items."""

    ISSUED = "issued"  # POST /v1/products/{id}/items, and its older twin
    ORDERED = "ordered"  # an order completed
    CLAIMED = "claimed"  # a claim through a claim link
    TRANSFERRED = "transferred"  # a transfer in
    REISSUED = "reissued"  # a new secret and page for the item


class EventFacts(NamedTuple):
    """What an email tells of a product's event."""

    name: str
    location: str
    start_date: int
    end_date: int


class Ticket(NamedTuple):
    """One ticket an email links to."""

    product: str  # the product's name
    number: int  # the item's number within its product
    event_id: uuid.UUID | None
    url: str  # the ticket's page (tessera.tickets.service.ticket_url)
    secret: str  # what its QR code holds, to type in at the door (tessera.ticket_keys.codes)
    apple_pass: str | None = None  # its Apple Wallet pass, where the server signs them
    google_wallet: str | None = None  # its Google Wallet link, where the server has one
    seat: str | None = None  # a seated product's ticket: its seat (``seats.rules.label``)


class Letter(NamedTuple):
    subject: str
    text: str
    html: str


def _subject(text: str) -> str:
    """One line (a header: no line break may reach it), at most the column's length."""
    line = " ".join(text.split())
    return line if len(line) <= SUBJECT_LENGTH else line[: SUBJECT_LENGTH - 1] + "…"


def _title(tickets: Sequence[Ticket], events: dict[uuid.UUID, EventFacts]) -> str | None:
    """What the tickets are for: their one event, else their one product, else nothing."""
    event_ids = {ticket.event_id for ticket in tickets}
    if len(event_ids) == 1:
        [event_id] = event_ids
        event = events.get(event_id) if event_id is not None else None
        if event is not None:
            return event.name
    products = {ticket.product for ticket in tickets}
    return next(iter(products)) if len(products) == 1 else None


def _ticket_subject(kind: Kind, count: int, title: str | None) -> str:
    what = "your ticket" if count == 1 else f"your {count} tickets"
    if kind is Kind.TRANSFERRED:
        moved = "A ticket was" if count == 1 else f"{count} tickets were"
        return f"{moved} transferred to you" + (f": {title}" if title else "")
    if kind is Kind.REISSUED:
        what = "your new ticket" if count == 1 else f"your {count} new tickets"
    return what[0].upper() + what[1:] + (f" for {title}" if title else "")


def _render(name: str, context: dict[str, Any]) -> tuple[str, str]:
    text = _templates.get_template(f"{name}.txt").render(context)
    html = _templates.get_template(f"{name}.html").render(context)
    return text, html


def tickets_letter(
    kind: Kind,
    *,
    first_name: str | None,
    tickets: Sequence[Ticket],
    events: dict[uuid.UUID, EventFacts],
) -> Letter:
    """The email of one user's tickets (one link each), for the change ``kind``."""
    title = _title(tickets, events)
    shown = [
        {"ticket": ticket, "event": events.get(ticket.event_id) if ticket.event_id else None}
        for ticket in tickets
    ]
    text, html = _render(
        "tickets",
        {
            "kind": kind.value,
            "first_name": first_name,
            "tickets": shown,
            "count": len(tickets),
            "title": title,
        },
    )
    return Letter(_subject(_ticket_subject(kind, len(tickets), title)), text, html)


def invitation_letter(
    *, product: str, event: EventFacts | None, claim_url: str, expires_at: int | None
) -> Letter:
    """A claim link's invitation: the claim page's URL, for the person the link is for."""
    title = event.name if event is not None else product
    text, html = _render(
        "claim_invite",
        {
            "product": product,
            "event": event,
            "claim_url": claim_url,
            "expires_at": expires_at,
            "title": title,
        },
    )
    return Letter(_subject(f"Claim your ticket for {title}"), text, html)


def offer_letter(
    *,
    first_name: str | None,
    product: str,
    event: EventFacts | None,
    quantity: int,
    claim_url: str,
    expires_at: int,
) -> Letter:
    """A waiting list's offer: the claim page's URL for the person next in line."""
    title = event.name if event is not None else product
    text, html = _render(
        "waiting_offer",
        {
            "first_name": first_name,
            "product": product,
            "event": event,
            "quantity": quantity,
            "claim_url": claim_url,
            "expires_at": expires_at,
            "title": title,
        },
    )
    return Letter(_subject(f"Your turn: tickets for {title}"), text, html)
