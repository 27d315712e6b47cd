"""What a scrape shows, and the job worker's chore that reads the project wallets' balances.

The job queue is read from the jobs table at each scrape (one grouped statement), so it is the
same whichever process answers. Balances need chain reads, far too slow for a scrape: a chore
of the job worker (``tessera serve``'s in-process one or ``tessera worker``) reads them every
minute and records them in ``project_wallet_balances``; the scrape shows the last reading and
when it was made. With several workers, the one that finds a reading younger than half a
minute leaves it. The NFT drift is counted, by kind, from the findings each product's last
reconciliation recorded (``reconciliations``): a scrape never waits on a chain either. The
mails are counted by status from the outbox (``mails``). The chain work: the counters and
histograms the workers add to in the transactions of what they count (``metric_counts``,
``tessera.instruments.counts``), the extrinsics in flight from the ledger (``extrinsics``) and the
jobs waiting for funds from the job table.
"""

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tessera.chain.gateway import ChainGateway
from tessera.chain.keys import ss58_address
from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database, Rows
from tessera.errors import AppError
from tessera.instruments import counts
from tessera.instruments.counts import MINT_SECONDS, PARTS
from tessera.instruments.process import sample_pool, scrape_registry
from tessera.jobs.queue import WAITING_FOR_FUNDS, JobKind
from tessera.mail import repository as mails
from tessera.metrics import repository
from tessera.models import JobStatus, MailStatus
from tessera.models.base import utcnow
from tessera.reconciliation import repository as reconciliations
from tessera.reconciliation.findings import Kind

log = logging.getLogger("tessera.metrics")

BALANCE_SECONDS = 60.0
BALANCE_BATCH = 50  # wallets per chain call (each one RPC), well within its deadline
QUEUE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
COUNTERS: dict[str, tuple[str, Sequence[str]]] = {
    "tessera_chain_extrinsics_submitted_total": (
        "Extrinsics signed with a key Tessera holds and recorded in the ledger to be submitted, "
        "by chain and call (Nfts.mint, Nfts.transfer, Balances.transfer_keep_alive, Nfts.create, "
        "System.remark).",
        ["chain", "call"],
    ),
}
HISTOGRAMS: dict[str, tuple[str, Sequence[str], Sequence[float]]] = {
    "tessera_chain_nfts_per_extrinsic": (
        "Parts per signed extrinsic (NFTs minted or transferred, holders sent their fees), by "
        "chain and call.",
        ["chain", "call"],
        PARTS,
    ),
    "tessera_nft_mint_seconds": (
        "Seconds from an item's issue to its NFT in a final block, by chain.",
        ["chain"],
        MINT_SECONDS,
    ),
}


async def scrape(database: Database, settings: Settings) -> bytes:
    """The Prometheus text exposition: every process's request and pool figures, the job
    queue, the recorded balances, the webhooks' deliveries, the NFT drift found by the
    products' last reconciliations, the mails and the chain work (extrinsics signed, NFTs per
    extrinsic, mint times, extrinsics in flight, jobs waiting for funds). A fixed number of
    statements, however many rows: nothing here asks a chain."""

    async def read(
        rows: Rows,
    ) -> tuple[list[repository.QueuedJobs], list[repository.ShownBalance], list[Metric]]:
        recorded = _webhook_families(
            await repository.recent_deliveries(rows, utcnow() - timedelta(hours=1)),
            await repository.endpoint_states(rows),
        )
        recorded.append(_drift_family(await reconciliations.all_findings(rows)))
        recorded.append(_mail_family(await mails.mails_by_status(rows)))
        recorded += counts.families(
            await repository.all_counts(rows), counters=COUNTERS, histograms=HISTOGRAMS
        )
        recorded.append(_in_flight_family(await repository.in_flight(rows), settings))
        recorded.append(
            _waiting_family(await repository.waiting_for_funds(rows, WAITING_FOR_FUNDS))
        )
        return await repository.job_queue(rows), await repository.shown_balances(rows), recorded

    queue, balances, recorded = await database.read(read)
    sample_pool(database)  # this process's, fresh; the others' are at most a second old
    registry = scrape_registry()
    families = [*_job_families(queue), *_balance_families(balances, settings), *recorded]
    registry.register(_Families(families))
    # With several processes this reads their files: off the event loop.
    return await asyncio.to_thread(generate_latest, registry)


class _Families(Collector):
    """Families computed for one scrape."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def _job_families(queue: Sequence[repository.QueuedJobs]) -> list[Metric]:
    depth = GaugeMetricFamily(
        "tessera_job_queue_depth",
        "Jobs queued (due, or waiting for a retry) or running, by kind and status.",
        labels=["kind", "status"],
    )
    age = GaugeMetricFamily(
        "tessera_job_queue_oldest_age_seconds",
        "Age since it was enqueued of the oldest queued or running job, by kind and status "
        "(0 when there is none).",
        labels=["kind", "status"],
    )
    failed = GaugeMetricFamily(
        "tessera_jobs_failed",
        "Jobs that gave up after their attempts, by kind (until `tessera jobs retry`).",
        labels=["kind"],
    )
    found = {(row.kind, row.status): row for row in queue}
    now = utcnow()
    # Every known kind has its series, at 0 when idle, so that alerts see a value.
    for kind in sorted({*JobKind, *(row.kind for row in queue)}):
        for status in QUEUE_STATUSES:
            row = found.get((kind, status))
            depth.add_metric([kind, status], row.jobs if row else 0)
            oldest = (now - row.oldest).total_seconds() if row else 0.0
            age.add_metric([kind, status], max(oldest, 0.0))
        row = found.get((kind, JobStatus.FAILED))
        failed.add_metric([kind], row.jobs if row else 0)
    return [depth, age, failed]


def _webhook_families(deliveries: dict[str, int], endpoints: dict[str, int]) -> list[Metric]:
    attempts = GaugeMetricFamily(
        "tessera_webhook_deliveries_last_hour",
        "Webhook delivery attempts in the last hour, by outcome (failed: not a 2xx answer, a "
        "timeout, or an address refused).",
        labels=["status"],
    )
    for status in ("succeeded", "failed"):
        attempts.add_metric([status], deliveries.get(status, 0))
    states = GaugeMetricFamily(
        "tessera_webhook_endpoints",
        "Webhook endpoints by status: enabled, failing (retrying a change), disabled.",
        labels=["status"],
    )
    for status in ("enabled", "failing", "disabled"):
        states.add_metric([status], endpoints.get(status, 0))
    return [attempts, states]


def _drift_family(findings: Sequence[Sequence[Mapping[str, Any]]]) -> Metric:
    """``findings``: those of each product's last reconciliation."""
    drift = GaugeMetricFamily(
        "tessera_nft_drift",
        "Findings of the products' last reconciliations of their NFTs with the chain, by kind "
        "(the scheduled check, GET /v1/products/{id}/reconciliation, `tessera chain reconcile`).",
        labels=["kind"],
    )
    counted = Counter(str(finding["kind"]) for check in findings for finding in check)
    for kind in Kind:  # every kind, at 0 when none, so that alerts see a value
        drift.add_metric([kind.value], counted[kind.value])
    return drift


def _mail_family(counted: Mapping[MailStatus, int]) -> Metric:
    family = GaugeMetricFamily(
        "tessera_mails",
        "Mails by status: queued (waiting to be sent, or for a retry), sent, failed (given up; "
        "mail.failed). Sent and failed ones are kept 30 days.",
        labels=["status"],
    )
    for status in MailStatus:  # every status, at 0 when none, so that alerts see a value
        family.add_metric([status.value], counted.get(status, 0))
    return family


def _in_flight_family(in_flight: Sequence[repository.InFlight], settings: Settings) -> Metric:
    family = GaugeMetricFamily(
        "tessera_chain_extrinsics_in_flight",
        "Extrinsics signed and not yet final or dropped (each holds a nonce of its signer), by "
        "chain and signing account (its SS58 address).",
        labels=["chain", "signer"],
    )
    for row in sorted(in_flight):
        chain = settings.chain(row.chain)
        if chain is None:  # a chain this version no longer knows
            continue
        address = ss58_address(bytes.fromhex(row.signer), chain.ss58_prefix)
        family.add_metric([row.chain, address], row.extrinsics)
    return family


def _waiting_family(waiting: Sequence[repository.WaitingJobs]) -> Metric:
    family = GaugeMetricFamily(
        "tessera_jobs_waiting_for_funds",
        "Queued jobs waiting because their project wallet cannot pay the fees and deposits, "
        "by kind and project: they run again once it is funded.",
        labels=["kind", "project_id"],
    )
    for row in sorted(waiting, key=lambda row: (row.kind, str(row.project_id))):
        family.add_metric([row.kind, str(row.project_id)], row.jobs)
    return family


def _balance_families(
    balances: Sequence[repository.ShownBalance], settings: Settings
) -> list[Metric]:
    labels = ["project_id", "chain", "address"]
    balance = GaugeMetricFamily(
        "tessera_project_wallet_balance",
        "Free native balance of a project wallet in the chain's token (DOT, WND, ...), as the "
        "job worker last read it (every minute).",
        labels=labels,
    )
    read_at = GaugeMetricFamily(
        "tessera_project_wallet_balance_read_timestamp_seconds",
        "When that balance was read (Unix time).",
        labels=labels,
    )
    for row in balances:
        chain = settings.chain(row.chain)
        if chain is None:  # a chain this version no longer knows
            continue
        series = [str(row.project_id), row.chain, row.address]
        balance.add_metric(series, int(row.free) / 10**chain.decimals)
        read_at.add_metric(series, row.read_at.timestamp())
    return [balance, read_at]


def wallet_balance_chore(chains: Chains) -> tuple[float, Callable[[Database], Awaitable[int]]]:
    """The job worker's chore (``Worker`` chores) that records the project wallets' balances
    on every configured chain."""

    async def record_wallet_balances(database: Database) -> int:
        """Read and record the balances of every project wallet on each configured chain that
        no other worker has read in the last half interval; how many were recorded. A chain
        that does not answer keeps its last readings (their timestamp tells their age)."""
        configured = chains.settings.configured_chains()
        if not configured:
            return 0
        wallets = await database.read(repository.project_wallets)
        last = await database.read(repository.last_reads)
        fresh_after = utcnow() - timedelta(seconds=BALANCE_SECONDS / 2)
        recorded = 0
        for chain in configured:
            last_read = last.get(chain.name)
            if last_read is not None and last_read > fresh_after:  # another worker's
                continue
            try:
                frees = await _read_frees(chains, chain.name, [w.public_key for w in wallets])
            except AppError as exc:  # unreachable or too slow: try again next time
                log.warning("wallet balances on %s not read: %s", chain.name, exc.message)
                continue
            read_at = utcnow()
            async with database.transaction() as tx:
                readings = [(w.id, free) for w, free in zip(wallets, frees, strict=True)]
                await repository.replace_balances(tx, chain.name, readings, read_at)
                await tx.commit()
            recorded += len(wallets)
        return recorded

    return BALANCE_SECONDS, record_wallet_balances


async def _read_frees(chains: Chains, chain: str, keys: Sequence[bytes]) -> list[int]:
    frees: list[int] = []
    for start in range(0, len(keys), BALANCE_BATCH):
        batch = keys[start : start + BALANCE_BATCH]

        def read(gateway: ChainGateway, batch: Sequence[bytes] = batch) -> list[int]:
            return [gateway.balance(key).free for key in batch]

        # The request deadline, not the job's: the worker's jobs wait while a chore runs.
        frees += await chains.run(chain, read, in_request=True)
    return frees
