"""Job and worker-heartbeat statements."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, case, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from tessera.db import Rows, Transaction, skip_locked, table_of
from tessera.models import Job, JobStatus, Project, WorkerHeartbeat


class JobRow(NamedTuple):
    """A job's whole row (``jobs``)."""

    project_id: uuid.UUID
    kind: str
    subject: str
    payload: dict[str, Any]
    status: JobStatus
    attempts: int
    run_after: datetime
    lease_until: datetime | None
    last_error: str | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


async def add_jobs(tx: Transaction, jobs: Sequence[dict[str, Any]]) -> list[JobRow]:
    """New jobs of ``jobs`` (the other columns as their defaults), as written."""
    return await tx.insert(Job, jobs, JobRow)


async def next_due(session: AsyncSession, now: datetime) -> Job | None:
    """The due job that came due first (queued and due, or running with its lease run out: a
    dead worker's job keeps its place) whose subject is not running under another lease,
    locked (skipped by the other workers on PostgreSQL)."""
    other = aliased(Job)
    busy = exists().where(
        and_(
            other.subject == Job.subject,
            other.id != Job.id,
            other.status == JobStatus.RUNNING,
            other.lease_until > now,
        )
    )
    due = or_(
        and_(Job.status == JobStatus.QUEUED, Job.run_after <= now),
        and_(
            Job.status == JobStatus.RUNNING,
            or_(Job.lease_until.is_(None), Job.lease_until <= now),
        ),
    )
    statement = select(Job).where(due, ~busy).order_by(Job.run_after, Job.created_at).limit(1)
    job: Job | None = await session.scalar(skip_locked(statement))
    return job


_HELD = and_(
    Job.id == bindparam("id"),
    Job.attempts == bindparam("attempts"),
    Job.status == JobStatus.RUNNING,
    Job.lease_until > bindparam("now"),
)
_RENEW = (
    update(Job).where(_HELD).values(lease_until=bindparam("until"), updated_at=bindparam("now"))
)
# A no-op write: it takes the job's row lock, so that no other worker claims it until the
# handler's transaction ends.
_HOLD = update(Job).where(_HELD).values(updated_at=Job.updated_at)


async def renew_lease(tx: Transaction, job: Job, now: datetime, until: datetime) -> bool:
    """The lease of this attempt at ``job`` runs to ``until``; whether it still held it."""
    return bool(await tx.execute(_RENEW, id=job.id, attempts=job.attempts, now=now, until=until))


async def hold_lease(tx: Transaction, job: Job, now: datetime) -> bool:
    """Whether this attempt at ``job`` still holds its lease, locked until ``tx`` ends."""
    return bool(await tx.execute(_HOLD, id=job.id, attempts=job.attempts, now=now))


async def settle(session: AsyncSession, job: Job, values: dict[str, Any]) -> bool:
    """``values`` written on ``job`` if this attempt still holds it; whether it did."""
    settled = await session.scalar(
        update(Job)
        .where(Job.id == job.id, Job.attempts == job.attempts, Job.status == JobStatus.RUNNING)
        .values(lease_until=None, **values)
        .returning(Job.id)
    )
    return settled is not None


async def newest(session: AsyncSession, *, status: JobStatus | None, limit: int) -> list[Job]:
    statement = select(Job).order_by(Job.created_at.desc()).limit(limit)
    if status is not None:
        statement = statement.where(Job.status == status)
    return list(await session.scalars(statement))


# The console's job queue page (tessera.console.jobs).
_JOBS, _PROJECTS = table_of(Job), table_of(Project)


class JobCount(NamedTuple):
    kind: str
    status: JobStatus
    jobs: int


class JobShown(NamedTuple):
    id: uuid.UUID
    project_id: uuid.UUID
    kind: str
    subject: str
    status: JobStatus
    attempts: int
    run_after: datetime
    created_at: datetime
    last_error: str | None
    project_name: str


class JobQueue(NamedTuple):
    counts: list[JobCount]  # by kind and status
    newest: list[JobShown]  # newest first


_NEWEST = (
    select(
        _JOBS.c.id,
        _JOBS.c.project_id,
        _JOBS.c.kind,
        _JOBS.c.subject,
        _JOBS.c.status,
        _JOBS.c.attempts,
        _JOBS.c.run_after,
        _JOBS.c.created_at,
        _JOBS.c.last_error,
        _PROJECTS.c.name.label("project_name"),
    )
    .join(_PROJECTS, _PROJECTS.c.id == _JOBS.c.project_id)
    .order_by(_JOBS.c.created_at.desc(), _JOBS.c.id.desc())
    .limit(bindparam("limit"))
)
_COUNTS = select(_JOBS.c.kind, _JOBS.c.status, func.count().label("jobs")).group_by(
    _JOBS.c.kind, _JOBS.c.status
)
_OF_PROJECT = _JOBS.c.project_id == bindparam("project_id")
_OF_STATUS = _JOBS.c.status == bindparam("status")
# Every project's or one's, any status or one: each statement built once.
_SHOWN = {
    (mine, status): _NEWEST.where(
        *([_OF_PROJECT] if mine else []), *([_OF_STATUS] if status else [])
    )
    for mine in (False, True)
    for status in (False, True)
}
_COUNTS_OF = {False: _COUNTS, True: _COUNTS.where(_OF_PROJECT)}
_PROJECT_OF_JOB = select(_JOBS.c.project_id).where(_JOBS.c.id == bindparam("id"))


async def queue(
    rows: Rows, project_id: uuid.UUID | None, status: JobStatus | None, *, limit: int
) -> JobQueue:
    """Counts by kind and status, and the newest ``limit`` jobs (of one project, of one
    status), each with its project's name."""
    values: dict[str, object] = {}
    if project_id is not None:
        values["project_id"] = project_id
    counts = await rows.all(_COUNTS_OF[project_id is not None], JobCount, **values)
    if status is not None:
        values["status"] = status
    shown = _SHOWN[project_id is not None, status is not None]
    return JobQueue(counts, await rows.all(shown, JobShown, limit=limit, **values))


async def project_of_job(rows: Rows, job_id: uuid.UUID) -> uuid.UUID | None:
    project_id: uuid.UUID | None = await rows.scalar(_PROJECT_OF_JOB, id=job_id)
    return project_id


# Workers' heartbeats (tessera.jobs.heartbeat).
_BEATS = table_of(WorkerHeartbeat)
_HEARTBEAT_MOVE = (
    update(_BEATS)
    .where(_BEATS.c.worker_id == bindparam("worker_id"))
    .values(beat_at=bindparam("now"))
)
_HEARTBEAT_FORGET = delete(_BEATS).where(_BEATS.c.worker_id == bindparam("worker_id"))
_HEARTBEAT_SILENT = delete(_BEATS).where(_BEATS.c.beat_at < bindparam("before"))
_HEARTBEAT_FRESHEST = select(
    func.max(_BEATS.c.beat_at).label("beat_at"),
    func.count(case((_BEATS.c.beat_at >= bindparam("since"), 1))).label("beating"),
)


class Freshest(NamedTuple):
    beat_at: datetime | None  # the last beat of any worker
    beating: int  # the workers that have beaten since ``since``


async def move_heartbeat(tx: Transaction, worker_id: str, now: datetime) -> bool:
    """The worker's row beats at ``now``; whether it was there to move."""
    return bool(await tx.execute(_HEARTBEAT_MOVE, worker_id=worker_id, now=now))


async def add_heartbeat(tx: Transaction, row: dict[str, Any]) -> None:
    """A worker's row (``worker_heartbeats``), with all its columns."""
    await tx.insert(WorkerHeartbeat, [row])


async def forget_silent_heartbeats(tx: Transaction, before: datetime) -> None:
    """The rows of the workers that have not beaten since ``before`` go."""
    await tx.execute(_HEARTBEAT_SILENT, before=before)


async def forget_heartbeat(tx: Transaction, worker_id: str) -> None:
    await tx.execute(_HEARTBEAT_FORGET, worker_id=worker_id)


async def freshest_heartbeat(rows: Rows, since: datetime) -> Freshest:
    row = await rows.first(_HEARTBEAT_FRESHEST, Freshest, since=since)
    assert row is not None  # an aggregate without GROUP BY: one row
    return row
