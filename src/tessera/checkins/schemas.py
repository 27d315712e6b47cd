import uuid
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from tessera.schemas import SnakeInput, SnakeModel

Nonce = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128),
    Field(
        description="The scanner's id of this scan (1-128 characters): the same nonce again "
        "gets the first answer again and counts once; `POST /v1/checkins/annul` names it."
    ),
]


class CheckinRequest(SnakeInput):
    secret: Annotated[str, StringConstraints(pattern=r"^[A-Za-z2-7]{52}$")] = Field(
        description="The ticket's secret, as its QR code holds it (52 characters A-Z, 2-7; "
        "either case)."
    )
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
    reason: Literal["already_checked_in", "wrong_event", "unknown", "held_outside"]
    checked_in_at: int | None = Field(
        default=None,
        description="`already_checked_in`: when the earlier scan checked the holder in.",
        exclude_if=lambda value: value is None,
    )


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
