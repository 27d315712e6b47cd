"""The job worker: claims due jobs, runs their handler, and records each job's outcome.

A claim takes a lease: its jobs become ``running`` under the claim's id with ``lease_until`` =
now + lease, which the worker renews every quarter lease while the handler runs. A worker that
dies leaves its jobs to be claimed again when their lease passes (within ``job_lease_seconds``,
20 by default), in their place in the queue (``run_after`` stays), so every handler must be
idempotent (the NFT handlers follow what they recorded, and read the chain, before they sign),
and writes its result only while it still holds the lease (``hold``, in the transaction that
writes it). Jobs sharing a ``subject`` never run at the same time. A failing job is retried with
exponential backoff and becomes ``failed`` after ``job_max_attempts``; ``tessera jobs retry``
queues it again.

Batches: jobs with the same ``batch`` key whose kind has a ``BatchHandler`` (an NFT collection's
mints) are claimed together, as many as the handler says fit (``capacity``), and handled at
once; each job of the batch gets its own outcome. A batch that is not full waits to be claimed
while jobs keep joining it: until none has joined for ``job_batch_gather_seconds``, or its
oldest has waited ``job_batch_max_wait_seconds``.

A worker runs ``worker_slots`` claims at a time (a batch waiting for its block takes one slot,
so the next batch of the same signer is signed meanwhile).

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
from datetime import datetime, timedelta
from typing import Any

from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database, Transaction, serialize
from tessera.jobs import repository
from tessera.jobs.heartbeat import Heartbeat
from tessera.jobs.queue import NotReady
from tessera.jobs.repository import JobRow
from tessera.models import JobStatus
from tessera.models.base import utcnow
from tessera.toolkit.crypto import SecretBox

log = logging.getLogger("tessera.worker")

MAX_BACKOFF_SECONDS = 300
# Claims take this advisory lock on PostgreSQL: the "subject not running elsewhere" check reads
# committed rows only, so two concurrent claims could otherwise start two jobs of one subject.
CLAIM_LOCK = 0x7E55E7A
# Batch keys found not ready are passed over by this many claims in a row at most.
UNREADY_SKIPS = 8


class LeaseLost(Exception):
    """The claim's lease ran out and another worker may be running its jobs: write nothing."""


@dataclass(frozen=True, slots=True)
class Claim:
    """Jobs a worker runs together under one lease (one job, or a batch)."""

    id: uuid.UUID
    jobs: tuple[JobRow, ...]


async def hold(tx: Transaction, held: JobRow | Claim) -> None:
    """In a handler's transaction: the claim of ``held`` (a job, or a whole claim) still holds
    its lease, and keeps it until ``tx`` ends (the jobs' rows are locked); else
    ``LeaseLost``."""
    claim_id, count = (held.id, len(held.jobs)) if isinstance(held, Claim) else (held.claim, 1)
    assert claim_id is not None  # a claimed job's
    if not await repository.hold_lease(tx, claim_id, count, utcnow()):
        raise LeaseLost(f"claim {claim_id}: lease lost")


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a handler may use: the database, the secret box (to sign) and the chains."""

    database: Database
    box: SecretBox
    chains: Chains


# What became of one job of a batch.
@dataclass(frozen=True, slots=True)
class Done:
    pass


@dataclass(frozen=True, slots=True)
class Wait:
    """Queued again after ``delay`` seconds without spending an attempt (``NotReady``)."""

    reason: str
    delay: float


@dataclass(frozen=True, slots=True)
class Failed:
    """An attempt that failed: retried after a backoff, until the job gives up."""

    error: str


JobOutcome = Done | Wait | Failed
# Shows the jobs' state on the rows they serve: FAILED when they give up, QUEUED when they wait
# for a retry (after a failed attempt, or retried by hand).
Show = Callable[["JobContext", Sequence[JobRow], JobStatus], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class JobHandler:
    run: Callable[[JobContext, JobRow], Coroutine[Any, Any, None]]
    show: Show


@dataclass(frozen=True, slots=True)
class BatchHandler:
    """Runs the jobs of one batch key together; says how many fit one batch (``capacity``, of
    the batch's first job: at least 1) and what became of each job."""

    run: Callable[[JobContext, Claim], Coroutine[Any, Any, Mapping[uuid.UUID, JobOutcome]]]
    show: Show
    capacity: Callable[[JobContext, JobRow], Awaitable[int]]


Handlers = Mapping[str, JobHandler | BatchHandler]


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
        slots: int = 1,
        gather_seconds: float = 0.0,
        max_wait_seconds: float = 0.0,
        chores: Sequence[Chore] = (),
        companions: Sequence[Companion] = (),
    ) -> None:
        self.context = context
        self.companions = list(companions)
        self.chores = list(chores)
        self._chores_due = [0.0] * len(self.chores)  # time.monotonic(): each runs at start
        self._chores_lock = asyncio.Lock()
        self.handlers = handlers
        self.max_attempts = max_attempts
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.slots = slots
        self.gather = timedelta(seconds=gather_seconds)
        self.max_wait = timedelta(seconds=max_wait_seconds)
        # Batch keys not ready to be claimed, until when (this worker's memory).
        self._unready: dict[str, datetime] = {}
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
            slots=settings.worker_slots,
            gather_seconds=settings.job_batch_gather_seconds,
            max_wait_seconds=settings.job_batch_max_wait_seconds,
            chores=chores,
            companions=companions,
        )

    async def run_chores(self) -> None:
        """The housekeeping that is due (each at most every its interval, in this worker)."""
        if self._chores_lock.locked():  # another slot is at it
            return
        async with self._chores_lock:
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

    # claims

    async def claim(self) -> Claim | None:
        """Take the first due job whose subject is not running elsewhere, with a lease; a job
        with a batch key, with the other due jobs of its key that fit its batch, once the
        batch is ready."""
        now = utcnow()
        self._unready = {key: until for key, until in self._unready.items() if until > now}
        skip = list(self._unready)
        for _ in range(UNREADY_SKIPS):
            async with self.database.transaction() as tx:
                await serialize(tx, CLAIM_LOCK)
                first = await repository.first_due(tx, now, skip=skip)
                if first is None:
                    return None
                handler = self.handlers.get(first.kind)
                if first.batch is None or not isinstance(handler, BatchHandler):
                    claim = await self._take(tx, [first])
                    await tx.commit()
                    return claim
            # A batch: its capacity may need the chain, outside any transaction.
            try:
                capacity = max(1, await handler.capacity(self.context, first))
            except Exception:
                log.exception("job %s (%s): its batch's capacity is unknown", first.id, first.kind)
                capacity = 1
            ready_at = await self._ready_at(first.batch, capacity, now)
            if ready_at is not None:
                self._unready[first.batch] = ready_at
                skip.append(first.batch)
                continue
            async with self.database.transaction() as tx:
                await serialize(tx, CLAIM_LOCK)
                due = await repository.due_in_batch(tx, first.batch, now, capacity)
                # One job per subject: two of an item (a transfer and the next) never run
                # together.
                firsts = list({job.subject: job for job in reversed(due)}.values())[::-1]
                claim = await self._take(tx, firsts)
                await tx.commit()
            if claim is not None:
                log.info(
                    "worker %s: claim %s takes %s jobs of batch %s",
                    self.worker_id,
                    claim.id,
                    len(claim.jobs),
                    first.batch,
                )
                return claim
        return None

    async def _ready_at(self, batch: str, capacity: int, now: datetime) -> datetime | None:
        """None when the batch is to be claimed now (full, or no job joined it lately, or its
        oldest waited long enough); else when it will be."""
        stats = await self.database.read(repository.batch_stats, batch, now)
        if stats.due >= capacity or stats.youngest is None or stats.oldest is None:
            return None
        ready_at = min(stats.youngest + self.gather, stats.oldest + self.max_wait)
        return None if ready_at <= now else ready_at

    async def _take(self, tx: Transaction, jobs: Sequence[JobRow]) -> Claim | None:
        """The jobs, under a new claim whose lease runs from now (not from when the claim
        began: a batch's capacity may have taken a while to learn)."""
        if not jobs:
            return None
        claim_id, now = uuid.uuid4(), utcnow()
        taken = await repository.take(
            tx, [job.id for job in jobs], claim_id, now, self._lease_end(now)
        )
        order = {job.id: index for index, job in enumerate(jobs)}
        return Claim(claim_id, tuple(sorted(taken, key=lambda job: order[job.id])))

    def _lease_end(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)

    # running

    async def run_one(self) -> bool:
        """Claim and run one due job, or batch; False when there is none."""
        claim = await self.claim()
        if claim is None:
            return False
        first = claim.jobs[0]
        handler = self.handlers.get(first.kind)
        try:
            if handler is None:
                raise RuntimeError(f"no handler for job kind {first.kind!r}")
            outcomes = await self._run_leased(handler, claim)
        except LeaseLost as lost:
            log.warning("claim %s (%s): %s, left to its new holder", claim.id, first.kind, lost)
            return True
        except NotReady as wait:
            outcomes = dict.fromkeys((job.id for job in claim.jobs), Wait(str(wait), wait.delay))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:2000]
            outcomes = dict.fromkeys((job.id for job in claim.jobs), Failed(error))
        await self._settle(claim, handler, outcomes)
        return True

    async def _run_leased(
        self, handler: JobHandler | BatchHandler, claim: Claim
    ) -> Mapping[uuid.UUID, JobOutcome]:
        """Run the handler while renewing the claim's lease every quarter lease; a renewal that
        finds the lease gone stops the handler (``LeaseLost``)."""
        work: asyncio.Task[Any]
        if isinstance(handler, BatchHandler):
            work = asyncio.create_task(handler.run(self.context, claim))
        else:
            work = asyncio.create_task(handler.run(self.context, claim.jobs[0]))
        every = self.lease_seconds / 4
        try:
            while True:
                done, _ = await asyncio.wait({work}, timeout=every)
                if done:
                    result = work.result()  # its exception, if it raised one
                    if isinstance(handler, BatchHandler):
                        return dict(result)
                    return {claim.jobs[0].id: Done()}
                if not await self._renew(claim):
                    raise LeaseLost(f"claim {claim.id}: lease lost")
        finally:
            work.cancel()  # a no-op once it is done

    async def _renew(self, claim: Claim) -> bool:
        """The claim's lease moved a whole lease ahead; False when it was lost (a renewal that
        cannot reach the database counts as held: the handler's ``hold`` decides)."""
        now = utcnow()
        try:
            async with self.database.transaction() as tx:
                renewed = await repository.renew_lease(
                    tx, claim.id, len(claim.jobs), now, self._lease_end(now)
                )
                await tx.commit()
        except Exception:
            log.exception("claim %s: could not renew its lease", claim.id)
            return True
        return renewed

    async def _settle(
        self,
        claim: Claim,
        handler: JobHandler | BatchHandler | None,
        outcomes: Mapping[uuid.UUID, JobOutcome],
    ) -> None:
        """Write each job's outcome (unless another worker has claimed it since), then show
        the retried and the failed ones on their rows."""
        now = utcnow()
        jobs = {job.id: job for job in claim.jobs}
        retried: list[JobRow] = []
        failed: list[JobRow] = []
        async with self.database.transaction() as tx:
            for outcome, ids in _grouped(outcomes, jobs):
                values = self._values(outcome, jobs[ids[0]], now)
                settled = await repository.settle(tx, claim.id, ids, now, **values)
                if isinstance(outcome, Failed):
                    shown = [jobs[i] for i in ids if i in settled]
                    (retried if values["status"] == JobStatus.QUEUED else failed).extend(shown)
                    self._log_failure(outcome, shown, values["status"])
            await tx.commit()
        if handler is not None:
            if retried:
                await handler.show(self.context, retried, JobStatus.QUEUED)
            if failed:
                await handler.show(self.context, failed, JobStatus.FAILED)

    def _values(self, outcome: JobOutcome, job: JobRow, now: datetime) -> dict[str, Any]:
        if isinstance(outcome, Done):
            return {"status": JobStatus.SUCCEEDED, "last_error": None}
        if isinstance(outcome, Wait):
            return {
                "status": JobStatus.QUEUED,
                "last_error": f"waiting: {outcome.reason}"[:2000],
                "run_after": now + timedelta(seconds=outcome.delay),
                "spared": 1,
            }
        if job.attempts < self.max_attempts:
            delay = min(2**job.attempts, MAX_BACKOFF_SECONDS) * random.uniform(0.8, 1.2)  # noqa: S311
            return {
                "status": JobStatus.QUEUED,
                "last_error": outcome.error,
                "run_after": now + timedelta(seconds=delay),
            }
        return {"status": JobStatus.FAILED, "last_error": outcome.error}

    def _log_failure(self, outcome: Failed, jobs: Sequence[JobRow], status: JobStatus) -> None:
        if not jobs:
            return
        job, more = jobs[0], f" (and {len(jobs) - 1} more of its batch)" if len(jobs) > 1 else ""
        if status == JobStatus.QUEUED:
            log.warning(
                "job %s (%s)%s attempt %s failed, retried later: %s",
                job.id,
                job.kind,
                more,
                job.attempts,
                outcome.error,
            )
        else:
            log.error(
                "job %s (%s)%s failed after %s attempts: %s",
                job.id,
                job.kind,
                more,
                job.attempts,
                outcome.error,
            )

    async def run_until_idle(self, *, max_jobs: int = 10_000) -> int:
        """Run due jobs, and batches, until none is left (tests, scripts); how many claims."""
        done = 0
        while done < max_jobs and await self.run_one():
            done += 1
        return done

    async def run_forever(self, stop: asyncio.Event) -> None:
        log.info("worker %s started with %s slots", self.worker_id, self.slots)
        beside = [asyncio.create_task(companion(stop)) for companion in self.companions]
        async with self.heartbeat.beating():  # beside the jobs: see tessera.jobs.heartbeat
            await asyncio.gather(*(self._slot(stop) for _ in range(self.slots)))
        await asyncio.gather(*beside)
        log.info("worker %s stopped", self.worker_id)

    async def _slot(self, stop: asyncio.Event) -> None:
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


def _grouped(
    outcomes: Mapping[uuid.UUID, JobOutcome], jobs: Mapping[uuid.UUID, JobRow]
) -> list[tuple[JobOutcome, list[uuid.UUID]]]:
    """The claim's jobs by outcome (and, for a failure, by attempts, which set its backoff); a
    job the handler gave no outcome failed."""
    groups: dict[tuple[JobOutcome, int], list[uuid.UUID]] = {}
    for job_id, job in jobs.items():
        outcome = outcomes.get(job_id, Failed("the handler gave no outcome"))
        attempts = job.attempts if isinstance(outcome, Failed) else 0
        groups.setdefault((outcome, attempts), []).append(job_id)
    return [(outcome, ids) for (outcome, _), ids in groups.items()]
