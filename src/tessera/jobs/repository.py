"""Job and worker-heartbeat statements."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, case, delete, exists, func, or_, select, update

from tessera.db import Rows, Transaction, skip_locked, table_of
from tessera.models import Job, JobStatus, Project, WorkerHeartbeat
from tessera.models.base import UTCDateTime


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
    claim: uuid.UUID | None
    batch: str | None
    last_error: str | None
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class BatchStats(NamedTuple):
    """The due jobs of a batch key: how many, and when the oldest and youngest were queued."""

    due: int
    oldest: datetime | None
    youngest: datetime | None


async def add_jobs(tx: Transaction, jobs: Sequence[dict[str, Any]]) -> list[JobRow]:
    """New jobs of ``jobs`` (the other columns as their defaults), as written."""
    return await tx.insert(Job, jobs, JobRow)


_JOBS = table_of(Job)
_OTHER = _JOBS.alias("other")
_NOW = bindparam("now", type_=UTCDateTime())
# Queued and due, or running with its lease run out (a dead worker's job keeps its place).
_DUE = or_(
    and_(_JOBS.c.status == JobStatus.QUEUED, _JOBS.c.run_after <= _NOW),
    and_(
        _JOBS.c.status == JobStatus.RUNNING,
        or_(_JOBS.c.lease_until.is_(None), _JOBS.c.lease_until <= _NOW),
    ),
)
# First come, first served. Jobs queued by one transaction share its ``created_at`` on
# PostgreSQL (``now()`` is the transaction's start), so their ids (UUIDv7, increasing in the
# process that made them) keep the order in which they were queued: ten tickets of one order
# are minted in the order they were issued, whichever plan PostgreSQL picks.
_IN_LINE = (_JOBS.c.run_after, _JOBS.c.created_at, _JOBS.c.id)
# Another job of the same subject runs under a live lease.
_BUSY = exists().where(
    _OTHER.c.subject == _JOBS.c.subject,
    _OTHER.c.id != _JOBS.c.id,
    _OTHER.c.status == JobStatus.RUNNING,
    _OTHER.c.lease_until > _NOW,
)
_FIRST_DUE = skip_locked(
    select(*_JOBS.c)
    .where(
        _DUE,
        ~_BUSY,
        or_(_JOBS.c.batch.is_(None), _JOBS.c.batch.not_in(bindparam("skip", expanding=True))),
    )
    .order_by(*_IN_LINE)
    .limit(1)
)
_DUE_IN_BATCH = skip_locked(
    select(*_JOBS.c)
    .where(_JOBS.c.batch == bindparam("batch"), _DUE, ~_BUSY)
    .order_by(*_IN_LINE)
    .limit(bindparam("limit"))
)
_BATCH_STATS = select(
    func.count().label("due"),
    func.min(_JOBS.c.created_at).label("oldest"),
    func.max(_JOBS.c.created_at).label("youngest"),
).where(_JOBS.c.batch == bindparam("batch"), _DUE)
_TAKE = (
    update(_JOBS)
    .where(_JOBS.c.id.in_(bindparam("ids", expanding=True)))
    .values(
        status=JobStatus.RUNNING,
        attempts=_JOBS.c.attempts + 1,
        lease_until=bindparam("until"),
        claim=bindparam("claim"),
        updated_at=_NOW,
    )
    .returning(*_JOBS.c)
)
_HELD = and_(
    _JOBS.c.claim == bindparam("claim"),
    _JOBS.c.status == JobStatus.RUNNING,
    _JOBS.c.lease_until > _NOW,
)
_RENEW = update(_JOBS).where(_HELD).values(lease_until=bindparam("until"), updated_at=_NOW)
# A no-op write: it takes the jobs' row locks, so that no other worker claims them until the
# handler's transaction ends.
_HOLD = update(_JOBS).where(_HELD).values(updated_at=_JOBS.c.updated_at)
_SETTLE = (
    update(_JOBS)
    .where(
        _JOBS.c.id.in_(bindparam("ids", expanding=True)),
        _JOBS.c.claim == bindparam("claim"),
        _JOBS.c.status == JobStatus.RUNNING,
    )
    .values(
        status=bindparam("status"),
        attempts=_JOBS.c.attempts - bindparam("spared"),
        run_after=func.coalesce(bindparam("run_after", type_=UTCDateTime()), _JOBS.c.run_after),
        last_error=bindparam("last_error"),
        lease_until=None,
        updated_at=_NOW,
    )
    .returning(_JOBS.c.id)
)


async def first_due(rows: Rows, now: datetime, *, skip: Sequence[str]) -> JobRow | None:
    """The due job that came due first whose subject is not running under another lease and
    whose batch key is not one of ``skip``, locked (skipped by the other workers on
    PostgreSQL)."""
    return await rows.first(_FIRST_DUE, JobRow, now=now, skip=list(skip) or [""])


async def due_in_batch(rows: Rows, batch: str, now: datetime, limit: int) -> list[JobRow]:
    """Up to ``limit`` due jobs of the batch key, first due first, as ``first_due`` finds
    them."""
    return await rows.all(_DUE_IN_BATCH, JobRow, batch=batch, now=now, limit=limit)


async def batch_stats(rows: Rows, batch: str, now: datetime) -> BatchStats:
    stats = await rows.first(_BATCH_STATS, BatchStats, batch=batch, now=now)
    assert stats is not None  # an aggregate without GROUP BY: one row
    return stats


async def take(
    tx: Transaction, ids: Sequence[uuid.UUID], claim: uuid.UUID, now: datetime, until: datetime
) -> list[JobRow]:
    """The jobs become running under ``claim`` with a lease to ``until``, an attempt more."""
    return await tx.all(_TAKE, JobRow, ids=list(ids), claim=claim, now=now, until=until)


async def renew_lease(
    tx: Transaction, claim: uuid.UUID, count: int, now: datetime, until: datetime
) -> bool:
    """The lease of the claim's ``count`` jobs runs to ``until``; whether it still held them."""
    return await tx.execute(_RENEW, claim=claim, now=now, until=until) == count


async def hold_lease(tx: Transaction, claim: uuid.UUID, count: int, now: datetime) -> bool:
    """Whether the claim still holds its ``count`` jobs, locked until ``tx`` ends."""
    return await tx.execute(_HOLD, claim=claim, now=now) == count


async def settle(
    tx: Transaction,
    claim: uuid.UUID,
    ids: Sequence[uuid.UUID],
    now: datetime,
    *,
    status: JobStatus,
    last_error: str | None,
    run_after: datetime | None = None,
    spared: int = 0,
) -> set[uuid.UUID]:
    """The outcome written on those of the claim's jobs ``ids`` that it still runs (``spared``:
    attempts given back); the ids written."""
    settled = await tx.all(
        _SETTLE,
        _Id,
        ids=list(ids),
        claim=claim,
        now=now,
        status=status,
        last_error=last_error,
        run_after=run_after,
        spared=spared,
    )
    return {row.id for row in settled}


_GET = select(*_JOBS.c).where(_JOBS.c.id == bindparam("id"))
_REQUEUE = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("id"))
    .values(
        status=JobStatus.QUEUED,
        attempts=0,
        run_after=_NOW,
        last_error=None,
        claim=None,
        lease_until=None,
        updated_at=_NOW,
    )
    .returning(*_JOBS.c)
)


async def get_job(rows: Rows, job_id: uuid.UUID) -> JobRow | None:
    return await rows.first(_GET, JobRow, id=job_id)


async def requeue(tx: Transaction, job_id: uuid.UUID, now: datetime) -> JobRow:
    """The job queued again, due now, with fresh attempts."""
    job = await tx.first(_REQUEUE, JobRow, id=job_id, now=now)
    assert job is not None  # the caller found it
    return job


class _Id(NamedTuple):
    id: uuid.UUID


_LATEST = select(*_JOBS.c).order_by(_JOBS.c.created_at.desc()).limit(bindparam("limit"))
_LATEST_OF_STATUS = _LATEST.where(_JOBS.c.status == bindparam("status"))


async def newest(rows: Rows, *, status: JobStatus | None, limit: int) -> list[JobRow]:
    if status is None:
        return await rows.all(_LATEST, JobRow, limit=limit)
    return await rows.all(_LATEST_OF_STATUS, JobRow, status=status, limit=limit)


# The console's job queue page (tessera.console.jobs).
_PROJECTS = table_of(Project)


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


class JobsWaiting(NamedTuple):
    project_id: uuid.UUID
    project_name: str
    kind: str
    jobs: int


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
# Queued jobs whose last word is a reason to wait for funds (``last_error`` LIKE ``waiting``).
_WAITING = (
    select(
        _JOBS.c.project_id,
        _PROJECTS.c.name.label("project_name"),
        _JOBS.c.kind,
        func.count().label("jobs"),
    )
    .join(_PROJECTS, _PROJECTS.c.id == _JOBS.c.project_id)
    .where(_JOBS.c.status == JobStatus.QUEUED, _JOBS.c.last_error.like(bindparam("waiting")))
    .group_by(_JOBS.c.project_id, _PROJECTS.c.name, _JOBS.c.kind)
    .order_by(_PROJECTS.c.name, _JOBS.c.project_id, _JOBS.c.kind)
)
_WAITING_OF = {False: _WAITING, True: _WAITING.where(_OF_PROJECT)}
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


async def waiting_jobs(rows: Rows, project_id: uuid.UUID | None, prefix: str) -> list[JobsWaiting]:
    """The queued jobs (of one project) whose ``last_error`` starts with ``prefix``, by project
    and kind."""
    values: dict[str, object] = {"waiting": prefix + "%"}
    if project_id is not None:
        values["project_id"] = project_id
    return await rows.all(_WAITING_OF[project_id is not None], JobsWaiting, **values)


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
