import re
import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BeforeValidator, Field, StringConstraints

from tessera.schemas import PageParams, Pagination, SnakeInput, SnakeModel
from tessera.seats.schemas import SeatRef
from tessera.ticket_keys.schemas import PublicCheckinKey

Nonce = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128),
    Field(
        description="The scanner's id of this scan (1-128 characters): the same nonce again "
        "gets the first answer again and counts once; `POST /v1/checkins/annul` names it."
    ),
]


# What a scanner read: any text a door can be shown, up to 1,000 characters without a control
# character (a NUL, a line break: a scanner's Enter is not part of the code).
Scanned = Annotated[
    str,
    StringConstraints(max_length=1000, pattern=r"^[^\x00-\x1F\x7F]*$"),
    Field(
        description="What the scanner read: the ticket's secret as its QR code holds it (143 "
        "characters A-Z, 2-7, either case; a 52-character secret handed out before secrets "
        "were signed still works online), or any other text up to 1,000 characters (answered "
        "`unknown`)."
    ),
]
Outcome = Literal[
    "ok", "already_checked_in", "wrong_event", "unknown", "invalid", "revoked", "held_outside"
]
Reason = Literal[
    "already_checked_in", "wrong_event", "unknown", "invalid", "revoked", "held_outside"
]


class CheckinRequest(SnakeInput):
    secret: Scanned
    nonce: Nonce
    event_id: uuid.UUID | None = Field(
        default=None, description="Refuse tickets of any other event (`wrong_event`)."
    )


class AnnulRequest(SnakeInput):
    nonce: Nonce


class Holder(SnakeModel):
    id: uuid.UUID
    email: str
    first_name: str | None
    last_name: str | None


class CheckinRead(SnakeModel):
    status: Literal["ok"]
    item_id: int
    product_id: uuid.UUID
    event_id: uuid.UUID | None
    checked_in_at: int = Field(
        description="Unix seconds: when this scan checked the holder in (for a product without "
        "an event, when it redeemed the use)."
    )
    holder: Holder
    redemption_count: int
    redemption_quantity: int


class CheckinCreated(CheckinRead):
    """The ``data`` of a ``checkin.created`` change: the answer, and the scan's nonce."""

    nonce: str


class CheckinRefused(SnakeModel):
    message: str
    reason: Reason
    checked_in_at: int | None = Field(
        default=None,
        description="`already_checked_in`: when the earlier scan checked the holder in.",
        exclude_if=lambda value: value is None,
    )


class CheckinDisplaced(CheckinRefused):
    """The ``data`` of a ``checkin.displaced`` change: an ``ok`` scan whose use a scan made
    offline before it took over (the earliest scan wins), its answer now, its nonce, and the
    nonce of the scan that took the use."""

    nonce: str
    conflict_with: str


class AnnulRead(SnakeModel):
    status: Literal["annulled"]
    nonce: str
    item_id: int
    product_id: uuid.UUID
    annulled_at: int
    redemption_count: int = Field(description="The item's count after the use was given back.")
    checked_in_at: int | None = Field(
        description="The holder's check-in time at the event now (what it was before the scan)."
    )


RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def _rfc3339(value: object) -> object:
    """A time as RFC 3339 text only (not a number of seconds, not a date alone)."""
    if not isinstance(value, str) or not RFC3339.match(value):
        raise ValueError("an RFC 3339 date and time with its offset, as text")
    return value


class OfflineScan(SnakeInput):
    """A scan a door made offline, uploaded later."""

    secret: Scanned
    nonce: Nonce
    event_id: uuid.UUID = Field(description="The event whose door made the scan.")
    scanned_at: Annotated[AwareDatetime, BeforeValidator(_rfc3339)] = Field(
        description="When the scan was made (RFC 3339, with its offset); one in the future is "
        "taken as made now."
    )
    device: Annotated[str, StringConstraints(min_length=1, max_length=128)] = Field(
        description="The scanner that made it (its own name for itself)."
    )


class BatchRequest(SnakeInput):
    scans: list[OfflineScan] = Field(min_length=1, max_length=500)


class BatchResult(SnakeModel):
    nonce: str
    status: Outcome
    checked_in_at: int | None = Field(
        description="`ok`: when this scan checked the holder in; `already_checked_in`: when the "
        "holder was checked in (the earlier scan's time, if this one conflicts); else null."
    )


class BatchRead(SnakeModel):
    results: list[BatchResult] = Field(description="One per scan, in the request's order.")


class DoorEvent(SnakeModel):
    id: uuid.UUID
    name: str
    start_date: int
    end_date: int
    location: str


class DoorEvents(SnakeModel):
    events: list[DoorEvent]


class SyncedTicket(SnakeModel):
    item_id: int = Field(description="The item's number within its product.")
    id: uuid.UUID = Field(description="The item's id: bytes 6-21 of its secret.")
    ticket_version: int = Field(description="A secret of an older version is revoked.")
    product_id: uuid.UUID
    holder_name: str | None
    redemption_count: int
    redemption_quantity: int
    checked_in_at: int | None = Field(description="The holder's check-in time at the event.")
    seat: SeatRef | None = Field(
        default=None,
        exclude_if=lambda seat: seat is None,
        description="A seated product's ticket: its seat (absent otherwise).",
    )


class SyncRead(SnakeModel):
    keys: list[PublicCheckinKey] = Field(description="The keys that verify the secrets.")
    tickets: list[SyncedTicket]
    cursor: str = Field(description="Pass as `since` next time: only what changed since.")


class ScanRead(SnakeModel):
    """A scan as ``GET /v1/checkins`` lists it."""

    nonce: str
    status: Outcome
    source: Literal["api", "console", "offline"]
    device: str | None
    product_item_id: uuid.UUID | None = Field(
        description="The item's id (as `product_item_id` in redeem and transfer; none for an "
        "unknown ticket). `item_id`, in other answers, is the item's number within its product."
    )
    event_id: uuid.UUID | None
    checked_in_at: int | None
    scanned_at: datetime | None = Field(description="When an offline scan was made.")
    created_at: datetime = Field(description="When the scan reached Tessera.")
    annulled_at: datetime | None
    conflict_with: str | None = Field(
        description="The nonce of the scan that had used the ticket before this one, made "
        "offline meanwhile, was uploaded: a ticket admitted twice."
    )


class CheckinFilter(PageParams):
    """A page of the scans at an event's door, optionally its conflicts only."""

    event_id: uuid.UUID = Field(description="The event whose door's scans to list.")
    conflicts: bool = Field(
        default=False, description="Only the conflicts: tickets two doors admitted offline."
    )


class ScanList(SnakeModel):
    scans: list[ScanRead]
    pagination: Pagination
