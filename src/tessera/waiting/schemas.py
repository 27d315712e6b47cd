"""A product's waiting list as the API reads and answers it."""

import uuid
from datetime import datetime

from pydantic import Field

from tessera.models import EntryStatus
from tessera.schemas import Email, Integer, PageParams, Pagination, SnakeInput, SnakeModel
from tessera.users.schemas import Name

MAX_QUANTITY = 10  # tickets one entry waits for
OFFER_SECONDS = 86_400  # how long an offer stays open, unless the product says otherwise
MIN_OFFER_SECONDS, MAX_OFFER_SECONDS = 1, 30 * 86_400


class EntryCreate(SnakeInput):
    email: Email
    first_name: Name | None = None
    quantity: Integer = Field(
        default=1, ge=1, le=MAX_QUANTITY, description="Tickets wanted, offered together."
    )


class EntryFilter(PageParams):
    status: EntryStatus | None = Field(default=None, description="Only the entries in it.")


class EntryRead(SnakeModel):
    """An entry: ``position`` is its place in line (1 first) while it waits or holds an offer,
    null once it is out of line (claimed, expired, removed)."""

    id: uuid.UUID
    product_id: uuid.UUID
    email: str
    first_name: str | None
    quantity: int
    position: int | None
    status: EntryStatus
    offered_at: int | None = Field(description="Unix seconds: when its offer was made.")
    offer_expires_at: int | None = Field(
        description="Unix seconds: until when its offer can be claimed."
    )
    created_at: datetime
    updated_at: datetime


class EntryList(SnakeModel):
    entries: list[EntryRead]
    pagination: Pagination


class EntryChange(SnakeModel):
    """The ``data`` of a ``waiting_list.offered``, ``.claimed`` or ``.expired`` change: the
    entry, and its offer's claim link (never the link's token: it is the person's)."""

    id: uuid.UUID
    product_id: uuid.UUID
    email: str
    quantity: int
    status: EntryStatus
    claim_link_id: uuid.UUID | None
    offer_expires_at: int | None
    user_id: uuid.UUID | None = Field(default=None, description="The claimant (claimed only).")
