"""Worker processes killed in the middle of NFT work, against the real Asset Hub runtime.

Real ``tessera worker`` processes share the test database and the Chopsticks chain, with the
default job lease (20 s, renewed every 5 s). One is killed with SIGKILL while it creates a
product's collection (its creation signed and recorded, the extrinsic on its way): the job runs
again on a live worker once its lease has passed, in its place in the queue, follows what was
recorded and succeeds within 30 s of the kill, with one collection on chain. Then two workers
mint a product of 2,000 items together, their batches in flight at once with consecutive
nonces of the project wallet; the one holding a batch signed and not final is killed and a
fresh one starts: every NFT exists once, in its holder's wallet, no job failed, the signer's
nonces have no gap, and a reconciliation finds nothing.

Which worker holds a claim, its log says (a claim of a batch is logged with its id). Several
worker processes need a database that many processes write: PostgreSQL only.
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

from tessera.models import Extrinsic, Job, JobStatus, Product, ProductItem, WorkerHeartbeat
from tests import orm
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
MANY = 2000
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

    def holding(self, claim: uuid.UUID) -> subprocess.Popen[bytes]:
        """The worker whose log says it took the claim."""
        for index, log in enumerate(self._logs()):
            if str(claim) in log.read_text(errors="replace"):
                return self.processes[index]
        raise AssertionError(f"no worker took claim {claim}\n{self.logs()}")

    def _logs(self) -> list[Path]:
        return [self.directory / f"worker-{n + 1}.log" for n in range(len(self.processes))]

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
    async with orm.session(database, write=False) as session:
        return list(
            await session.scalars(
                select(Job).where(Job.project_id == project_id).order_by(Job.created_at)
            )
        )


async def job_row(database, job_id: uuid.UUID) -> Job:
    async with orm.session(database, write=False) as session:
        found = await session.get(Job, job_id)
    assert found is not None
    return found


async def product_row(database, product_id: str) -> Product:
    async with orm.session(database, write=False) as session:
        found = await session.get(Product, uuid.UUID(product_id))
    assert found is not None
    return found


def state(job: Job) -> tuple[str, int]:
    return job.status, job.attempts


async def beating(database, process: subprocess.Popen[bytes]) -> bool:
    """Whether the worker process has written its heartbeat (its loop runs)."""
    async with orm.session(database, write=False) as session:
        pid = await session.scalar(
            select(WorkerHeartbeat.pid).where(WorkerHeartbeat.pid == process.pid)
        )
    return pid is not None


async def _extrinsic_rows(database, project_id: uuid.UUID) -> list[Extrinsic]:
    async with orm.session(database, write=False) as session:
        return list(
            await session.scalars(
                select(Extrinsic)
                .where(Extrinsic.project_id == project_id)
                .order_by(Extrinsic.nonce, Extrinsic.created_at)
            )
        )


async def mint_in_flight(database, project_id: uuid.UUID) -> tuple[Extrinsic, uuid.UUID] | None:
    """A batch of mints signed and not final yet, with the claim whose jobs carry it."""
    for extrinsic in await _extrinsic_rows(database, project_id):
        if extrinsic.call != "Nfts.mint" or extrinsic.status not in ("signed", "submitted"):
            continue
        async with orm.session(database, write=False) as session:
            item = await session.scalar(
                select(ProductItem).where(ProductItem.nft_extrinsic_id == extrinsic.id).limit(1)
            )
            if item is None:
                continue
            job = await session.scalar(
                select(Job).where(
                    Job.kind == "nft.mint",
                    Job.status == JobStatus.RUNNING,
                    Job.subject == f"item:{item.id}",
                )
            )
        if job is not None and job.claim is not None:
            return extrinsic, job.claim
    return None


async def _created(database, product_id: str) -> bool:
    return (await product_row(database, product_id)).nft_status == "created"


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
        devchain.fund(wallet["address"], 2000 * DOT)
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
        workers.start()

        async def attempt_recorded() -> bool:
            return (await product_row(database, product["id"])).nft_extrinsic_id is not None

        await until(attempt_recorded, "the creation is signed and recorded", workers, 30)
        killed_at = workers.kill(first)
        assert state(await job_row(database, creation.id)) == ("running", 1)  # mid-creation

        recreated, took = await succeeded_within(database, creation.id, killed_at, workers)
        assert took <= RECOVERY_SECONDS, f"the collection took {took:.1f} s after the kill"
        assert (recreated.attempts, recreated.run_after) == (2, creation.run_after)
        done = await product_row(database, product["id"])
        assert done.nft_status == "created"
        collection_id = done.nft_collection_id
        assert collection_id is not None
        owned = gateway.collections_owned_by(project_key)
        assert owned == sorted([*owned_before, collection_id])  # exactly one more: this one
        chain_collection = gateway.collection(collection_id)
        assert chain_collection is not None
        assert (chain_collection.owner, chain_collection.max_supply) == (project_key, ITEMS)

        # A second worker joins; both mint a product of 2,000 items together, each batch
        # of theirs in flight with the next nonce. The worker holding a batch that is signed
        # and not final is killed; a fresh one starts (as a supervisor restarts it).
        third = workers.start()
        await until(lambda: beating(database, third), "another worker beats", workers, 60)
        many = await chain_client.post(
            "/v1/products", headers=tenant.w, json=product_body(**NFT, max_items=MANY)
        )
        assert many.status_code == 201, many.text
        big = many.json()
        await until(
            lambda: _created(database, big["id"]), "the big product's collection", workers, 60
        )
        holders = [
            user
            for start in range(0, MANY, 400)  # the tests' bodies are at most 256 KiB
            for user in await create_users(chain_client, tenant, min(400, MANY - start))
        ]
        for start in range(0, MANY, 500):
            await issue_items(
                chain_client, tenant, big["id"], *(u["id"] for u in holders[start : start + 500])
            )
        carried, claim = await until(
            lambda: mint_in_flight(database, tenant.project_id), "a batch in flight", workers, 120
        )
        victim = workers.holding(claim)
        workers.kill(victim)
        workers.start()

        async def all_minted() -> bool:
            rows = await items_of(database, big["id"])
            assert not [r for r in rows if r.nft_status == "failed"], workers.logs()
            return all(r.nft_status == "minted" for r in rows)

        await until(all_minted, "all 2,000 NFTs minted", workers, 300)
        jobs = await project_jobs(database, tenant.project_id)
        assert {(j.kind, j.status) for j in jobs} == {
            ("nft.create_collection", "succeeded"),
            ("nft.mint", "succeeded"),
        }
        # No nonce trouble ever surfaced as a job's failure; the killed worker's jobs ran
        # again (their second attempt) and followed its batch.
        assert [j.last_error for j in jobs if j.last_error] == []
        assert any(j.attempts == 2 for j in jobs if j.kind == "nft.mint")
        big_collection = (await product_row(database, big["id"])).nft_collection_id
        assert big_collection is not None
        nfts = gateway.collection_items(big_collection)
        assert sorted(nfts) == list(range(1, MANY + 1))  # every NFT once
        wallets = {user["id"]: public_key(user["wallets"][0]["address"]) for user in holders}
        rows = await items_of(database, big["id"])
        for row in rows:
            assert (nfts[row.item_id].owner, nfts[row.item_id].metadata) == (
                wallets[str(row.owner_id)],
                NFT["metadata_uri"],
            )
        # The killed worker's batch landed once, followed by the worker that took its jobs
        # over. The signer did not stall: every extrinsic it signed landed (none dropped or
        # signed again, no nonce filled) and its nonces have no gap.
        ledger = await _extrinsic_rows(database, tenant.project_id)
        assert {e.status for e in ledger} == {"final"}
        assert sorted(e.nonce for e in ledger) == list(range(len(ledger)))
        assert gateway.account(project_key).nonce == len(ledger)
        assert "System.remark" not in {e.call for e in ledger}
        assert next(e for e in ledger if e.id == carried.id).status == "final"
        checked_big = await chain_client.get(
            f"/v1/products/{big['id']}/reconciliation", headers=tenant.r
        )
        assert checked_big.status_code == 200, checked_big.text
        assert (checked_big.json()["items_checked"], checked_big.json()["findings"]) == (MANY, [])

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
