"""The job queue: what a job is, how one is added, and how a handler says "not yet".

A job is a row of ``jobs`` (``tessera.models.Job``, with its ``JobStatus``) written in the same
transaction as the change that needs it. The worker (``tessera.jobs.worker``) runs it with the
handler registered for its kind.
"""

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from tessera.db import Transaction
from tessera.jobs import repository
from tessera.jobs.repository import JobRow
from tessera.models import JobStatus
from tessera.models.base import utcnow


class JobKind(StrEnum):
    CREATE_COLLECTION = "nft.create_collection"
    MINT = "nft.mint"
    TRANSFER = "nft.transfer"
    FOLLOW = "nft.follow"  # an item follows its NFT (tessera.reconciliation)
    RECONCILE = "nft.reconcile"  # a product's scheduled reconciliation


# A job queued again by ``NotReady`` (or a batch's ``Wait``) shows "waiting: " and its reason as
# its ``last_error``; a reason to wait for the wallet that pays to be funded starts with ``FUNDS``
# (``tessera.extrinsics.service.short_of_funds``). The console and /metrics count those jobs.
FUNDS = "waiting for funds"
WAITING_FOR_FUNDS = f"waiting: {FUNDS}"


class NotReady(Exception):
    """Raised by a handler whose job waits for another one (e.g. a mint for its collection).

    The job is queued again after ``delay`` seconds without spending an attempt.
    """

    def __init__(self, reason: str, *, delay: float = 2.0) -> None:
        super().__init__(reason)
        self.delay = delay


async def enqueue(tx: Transaction, jobs: Sequence[dict[str, Any]]) -> list[JobRow]:
    """Add jobs to the caller's transaction: they exist exactly when the change commits. Each
    gives ``project_id``, ``kind``, ``subject`` and ``payload`` (and may set any other column
    of ``Job``); the jobs as written.

    Jobs with the same ``subject`` (e.g. one item's mint and its transfers) never run at the
    same time; due jobs are claimed oldest ``run_after`` first, and a handler that must wait for
    an earlier step raises ``NotReady``.
    """
    now = utcnow()
    queued = {"status": JobStatus.QUEUED, "attempts": 0, "run_after": now, "created_at": now}
    return await repository.add_jobs(tx, [queued | job for job in jobs])
