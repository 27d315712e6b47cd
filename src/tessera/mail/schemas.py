import uuid
from datetime import datetime

from pydantic import Field

from tessera.schemas import SnakeModel


class MailFailed(SnakeModel):
    """The ``data`` of a ``mail.failed`` change: which mail, to whom, why it was given up
    (never its bodies: they hold ticket links)."""

    id: uuid.UUID
    to: str
    subject: str
    cause: str = Field(description="The change that wrote it, e.g. `items:<item id>:<user id>`.")
    attempts: int
    error: str
    created_at: datetime
