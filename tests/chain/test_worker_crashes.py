"""Worker processes killed in the middle of NFT work, against the real Asset Hub runtime.

Real ``tessera worker`` processes share the test database and the Chopsticks chain, with the
default job lease (20 s, renewed every 5 s). One is killed with SIGKILL while it creates a
product's collection (its creation signed and recorded, the extrinsic on its way): the job runs
again on a live worker once its lease has passed, in its place in the queue, follows what was
recorded and succeeds within 30 s of the kill, with one collection on chain.

Then two workers mint a product of 2,000 items together while Chopsticks builds no block
(``blocks_on_demand``): each worker's batches are signed and submitted, with consecutive nonces
of the project wallet, and wait in the node's pool. The holder of the first of them (the nonce
every later batch waits for) is killed with its batches in flight (the ledger says submitted,
the chain has not moved) and a fresh worker starts; the batches then land, one a block. The
jobs the killed worker held run again (their second attempt) under another worker's claim and
follow its extrinsics: every NFT is carried by exactly one mint extrinsic, each extrinsic of
the ledger is in the chain's block where it is recorded, the signer's nonces have no gap and
each item is minted by the extrinsic that carried it; a reconciliation finds nothing.

Which worker holds a claim, its log says (a claim of a batch is logged with the worker's id);
which process is which worker, the heartbeat rows. Several worker processes need a database
that many processes write: PostgreSQL only.
"""

import asyncio
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import func, select

from tessera.chain.extrinsics import parts_of, tx_hash
from tessera.models import Extrinsic, Job, JobStatus, Product, ProductItem, WorkerHeartbeat
from tests import orm
from tests.chain.conftest import blocks_on_demand
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
SLOTS = 4  # claims a worker runs at a time (the default worker_slots)
# A worker's log line for each claim of a batch: the worker's id, the claim, how many jobs.
CLAIMED = re.compile(r"worker (\w+): claim ([0-9a-f-]{36}) takes (\d+) jobs of batch ")
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

    def claims(self) -> dict[uuid.UUID, tuple[str, int]]:
        """Each claim of a batch the workers' logs name: the id of the worker that took it, and
        how many jobs it took."""
        found = {}
        for log in self._logs():
            for match in CLAIMED.finditer(log.read_text(errors="replace")):
                found[uuid.UUID(match[2])] = (match[1], int(match[3]))
        return found

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
    assert "TESSERA_WORKER_SLOTS" not in env  # SLOTS
    started = Workers(env, tmp_path)
    yield started
    started.stop()


async def until(
    probe: Callable[[], Awaitable[T]], what: str, workers: Workers, within: float, every=0.05
) -> T:
    """``probe()``'s first truthy answer, polled every ``every`` seconds for ``within``."""
    deadline = time.monotonic() + within
    while True:
        found = await probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {within} s: {what}\n{workers.logs()}"
        await asyncio.sleep(every)


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


async def worker_ids(database) -> dict[int, str]:
    """The running workers' ids by their processes' ids (their heartbeat rows)."""
    async with orm.session(database, write=False) as session:
        beats = await session.execute(select(WorkerHeartbeat.pid, WorkerHeartbeat.worker_id))
    return {pid: worker_id for pid, worker_id in beats.all()}


@dataclass(frozen=True)
class InFlight:
    """A product's mints as they stand while no block is built."""

    rows: list[Extrinsic]  # the mint extrinsics carrying the running jobs, by nonce
    jobs: dict[uuid.UUID, set[uuid.UUID]]  # by extrinsic: the jobs whose items it carries
    claims: dict[uuid.UUID, uuid.UUID]  # by extrinsic: the claim its jobs run under
    holders: dict[uuid.UUID, str]  # by extrinsic: the worker holding that claim (its log)


async def in_flight(database, product_id: str, workers: Workers) -> InFlight | None:
    """The product's mints once they stand still with no block built: every running mint job
    of the product carried by an extrinsic signed and submitted, under a claim a worker's log
    names, and none more to come (no job queued, or every slot of both workers taken). Counted
    first, loaded only then: the workers signing meanwhile share the machine."""
    product, batch = uuid.UUID(product_id), f"mint:{product_id}"
    async with orm.session(database, write=False) as session:
        count = select(Job.status, func.count()).where(Job.batch == batch).group_by(Job.status)
        statuses = {status: n for status, n in await session.execute(count)}
        running, queued = statuses.get(JobStatus.RUNNING, 0), statuses.get(JobStatus.QUEUED, 0)
        live = Extrinsic.status.in_(("signed", "submitted", "included"))
        rows = list(
            await session.scalars(
                select(Extrinsic)
                .where(Extrinsic.call == "Nfts.mint", live)
                .order_by(Extrinsic.nonce)
            )
        )
        if not running or any(row.status != "submitted" for row in rows):
            return None
        carrying = select(func.count()).where(
            ProductItem.product_id == product,
            ProductItem.nft_extrinsic_id.in_([row.id for row in rows]),
        )
        # The items of a batch in flight have their jobs running: as many means the same.
        if await session.scalar(carrying) != running:
            return None
        jobs = (
            await session.execute(
                select(Job.id, Job.subject, Job.claim).where(
                    Job.batch == batch, Job.status == JobStatus.RUNNING
                )
            )
        ).all()
        carried = await session.execute(
            select(ProductItem.id, ProductItem.nft_extrinsic_id).where(
                ProductItem.product_id == product, ProductItem.nft_extrinsic_id.is_not(None)
            )
        )
        carrier = {item_id: row_id for item_id, row_id in carried}
    logged = workers.claims()
    if any(claim not in logged for _, _, claim in jobs):
        return None
    taken = Counter(logged[claim][0] for claim in {claim for _, _, claim in jobs})
    if queued and sorted(taken.values()) != [SLOTS, SLOTS]:
        return None
    by_row: dict[uuid.UUID, set[uuid.UUID]] = {row.id: set() for row in rows}
    claims: dict[uuid.UUID, set[uuid.UUID]] = {row.id: set() for row in rows}
    for job_id, subject, claim in jobs:
        row_id = carrier[uuid.UUID(subject.removeprefix("item:"))]
        by_row[row_id].add(job_id)
        claims[row_id].add(claim)
    # Each extrinsic is one claim's batch, signed once: it carries all the claim's jobs.
    assert [len(claims[row.id]) for row in rows] == [1] * len(rows), workers.logs()
    one_claim = {row_id: claim for row_id, [claim] in claims.items()}
    assert [(row.parts, len(by_row[row.id])) for row in rows] == [
        (logged[one_claim[row.id]][1],) * 2 for row in rows
    ], workers.logs()
    holders = {row_id: logged[claim][0] for row_id, claim in one_claim.items()}
    return InFlight(rows, by_row, one_claim, holders)


async def nft_statuses(database, product_id: str) -> dict[str | None, int]:
    """How many of the product's items are in each NFT status."""
    async with orm.session(database, write=False) as session:
        counted = await session.execute(
            select(ProductItem.nft_status, func.count())
            .where(ProductItem.product_id == uuid.UUID(product_id))
            .group_by(ProductItem.nft_status)
        )
    return {status: count for status, count in counted}


def minted_items(row: Extrinsic) -> list[tuple[int, int]]:
    """(collection, item) of each NFT the mint extrinsic carries."""
    return [(part.collection_id, part.item_id) for part in parts_of(row.body)]


def block_extrinsics(devchain, block_hash: str) -> list[str]:
    """The hashes of a block's extrinsics, as the chain holds them."""
    block = devchain.rpc("chain_getBlock", [block_hash])
    assert isinstance(block, dict)
    return [tx_hash(data) for data in block["block"]["extrinsics"]]


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
        second = workers.start()

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

        # A third worker joins the second. Once nothing of the wallet is in flight, Chopsticks
        # stops building blocks, and both mint a product of 2,000 items together.
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

        async def quiet() -> list[Extrinsic] | None:
            """The wallet's ledger, once the small product is minted and all of it is final."""
            small = {row.nft_status for row in await items_of(database, product["id"])}
            ledger = await _extrinsic_rows(database, tenant.project_id)
            final = {e.status for e in ledger} == {"final"}
            return ledger if small == {"minted"} and final else None

        nonce = len(await until(quiet, "nothing of the wallet in flight", workers, 60))
        ids = await worker_ids(database)
        minters = {ids[second.pid], ids[third.pid]}
        with blocks_on_demand(devchain) as paused_at:
            for start in range(0, MANY, 500):
                chunk = holders[start : start + 500]
                await issue_items(chain_client, tenant, big["id"], *(u["id"] for u in chunk))
            flight = await until(
                lambda: in_flight(database, big["id"], workers),
                "batches in flight",
                workers,
                120,
                every=0.25,
            )
            rows = flight.rows
            # Both workers' batches are in flight at once, with consecutive nonces of the one
            # signer, and none is in a block: no block was built, the signer's nonce on chain
            # has not moved, the node's pool holds them all. (At least six batches of at most
            # 355 NFTs, four slots a worker: each worker holds some.)
            assert [(row.signer, row.nonce, row.status, row.block_number) for row in rows] == [
                (project_key.hex(), nonce + n, "submitted", None) for n in range(len(rows))
            ]
            assert set(flight.holders.values()) == minters
            assert devchain.head() == paused_at
            assert gateway.account(project_key).nonce == nonce
            assert gateway.pending() == {row.tx_hash for row in rows}

            # The worker holding the first batch, whose nonce every later one waits for, is
            # killed; a fresh one starts (as a supervisor restarts it).
            victim_id = flight.holders[rows[0].id]
            [victim] = [w for w in (second, third) if ids[w.pid] == victim_id]
            held = [row.id for row in rows if flight.holders[row.id] == victim_id]
            victim_jobs = set().union(*(flight.jobs[row_id] for row_id in held))
            workers.kill(victim)
            fresh = workers.start()
            # Its batches were in flight when it died: signed and submitted, in no block.
            async with orm.session(database, write=False) as session:
                stood = list(await session.scalars(select(Extrinsic).where(Extrinsic.id.in_(held))))
            assert [(row.status, row.submitted_at is None, row.block_number) for row in stood] == [
                ("submitted", False, None)
            ] * len(held)
            assert (devchain.head(), gateway.account(project_key).nonce) == (paused_at, nonce)

            # The chain takes the batches in flight, one a block, in their nonces' order.
            for row in rows:
                built = {"transactions": [row.data]}
                await asyncio.to_thread(devchain.rpc, "dev_newBlock", [built])

        async def all_minted() -> bool:
            statuses = await nft_statuses(database, big["id"])
            assert "failed" not in statuses, workers.logs()
            return statuses == {"minted": MANY}

        await until(all_minted, "all 2,000 NFTs minted", workers, 300, every=0.25)
        jobs = await project_jobs(database, tenant.project_id)
        assert {(j.kind, j.status) for j in jobs} == {
            ("nft.create_collection", "succeeded"),
            ("nft.mint", "succeeded"),
        }
        # The killed worker's jobs ran once more each (their second attempt), under the claims
        # of the workers alive; every other job of the product ran once.
        big_jobs = [j for j in jobs if j.batch == f"mint:{big['id']}"]
        assert {j.id: j.attempts for j in big_jobs} == {
            j.id: 2 if j.id in victim_jobs else 1 for j in big_jobs
        }
        alive = await worker_ids(database)
        assert fresh.pid in alive  # the fresh worker runs
        logged = workers.claims()
        rerun_by = {logged[j.claim][0] for j in big_jobs if j.id in victim_jobs}
        assert rerun_by and rerun_by <= (minters | {alive[fresh.pid]}) - {victim_id}

        # The ledger: every extrinsic the signer signed is final, in the chain's block where it
        # is recorded, one per nonce with no gap and none outside it (the chain's nonce).
        ledger = await _extrinsic_rows(database, tenant.project_id)
        assert [(e.nonce, e.status) for e in ledger] == [(n, "final") for n in range(len(ledger))]
        assert gateway.account(project_key).nonce == len(ledger)
        assert {e.call for e in ledger} == {"Nfts.create", "Nfts.mint"}  # no filler
        blocks: dict[str, list[str]] = {}
        for e in ledger:
            assert e.block_hash is not None and e.block_index is not None
            assert gateway.block_hash(e.block_number) == e.block_hash
            if e.block_hash not in blocks:
                blocks[e.block_hash] = block_extrinsics(devchain, e.block_hash)
            assert blocks[e.block_hash][e.block_index] == e.tx_hash
        # The batches in flight landed, one a block, in their nonces' order, each once.
        landed = {e.id: e for e in ledger}
        assert [landed[row.id].block_number for row in rows] == list(
            range(paused_at + 1, paused_at + 1 + len(rows))
        )
        # The mint extrinsics carry each NFT of each product exactly once: none minted twice
        # (a batch signed again), none missing.
        big_collection = (await product_row(database, big["id"])).nft_collection_id
        assert big_collection is not None
        mints = [e for e in ledger if e.call == "Nfts.mint"]
        carried = Counter(pair for e in mints for pair in minted_items(e))
        assert carried == Counter(
            [(collection_id, n) for n in range(1, ITEMS + 1)]
            + [(big_collection, n) for n in range(1, MANY + 1)]
        )
        big_mints = [e for e in mints if minted_items(e)[0][0] == big_collection]
        assert sum(e.parts for e in big_mints) == MANY
        # Each item is recorded as minted by the extrinsic that carried it (not found on
        # chain afterwards, as a batch signed again would find it).
        carrier = {item: e for e in big_mints for _, item in minted_items(e)}
        items = await items_of(database, big["id"])
        assert [(r.nft_status, r.nft_tx_hash, r.nft_block, r.nft_block_hash) for r in items] == [
            (
                "minted",
                carrier[r.item_id].tx_hash,
                carrier[r.item_id].block_number,
                carrier[r.item_id].block_hash,
            )
            for r in items
        ]
        # On chain: the collection holds the 2,000 NFTs, each in its holder's wallet.
        chain_big = gateway.collection(big_collection)
        assert chain_big is not None and chain_big.items == MANY
        nfts = gateway.collection_items(big_collection)
        wallets = {user["id"]: public_key(user["wallets"][0]["address"]) for user in holders}
        assert {n: (nft.owner, nft.metadata) for n, nft in nfts.items()} == {
            r.item_id: (wallets[str(r.owner_id)], NFT["metadata_uri"]) for r in items
        }
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
