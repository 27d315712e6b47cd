"""Worker processes killed in the middle of NFT work, against the real Asset Hub runtime.

Real ``tessera worker`` processes share the test database and the Chopsticks chain, with the
default job lease (20 s, renewed every 5 s). One is killed with SIGKILL while it creates a
product's collection (its attempt signed and recorded, the extrinsic on its way), the next
while it mints (the NFT on chain, not yet recorded): each job runs again on a live worker once
its lease has passed, in its place in the queue, and succeeds within 30 s of the kill; the
chain ends with one collection and every NFT minted once, to its holder's wallet, and a
reconciliation finds nothing.

The job row does not say which worker holds it: the worker killed is the only one that could
have claimed the job (the others start after it has). Several worker processes need a database
that many processes write: PostgreSQL only.
"""

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import select

from tessera.models import Job, JobStatus, Product, ProductItem, WorkerHeartbeat
from tessera.models.base import utcnow
from tests.conftest import BACKEND
from tests.factories import create_users, issue_items, items_of, product_body
from tests.serving import BIN, settings_env

pytestmark = [
    pytest.mark.chain,
    pytest.mark.skipif(
        BACKEND != "postgresql",
        reason="several worker processes need PostgreSQL (SQLite has a single writer)",
    ),
]

DOT = 10**10
ITEMS = 10
RECOVERY_SECONDS = 30.0  # the lease (20 s) and the run that finishes the job
NFT = {"mint_nft": True, "metadata_uri": "https://meta.example/ticket.json", "chain": "AssetHub"}
T = TypeVar("T")


def public_key(address: str) -> bytes:
    return bytes.fromhex(ss58_decode(address))


class Workers:
    """``tessera worker`` processes on one environment, each writing its own log."""

    def __init__(self, env: dict[str, str], directory: Path) -> None:
        self.env = env
        self.directory = directory
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = self.directory / f"worker-{len(self.processes) + 1}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [str(BIN / "tessera"), "worker"],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> float:
        """SIGKILL: the worker dies without a word (no lease given back, no row written);
        when it died (``time.monotonic()``)."""
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        return time.monotonic()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def logs(self) -> str:
        """The end of each worker's log (for a failing assertion's message)."""
        return "\n".join(
            f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:]
            for log in sorted(self.directory.glob("worker-*.log"))
        )


@pytest.fixture
def workers(chain_app, devchain, tmp_path) -> Iterator[Workers]:
    """Workers on the test database and chain, with the test app's secrets (they open the
    custodial seeds it wrote), the default job lease and no scheduled reconciliation."""
    settings = chain_app.state.settings
    env = settings_env(
        settings.database_url,
        env=settings.env,
        secret_keys=settings.secret_keys.get_secret_value(),
        hash_key=settings.hash_key.get_secret_value(),
        chain_assethub_rpc_url=devchain.url,
        chain_timeout_seconds=settings.chain_timeout_seconds,
        worker_poll_seconds=0.2,
        reconcile_interval_seconds=0,
        log_level="info",
    )
    assert "TESSERA_JOB_LEASE_SECONDS" not in env  # the default lease, 20 s
    started = Workers(env, tmp_path)
    yield started
    started.stop()


async def until(probe: Callable[[], Awaitable[T]], what: str, workers: Workers, within: float) -> T:
    """``probe()``'s first truthy answer, polled every 50 ms for ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        found = await probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {within} s: {what}\n{workers.logs()}"
        await asyncio.sleep(0.05)


async def project_jobs(database, project_id: uuid.UUID) -> list[Job]:
    async with database.session(write=False) as session:
        return list(
            await session.scalars(
                select(Job).where(Job.project_id == project_id).order_by(Job.created_at)
            )
        )


async def job_row(database, job_id: uuid.UUID) -> Job:
    async with database.session(write=False) as session:
        found = await session.get(Job, job_id)
    assert found is not None
    return found


async def product_row(database, product_id: str) -> Product:
    async with database.session(write=False) as session:
        found = await session.get(Product, uuid.UUID(product_id))
    assert found is not None
    return found


def state(job: Job) -> tuple[str, int]:
    return job.status, job.attempts


async def beating(database, process: subprocess.Popen[bytes]) -> bool:
    """Whether the worker process has written its heartbeat (its loop runs)."""
    async with database.session(write=False) as session:
        pid = await session.scalar(
            select(WorkerHeartbeat.pid).where(WorkerHeartbeat.pid == process.pid)
        )
    return pid is not None


async def running_mint(database, project_id: uuid.UUID) -> tuple[Job, int] | None:
    """A mint running under a live lease whose handler is at the chain (its item shows
    submitted), with the item's number; or None."""
    now = utcnow()
    async with database.session(write=False) as session:
        running = await session.scalars(
            select(Job).where(
                Job.project_id == project_id,
                Job.kind == "nft.mint",
                Job.status == JobStatus.RUNNING,
                Job.lease_until > now,
            )
        )
        for mint in running:
            item = await session.get(ProductItem, uuid.UUID(mint.payload["product_item_id"]))
            if item is not None and item.nft_status == "submitted":
                return mint, item.item_id
    return None


async def on_chain_unrecorded(database, gateway, collection_id: int, mint: Job, nft: int) -> bool:
    """Whether the mint's NFT shows on chain while its job still runs in the same attempt (its
    worker has minted and not recorded it: it may be setting the metadata); False once the
    worker has recorded it first."""
    while True:
        minted = gateway.item_owner(collection_id, nft) is not None
        now = await job_row(database, mint.id)
        if (now.status, now.attempts) != (JobStatus.RUNNING, mint.attempts):
            return False
        if minted:
            return True
        await asyncio.sleep(0.02)


async def succeeded_within(
    database, job_id: uuid.UUID, killed_at: float, workers: Workers
) -> tuple[Job, float]:
    """The job once it has succeeded, and the seconds from the kill to then."""

    async def done() -> Job | None:
        found = await job_row(database, job_id)
        return found if found.status == JobStatus.SUCCEEDED else None

    finished = await until(done, f"job {job_id} succeeded", workers, RECOVERY_SECONDS + 5)
    return finished, time.monotonic() - killed_at


class TestKilledWorkers:
    async def test_a_job_killed_mid_creation_or_mid_mint_runs_again_once_within_30_s(
        self, chain_client, tenant, devchain, gateway, database, workers
    ):
        [wallet] = (await chain_client.get("/v1/projects/wallets", headers=tenant.r)).json()
        devchain.fund(wallet["address"], 1000 * DOT)
        project_key = public_key(wallet["address"])
        owned_before = gateway.collections_owned_by(project_key)

        # One worker alone takes the collection (the job row does not say which worker holds
        # it); a second starts beside it as soon as it has.
        first = workers.start()
        await until(lambda: beating(database, first), "the first worker beats", workers, 60)
        created = await chain_client.post(
            "/v1/products", headers=tenant.w, json=product_body(**NFT, max_items=ITEMS)
        )
        assert created.status_code == 201, created.text
        product = created.json()
        holders = await create_users(chain_client, tenant, ITEMS)
        issued = await issue_items(
            chain_client, tenant, product["id"], *(user["id"] for user in holders)
        )
        assert [item["item_id"] for item in issued] == list(range(1, ITEMS + 1))

        async def creating() -> Job | None:
            jobs = await project_jobs(database, tenant.project_id)
            [creation] = [j for j in jobs if j.kind == "nft.create_collection"]
            return creation if creation.status == JobStatus.RUNNING else None

        creation = await until(creating, "the collection job runs", workers, 30)
        second = workers.start()

        async def attempt_recorded() -> bool:
            return (await product_row(database, product["id"])).nft_attempt is not None

        await until(attempt_recorded, "the creation is signed and recorded", workers, 30)
        killed_at = workers.kill(first)
        assert state(await job_row(database, creation.id)) == ("running", 1)  # mid-creation

        recreated, took = await succeeded_within(database, creation.id, killed_at, workers)
        assert took <= RECOVERY_SECONDS, f"the collection took {took:.1f} s after the kill"
        assert (recreated.attempts, recreated.run_after) == (2, creation.run_after)
        done = await product_row(database, product["id"])
        assert (done.nft_status, done.nft_attempt) == ("created", None)
        collection_id = done.nft_collection_id
        assert collection_id is not None
        owned = gateway.collections_owned_by(project_key)
        assert owned == sorted([*owned_before, collection_id])  # exactly one more: this one
        chain_collection = gateway.collection(collection_id)
        assert chain_collection is not None
        assert (chain_collection.owner, chain_collection.max_supply) == (project_key, ITEMS)

        # The second worker, alone now, mints. It is killed once one of its mints is on chain
        # and not recorded; a fresh worker starts (as a supervisor would restart it).
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, f"no mint caught on chain\n{workers.logs()}"
            mint, nft = await until(
                lambda: running_mint(database, tenant.project_id), "a mint runs", workers, 60
            )
            if await on_chain_unrecorded(database, gateway, collection_id, mint, nft):
                break
        killed_at = workers.kill(second)
        workers.start()
        assert state(await job_row(database, mint.id)) == ("running", mint.attempts)
        assert (await items_of(database, product["id"]))[nft - 1].nft_status == "submitted"

        reminted, took = await succeeded_within(database, mint.id, killed_at, workers)
        assert took <= RECOVERY_SECONDS, f"the mint took {took:.1f} s after the kill"
        assert reminted.attempts == mint.attempts + 1

        async def all_done() -> bool:
            jobs = await project_jobs(database, tenant.project_id)
            return all(j.status == JobStatus.SUCCEEDED for j in jobs)

        await until(all_done, "every job succeeded", workers, 240)
        jobs = await project_jobs(database, tenant.project_id)
        assert sorted(j.kind for j in jobs) == ["nft.create_collection"] + ["nft.mint"] * ITEMS

        # One collection, each NFT minted once, to its holder's wallet.
        assert gateway.collections_owned_by(project_key) == owned
        nfts = gateway.collection_items(collection_id)
        assert sorted(nfts) == list(range(1, ITEMS + 1))
        wallets = {user["id"]: user["wallets"][0] for user in holders}
        for item in issued:
            on_chain = nfts[item["item_id"]]
            assert (on_chain.owner, on_chain.metadata) == (
                public_key(wallets[item["user"]["id"]]["address"]),
                NFT["metadata_uri"],
            )
        chain_collection = gateway.collection(collection_id)
        assert chain_collection is not None and chain_collection.items == ITEMS
        rows = await items_of(database, product["id"])
        assert [(r.item_id, r.nft_status, str(r.nft_wallet_id)) for r in rows] == [
            (item["item_id"], "minted", wallets[item["user"]["id"]]["id"]) for item in issued
        ]

        checked = await chain_client.get(
            f"/v1/products/{product['id']}/reconciliation", headers=tenant.r
        )
        assert checked.status_code == 200, checked.text
        body = checked.json()
        assert (body["collection_id"], body["items_checked"], body["findings"]) == (
            collection_id,
            ITEMS,
            [],
        )
