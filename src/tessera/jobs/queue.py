import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tessera.models import Job
from tessera.models.base import utcnow

# Kinds the chain worker runs (see tessera.models.job.Job).
CREATE_COLLECTION = "nft.create_collection"
MINT = "nft.mint"
TRANSFER = "nft.transfer"


def enqueue(
    session: AsyncSession,
    *,
    project_id: uuid.UUID,
    kind: str,
    subject: str,
    payload: dict[str, Any],
) -> Job:
    """Add a job to the caller's transaction: it exists exactly when the change commits.

    Jobs with the same ``subject`` run one at a time, in the order they were queued.
    """
    job = Job(
        project_id=project_id,
        kind=kind,
        subject=subject,
        payload=payload,
        status="queued",
        attempts=0,
        run_after=utcnow(),
    )
    session.add(job)
    return job


def item_subject(item_id: uuid.UUID) -> str:
    return f"item:{item_id}"


def collections_subject(project_id: uuid.UUID, chain: str) -> str:
    """Collection creation is serialised per project wallet and chain (see jobs.nft)."""
    return f"collections:{project_id}:{chain}"
