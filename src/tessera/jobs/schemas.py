import uuid
from datetime import datetime

from tessera.models import JobStatus
from tessera.schemas import SnakeModel


class JobRead(SnakeModel):
    id: uuid.UUID
    kind: str
    subject: str
    status: JobStatus
    attempts: int
    run_after: datetime
    last_error: str | None
    created_at: datetime
