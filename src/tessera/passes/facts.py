"""What a wallet's ticket shows, the same for Apple's and Google's."""

import uuid
from datetime import UTC, datetime
from typing import NamedTuple

from tessera.seats.rules import SeatView, seat_of
from tessera.tickets.repository import TicketItem, TicketPageRow


class PassFacts(NamedTuple):
    """What a pass shows of its ticket."""

    serial: uuid.UUID  # the item's id: one pass per item, whatever its version
    organization: str  # the project's name
    product: str
    item_number: int
    holder: str | None
    event_name: str | None
    event_location: str | None
    event_address: str | None
    event_start: int | None
    event_end: int | None
    secret: str | None  # None: voided (passed on to someone else), no barcode
    seat: SeatView | None = None  # a seated product's ticket


def facts_of(item: TicketItem, shown: TicketPageRow, secret: str | None) -> PassFacts:
    """The facts of the ticket as its page shows them, with ``secret`` (None: voided)."""
    names = (shown.first_name, shown.last_name)
    return PassFacts(
        serial=item.id,
        organization=shown.project_name,
        product=shown.product_name,
        item_number=shown.item_id,
        holder=" ".join(n for n in names if n) or None,
        event_name=shown.event_name,
        event_location=shown.event_location,
        event_address=shown.event_address,
        event_start=shown.event_start_date,
        event_end=shown.event_end_date,
        secret=secret,
        seat=seat_of(shown),
    )


def iso_date(unix: int) -> str:
    """Unix seconds as ISO 8601 in UTC, to the second (what both wallets read)."""
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds")
