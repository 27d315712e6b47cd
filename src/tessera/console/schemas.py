import uuid
from datetime import datetime

from tessera.schemas import SnakeModel


class OperatorRead(SnakeModel):
    id: uuid.UUID
    email: str
    created_at: datetime
