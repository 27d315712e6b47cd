import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tessera.models import Job

# Kinds the chain worker runs (see tessera.models.job.Job).
CREATE_COLLECTION = "nft.create_collection"
MINT = "nft.mint"
TRANSFER = "nft.transfer"


def enqueue(
    session: AsyncSession, *, project_id: uuid.UUID, kind: str, payload: dict[str, Any]
) -> Job:
    """Add a job to the caller's transaction: it exists exactly when the change commits."""
    job = Job(project_id=project_id, kind=kind, payload=payload, status="queued", attempts=0)
    session.add(job)
    return job
