"""Job and worker-heartbeat statements."""

from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from tessera.db import skip_locked, table_of
from tessera.models import Job, JobStatus, WorkerHeartbeat


async def next_due(session: AsyncSession, now: datetime) -> Job | None:
    """The oldest due job (queued, or running with its lease run out) whose subject is not
    running under another lease, locked (skipped by the other workers on PostgreSQL)."""
    other = aliased(Job)
    busy = exists().where(
        and_(
            other.subject == Job.subject,
            other.id != Job.id,
            other.status == JobStatus.RUNNING,
            other.run_after > now,
        )
    )
    statement = (
        select(Job)
        .where(Job.status.in_((JobStatus.QUEUED, JobStatus.RUNNING)), Job.run_after <= now, ~busy)
        .order_by(Job.run_after, Job.created_at)
        .limit(1)
    )
    job: Job | None = await session.scalar(skip_locked(statement))
    return job


async def settle(session: AsyncSession, job: Job, values: dict[str, Any]) -> bool:
    """``values`` written on ``job`` if this attempt still holds it; whether it did."""
    settled = await session.scalar(
        update(Job)
        .where(Job.id == job.id, Job.attempts == job.attempts, Job.status == JobStatus.RUNNING)
        .values(**values)
        .returning(Job.id)
    )
    return settled is not None


async def newest(session: AsyncSession, *, status: JobStatus | None, limit: int) -> list[Job]:
    statement = select(Job).order_by(Job.created_at.desc()).limit(limit)
    if status is not None:
        statement = statement.where(Job.status == status)
    return list(await session.scalars(statement))


# Workers' heartbeats (tessera.jobs.heartbeat).
_BEATS = table_of(WorkerHeartbeat)
HEARTBEAT_MOVE = (
    update(_BEATS)
    .where(_BEATS.c.worker_id == bindparam("worker_id"))
    .values(beat_at=bindparam("now"))
)
HEARTBEAT_FORGET = delete(_BEATS).where(_BEATS.c.worker_id == bindparam("worker_id"))
HEARTBEAT_SILENT = delete(_BEATS).where(_BEATS.c.beat_at < bindparam("before"))
HEARTBEAT_FRESHEST = select(
    func.max(_BEATS.c.beat_at).label("beat_at"),
    func.count(case((_BEATS.c.beat_at >= bindparam("since"), 1))).label("beating"),
)
