"""The job worker and every path of the NFT job handlers, against the in-memory chain."""

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import delete, select, update

from tessera.chain.gateway import ChainError, Collection, Signed
from tessera.chain.keys import open_seed
from tessera.crypto import Sealed
from tessera.errors import JobNotFailed, JobNotFound
from tessera.jobs.queue import enqueue
from tessera.jobs.repository import JobRow
from tessera.jobs.service import retry_job
from tessera.jobs.worker import JobHandler, Worker
from tessera.main import job_handlers
from tessera.models import (
    Job,
    JobStatus,
    Product,
    ProductItem,
    ProjectWallet,
    UserWallet,
)
from tessera.models.base import utcnow
from tests.changes.feed import cursor_now, marker, shown, typed
from tests.factories import (
    create_event,
    create_order,
    create_users,
    issue_items,
    link_receiving,
    product_body,
    transfer_item,
)
from tests.jobs.memory_chain import DEPOSITS, DOT, FEE, Crash, signer_of

METADATA = "https://meta.example/ticket.json"
NFT = {"mint_nft": True, "metadata_uri": METADATA, "chain": "AssetHub"}
LEASE = timedelta(seconds=20)  # job_lease_seconds
CANNOT_PAY = "ChainError: {}: rejected: the signer cannot pay the fee"


# the chain side


def public_key(address: str) -> bytes:
    return bytes.fromhex(ss58_decode(address))


def key_of(user: dict) -> bytes:
    return public_key(user["wallets"][0]["address"])


async def funded(client, tenant, chain, amount: int = 100 * DOT) -> bytes:
    """The project wallet's public key, after giving it ``amount``."""
    [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
    key = public_key(wallet["address"])
    chain.fund(key, amount)
    return key


async def seed_of(app, key: bytes) -> bytes:
    """A custodial wallet's seed, to act on the chain as its owner outside Tessera."""
    async with app.state.database.session(write=False) as session:
        wallet = await session.scalar(select(ProjectWallet).where(ProjectWallet.public_key == key))
        if wallet is None:
            wallet = await session.scalar(select(UserWallet).where(UserWallet.public_key == key))
    return open_seed(
        app.state.box, public_key=key, secret=Sealed(wallet.secret_key_id, wallet.secret_blob)
    )


# the API side


async def nft_product(client, tenant, **extra) -> dict:
    response = await client.post(
        "/v1/products", headers=tenant.w, json=product_body(**NFT, **extra)
    )
    assert response.status_code == 201, response.text
    return response.json()


async def product_nft(client, tenant, product_id: str) -> dict:
    response = await client.get(f"/v1/products/{product_id}", headers=tenant.r)
    assert response.status_code == 200
    return response.json()["nft"]


async def order_item(client, tenant, user: dict, product_id: str) -> tuple[str, dict]:
    """Buy one item: the order's id and the item as the order shows it."""
    response = await create_order(client, tenant, user["id"], (product_id, 1))
    assert response.status_code == 201, response.text
    [item] = response.json()["product_items"]
    return response.json()["id"], item


async def item_nft(client, tenant, order_id: str) -> dict:
    response = await client.get(f"/v1/orders/{order_id}", headers=tenant.r)
    assert response.status_code == 200
    [item] = response.json()["product_items"]
    return item["nft"]


async def transfer(client, tenant, product_id: str, item_id: str, sender, recipient) -> None:
    response = await transfer_item(client, tenant, product_id, item_id, sender, recipient)
    assert response.status_code == 200, response.text


# the database side


async def add_job(
    database,
    tenant,
    *,
    subject: str,
    run_after: datetime | None = None,
    lease_until: datetime | None = None,
    status: JobStatus = JobStatus.QUEUED,
    attempts: int = 0,
    kind: str = "test.job",
    created_at: datetime | None = None,
) -> JobRow:
    values = {
        "project_id": tenant.project_id,
        "kind": kind,
        "subject": subject,
        "payload": {},
        "status": status,
        "attempts": attempts,
    }
    values |= {"run_after": run_after} if run_after else {}
    values |= {"lease_until": lease_until} if lease_until else {}
    values |= {"created_at": created_at} if created_at else {}
    async with database.transaction() as tx:
        [job] = await enqueue(tx, [values])
        await tx.commit()
    return job


async def jobs(database) -> list[Job]:
    async with database.session(write=False) as session:
        return list(await session.scalars(select(Job).order_by(Job.created_at)))


async def job_of(database, kind: str) -> Job:
    [job] = [job for job in await jobs(database) if job.kind == kind]
    return job


def state(job: Job) -> tuple[str, int, str | None]:
    return job.status, job.attempts, job.last_error


async def row(database, model, row_id: str | uuid.UUID):
    async with database.session(write=False) as session:
        return await session.get(model, uuid.UUID(str(row_id)))


async def expire_leases(database) -> None:
    """Every running job's worker is dead: its lease has passed."""
    async with database.session() as session:
        await session.execute(
            update(Job).where(Job.status == JobStatus.RUNNING).values(lease_until=Job.created_at)
        )
        await session.commit()


async def skip_waits(database) -> None:
    """Every queued job is due now (no waiting out a backoff)."""
    async with database.session() as session:
        await session.execute(
            update(Job).where(Job.status == JobStatus.QUEUED).values(run_after=Job.created_at)
        )
        await session.commit()


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


async def collection_job(database, product_id: str) -> Job:
    [job] = [
        job
        for job in await jobs(database)
        if job.kind == "nft.create_collection" and job.payload["product_id"] == product_id
    ]
    return job


async def nothing_shown(context, job, status) -> None:
    """A test handler's ``show``: its job serves no row."""


class TestClaim:
    async def test_due_jobs_only_oldest_first_with_a_lease(self, worker, tenant, database):
        now = utcnow()
        later = await add_job(database, tenant, subject="a", run_after=now - seconds(10))
        older = await add_job(database, tenant, subject="b", run_after=now - seconds(20))
        future = await add_job(database, tenant, subject="c", run_after=now + seconds(60))
        before = utcnow()
        claimed = [await worker.claim(), await worker.claim()]
        after = utcnow()
        assert [job.id for job in claimed] == [older.id, later.id]
        assert await worker.claim() is None

        rows = {job.id: job for job in await jobs(database)}
        for job in claimed:
            assert (rows[job.id].status, rows[job.id].attempts) == ("running", 1)
            assert before + LEASE <= rows[job.id].lease_until <= after + LEASE
        assert (rows[older.id].run_after, rows[later.id].run_after) == (
            older.run_after,
            later.run_after,
        )  # a running job keeps its place in the queue
        assert state(rows[future.id]) == ("queued", 0, None)
        assert rows[future.id].run_after == future.run_after

    async def test_jobs_due_at_the_same_time_run_in_the_order_they_were_queued(
        self, worker, tenant, database
    ):
        due = utcnow() - seconds(5)
        # Stored in the other order, so that the table's own order cannot pass the test.
        second = await add_job(database, tenant, subject="b", run_after=due)
        first = await add_job(
            database, tenant, subject="a", run_after=due, created_at=second.created_at - seconds(1)
        )
        assert (await worker.claim()).id == first.id
        assert (await worker.claim()).id == second.id

    async def test_a_subject_with_a_running_job_is_not_claimed(self, worker, tenant, database):
        now = utcnow()
        running = await add_job(
            database,
            tenant,
            subject="item:1",
            status=JobStatus.RUNNING,
            attempts=1,
            lease_until=now + seconds(60),
        )
        waiting = await add_job(database, tenant, subject="item:1", run_after=now - seconds(30))
        other = await add_job(database, tenant, subject="item:2", run_after=now - seconds(10))
        assert (await worker.claim()).id == other.id
        assert await worker.claim() is None
        rows = {job.id: job for job in await jobs(database)}
        assert state(rows[waiting.id]) == ("queued", 0, None)
        assert state(rows[running.id]) == ("running", 1, None)

        async with database.session() as session:
            await session.execute(
                update(Job).where(Job.id == running.id).values(status=JobStatus.SUCCEEDED)
            )
            await session.commit()
        assert (await worker.claim()).id == waiting.id

    async def test_concurrent_claims_start_one_job_of_a_subject(self, worker, tenant, database):
        # On PostgreSQL each claim runs in its own connection: without the claim lock, SKIP
        # LOCKED would hand each claimer a different job of the same subject.
        due = utcnow() - seconds(5)
        for _ in range(8):
            await add_job(database, tenant, subject="item:1", run_after=due)
        claimed = await asyncio.gather(*(worker.claim() for _ in range(8)))
        assert len([job for job in claimed if job is not None]) == 1
        assert sorted(job.status for job in await jobs(database)) == ["queued"] * 7 + ["running"]

    async def test_a_running_job_is_claimed_again_when_its_lease_has_passed(
        self, worker, tenant, database
    ):
        dead = await add_job(
            database,
            tenant,
            subject="item:1",
            status=JobStatus.RUNNING,
            attempts=1,
            run_after=utcnow() - seconds(600),
            lease_until=utcnow() + seconds(60),
        )
        younger = await add_job(database, tenant, subject="item:2", run_after=utcnow())
        assert (await worker.claim()).id == younger.id  # its worker may still be working on it
        assert await worker.claim() is None
        await expire_leases(database)
        before = utcnow()
        claimed = await worker.claim()
        assert claimed.id == dead.id
        job = await row(database, Job, dead.id)
        assert (job.status, job.attempts) == ("running", 2)
        assert before + LEASE <= job.lease_until <= utcnow() + LEASE

    async def test_a_dead_workers_job_is_claimed_ahead_of_the_jobs_due_after_it(
        self, worker, tenant, database
    ):
        now = utcnow()
        # Queued before it, so that the order the jobs were written in cannot pass the test.
        younger = await add_job(database, tenant, subject="item:2", run_after=now - seconds(60))
        dead = await add_job(
            database,
            tenant,
            subject="item:1",
            status=JobStatus.RUNNING,
            attempts=1,
            run_after=now - seconds(120),
            lease_until=now - seconds(1),
        )
        youngest = await add_job(database, tenant, subject="item:3", run_after=now - seconds(1))
        claimed = [await worker.claim() for _ in range(3)]
        assert [job.id for job in claimed] == [dead.id, younger.id, youngest.id]
        again = await row(database, Job, dead.id)
        # Its place in the queue is the time it first came due, not the time its worker died.
        assert (again.status, again.attempts, again.run_after) == ("running", 2, dead.run_after)


class TestLeaseRenewal:
    async def test_a_handler_running_longer_than_its_lease_keeps_it(self, worker, tenant, database):
        lease = 0.4
        second = Worker(worker.context, {}, max_attempts=1, lease_seconds=lease)
        claims: list[Job | None] = []
        leases: list[datetime | None] = []

        async def run(context, job):
            for _ in range(4):  # a second in all: the first lease ends long before
                await asyncio.sleep(0.25)
                claims.append(await second.claim())
                leases.append((await row(database, Job, job.id)).lease_until)

        first = Worker(
            worker.context,
            {"test.job": JobHandler(run, nothing_shown)},
            max_attempts=1,
            lease_seconds=lease,
        )
        job = await add_job(database, tenant, subject="item:1")
        before = utcnow()  # the claim comes after
        assert await first.run_one()
        assert claims == [None] * 4  # the other worker never got it
        assert leases[-1] > before + seconds(2 * lease)  # renewed, more than once
        [stored] = await jobs(database)
        assert (stored.id, stored.lease_until) == (job.id, None)
        assert state(stored) == ("succeeded", 1, None)


class TestLeaseLoss:
    @pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
    async def test_a_worker_whose_job_was_claimed_again_records_nothing(
        self, worker, tenant, database, fails
    ):
        second = Worker(worker.context, {}, max_attempts=1, lease_seconds=120)
        taken: list[Job] = []
        shown: list[JobStatus] = []

        async def run(context, job):
            await expire_leases(database)  # this worker stalled past its lease...
            taken.append(await second.claim())  # ...and another one took the job
            if fails:
                raise RuntimeError("too late")

        async def show(context, job, status):
            shown.append(status)

        first = Worker(
            worker.context,
            {"test.job": JobHandler(run, show)},
            max_attempts=1,  # a failure would be final: the row would show it
            lease_seconds=120,
        )
        job = await add_job(database, tenant, subject="item:1")
        assert await first.run_one()
        [stored] = await jobs(database)
        assert taken[0].id == job.id
        assert state(stored) == ("running", 2, None)
        assert stored.lease_until == taken[0].lease_until
        assert shown == []

    async def test_a_mint_whose_lease_was_lost_records_nothing(
        self, client, tenant, chain, worker, database, monkeypatch
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        assert await worker.run_one()  # the collection
        cursor = await cursor_now(client, tenant)
        second = Worker(worker.context, {}, max_attempts=3, lease_seconds=120)
        taken: list[Job] = []
        loop = asyncio.get_running_loop()

        async def take_over() -> None:
            await expire_leases(database)  # the first worker stalled past its lease...
            taken.append(await second.claim())  # ...and another one took the mint

        mint = chain.mint

        def stalled_mint(seed: bytes, **call) -> object:
            minted = mint(seed, **call)
            asyncio.run_coroutine_threadsafe(take_over(), loop).result()  # from the chain thread
            return minted

        monkeypatch.setattr(chain, "mint", stalled_mint)
        assert await worker.run_one()
        monkeypatch.undo()

        assert chain.item_owner(0, 1) == key_of(ada)  # the chain took the mint...
        stored = await row(database, ProductItem, item["id"])
        # ...but the row shows only what was written under the lease: nothing of the result.
        assert (stored.nft_status, stored.nft_tx_hash, stored.nft_wallet_id) == (
            "submitted",
            None,
            None,
        )
        mint_job = await job_of(database, "nft.mint")
        assert [job.id for job in taken] == [mint_job.id]
        assert state(mint_job) == ("running", 2, None)  # the new holder's attempt, untouched
        assert mint_job.lease_until == taken[0].lease_until
        made = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=cursor)) == [made]  # no nft.minted

        await expire_leases(database)  # the new holder died too: the next run finishes
        assert await worker.run_until_idle() == 1
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 3, None)
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        stored = await row(database, ProductItem, item["id"])
        assert (stored.nft_status, str(stored.nft_wallet_id)) == ("minted", ada["wallets"][0]["id"])
        minted = [e["type"] for e in await shown(client, tenant, 2, after=cursor)]
        assert minted == ["user.created", "nft.minted"]


class TestBackoff:
    async def test_a_failing_job_is_retried_later_then_fails_on_its_row(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        chain.free[wallet] = 0  # emptied after the request checked it
        error = CANNOT_PAY.format("Nfts.create")
        for attempt in range(1, worker.max_attempts):
            before = utcnow()
            assert await worker.run_one()
            after = utcnow()
            job = await job_of(database, "nft.create_collection")
            assert state(job) == ("queued", attempt, error)
            delay = 2**attempt
            assert before + seconds(0.8 * delay) <= job.run_after <= after + seconds(1.2 * delay)
            assert not await worker.run_one()  # not due yet
            # The row shows the job queued again until it gives up.
            assert (await product_nft(client, tenant, product["id"]))["status"] == "queued"
            await skip_waits(database)

        assert await worker.run_one()
        job = await job_of(database, "nft.create_collection")
        assert state(job) == ("failed", worker.max_attempts, error)
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": None,
            "status": "failed",
        }
        assert (await row(database, Product, product["id"])).nft_status == "failed"
        await skip_waits(database)
        assert not await worker.run_one()
        assert chain.collections == {} and chain.calls == []

    async def test_the_backoff_is_capped_at_five_minutes(self, worker, tenant, database):
        patient = Worker(worker.context, {}, max_attempts=20, lease_seconds=120)
        await add_job(database, tenant, subject="item:1", attempts=9)
        before = utcnow()
        assert await patient.run_one()
        after = utcnow()
        [job] = await jobs(database)
        assert (job.status, job.attempts) == ("queued", 10)  # 2**10 s would be 17 minutes
        assert before + seconds(240) <= job.run_after <= after + seconds(360)


class TestNotReady:
    async def test_a_mint_waits_for_its_collection_without_spending_an_attempt(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        # The collection's worker dies after submitting: its job holds the lease.
        chain.crash_after = "create_collection"
        with pytest.raises(Crash):
            await worker.run_one()
        chain.crash_after = None

        before = utcnow()
        assert await worker.run_one()  # the mint
        after = utcnow()
        mint = await job_of(database, "nft.mint")
        assert state(mint) == (
            "queued",
            0,
            "waiting: the product's NFT collection is not created yet",
        )
        assert before + seconds(2) <= mint.run_after <= after + seconds(2)
        assert (await row(database, ProductItem, item["id"])).nft_status == "queued"
        assert not await worker.run_one()

        await expire_leases(database)
        await skip_waits(database)
        assert await worker.run_until_idle() == 2
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)
        assert (await row(database, ProductItem, item["id"])).nft_status == "minted"
        assert chain.item_owner(0, 1) == key_of(ada)


class TestRetry:
    async def test_a_failed_job_runs_again_with_fresh_attempts(
        self, client, tenant, chain, impatient, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        assert await impatient.run_until_idle() == 1
        chain.free[wallet] = FEE - 1  # the mint cannot pay its fee
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        assert await impatient.run_until_idle() == 1
        job = await job_of(database, "nft.mint")
        assert state(job) == ("failed", 1, CANNOT_PAY.format("Nfts.mint"))
        assert (await item_nft(client, tenant, order_id))["status"] == "failed"

        chain.fund(wallet, 100 * DOT)
        retried = await retry_job(impatient.context, job_handlers(), job_id=job.id)
        assert retried.id == job.id
        job = await job_of(database, "nft.mint")
        assert state(job) == ("queued", 0, None)
        assert job.run_after <= utcnow()
        assert (await item_nft(client, tenant, order_id))["status"] == "queued"

        assert await impatient.run_until_idle() == 1
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)
        assert (await item_nft(client, tenant, order_id))["status"] == "minted"
        assert chain.item_owner(0, 1) == key_of(ada)

    async def test_an_unknown_job_is_not_found(self, worker, database):
        with pytest.raises(JobNotFound):
            await retry_job(worker.context, job_handlers(), job_id=uuid.uuid4())

    @pytest.mark.parametrize("status", [JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED])
    async def test_only_a_failed_job_is_retried(self, worker, tenant, database, status):
        job = await add_job(database, tenant, subject="item:1", status=status, attempts=1)
        with pytest.raises(JobNotFailed, match=f"job {job.id} is {status}"):
            await retry_job(worker.context, job_handlers(), job_id=job.id)
        [unchanged] = await jobs(database)
        assert (unchanged.status, unchanged.attempts, unchanged.run_after) == (
            status,
            1,
            job.run_after,
        )


class TestUnknownKind:
    async def test_fails_with_no_handler_and_can_be_retried(
        self, worker, impatient, tenant, database
    ):
        job = await add_job(database, tenant, kind="nft.burn", subject="item:1")
        error = "RuntimeError: no handler for job kind 'nft.burn'"
        assert await worker.run_one()
        assert state((await jobs(database))[0]) == ("queued", 1, error)
        await skip_waits(database)
        assert await impatient.run_one()
        assert state((await jobs(database))[0]) == ("failed", 2, error)
        await retry_job(worker.context, job_handlers(), job_id=job.id)
        assert state((await jobs(database))[0]) == ("queued", 0, None)
        assert await impatient.run_one()
        assert state((await jobs(database))[0]) == ("failed", 1, error)


class TestCreateCollection:
    async def test_created_by_the_project_wallet_with_the_max_supply(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=3)
        assert product["nft"] == {"chain": "AssetHub", "collection_id": None, "status": "queued"}
        assert await worker.run_until_idle() == 1
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }
        assert chain.collection(0) == Collection(owner=wallet, items=0, max_supply=3)
        assert chain.calls == ["Nfts.create"]
        assert chain.free[wallet] == 100 * DOT - DEPOSITS.collection - FEE
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 1, None)

    async def test_a_collection_created_by_a_run_that_died_is_adopted(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=5)
        chain.crash_after = "create_collection"
        with pytest.raises(Crash):
            await worker.run_one()
        chain.crash_after = None
        assert chain.collections_owned_by(wallet) == [0]
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": None,
            "status": "submitted",
        }
        assert state(await job_of(database, "nft.create_collection")) == ("running", 1, None)
        assert not await worker.run_one()  # the lease holds

        await expire_leases(database)
        assert await worker.run_one()
        assert (await product_nft(client, tenant, product["id"]))["collection_id"] == 0
        assert chain.collections_owned_by(wallet) == [0]
        assert chain.calls == ["Nfts.create"]
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)

    @pytest.mark.parametrize("pool", ["lands", "drops"])
    async def test_an_attempt_waiting_in_a_pool_is_submitted_again_never_signed_again(
        self, client, tenant, chain, worker, database, monkeypatch, pool
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=4)
        signed: list[Signed] = []
        sign = chain.sign_create_collection

        def counted(seed: bytes, *, max_supply: int | None) -> Signed:
            signed.append(sign(seed, max_supply=max_supply))
            return signed[-1]

        monkeypatch.setattr(chain, "sign_create_collection", counted)
        waiting = (
            "ChainUnavailable: chain AssetHub is unavailable: Nfts.create: waiting in the pool"
        )
        chain.held = True
        for attempt in (1, 2):  # the first submits; the retry sends the same bytes again
            assert await worker.run_one()
            assert state(await job_of(database, "nft.create_collection")) == (
                "queued",
                attempt,
                waiting,
            )
            assert (await row(database, Product, product["id"])).nft_attempt == {
                "extrinsic": signed[0].extrinsic,
                "nonce": 0,
            }
            assert (len(signed), chain.pool, chain.collections) == (1, [signed[0]], {})
            await skip_waits(database)

        if pool == "lands":  # the creation lands: the retry finds the collection and adopts it
            chain.release()
            assert chain.collections_owned_by(wallet) == [0]
        else:  # the pool forgot it (a node restarted): the retry's bytes create it
            chain.held, chain.pool = False, []
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 3, None)
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }
        assert (await row(database, Product, product["id"])).nft_attempt is None
        assert chain.collections_owned_by(wallet) == [0]
        assert chain.collection(0) == Collection(owner=wallet, items=0, max_supply=4)
        assert (chain.calls, len(signed)) == (["Nfts.create"], 1)

    async def test_an_attempt_whose_nonce_another_call_spent_is_signed_anew(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        first = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        assert await worker.run_until_idle() == 1  # the first product's collection, 0
        second = await nft_product(client, tenant, max_items=3)
        chain.held = True
        assert await worker.run_one()  # the second's creation waits in the pool
        stale = (await row(database, Product, second["id"])).nft_attempt
        assert stale["nonce"] == 1 and chain.pool == [Signed(**stale)]

        # Meanwhile the project wallet signs a mint of the first product (the creation waits
        # out its backoff): the nonce of the pooled creation is spent.
        await issue_items(client, tenant, first["id"], ada["id"])
        assert await worker.run_one()
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)
        chain.release()
        assert chain.collections_owned_by(wallet) == [0]  # the pool refused the stale attempt
        with pytest.raises(ChainError, match="Transaction is outdated"):
            chain.submit_create_collection(Signed(**stale))

        await skip_waits(database)
        assert await worker.run_one()
        assert state(await collection_job(database, second["id"])) == ("succeeded", 2, None)
        assert await product_nft(client, tenant, second["id"]) == {
            "chain": "AssetHub",
            "collection_id": 1,
            "status": "created",
        }
        assert (await row(database, Product, second["id"])).nft_attempt is None
        assert chain.collections_owned_by(wallet) == [0, 1]
        assert chain.collection(1) == Collection(owner=wallet, items=0, max_supply=3)
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata", "Nfts.create"]

    async def test_recorded_collections_and_other_sizes_are_not_adopted(
        self, client, tenant, chain, worker, jobs_app
    ):
        wallet = await funded(client, tenant, chain)
        first = await nft_product(client, tenant, max_items=3)
        assert await worker.run_until_idle() == 1
        # A collection of another size made with the project wallet outside Tessera.
        assert chain.create_collection(await seed_of(jobs_app, wallet), max_supply=5)[0] == 1
        second = await nft_product(client, tenant, max_items=3)
        assert await worker.run_until_idle() == 1
        assert (await product_nft(client, tenant, second["id"]))["collection_id"] == 2
        assert (await product_nft(client, tenant, first["id"]))["collection_id"] == 0
        assert chain.calls == ["Nfts.create"] * 3
        assert chain.collections_owned_by(wallet) == [0, 1, 2]

    async def test_a_collection_recorded_by_a_run_that_died_is_not_created_again(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        assert await worker.run_until_idle() == 1
        # The worker died after recording the collection, before recording its job.
        async with database.session() as session:
            await session.execute(
                update(Job).values(status=JobStatus.RUNNING, last_error=None, lease_until=utcnow())
            )
            await session.commit()
        assert await worker.run_until_idle() == 1
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)
        assert chain.calls == ["Nfts.create"]
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }

    async def test_a_deleted_product_needs_nothing(self, client, tenant, chain, worker, database):
        await funded(client, tenant, chain)
        event = await create_event(client, tenant)
        product = await nft_product(client, tenant, event_id=event["id"])
        response = await client.delete(f"/v1/events/{event['id']}", headers=tenant.w)
        assert response.status_code == 204
        assert await row(database, Product, product["id"]) is None
        assert await worker.run_until_idle() == 1
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 1, None)
        assert chain.calls == [] and chain.collections == {}


class TestMint:
    async def test_minted_to_the_owner_with_the_metadata(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, item = await order_item(client, tenant, ada, product["id"])
        assert item["nft"] == {"status": "queued", "tx_hash": None, "block": None, "transfer": None}
        assert await worker.run_until_idle() == 2

        minted = chain.tx("Nfts.mint")
        assert await item_nft(client, tenant, order_id) == {
            "status": "minted",
            "tx_hash": minted.tx_hash,
            "block": minted.block_number,
            "transfer": None,
        }
        stored = await row(database, ProductItem, item["id"])
        assert (stored.nft_status, stored.nft_tx_hash, stored.nft_block) == (
            "minted",
            minted.tx_hash,
            2,
        )
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        assert chain.item_owner(0, 1) == key_of(ada)
        assert chain.item_metadata(0, 1) == METADATA
        assert chain.collection(0).items == 1
        spent = DEPOSITS.collection + DEPOSITS.item + 3 * FEE
        assert chain.free[wallet] == 100 * DOT - spent
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)

    async def test_an_item_minted_by_a_run_that_died_is_not_minted_again(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()  # the collection
        chain.crash_after = "mint"
        with pytest.raises(Crash):
            await worker.run_one()
        chain.crash_after = None
        assert chain.item_owner(0, 1) == key_of(ada)
        assert chain.item_metadata(0, 1) is None
        assert (await item_nft(client, tenant, order_id))["status"] == "submitted"

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        assert chain.item_metadata(0, 1) == METADATA
        # This run submitted no mint: the row has no transaction to show.
        assert await item_nft(client, tenant, order_id) == {
            "status": "minted",
            "tx_hash": None,
            "block": None,
            "transfer": None,
        }
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 2, None)

    async def test_a_rerun_records_the_wallet_the_nft_went_to_not_the_one_chosen_since(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        assert await worker.run_one()  # the collection
        chain.crash_after = "mint"
        with pytest.raises(Crash):  # minted to Ada's custodial wallet, then died
            await worker.run_one()
        chain.crash_after = None
        _, held = await link_receiving(client, tenant, ada)

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        [custodial] = ada["wallets"]
        assert (
            chain.item_owner(0, 1)
            == public_key(custodial["address"])
            != public_key(held["address"])
        )
        stored = await row(database, ProductItem, item["id"])
        assert (stored.nft_status, str(stored.nft_wallet_id), stored.nft_held_by) == (
            "minted",
            custodial["id"],
            None,
        )
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        checked = await client.get(f"/v1/products/{product['id']}/reconciliation", headers=tenant.r)
        assert checked.status_code == 200, checked.text
        assert (checked.json()["items_checked"], checked.json()["findings"]) == (1, [])

    async def test_metadata_already_set_is_not_set_again(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()
        chain.crash_after = "set_metadata"
        with pytest.raises(Crash):
            await worker.run_one()
        chain.crash_after = None
        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 2, None)

    async def test_fails_when_the_collection_could_not_be_created(
        self, client, tenant, chain, impatient, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        chain.free[wallet] = 0
        assert await impatient.run_until_idle() == 2
        assert state(await job_of(database, "nft.create_collection")) == (
            "failed",
            1,
            CANNOT_PAY.format("Nfts.create"),
        )
        assert state(await job_of(database, "nft.mint")) == (
            "failed",
            1,
            "RuntimeError: the product's NFT collection could not be created",
        )
        assert (await product_nft(client, tenant, product["id"]))["status"] == "failed"
        assert (await item_nft(client, tenant, order_id))["status"] == "failed"
        assert chain.calls == []

    async def test_an_item_that_is_gone_needs_nothing(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        async with database.session() as session:
            await session.execute(
                delete(ProductItem).where(ProductItem.id == uuid.UUID(item["id"]))
            )
            await session.commit()
        assert await worker.run_until_idle() == 2
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)
        assert chain.calls == ["Nfts.create"]

    async def test_an_owner_without_a_wallet_is_an_error(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        async with database.session() as session:
            await session.execute(
                delete(UserWallet).where(UserWallet.user_id == uuid.UUID(ada["id"]))
            )
            await session.commit()
        assert await worker.run_until_idle() == 2
        mint = await job_of(database, "nft.mint")
        assert state(mint) == ("queued", 1, f"RuntimeError: user {ada['id']} has no wallet")
        assert (await row(database, ProductItem, item["id"])).nft_status == "queued"
        assert chain.calls == ["Nfts.create"]


@dataclass(frozen=True)
class Minted:
    wallet: bytes
    product_id: str
    item_id: str
    order_id: str
    ada: dict
    bob: dict


async def minted_item(client, tenant, chain, worker) -> Minted:
    """A transferable NFT product, its collection created and Ada's item minted."""
    wallet = await funded(client, tenant, chain)
    product = await nft_product(client, tenant, is_transferable=True)
    ada, bob = await create_users(client, tenant, 2)
    order_id, item = await order_item(client, tenant, ada, product["id"])
    assert await worker.run_until_idle() == 2
    assert chain.item_owner(0, 1) == key_of(ada)
    return Minted(wallet, product["id"], item["id"], order_id, ada, bob)


class TestTransfer:
    async def test_the_sponsor_funds_the_custodial_holder_which_then_transfers(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        sponsor = chain.free[nft.wallet]
        assert key_of(nft.ada) not in chain.free  # custodial wallets hold nothing
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == {
            "status": "queued",
            "tx_hash": None,
            "block": None,
        }
        assert chain.item_owner(0, 1) == key_of(nft.ada)  # the database moves first

        assert await worker.run_until_idle() == 1
        assert chain.item_owner(0, 1) == key_of(nft.bob)
        assert chain.calls[3:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        needed = 2 * FEE + DEPOSITS.existential
        assert chain.free[key_of(nft.ada)] == needed - FEE
        assert chain.free[nft.wallet] == sponsor - needed - FEE
        moved = chain.tx("Nfts.transfer")
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == {
            "status": "transferred",
            "tx_hash": moved.tx_hash,
            "block": moved.block_number,
        }
        stored = await row(database, ProductItem, nft.item_id)
        assert (stored.nft_status, stored.nft_transfer_block) == ("minted", 5)
        assert state(await job_of(database, "nft.transfer")) == ("succeeded", 1, None)

    async def test_a_holder_short_of_funds_gets_the_difference(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        chain.fund(key_of(nft.ada), FEE)
        sponsor = chain.free[nft.wallet]
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        assert await worker.run_until_idle() == 1
        needed = 2 * FEE + DEPOSITS.existential
        assert chain.calls[3:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        assert chain.free[nft.wallet] == sponsor - (needed - FEE) - FEE
        assert chain.free[key_of(nft.ada)] == needed - FEE
        assert chain.item_owner(0, 1) == key_of(nft.bob)

    async def test_a_holder_that_can_pay_is_not_sponsored(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        chain.fund(key_of(nft.ada), DOT)
        sponsor = chain.free[nft.wallet]
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        assert await worker.run_until_idle() == 1
        assert chain.calls[3:] == ["Nfts.transfer"]
        assert chain.free[key_of(nft.ada)] == DOT - FEE
        assert chain.free[nft.wallet] == sponsor
        assert chain.item_owner(0, 1) == key_of(nft.bob)

    async def test_nothing_is_submitted_when_the_chain_already_agrees(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.bob, nft.ada)
        assert await worker.run_until_idle() == 2
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        assert chain.item_owner(0, 1) == key_of(nft.ada)
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == {
            "status": "transferred",
            "tx_hash": None,
            "block": None,
        }
        assert [state(job) for job in await jobs(database) if job.kind == "nft.transfer"] == [
            ("succeeded", 1, None)
        ] * 2

    async def test_a_transfer_by_a_run_that_died_is_not_repeated(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        chain.crash_after = "transfer"
        with pytest.raises(Crash):
            await worker.run_one()
        chain.crash_after = None
        assert chain.item_owner(0, 1) == key_of(nft.bob)
        assert (await item_nft(client, tenant, nft.order_id))["transfer"]["status"] == "submitted"
        held = chain.free[key_of(nft.ada)]

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls[3:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        assert chain.free[key_of(nft.ada)] == held
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == {
            "status": "transferred",
            "tx_hash": None,
            "block": None,
        }
        assert state(await job_of(database, "nft.transfer")) == ("succeeded", 2, None)

    async def test_a_sponsoring_by_a_run_that_died_is_not_repeated(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        chain.crash_after = "send"
        with pytest.raises(Crash):
            await worker.run_one()
        chain.crash_after = None
        sponsor = chain.free[nft.wallet]

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls[3:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        assert chain.free[nft.wallet] == sponsor
        assert chain.item_owner(0, 1) == key_of(nft.bob)
        moved = chain.tx("Nfts.transfer")
        assert (await item_nft(client, tenant, nft.order_id))["transfer"]["tx_hash"] == (
            moved.tx_hash
        )

    async def test_an_owner_outside_the_project_is_an_error(
        self, client, tenant, other, chain, impatient, jobs_app, database
    ):
        nft = await minted_item(client, tenant, chain, impatient)
        # Ada's key moves the NFT to a user of another project, outside Tessera.
        [stranger] = await create_users(client, other, 1)
        chain.fund(key_of(nft.ada), DOT)
        seed = await seed_of(jobs_app, key_of(nft.ada))
        assert signer_of(seed) == key_of(nft.ada)
        chain.transfer(seed, collection_id=0, item_id=1, dest=key_of(stranger))
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        assert await impatient.run_until_idle() == 1
        assert state(await job_of(database, "nft.transfer")) == (
            "failed",
            1,
            "RuntimeError: the on-chain owner is not a custodial wallet of this project",
        )
        shown = await item_nft(client, tenant, nft.order_id)
        assert (shown["status"], shown["transfer"]["status"]) == ("minted", "failed")
        assert chain.item_owner(0, 1) == key_of(stranger)
        assert chain.calls[3:] == ["Nfts.transfer"]  # only the move outside Tessera

    async def test_a_transfer_of_an_item_whose_mint_failed_fails(
        self, client, tenant, chain, impatient, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        assert await impatient.run_until_idle() == 1
        chain.free[wallet] = 0
        order_id, item = await order_item(client, tenant, ada, product["id"])
        assert await impatient.run_one()
        assert state(await job_of(database, "nft.mint"))[0] == "failed"
        await transfer(client, tenant, product["id"], item["id"], ada, bob)
        assert await impatient.run_one()
        assert state(await job_of(database, "nft.transfer")) == (
            "failed",
            1,
            "RuntimeError: the item could not be minted",
        )
        shown = await item_nft(client, tenant, order_id)
        assert (shown["status"], shown["transfer"]["status"]) == ("failed", "failed")
        assert "Nfts.transfer" not in chain.calls

    async def test_a_transfer_waits_for_its_mint(self, client, tenant, chain, worker, database):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        assert await worker.run_until_idle() == 1
        chain.free[wallet] = 0
        order_id, item = await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()  # the mint fails and backs off
        await transfer(client, tenant, product["id"], item["id"], ada, bob)
        assert await worker.run_one()
        assert state(await job_of(database, "nft.transfer")) == (
            "queued",
            0,
            "waiting: the item is not minted yet",
        )
        assert (await item_nft(client, tenant, order_id))["transfer"]["status"] == "queued"

        chain.fund(wallet, 100 * DOT)
        await skip_waits(database)
        assert await worker.run_until_idle() == 2  # the mint (queued first), then the transfer
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 2, None)
        assert state(await job_of(database, "nft.transfer")) == ("succeeded", 1, None)
        # Minted straight to Bob, who owns the item by then: nothing to transfer.
        assert chain.item_owner(0, 1) == key_of(bob)
        assert "Nfts.transfer" not in chain.calls
        assert (await item_nft(client, tenant, order_id))["transfer"]["status"] == "transferred"


class TestUnreachableChain:
    async def test_the_job_is_retried_until_the_chain_answers(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        chain.unreachable = True
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == (
            "queued",
            1,
            "ChainUnavailable: chain AssetHub is unavailable: "
            "cannot reach ws://memory: connection refused",
        )
        chain.unreachable = False
        await skip_waits(database)
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)
        assert (await product_nft(client, tenant, product["id"]))["collection_id"] == 0
