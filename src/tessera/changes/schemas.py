"""The change feed's shapes: the event types and what each one's ``data`` is, a place in the
feed and its cursor, a change and a page of them as the API answers."""

import json
import re
import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from pydantic import Field

from tessera.errors import InvalidInput
from tessera.schemas import SnakeInput, SnakeModel


class EventType(StrEnum):
    """Each type and what its ``data`` is (docs/webhooks.md)."""

    USER_CREATED = "user.created"  # the user, as users/create answers (with wallets)
    USER_ACTIVATED = "user.activated"  # the user, as users/profile answers
    ATTENDEE_REGISTERED = "attendee.registered"  # the attendee, as events/attendees answers
    ATTENDEE_CHECKED_IN = "attendee.checked_in"  # the attendee
    PRODUCT_CREATED = "product.created"  # the product, as GET /v1/products/{id} answers
    PRODUCT_UPDATED = "product.updated"  # the product
    ITEM_ISSUED = "item.issued"  # the item, as the items endpoints answer
    ITEM_REDEEMED = "item.redeemed"  # the item, as redeem answers
    ITEM_TRANSFERRED = "item.transferred"  # the transfer, as transfer answers
    ORDER_CREATED = "order.created"  # the order, as GET /v1/orders/{id} answers
    ORDER_COMPLETED = "order.completed"  # the order
    ORDER_CANCELLED = "order.cancelled"  # the order
    NFT_COLLECTION_CREATED = "nft.collection_created"  # the product
    NFT_MINTED = "nft.minted"  # the item
    NFT_TRANSFERRED = "nft.transferred"  # the item
    NFT_FAILED = "nft.failed"  # {"job", "error", and "product" or "product_item"}
    NFT_DRIFT_FOUND = "nft.drift_found"  # the reconciliation, as GET .../reconciliation answers
    CLAIM_CLAIMED = "claim.claimed"  # {"claim_link_id", "user_id", "product_item"}
    TICKET_REISSUED = "ticket.reissued"  # {"id", "item_id", "product_id", "user_id"}
    CHECKIN_CREATED = "checkin.created"  # the scan's answer, with its "nonce"
    CHECKIN_ANNULLED = "checkin.annulled"  # the annulled scan's answer, with "annulled_at"
    # An ok scan whose use an earlier offline scan took: its answer now (already_checked_in),
    # its "nonce" and "conflict_with", the nonce of the scan that took it.
    CHECKIN_DISPLACED = "checkin.displaced"
    # A mail given up: {"id", "to", "subject", "cause", "attempts", "error", "created_at"}
    MAIL_FAILED = "mail.failed"
    # A waiting list entry's offer: {"id", "product_id", "email", "quantity", "status",
    # "claim_link_id", "offer_expires_at", "user_id"} (the claimant's, claimed only).
    WAITING_LIST_OFFERED = "waiting_list.offered"
    WAITING_LIST_CLAIMED = "waiting_list.claimed"
    WAITING_LIST_EXPIRED = "waiting_list.expired"


EVENT_TYPES = tuple(EventType)


# A cursor is the place itself, ``<txid>.<seq>`` in decimals: any text of this pattern is a
# cursor (18 digits stay below PostgreSQL's bigint), so the OpenAPI's pattern says all there is.
CURSOR_PATTERN = r"^[0-9]{1,18}\.[0-9]{1,18}$"
_CURSOR = re.compile(CURSOR_PATTERN)


class Place(NamedTuple):
    """After which change a reader goes on: the ``(txid, seq)`` of the last one it had."""

    txid: int
    seq: int

    def cursor(self) -> str:
        return f"{self.txid}.{self.seq}"

    @classmethod
    def of_cursor(cls, cursor: str) -> "Place":
        if not _CURSOR.fullmatch(cursor):
            raise InvalidInput("after: not a cursor that Tessera gave")
        txid, seq = cursor.split(".")
        return cls(int(txid), int(seq))


START = Place(0, 0)  # before every change


class ChangeColumns(Protocol):
    """What a change is rendered from: a row of ``changes`` (``ChangeRow``, or any read of its
    columns)."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def type(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def data(self) -> str: ...


class ChangeRead(SnakeModel):
    id: uuid.UUID
    type: str
    created_at: datetime
    data: dict[str, Any]

    @classmethod
    def of(cls, row: ChangeColumns) -> "ChangeRead":
        return cls(id=row.id, type=row.type, created_at=row.created_at, data=json.loads(row.data))


class ChangeList(SnakeModel):
    events: list[ChangeRead]
    cursor: str


class ChangesQuery(SnakeInput):
    after: str | None = Field(
        default=None,
        max_length=37,
        pattern=CURSOR_PATTERN,
        description="The `cursor` of the previous page; absent: from the oldest change kept.",
    )
    limit: int = Field(default=100, ge=1, le=1000)
