import uuid
from datetime import datetime

from tessera.schemas import SnakeModel


class ProjectWalletRead(SnakeModel):
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    address: str
    type: str
    custody: str
    project_id: uuid.UUID
