"""The job worker against the in-memory chain: claims and their leases, backoff, waiting
without spending an attempt, retry by hand, an unknown kind, an unreachable chain. The NFT job
tests (``test_nft_handlers``, ``test_batches``, ``test_ledger``, ...) share its helpers."""

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import select, update

from tessera.chain.keys import open_seed
from tessera.db import database_of
from tessera.errors import JobNotFailed, JobNotFound
from tessera.jobs.queue import enqueue
from tessera.jobs.repository import JobRow
from tessera.jobs.service import retry_job
from tessera.jobs.worker import Claim, JobHandler, Worker
from tessera.main import job_handlers
from tessera.models import (
    Extrinsic,
    Job,
    JobStatus,
    Product,
    ProductItem,
    ProjectWallet,
    UserWallet,
)
from tessera.models.base import utcnow
from tessera.toolkit.crypto import Sealed
from tests import orm
from tests.changes.feed import cursor_now, marker, shown, typed
from tests.factories import (
    create_order,
    create_users,
    issue_items,
    product_body,
    transfer_item,
)
from tests.jobs.memory_chain import DEPOSITS, DOT, Crash

METADATA = "https://meta.example/ticket.json"
NFT = {"mint_nft": True, "metadata_uri": METADATA, "chain": "AssetHub"}
LEASE = timedelta(seconds=20)  # job_lease_seconds
UNREACHABLE = (
    "ChainUnavailable: chain AssetHub is unavailable: cannot reach ws://memory: connection refused"
)
NO_COLLECTION = "the product's NFT collection could not be created"
# An item's NFT and its on-chain transfer as the API shows them before any work.
QUEUED = {"status": "queued", "tx_hash": None, "block": None, "block_hash": None, "reason": None}


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
    async with orm.session(database_of(app), write=False) as session:
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


async def short_of_funds(client, tenant, jobs_app, *, holds: int, what: str, needs: int) -> str:
    """Why work waits for the project wallet to be funded, as the worker says it (the wallet
    holds ``holds``, ``what`` needs ``needs``)."""
    config = jobs_app.state.settings.chain("AssetHub")
    [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
    return (
        f"waiting for funds: the project wallet {wallet['addresses']['AssetHub']} holds "
        f"{config.amount(holds)} on AssetHub; {what} needs {config.amount(needs)} and "
        f"{config.amount(DEPOSITS.existential)} kept"
    )


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
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Job).order_by(Job.created_at)))


async def job_of(database, kind: str) -> Job:
    [job] = [job for job in await jobs(database) if job.kind == kind]
    return job


def state(job: Job) -> tuple[str, int, str | None]:
    return job.status, job.attempts, job.last_error


async def row(database, model, row_id: str | uuid.UUID):
    async with orm.session(database, write=False) as session:
        return await session.get(model, uuid.UUID(str(row_id)))


async def expire_leases(database) -> None:
    """Every running job's worker is dead: its lease has passed."""
    async with orm.session(database) as session:
        await session.execute(
            update(Job).where(Job.status == JobStatus.RUNNING).values(lease_until=Job.created_at)
        )
        await session.commit()


async def skip_waits(database) -> None:
    """Every queued job is due now (no waiting out a backoff)."""
    async with orm.session(database) as session:
        await session.execute(
            update(Job).where(Job.status == JobStatus.QUEUED).values(run_after=Job.created_at)
        )
        await session.commit()


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


async def nothing_shown(context, jobs, status) -> None:
    """A test handler's ``show``: its job serves no row."""


async def extrinsics(database) -> list[Extrinsic]:
    """The ledger, in the order it was written."""
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Extrinsic).order_by(Extrinsic.created_at)))


def ledger(rows: list[Extrinsic]) -> list[tuple[str, int, str, str | None]]:
    """Each extrinsic as (call, nonce, status, error)."""
    return [(row.call, row.nonce, row.status, row.error) for row in rows]


async def until(check: Callable[[], object], *, seconds: float = 10.0) -> None:
    """Wait until ``check()`` is true (work going on in a task meanwhile)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def until_stored(database, check: Callable[[list[Extrinsic]], bool]) -> None:
    """Wait until the ledger passes ``check``."""
    deadline = time.monotonic() + 10.0
    while not check(await extrinsics(database)):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


class TestClaim:
    async def test_due_jobs_only_oldest_first_with_a_lease(self, worker, tenant, database):
        now = utcnow()
        later = await add_job(database, tenant, subject="a", run_after=now - seconds(10))
        older = await add_job(database, tenant, subject="b", run_after=now - seconds(20))
        future = await add_job(database, tenant, subject="c", run_after=now + seconds(60))
        before = utcnow()
        claimed = [job for _ in range(2) for job in (await worker.claim()).jobs]
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
        assert [job.id for job in (await worker.claim()).jobs] == [first.id]
        assert [job.id for job in (await worker.claim()).jobs] == [second.id]

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
        assert [job.id for job in (await worker.claim()).jobs] == [other.id]
        assert await worker.claim() is None
        rows = {job.id: job for job in await jobs(database)}
        assert state(rows[waiting.id]) == ("queued", 0, None)
        assert state(rows[running.id]) == ("running", 1, None)

        async with orm.session(database) as session:
            await session.execute(
                update(Job).where(Job.id == running.id).values(status=JobStatus.SUCCEEDED)
            )
            await session.commit()
        assert [job.id for job in (await worker.claim()).jobs] == [waiting.id]

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
        # Its worker may still be working on it.
        assert [job.id for job in (await worker.claim()).jobs] == [younger.id]
        assert await worker.claim() is None
        await expire_leases(database)
        before = utcnow()
        [claimed] = (await worker.claim()).jobs
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
        claimed = [job for _ in range(3) for job in (await worker.claim()).jobs]
        assert [job.id for job in claimed] == [dead.id, younger.id, youngest.id]
        again = await row(database, Job, dead.id)
        # Its place in the queue is the time it first came due, not the time its worker died.
        assert (again.status, again.attempts, again.run_after) == ("running", 2, dead.run_after)


class TestLeaseRenewal:
    async def test_a_handler_running_longer_than_its_lease_keeps_it(self, worker, tenant, database):
        # A lease long enough that a loaded machine's stall (a busy CI core, a second or so)
        # does not end it: renewed every quarter of it, a stall must pass 2 s to; short enough
        # that the handler outlives it twice over.
        lease = 3.0
        second = Worker(worker.context, {}, max_attempts=1, lease_seconds=lease)
        claims: list[Claim | None] = []
        leases: list[datetime | None] = []

        async def run(context, job):
            for _ in range(4):  # 6.4 s in all: the first lease ends long before
                await asyncio.sleep(1.6)
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
        taken: list[Claim] = []
        shown: list[JobStatus] = []

        async def run(context, job):
            await expire_leases(database)  # this worker stalled past its lease...
            taken.append(await second.claim())  # ...and another one took the job
            if fails:
                raise RuntimeError("too late")

        async def show(context, jobs, status):
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
        [again] = taken[0].jobs
        assert again.id == job.id and again.claim == taken[0].id
        assert state(stored) == ("running", 2, None)
        assert (stored.lease_until, stored.claim) == (again.lease_until, taken[0].id)
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
        taken: list[Claim] = []
        loop = asyncio.get_running_loop()

        async def take_over() -> None:
            await expire_leases(database)  # the first worker stalled past its lease...
            taken.append(await second.claim())  # ...and another one took the mint

        submit = chain.submit

        def stalled_submit(extrinsic: str) -> None:
            submit(extrinsic)
            asyncio.run_coroutine_threadsafe(take_over(), loop).result()  # from the chain thread

        monkeypatch.setattr(chain, "submit", stalled_submit)
        assert await worker.run_one()
        monkeypatch.undo()

        assert chain.item_owner(0, 1) == key_of(ada)  # the chain took the mint...
        signed = chain.signed[-1]
        stored = await row(database, ProductItem, item["id"])
        # ...but the row shows only what was written under the lease: the extrinsic it rides.
        assert (stored.nft_status, stored.nft_tx_hash, stored.nft_block, stored.nft_wallet_id) == (
            "submitted",
            signed.tx_hash,
            None,
            None,
        )
        mint_job = await job_of(database, "nft.mint")
        [again] = taken[0].jobs
        assert again.id == mint_job.id
        assert state(mint_job) == ("running", 2, None)  # the new holder's attempt, untouched
        assert mint_job.lease_until == again.lease_until
        made = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=cursor)) == [made]  # no nft.minted

        await expire_leases(database)  # the new holder died too: the next run finishes
        assert await worker.run_until_idle() == 1
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 3, None)
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert len(chain.signed) == 2  # followed, never signed again
        stored = await row(database, ProductItem, item["id"])
        assert (stored.nft_status, str(stored.nft_wallet_id), stored.nft_tx_hash) == (
            "minted",
            ada["wallets"][0]["id"],
            signed.tx_hash,
        )
        assert (stored.nft_block, stored.nft_block_hash) == (2, chain.block_hash(2))
        minted = [e["type"] for e in await shown(client, tenant, 2, after=cursor)]
        assert minted == ["user.created", "nft.minted"]


class TestBackoff:
    async def test_a_failing_job_is_retried_later_then_fails_on_its_row(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        chain.unreachable = True  # after the request checked the wallet
        for attempt in range(1, worker.max_attempts):
            before = utcnow()
            assert await worker.run_one()
            after = utcnow()
            job = await job_of(database, "nft.create_collection")
            assert state(job) == ("queued", attempt, UNREACHABLE)
            delay = 2**attempt
            assert before + seconds(0.8 * delay) <= job.run_after <= after + seconds(1.2 * delay)
            assert not await worker.run_one()  # not due yet
            # The row shows the job queued again until it gives up.
            assert (await product_nft(client, tenant, product["id"]))["status"] == "queued"
            await skip_waits(database)

        assert await worker.run_one()
        job = await job_of(database, "nft.create_collection")
        assert state(job) == ("failed", worker.max_attempts, UNREACHABLE)
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": None,
            "status": "failed",
        }
        assert (await row(database, Product, product["id"])).nft_status == "failed"
        await skip_waits(database)
        assert not await worker.run_one()
        chain.unreachable = False
        assert chain.collections == {} and chain.calls == [] and chain.signed == []

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
        # The collection's worker dies once it has submitted it: its job holds the lease.
        chain.crash_after = "submit"
        with pytest.raises(Crash):
            await worker.run_one()

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
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]


class TestRetry:
    async def test_a_failed_job_runs_again_with_fresh_attempts(
        self, client, tenant, chain, impatient, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        assert await impatient.run_until_idle() == 1
        chain.unreachable = True
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        assert await impatient.run_until_idle() == 1
        job = await job_of(database, "nft.mint")
        assert state(job) == ("failed", 1, UNREACHABLE)
        assert (await item_nft(client, tenant, order_id))["status"] == "failed"

        chain.unreachable = False
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
            UNREACHABLE,
        )
        chain.unreachable = False
        await skip_waits(database)
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)
        assert (await product_nft(client, tenant, product["id"]))["collection_id"] == 0
