"""The job worker: claims due jobs, runs their handler, and records the outcome.

Claiming takes a lease: the job becomes ``running`` with ``lease_until`` = now + lease, which the
worker renews every quarter lease while the handler runs. A worker that dies leaves the job to be
claimed again when its lease passes (within ``job_lease_seconds``, 20 by default), in its place
in the queue (``run_after`` stays), so every handler must be idempotent (the NFT handlers check
the chain before they submit), and writes its result only while it still holds the lease
(``hold``, in the transaction that writes it). Jobs sharing a ``subject`` never run at the same
time. A failing job is retried with exponential backoff and becomes
``failed`` after ``job_max_attempts``; ``tessera jobs retry`` queues it again.

The worker knows no job kind: the app and the CLI hand it a registry of handlers (see
``tessera.main.job_handlers``), and each handler gets a ``JobContext``, not the worker.
"""

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.crypto import SecretBox
from tessera.db import Database, Transaction, serialize
from tessera.jobs import repository
from tessera.jobs.heartbeat import Heartbeat
from tessera.jobs.queue import NotReady
from tessera.models import Job, JobStatus
from tessera.models.base import utcnow

log = logging.getLogger("tessera.worker")

MAX_BACKOFF_SECONDS = 300
# Claims take this advisory lock on PostgreSQL: the "subject not running elsewhere" check reads
# committed rows only, so two concurrent claims could otherwise start two jobs of one subject.
CLAIM_LOCK = 0x7E55E7A


class LeaseLost(Exception):
    """The job's lease ran out and another worker may be running it: write nothing."""


async def hold(tx: Transaction, job: Job) -> None:
    """In a handler's transaction: this attempt at ``job`` still holds its lease, and keeps it
    until ``tx`` ends (the job's row is locked); else ``LeaseLost``."""
    if not await repository.hold_lease(tx, job, utcnow()):
        raise LeaseLost(f"job {job.id} attempt {job.attempts}: lease lost")


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a handler may use: the database, the secret box (to sign) and the chains."""

    database: Database
    box: SecretBox
    chains: Chains


@dataclass(frozen=True, slots=True)
class JobHandler:
    run: Callable[[JobContext, Job], Coroutine[Any, Any, None]]
    # Shows the job's state on the row it serves: FAILED when the job gives up, QUEUED when
    # it waits for a retry (after a failed attempt, or retried by hand).
    show: Callable[[JobContext, Job, JobStatus], Awaitable[None]]


Handlers = Mapping[str, JobHandler]
# Housekeeping between jobs: every so many seconds, an async function of the database.
Chore = tuple[float, Callable[[Database], Awaitable[Any]]]
# A loop that runs beside the jobs until the worker stops (webhook delivery).
Companion = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


async def run_rounds(
    stop: asyncio.Event, one_round: Callable[[], Awaitable[int]], *, poll_seconds: float, what: str
) -> None:
    """A companion's loop: ``one_round`` until ``stop``, again at once after a round that did
    some work, after ``poll_seconds`` after an idle one or one that failed (logged as ``what``)."""
    while not stop.is_set():
        try:
            done = await one_round()
        except Exception:
            log.exception("%s: a round failed", what)
            done = 0
        if not done:
            try:
                await asyncio.wait_for(stop.wait(), poll_seconds)
            except TimeoutError:
                pass


class Worker:
    def __init__(
        self,
        context: JobContext,
        handlers: Handlers,
        *,
        max_attempts: int,
        lease_seconds: float,
        poll_seconds: float = 1.0,
        heartbeat_seconds: float = 5.0,
        chores: Sequence[Chore] = (),
        companions: Sequence[Companion] = (),
    ) -> None:
        self.context = context
        self.companions = list(companions)
        self.chores = list(chores)
        self._chores_due = [0.0] * len(self.chores)  # time.monotonic(): each runs at start
        self.handlers = handlers
        self.max_attempts = max_attempts
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.worker_id = uuid.uuid4().hex[:8]
        self.heartbeat = Heartbeat(context.database, self.worker_id, interval=heartbeat_seconds)

    @classmethod
    def from_settings(
        cls,
        context: JobContext,
        handlers: Handlers,
        settings: Settings,
        *,
        chores: Sequence[Chore] = (),
        companions: Sequence[Companion] = (),
    ) -> "Worker":
        return cls(
            context,
            handlers,
            max_attempts=settings.job_max_attempts,
            lease_seconds=settings.job_lease_seconds,
            poll_seconds=settings.worker_poll_seconds,
            heartbeat_seconds=settings.worker_heartbeat_seconds,
            chores=chores,
            companions=companions,
        )

    async def run_chores(self) -> None:
        """The housekeeping that is due (each at most every its interval, in this worker)."""
        now = time.monotonic()
        for index, (interval, chore) in enumerate(self.chores):
            if self._chores_due[index] <= now:
                self._chores_due[index] = now + interval
                try:
                    await chore(self.database)
                except Exception:
                    log.exception("worker %s: chore %s failed", self.worker_id, chore.__name__)

    @property
    def database(self) -> Database:
        return self.context.database

    async def claim(self) -> Job | None:
        """Take the oldest due job whose subject is not running elsewhere, with a lease."""
        now = utcnow()
        async with self.database.session() as session:
            await serialize(session, CLAIM_LOCK)
            job = await repository.next_due(session, now)
            if job is None:
                return None
            job.status = JobStatus.RUNNING
            job.attempts += 1
            job.lease_until = now + timedelta(seconds=self.lease_seconds)
            await session.commit()
            return job

    async def _settle(self, job: Job, **values: object) -> bool:
        """Record the outcome unless another worker has claimed the job since (lease lost)."""
        async with self.database.session() as session:
            settled = await repository.settle(session, job, values)
            await session.commit()
        return settled

    async def run_one(self) -> bool:
        """Claim and run one due job; False when there is none."""
        job = await self.claim()
        if job is None:
            return False
        handler = self.handlers.get(job.kind)
        try:
            if handler is None:
                raise RuntimeError(f"no handler for job kind {job.kind!r}")
            await self._run_leased(handler, job)
        except LeaseLost as lost:
            log.warning("job %s (%s): %s, left to its new holder", job.id, job.kind, lost)
        except NotReady as wait:
            await self._settle(
                job,
                status=JobStatus.QUEUED,
                attempts=job.attempts - 1,
                run_after=utcnow() + timedelta(seconds=wait.delay),
                last_error=f"waiting: {wait}",
            )
        except Exception as exc:
            await self._failed(job, handler, f"{type(exc).__name__}: {exc}"[:2000])
        else:
            await self._settle(job, status=JobStatus.SUCCEEDED, last_error=None)
        return True

    async def _run_leased(self, handler: JobHandler, job: Job) -> None:
        """Run the handler while renewing the job's lease every quarter lease; a renewal that
        finds the lease gone stops the handler (``LeaseLost``)."""
        work = asyncio.create_task(handler.run(self.context, job))
        every = self.lease_seconds / 4
        try:
            while True:
                done, _ = await asyncio.wait({work}, timeout=every)
                if done:
                    work.result()  # its exception, if it raised one
                    return
                if not await self._renew(job):
                    raise LeaseLost(f"job {job.id} attempt {job.attempts}: lease lost")
        finally:
            work.cancel()  # a no-op once it is done

    async def _renew(self, job: Job) -> bool:
        """The job's lease moved a whole lease ahead; False when it was lost (a renewal that
        cannot reach the database counts as held: the handler's ``hold`` decides)."""
        now = utcnow()
        try:
            async with self.database.transaction() as tx:
                until = now + timedelta(seconds=self.lease_seconds)
                renewed = await repository.renew_lease(tx, job, now, until)
                await tx.commit()
        except Exception:
            log.exception("job %s: could not renew its lease", job.id)
            return True
        return renewed

    async def _failed(self, job: Job, handler: JobHandler | None, error: str) -> None:
        if job.attempts < self.max_attempts:
            delay = min(2**job.attempts, MAX_BACKOFF_SECONDS) * random.uniform(0.8, 1.2)  # noqa: S311
            log.warning(
                "job %s (%s) attempt %s failed, retry in %.0fs: %s",
                job.id,
                job.kind,
                job.attempts,
                delay,
                error,
            )
            settled = await self._settle(
                job,
                status=JobStatus.QUEUED,
                run_after=utcnow() + timedelta(seconds=delay),
                last_error=error,
            )
            if settled and handler is not None:
                await handler.show(self.context, job, JobStatus.QUEUED)
            return
        log.error("job %s (%s) failed after %s attempts: %s", job.id, job.kind, job.attempts, error)
        settled = await self._settle(job, status=JobStatus.FAILED, last_error=error)
        if settled and handler is not None:
            await handler.show(self.context, job, JobStatus.FAILED)

    async def run_until_idle(self, *, max_jobs: int = 10_000) -> int:
        """Run due jobs until none is left (tests, scripts)."""
        done = 0
        while done < max_jobs and await self.run_one():
            done += 1
        return done

    async def run_forever(self, stop: asyncio.Event) -> None:
        log.info("worker %s started", self.worker_id)
        beside = [asyncio.create_task(companion(stop)) for companion in self.companions]
        async with self.heartbeat.beating():  # beside the jobs: see tessera.jobs.heartbeat
            while not stop.is_set():
                try:
                    worked = await self.run_one()
                except Exception:
                    log.exception("worker %s: could not claim a job", self.worker_id)
                    worked = False
                if not worked:
                    await self.run_chores()
                    try:
                        await asyncio.wait_for(stop.wait(), self.poll_seconds)
                    except TimeoutError:
                        pass
        await asyncio.gather(*beside)
        log.info("worker %s stopped", self.worker_id)
