"""The job queue: what a job is, how one is added, and how a handler says "not yet".

A job is a row of ``jobs`` (``tessera.models.Job``, with its ``JobStatus``) written in the same
transaction as the change that needs it. The worker (``tessera.jobs.worker``) runs it with the
handler registered for its kind.
"""

import uuid
from enum import StrEnum
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tessera.models import Job, JobStatus
from tessera.models.base import utcnow


class JobKind(StrEnum):
    CREATE_COLLECTION = "nft.create_collection"
    MINT = "nft.mint"
    TRANSFER = "nft.transfer"


class NotReady(Exception):
    """Raised by a handler whose job waits for another one (e.g. a mint for its collection).

    The job is queued again after ``delay`` seconds without spending an attempt.
    """

    def __init__(self, reason: str, *, delay: float = 2.0) -> None:
        super().__init__(reason)
        self.delay = delay


def enqueue(
    session: AsyncSession,
    *,
    project_id: uuid.UUID,
    kind: JobKind,
    subject: str,
    payload: dict[str, Any],
) -> Job:
    """Add a job to the caller's transaction: it exists exactly when the change commits.

    Jobs with the same ``subject`` (e.g. one item's mint and its transfers) never run at the
    same time; due jobs are claimed oldest ``run_after`` first, and a handler that must wait for
    an earlier step raises ``NotReady``.
    """
    job = Job(
        project_id=project_id,
        kind=kind,
        subject=subject,
        payload=payload,
        status=JobStatus.QUEUED,
        attempts=0,
        run_after=utcnow(),
    )
    session.add(job)
    return job
