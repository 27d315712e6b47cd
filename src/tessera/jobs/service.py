"""Jobs as operators see them (``tessera jobs``): list, and retry a failed one."""

import uuid

from tessera.db import Database, rerun_on_conflict
from tessera.errors import JobNotFailed, JobNotFound
from tessera.jobs import repository
from tessera.jobs.repository import JobRow
from tessera.jobs.worker import Handlers, JobContext
from tessera.models import JobStatus
from tessera.models.base import utcnow


async def list_jobs(
    database: Database, *, status: JobStatus | None = None, limit: int = 50
) -> list[JobRow]:
    """The newest jobs first, optionally of one status."""
    return await database.read(repository.newest, status=status, limit=limit)


@rerun_on_conflict
async def retry_job(context: JobContext, handlers: Handlers, *, job_id: uuid.UUID) -> JobRow:
    """Queue a failed job again with fresh attempts, and show its row as queued again.

    Only a failed job can be retried: a queued or running one is still being worked on, and
    resetting a succeeded one would redo chain work.
    """
    async with context.database.transaction() as tx:
        job = await repository.get_job(tx, job_id)
        if job is None:
            raise JobNotFound
        if job.status != JobStatus.FAILED:
            raise JobNotFailed(f"job {job_id} is {job.status}, only a failed job can be retried")
        job = await repository.requeue(tx, job_id, utcnow())
        await tx.commit()
    handler = handlers.get(job.kind)
    if handler is not None:
        await handler.show(context, [job], JobStatus.QUEUED)
    return job
