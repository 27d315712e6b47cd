import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from pydantic import ConfigDict, Field

from tessera.products.item_schemas import TransferItem
from tessera.schemas import (
    NOT_NULL,
    CamelInput,
    Email,
    Pagination,
    PositiveInt,
    RefId,
    SnakeInput,
    SnakeModel,
    UnixSeconds,
)
from tessera.users.schemas import Name


class LinkStatus(StrEnum):
    ACTIVE = "active"
    EXPIRED = "expired"
    USED_UP = "used_up"
    REVOKED = "revoked"


def link_status(link: Any, now: int) -> LinkStatus:
    """Where a link stands at ``now`` (Unix seconds); the one place these rules are written."""
    if link.revoked_at is not None:
        return LinkStatus.REVOKED
    if link.expires_at is not None and link.expires_at <= now:
        return LinkStatus.EXPIRED
    if link.claims >= link.max_claims:
        return LinkStatus.USED_UP
    return LinkStatus.ACTIVE


def invitation_needs_email(schema: dict[str, Any]) -> None:
    """``send_email: true`` needs ``email`` (400 otherwise, ``service.create_link``)."""
    schema.setdefault("allOf", []).append(
        {
            "anyOf": [
                {"properties": {"send_email": {"const": False}}},
                {"required": ["email"], "properties": {"email": NOT_NULL}},
            ]
        }
    )


class ClaimLinkCreate(SnakeInput):
    model_config = ConfigDict(json_schema_extra=invitation_needs_email)

    max_claims: PositiveInt = Field(default=1, description="Claims the link allows in all.")
    expires_at: UnixSeconds | None = Field(
        default=None, description="Unix seconds; must be in the future."
    )
    email: Email | None = Field(default=None, description="Only this person may claim.")
    reference_id: RefId | None = Field(
        default=None, description="Your own id for the link, unique in the project."
    )
    send_email: bool = Field(
        default=False,
        description="Email `email` an invitation with the link's `url` (the server must send "
        "email: 409 otherwise). Needs `email`.",
    )


class ClaimLinkRead(SnakeModel):
    id: uuid.UUID
    product_id: uuid.UUID
    token_hint: str = Field(description="The token's first characters, to tell links apart.")
    status: LinkStatus
    max_claims: int
    claims: int = Field(description="Claims made through the link so far.")
    expires_at: int | None
    email: str | None
    reference_id: str | None
    revoked_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, link: Any, now: int) -> Self:
        fields = {name: getattr(link, name) for name in cls.model_fields if name != "status"}
        return cls(**fields, status=link_status(link, now))


class ClaimLinkCreated(ClaimLinkRead):
    """The token and the URL are shown here only: Tessera keeps a keyed hash of the token."""

    token: str
    url: str = Field(description="The claim page for people (GET); POST it as a form to claim.")


class ClaimLinkList(SnakeModel):
    claim_links: list[ClaimLinkRead]
    pagination: Pagination


class ClaimableProduct(SnakeModel):
    name: str
    description: str | None
    type: str


class ClaimableEvent(SnakeModel):
    name: str
    description: str | None
    location: str
    address: str
    start_date: int
    end_date: int


class ClaimView(SnakeModel):
    """What a link offers, and nothing else of the project."""

    product: ClaimableProduct
    event: ClaimableEvent | None
    claims_left: int
    expires_at: int | None
    quantity: int = Field(
        description="Items one claim issues: 1, or a waiting list offer's quantity."
    )


class ClaimRequest(CamelInput):
    email: Email
    first_name: Name | None = None
    last_name: Name | None = None


class ClaimResult(SnakeModel):
    user_id: uuid.UUID
    product_item: TransferItem = Field(description="The (first) item the claim issued.")
    product_items: list[TransferItem] = Field(
        description="Every item the claim issued: one, or a waiting list offer's quantity."
    )
    ticket_url: str | None = Field(
        description="The (first) item's ticket page, to open at once (no credential: the URL "
        "is the ticket's, keep it private). null when this email claimed through the link "
        "before: anyone with the link could send that email again, so the page is shown to "
        "the first claim only."
    )
    ticket_urls: list[str] | None = Field(
        description="Every item's ticket page, in the order of `product_items` (null as "
        "`ticket_url` is)."
    )


class ClaimedEvent(SnakeModel):
    """The ``data`` of a ``claim.claimed`` change: the claim's answer and its link, without the
    ticket's URL (a credential for its page, kept out of the change feed and webhooks)."""

    user_id: uuid.UUID
    product_item: TransferItem
    product_items: list[TransferItem]
    claim_link_id: uuid.UUID
