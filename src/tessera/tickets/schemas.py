import uuid

from pydantic import Field

from tessera.schemas import SnakeModel


class TicketRead(SnakeModel):
    item_id: int = Field(description="The item's number within its product.")
    secret: str = Field(
        description="What the QR code holds and a scanner sends to `POST /v1/checkins`: 52 "
        "characters A-Z and 2-7. A reissue or a transfer replaces it."
    )
    url: str = Field(description="The ticket's page, for its holder (no credential).")


class TicketReissued(SnakeModel):
    """The ``data`` of a ``ticket.reissued`` change: which item's ticket (never its secret)."""

    id: uuid.UUID
    item_id: int
    product_id: uuid.UUID
    user_id: uuid.UUID
