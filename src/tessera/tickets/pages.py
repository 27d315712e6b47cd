"""The ticket page, for the person who holds the item: ``GET /tickets/{token}`` shows the
product, its event, the holder's name, the item's state and a QR code of the ticket's secret,
what the door scans; ``GET /tickets/{token}/event.ics`` puts the event in a calendar;
``GET /tickets/{token}/ticket.pdf`` is the ticket to print (``tessera.tickets.pdf``);
its Apple Wallet pass and Google Wallet link are ``tessera.passes.pages``', linked where the
server is configured for them.

No credential: the token in the path is one, as a claim link's is, so the pages carry the claim
pages' headers (``tessera.web.pages.HEADERS``: nothing from another host, no Referer, not cached).
The QR code is drawn here as SVG inside the page: no script, no second request carrying the
token, and a page saved to the phone still has its code. An unknown, malformed or superseded
token (reissued, or the item transferred: its new holder has a new page) is one 404 page, the
same for all, so that a stranger learns nothing of an item from its old address.
"""

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

import icalendar
import segno
from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from tessera.config import SettingsDep
from tessera.db import DatabaseDep, Rows
from tessera.products.schemas import is_fully_redeemed
from tessera.ticket_keys import codes as codes
from tessera.ticket_keys.dependencies import SignersDep
from tessera.tickets import repository
from tessera.tickets.pdf import PrintedTicket, ticket_pdf
from tessera.tickets.repository import TicketItem, TicketPageRow
from tessera.tickets.service import item_of_code
from tessera.web.pages import HEADERS, page

router = APIRouter(include_in_schema=False)

NOT_VALID = (
    "This ticket is not valid",
    [
        "Check that the address is complete. A ticket that was reissued or passed on to "
        "someone else has a new address: ask the organiser for it."
    ],
)
NO_EVENT = ("This ticket has no event", ["There is nothing to put in a calendar."])


@dataclass(frozen=True, slots=True)
class Ticket:
    """A ticket found by its page token: the item and what its page shows."""

    item: TicketItem
    shown: TicketPageRow


@dataclass(frozen=True, slots=True)
class State:
    """Where the ticket stands, as its page says it: ``kind`` is ``valid``, ``checked-in``
    or ``redeemed`` (the style), ``checked_in_at`` when the holder was checked in."""

    kind: str
    heading: str
    checked_in_at: int | None
    uses: str | None


async def ticket_of_token(rows: Rows, token: str, hash_key: bytes) -> Ticket | None:
    item = await item_of_code(rows, codes.Use.PAGE, token, hash_key=hash_key)
    if item is None:
        return None
    shown = await repository.ticket_page(rows, item)
    return None if shown is None else Ticket(item, shown)


async def _printable(rows: Rows, token: str, hash_key: bytes) -> tuple[Ticket, str] | None:
    """The ticket and the paper its project prints on."""
    ticket = await ticket_of_token(rows, token, hash_key)
    if ticket is None:
        return None
    return ticket, await repository.paper_of(rows, ticket.item.project_id)


def state_of(shown: TicketPageRow) -> State:
    """Fully redeemed first (the door refuses it, checked in or not), then checked in (the
    holder at the product's event), else valid."""
    uses = None
    if shown.redemption_quantity > 1:
        uses = f"{shown.redemption_count} of {shown.redemption_quantity} uses redeemed"
    if is_fully_redeemed(shown.redemption_count, shown):
        return State("redeemed", "Fully redeemed", shown.checked_in_at, uses)
    if shown.checked_in_at is not None:
        return State("checked-in", "Checked in", shown.checked_in_at, uses)
    return State("valid", "Valid", None, uses)


def qr_svg(secret: str) -> Markup:
    """The secret as a QR code, inline SVG sized by the stylesheet (``viewBox`` only) with
    the standard quiet zone of four modules; colours as attributes, so that ``style-src 'self'``
    holds. The secret is base32 in capitals: the code's compact alphanumeric mode (143
    characters: a version 7 code at level M)."""
    code = segno.make(secret, error="m", micro=False)
    svg = code.svg_inline(
        border=4, omitsize=True, dark="#000", light="#fff", svgclass=None, lineclass=None
    )
    return Markup(svg)  # noqa: S704 - segno's own markup of [A-Z2-7] text: nothing to escape


def calendar_of(ticket: Ticket) -> bytes:
    """The event as iCalendar: one VEVENT whose UID is the item's (a calendar that imports
    it twice updates it), times in UTC."""
    shown = ticket.shown
    assert shown.event_start_date is not None and shown.event_end_date is not None
    event = icalendar.Event()
    event.add("uid", f"{ticket.item.id}@tessera")
    event.add("dtstamp", datetime.now(UTC).replace(microsecond=0))
    event.add("dtstart", datetime.fromtimestamp(shown.event_start_date, UTC))
    event.add("dtend", datetime.fromtimestamp(shown.event_end_date, UTC))
    event.add("summary", shown.event_name)
    event.add("location", ", ".join(p for p in (shown.event_location, shown.event_address) if p))
    event.add("description", f"{shown.product_name}, item #{shown.item_id}")
    calendar = icalendar.Calendar()
    calendar.add("prodid", "-//Tessera//Ticket//EN")
    calendar.add("version", "2.0")
    calendar.add_component(event)
    return bytes(calendar.to_ical())


def missing(request: Request, heading: str, lines: list[str]) -> HTMLResponse:
    context = {"ok": False, "heading": heading, "lines": lines, "retry": False}
    return page(request, "claim_result.html", context, status=404)


@router.get("/tickets/{token}", response_class=HTMLResponse)
async def ticket_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    signers: SignersDep,
    token: str,
) -> HTMLResponse:
    hash_key = settings.hash_key_bytes
    ticket = await database.read(ticket_of_token, token, hash_key)
    if ticket is None:
        return missing(request, *NOT_VALID)
    shown = ticket.shown
    names = (shown.first_name, shown.last_name)
    signer = await signers.of(database, ticket.item.project_id)
    secret = signer.secret(ticket.item.id, ticket.item.ticket_version)
    context = {
        "ticket": shown,
        "holder": " ".join(n for n in names if n),
        "state": state_of(shown),
        "secret": secret,
        "qr": qr_svg(secret),
        "calendar": f"{token}/event.ics",  # relative: /tickets/{token}/event.ics
        "pdf": f"{token}/ticket.pdf",
        "apple_pass": f"{token}/pass.pkpass" if settings.apple_wallet else None,
        "google_wallet": f"{token}/google-wallet" if settings.google_wallet else None,
    }
    return page(request, "ticket.html", context)


@router.get("/tickets/{token}/event.ics", response_model=None)
async def ticket_calendar(
    request: Request, database: DatabaseDep, settings: SettingsDep, token: str
) -> Response:
    ticket = await database.read(ticket_of_token, token, settings.hash_key_bytes)
    if ticket is None:
        return missing(request, *NOT_VALID)
    if ticket.shown.event_name is None:
        return missing(request, *NO_EVENT)
    return Response(
        calendar_of(ticket),
        media_type="text/calendar",
        headers={**HEADERS, "Content-Disposition": 'attachment; filename="event.ics"'},
    )


@router.get("/tickets/{token}/ticket.pdf", response_model=None)
async def ticket_pdf_page(
    request: Request, database: DatabaseDep, settings: SettingsDep, signers: SignersDep, token: str
) -> Response:
    found = await database.read(_printable, token, settings.hash_key_bytes)
    if found is None:
        return missing(request, *NOT_VALID)
    ticket, paper = found
    signer = await signers.of(database, ticket.item.project_id)
    printed = PrintedTicket(ticket.shown, signer.secret(ticket.item.id, ticket.item.ticket_version))
    # In a thread: a page takes some 20 ms to draw, too long to hold the event loop.
    pdf = await asyncio.to_thread(ticket_pdf, [printed], paper)
    return Response(
        pdf,
        media_type="application/pdf",
        headers={**HEADERS, "Content-Disposition": 'inline; filename="ticket.pdf"'},
    )
