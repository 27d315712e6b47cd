"""The job worker: claims due jobs, runs their handler, and records the outcome.

Claiming takes a lease: the job becomes ``running`` with ``run_after`` = now + lease. A worker
that dies leaves the job to be claimed again when the lease passes, so every handler must be
idempotent (the NFT handlers check the chain before they submit). Jobs sharing a ``subject``
never run at the same time. A failing job is retried with exponential backoff and becomes
``failed`` after ``job_max_attempts``; ``tessera jobs retry`` queues it again.
"""

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import and_, exists, select, update
from sqlalchemy.orm import aliased

from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.crypto import SecretBox
from tessera.db import Database, skip_locked
from tessera.models import Job
from tessera.models.base import utcnow

log = logging.getLogger("tessera.worker")

MAX_BACKOFF_SECONDS = 300


class NotReady(Exception):
    """The job waits for another one (e.g. a mint for its collection); not an attempt."""

    def __init__(self, reason: str, *, delay: float = 2.0) -> None:
        super().__init__(reason)
        self.delay = delay


@dataclass
class JobKind:
    run: Callable[["Worker", Job], Awaitable[None]]
    # Called with the final error when the job gives up, and with None when it is retried.
    mark_failed: Callable[["Worker", Job, str | None], Awaitable[None]]


@dataclass
class Worker:
    database: Database
    settings: Settings
    box: SecretBox
    chains: Chains
    kinds: dict[str, JobKind] = field(default_factory=lambda: dict(default_kinds()))
    worker_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    async def claim(self) -> Job | None:
        now = utcnow()
        other = aliased(Job)
        busy = exists().where(
            and_(
                other.subject == Job.subject,
                other.id != Job.id,
                other.status == "running",
                other.run_after > now,
            )
        )
        async with self.database.session() as session:
            job = await session.scalar(
                skip_locked(
                    select(Job)
                    .where(Job.status.in_(("queued", "running")), Job.run_after <= now, ~busy)
                    .order_by(Job.run_after, Job.created_at)
                    .limit(1)
                )
            )
            if job is None:
                return None
            job.status = "running"
            job.attempts += 1
            job.run_after = now + timedelta(seconds=self.settings.job_lease_seconds)
            await session.commit()
            return job

    async def _settle(self, job: Job, **values: object) -> None:
        """Record the outcome unless another worker has claimed the job since (lease lost)."""
        async with self.database.session() as session:
            await session.execute(
                update(Job)
                .where(Job.id == job.id, Job.attempts == job.attempts, Job.status == "running")
                .values(**values)
            )
            await session.commit()

    async def run_one(self) -> bool:
        """Claim and run one due job; False when there is none."""
        job = await self.claim()
        if job is None:
            return False
        kind = self.kinds.get(job.kind)
        try:
            if kind is None:
                raise RuntimeError(f"no handler for job kind {job.kind!r}")
            await kind.run(self, job)
        except NotReady as wait:
            await self._settle(
                job,
                status="queued",
                attempts=job.attempts - 1,
                run_after=utcnow() + timedelta(seconds=wait.delay),
                last_error=f"waiting: {wait}",
            )
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:2000]
            if job.attempts >= self.settings.job_max_attempts:
                log.error(
                    "job %s (%s) failed after %s attempts: %s",
                    job.id,
                    job.kind,
                    job.attempts,
                    error,
                )
                await self._settle(job, status="failed", last_error=error)
                if kind is not None:
                    await kind.mark_failed(self, job, error)
            else:
                delay = min(2**job.attempts, MAX_BACKOFF_SECONDS) * random.uniform(0.8, 1.2)  # noqa: S311
                log.warning(
                    "job %s (%s) attempt %s failed, retry in %.0fs: %s",
                    job.id,
                    job.kind,
                    job.attempts,
                    delay,
                    error,
                )
                await self._settle(
                    job,
                    status="queued",
                    run_after=utcnow() + timedelta(seconds=delay),
                    last_error=error,
                )
        else:
            await self._settle(job, status="succeeded", last_error=None)
        return True

    async def run_until_idle(self, *, max_jobs: int = 10_000) -> int:
        """Run due jobs until none is left (tests, scripts)."""
        done = 0
        while done < max_jobs and await self.run_one():
            done += 1
        return done

    async def run_forever(self, stop: asyncio.Event) -> None:
        log.info("worker %s started", self.worker_id)
        while not stop.is_set():
            try:
                worked = await self.run_one()
            except Exception:
                log.exception("worker %s: could not claim a job", self.worker_id)
                worked = False
            if not worked:
                try:
                    await asyncio.wait_for(stop.wait(), self.settings.worker_poll_seconds)
                except TimeoutError:
                    pass
        log.info("worker %s stopped", self.worker_id)


async def retry_job(database: Database, worker: Worker, job_id: uuid.UUID) -> Job | None:
    """Queue a failed job again with fresh attempts."""
    async with database.session() as session:
        job = await session.get(Job, job_id)
        if job is None:
            return None
        job.status, job.attempts, job.run_after, job.last_error = "queued", 0, utcnow(), None
        await session.commit()
    kind = worker.kinds.get(job.kind)
    if kind is not None:
        await kind.mark_failed(worker, job, None)
    return job


def default_kinds() -> dict[str, JobKind]:
    from tessera.jobs.nft import KINDS  # the handlers import this module

    return KINDS
