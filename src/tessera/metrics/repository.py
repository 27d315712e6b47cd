"""The statements behind the metrics: the job queue and the wallet balances (built once)."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import bindparam, case, delete, func, select

from tessera.db import Rows, Transaction, table_of
from tessera.models import (
    LIVE,
    Extrinsic,
    Job,
    JobStatus,
    MetricCount,
    ProjectWallet,
    ProjectWalletBalance,
    WebhookDelivery,
    WebhookEndpoint,
)

_JOBS, _WALLETS = table_of(Job), table_of(ProjectWallet)
_BALANCES = table_of(ProjectWalletBalance)
# Succeeded jobs are left out: they pile up, and the index on (status, run_after) finds the rest.
UNFINISHED = [JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.FAILED]

_QUEUE = (
    select(
        _JOBS.c.kind,
        _JOBS.c.status,
        func.count().label("jobs"),
        func.min(_JOBS.c.created_at).label("oldest"),
    )
    .where(_JOBS.c.status.in_(bindparam("statuses", expanding=True)))
    .group_by(_JOBS.c.kind, _JOBS.c.status)
)
_SHOWN_BALANCES = select(
    _WALLETS.c.project_id,
    _WALLETS.c.address,
    _BALANCES.c.chain,
    _BALANCES.c.free,
    _BALANCES.c.read_at,
).join_from(_BALANCES, _WALLETS, _WALLETS.c.id == _BALANCES.c.project_wallet_id)
_ALL_WALLETS = select(_WALLETS.c.id, _WALLETS.c.public_key).order_by(_WALLETS.c.id)
_LAST_READS = select(_BALANCES.c.chain, func.max(_BALANCES.c.read_at).label("read_at")).group_by(
    _BALANCES.c.chain
)
_DELIVERIES, _ENDPOINTS = table_of(WebhookDelivery), table_of(WebhookEndpoint)
_RECENT_DELIVERIES = (
    select(_DELIVERIES.c.status, func.count().label("deliveries"))
    .where(
        _DELIVERIES.c.status.in_(bindparam("statuses", expanding=True)),
        _DELIVERIES.c.created_at >= bindparam("since"),
    )
    .group_by(_DELIVERIES.c.status)
)
_ENDPOINT_STATES = select(
    case(
        (_ENDPOINTS.c.enabled.is_(False), "disabled"),
        (_ENDPOINTS.c.failing_since.is_not(None), "failing"),
        else_="enabled",
    ).label("status"),
    func.count().label("endpoints"),
).group_by("status")
_FORGET_CHAIN = delete(_BALANCES).where(_BALANCES.c.chain == bindparam("chain"))


class QueuedJobs(NamedTuple):
    kind: str
    status: JobStatus
    jobs: int
    oldest: datetime  # the oldest one's created_at


class ShownBalance(NamedTuple):
    project_id: uuid.UUID
    address: str
    chain: str
    free: str  # in the chain's smallest unit, decimal text
    read_at: datetime


class _DeliveriesByStatus(NamedTuple):
    status: str
    deliveries: int


class _EndpointsByStatus(NamedTuple):
    status: str
    endpoints: int


class WalletKey(NamedTuple):
    id: uuid.UUID
    public_key: bytes


class _LastRead(NamedTuple):
    chain: str
    read_at: datetime


async def job_queue(rows: Rows) -> list[QueuedJobs]:
    """The unfinished and failed jobs by kind and status, one statement."""
    return await rows.all(_QUEUE, QueuedJobs, statuses=UNFINISHED)


async def shown_balances(rows: Rows) -> list[ShownBalance]:
    """Every recorded balance, with its wallet's project and address."""
    return await rows.all(_SHOWN_BALANCES, ShownBalance)


async def recent_deliveries(rows: Rows, since: datetime) -> dict[str, int]:
    """Webhook delivery attempts made since ``since``, by outcome."""
    found = await rows.all(
        _RECENT_DELIVERIES, _DeliveriesByStatus, since=since, statuses=["succeeded", "failed"]
    )
    return {row.status: row.deliveries for row in found}


async def endpoint_states(rows: Rows) -> dict[str, int]:
    """Webhook endpoints by status (enabled, failing, disabled)."""
    found = await rows.all(_ENDPOINT_STATES, _EndpointsByStatus)
    return {row.status: row.endpoints for row in found}


async def project_wallets(rows: Rows) -> list[WalletKey]:
    """Every project wallet."""
    return await rows.all(_ALL_WALLETS, WalletKey)


async def last_reads(rows: Rows) -> dict[str, datetime]:
    """When each chain's balances were last recorded."""
    return {row.chain: row.read_at for row in await rows.all(_LAST_READS, _LastRead)}


async def replace_balances(
    tx: Transaction, chain: str, balances: Sequence[tuple[uuid.UUID, int]], read_at: datetime
) -> None:
    """The chain's readings become these (a wallet's balance as it was at ``read_at``)."""
    await tx.execute(_FORGET_CHAIN, chain=chain)
    await tx.insert(
        ProjectWalletBalance,
        [
            {"project_wallet_id": wallet_id, "chain": chain, "free": str(free), "read_at": read_at}
            for wallet_id, free in balances
        ],
    )


# Counts the workers keep (tessera.instruments.counts), and the chain work in flight.
_COUNTS_TABLE, _EXTRINSICS = table_of(MetricCount), table_of(Extrinsic)
_ALL_COUNTS = select(_COUNTS_TABLE.c.name, _COUNTS_TABLE.c.labels, _COUNTS_TABLE.c.value)
_IN_FLIGHT = (
    select(_EXTRINSICS.c.chain, _EXTRINSICS.c.signer, func.count().label("extrinsics"))
    .where(_EXTRINSICS.c.status.in_(LIVE))
    .group_by(_EXTRINSICS.c.chain, _EXTRINSICS.c.signer)
)
_WAITING_FOR_FUNDS = (
    select(_JOBS.c.kind, _JOBS.c.project_id, func.count().label("jobs"))
    .where(
        _JOBS.c.status == JobStatus.QUEUED,
        _JOBS.c.last_error.like(bindparam("waiting")),
    )
    .group_by(_JOBS.c.kind, _JOBS.c.project_id)
)


class CountRow(NamedTuple):
    name: str
    labels: str
    value: float


class InFlight(NamedTuple):
    chain: str
    signer: str  # public key, hex
    extrinsics: int


class WaitingJobs(NamedTuple):
    kind: str
    project_id: uuid.UUID
    jobs: int


async def all_counts(rows: Rows) -> list[CountRow]:
    return await rows.all(_ALL_COUNTS, CountRow)


async def in_flight(rows: Rows) -> list[InFlight]:
    """Extrinsics whose fate is not known yet, by chain and signer."""
    return await rows.all(_IN_FLIGHT, InFlight)


async def waiting_for_funds(rows: Rows, prefix: str) -> list[WaitingJobs]:
    """Queued jobs whose last word is that they wait for funds (``last_error`` starts with
    ``prefix``), by kind and project."""
    return await rows.all(_WAITING_FOR_FUNDS, WaitingJobs, waiting=prefix + "%")
