"""Jobs as operators see them (``tessera jobs``): list, and retry a failed one."""

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.errors import JobNotFound
from tessera.jobs.worker import Handlers, JobContext
from tessera.models import Job, JobStatus
from tessera.models.base import utcnow


async def list_jobs(
    session: AsyncSession, *, status: JobStatus | None = None, limit: int = 50
) -> list[Job]:
    """The newest jobs first, optionally of one status."""
    statement = select(Job).order_by(Job.created_at.desc()).limit(limit)
    if status is not None:
        statement = statement.where(Job.status == status)
    return list(await session.scalars(statement))


async def retry_job(context: JobContext, handlers: Handlers, *, job_id: uuid.UUID) -> Job:
    """Queue a job again with fresh attempts, and show its row as queued again."""
    async with context.database.session() as session:
        job = await session.get(Job, job_id)
        if job is None:
            raise JobNotFound
        job.status, job.attempts, job.run_after, job.last_error = (
            JobStatus.QUEUED,
            0,
            utcnow(),
            None,
        )
        await session.commit()
    handler = handlers.get(job.kind)
    if handler is not None:
        await handler.show(context, job, JobStatus.QUEUED)
    return job
