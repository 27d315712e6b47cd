"""NFTs in batches at the chain's pace, against the in-memory chain: a product's mints claimed
together into one extrinsic as large as the chain's weights allow, two batches of one signer
in flight at once, a part that fails alone, a wallet that runs dry, many holders' transfers."""

import asyncio
from collections import Counter

import pytest

from tessera.chain.gateway import Fund, Mint, PartOutcome, Transfer
from tessera.main import make_worker
from tests.factories import create_users
from tests.jobs.memory_chain import DEPOSITS, DOT, FEE, FEE_PER_PART, Crash, MemoryChain, fee
from tests.jobs.memory_pallets import metadata_deposit
from tests.jobs.test_worker import (
    METADATA,
    expire_leases,
    extrinsics,
    funded,
    jobs,
    key_of,
    ledger,
    nft_product,
    seed_of,
    short_of_funds,
    skip_waits,
    state,
    transfer,
    until,
    until_stored,
)
from tests.reconciliation.test_reconciliation import OUTSIDER, mints

# What minting one NFT reserves from the project wallet.
DEPOSIT = DEPOSITS.item + metadata_deposit(METADATA)


async def issued(client, tenant, product: dict, count: int) -> tuple[list[dict], list[dict]]:
    """``count`` users, and an item of the product issued to each, in one request."""
    users = await create_users(client, tenant, count)
    response = await client.post(
        f"/v1/products/{product['id']}/items",
        headers=tenant.w,
        json={"users": [user["id"] for user in users]},
    )
    assert response.status_code == 201, response.text
    return users, response.json()["items"]


async def shown_items(client, tenant, product: dict) -> list[dict]:
    response = await client.get(
        f"/v1/products/{product['id']}/items", headers=tenant.r, params={"limit": 100}
    )
    assert response.status_code == 200, response.text
    return sorted(response.json()["items"], key=lambda item: item["item_id"])


def every_nft(chain: MemoryChain) -> list[int]:
    """The NFTs of every mint extrinsic that landed, in the order of their ids."""
    return sorted(item for items in parts_landed(chain) for item in items)


def parts_landed(chain: MemoryChain) -> list[list[int]]:
    """The NFTs of each mint extrinsic that landed, in order."""
    return [
        [part.item_id for part in applied.tx.parts]
        for applied in chain.extrinsics
        if isinstance(applied.tx.parts[0], Mint)
    ]


class TestOneExtrinsic:
    async def test_a_products_due_mints_are_minted_in_one_extrinsic(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        users, _ = await issued(client, tenant, product, 10)
        assert await worker.run_until_idle() == 2  # the collection, then the ten together
        [created, minted] = chain.extrinsics
        assert [block.extrinsics for block in chain.blocks] == [(created,), (minted,)]
        assert minted.tx.parts == tuple(
            Mint(0, n, key_of(user), METADATA) for n, user in enumerate(users, start=1)
        )
        assert [fate.error for fate in minted.outcomes] == [None] * 10
        assert [state(job) for job in await jobs(database) if job.kind == "nft.mint"] == [
            ("succeeded", 1, None)
        ] * 10
        [_, carried] = await extrinsics(database)
        assert (carried.call, carried.nonce, carried.parts, carried.status) == (
            "Nfts.mint",
            1,
            10,
            "final",
        )
        assert carried.cost == fee(10) + 10 * DEPOSIT
        for item in await shown_items(client, tenant, product):
            assert item["nft"] == {
                "status": "minted",
                "tx_hash": minted.tx.tx_hash,
                "block": 2,
                "block_hash": chain.block_hash(2),
                "reason": None,
                "transfer": None,
            }
        assert chain.free[wallet] == 100 * DOT - DEPOSITS.collection - FEE - 10 * DEPOSIT - fee(10)

    async def test_as_many_as_the_chains_weights_allow_in_each(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 25)
        assert await worker.run_until_idle() == 1 + 3
        # Jobs queued in one request are due together: a claim takes any ten of them, and
        # mints them in the order of their NFTs' ids.
        landed = parts_landed(chain)
        assert [len(items) for items in landed] == [10, 10, 5]
        assert all(items == sorted(items) for items in landed)
        assert every_nft(chain) == list(range(1, 26))
        assert chain.collection(0).items == 25
        assert ledger((await extrinsics(database))[1:]) == [
            ("Nfts.mint", 1, "final", None),
            ("Nfts.mint", 2, "final", None),
            ("Nfts.mint", 3, "final", None),
        ]
        items = await shown_items(client, tenant, product)
        assert Counter(item["nft"]["block"] for item in items) == {2: 10, 3: 10, 4: 5}
        assert all(
            item["nft"]["block"] == 2 + n
            for n, nfts in enumerate(landed)
            for item in items
            if item["item_id"] in nfts
        )

    async def test_a_chain_that_takes_fewer_parts_gets_smaller_extrinsics(
        self, client, tenant, chain, worker, database
    ):
        chain.per_extrinsic = 4
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 9)
        assert await worker.run_until_idle() == 1 + 3
        landed = parts_landed(chain)
        assert [len(items) for items in landed] == [4, 4, 1]
        assert every_nft(chain) == list(range(1, 10))


class TestGathering:
    """A batch that is not full waits while jobs keep joining it."""

    async def patient(self, client, tenant, chain, worker, jobs_app, **seconds: float):
        """A product with its collection, and a worker that gathers batches."""
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        assert await worker.run_one()  # the collection
        settings = jobs_app.state.settings.model_copy(
            update={f"job_batch_{name}_seconds": value for name, value in seconds.items()}
        )
        return product, make_worker(worker.context, settings)

    async def test_until_none_has_joined_for_a_while(self, client, tenant, chain, worker, jobs_app):
        product, patient = await self.patient(
            client, tenant, chain, worker, jobs_app, gather=1.0, max_wait=60.0
        )
        await issued(client, tenant, product, 3)
        assert not await patient.run_one()  # three of ten: more may join
        await issued(client, tenant, product, 2)
        assert not await patient.run_one()
        await asyncio.sleep(1.1)
        assert await patient.run_one()
        assert parts_landed(chain) == [[1, 2, 3, 4, 5]]

    async def test_a_full_batch_at_once(self, client, tenant, chain, worker, jobs_app):
        product, patient = await self.patient(
            client, tenant, chain, worker, jobs_app, gather=60.0, max_wait=60.0
        )
        await issued(client, tenant, product, 12)
        assert await patient.run_one()
        assert [len(items) for items in parts_landed(chain)] == [10]
        assert not await patient.run_one()  # the other two wait for more

    async def test_no_longer_than_its_oldest_may_wait(
        self, client, tenant, chain, worker, jobs_app
    ):
        product, patient = await self.patient(
            client, tenant, chain, worker, jobs_app, gather=60.0, max_wait=1.0
        )
        await issued(client, tenant, product, 2)
        assert not await patient.run_one()
        await asyncio.sleep(1.1)
        assert await patient.run_one()
        assert parts_landed(chain) == [[1, 2]]


class TestPipelining:
    async def test_two_batches_of_one_signer_in_flight_take_consecutive_nonces(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        users, _ = await issued(client, tenant, product, 20)
        assert await worker.run_one()  # the collection
        other = make_worker(worker.context, jobs_app.state.settings)
        chain.manual = True  # blocks wait for the test: both batches are signed before any lands
        running = asyncio.gather(worker.run_one(), other.run_one())
        await until(lambda: len(chain.pool) == 2)
        assert sorted(tx.nonce for tx in chain.pool.values()) == [1, 2]
        await until_stored(
            database, lambda rows: [r.status for r in rows] == ["final", "submitted", "submitted"]
        )
        block = chain.build()
        assert await running == [True, True]

        assert [applied.tx.nonce for applied in block.extrinsics] == [1, 2]
        assert [len(items) for items in parts_landed(chain)] == [10, 10]
        assert every_nft(chain) == list(range(1, 21))
        assert [signed.nonce for signed in chain.signed] == [0, 1, 2]  # no nonce signed twice
        assert ledger(await extrinsics(database)) == [
            ("Nfts.create", 0, "final", None),
            ("Nfts.mint", 1, "final", None),
            ("Nfts.mint", 2, "final", None),
        ]
        items = await shown_items(client, tenant, product)
        assert {item["nft"]["status"] for item in items} == {"minted"}
        assert {item["nft"]["block"] for item in items} == {2}
        assert [chain.item_owner(0, n) for n in range(1, 21)] == [key_of(u) for u in users]

    async def test_a_worker_with_two_slots_has_two_batches_in_flight(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 20)
        assert await worker.run_one()  # the collection
        settings = jobs_app.state.settings.model_copy(update={"worker_slots": 2})
        slots = make_worker(worker.context, settings)
        assert slots.slots == 2
        chain.manual = True
        stop = asyncio.Event()
        running = asyncio.create_task(slots.run_forever(stop))
        try:
            await until(lambda: len(chain.pool) == 2)
            assert sorted(tx.nonce for tx in chain.pool.values()) == [1, 2]
            chain.build()
            await until_stored(database, lambda rows: {r.status for r in rows} == {"final"})
        finally:
            stop.set()
            await running
        [block] = chain.blocks[1:]
        assert [applied.tx.nonce for applied in block.extrinsics] == [1, 2]
        assert every_nft(chain) == list(range(1, 21))
        mint_jobs = [job for job in await jobs(database) if job.kind == "nft.mint"]
        assert [state(job) for job in mint_jobs] == [("succeeded", 1, None)] * 20

    async def test_workers_signing_at_once_never_share_a_nonce(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 40)
        assert await worker.run_one()  # the collection
        workers = [make_worker(worker.context, jobs_app.state.settings) for _ in range(4)]
        assert await asyncio.gather(*(w.run_one() for w in workers)) == [True] * 4
        assert sorted(signed.nonce for signed in chain.signed) == [0, 1, 2, 3, 4]
        assert every_nft(chain) == list(range(1, 41))
        assert [row.status for row in await extrinsics(database)] == ["final"] * 5


class TestAPartThatFails:
    async def test_fails_alone_and_the_others_are_minted(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=3)
        users, items = await issued(client, tenant, product, 3)
        assert await worker.run_one()  # the collection
        # The project wallet's key mints an NFT outside Tessera: the collection holds two more.
        chain.act(await seed_of(jobs_app, wallet), Mint(0, 99, wallet, None))
        assert await worker.run_one()

        [*_, minted] = chain.extrinsics
        assert [part.item_id for part in minted.tx.parts] == [1, 2, 3]
        assert [fate.error for fate in minted.outcomes] == [None, None, "Nfts.MaxSupplyReached"]
        mint_jobs = {
            job.payload["product_item_id"]: job
            for job in await jobs(database)
            if job.kind == "nft.mint"
        }
        assert [state(mint_jobs[item["id"]]) for item in items] == [
            ("succeeded", 1, None),
            ("succeeded", 1, None),
            ("queued", 1, "Nfts.MaxSupplyReached"),
        ]
        shown = await shown_items(client, tenant, product)
        assert [item["nft"]["status"] for item in shown] == ["minted", "minted", "queued"]
        assert [item["nft"]["reason"] for item in shown] == [
            None,
            None,
            f"Nfts.MaxSupplyReached (in {minted.tx.tx_hash})",
        ]
        assert shown[2]["nft"]["block"] is None
        assert [chain.item_owner(0, n) for n in (1, 2, 3)] == [
            key_of(users[0]),
            key_of(users[1]),
            None,
        ]

    async def test_an_nft_that_exists_in_a_block_not_final_yet_fails_alone(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        users, items = await issued(client, tenant, product, 2)
        assert await worker.run_one()  # the collection
        stranger = OUTSIDER.public_key  # no wallet of the project
        chain.hold_finality()
        # Minted to someone else outside Tessera, in a block the handler does not read yet.
        chain.act(await seed_of(jobs_app, wallet), Mint(0, 2, stranger, METADATA))
        running = asyncio.create_task(worker.run_one())
        await until_stored(database, lambda rows: [r.status for r in rows][1:] == ["included"])
        chain.release_finality()
        assert await running
        [*_, minted] = chain.extrinsics
        assert [fate.error for fate in minted.outcomes] == [None, "Nfts.AlreadyExists"]
        [first, second] = sorted(
            (job for job in await jobs(database) if job.kind == "nft.mint"),
            key=lambda job: job.payload["product_item_id"] != items[0]["id"],
        )
        assert (state(first), state(second)) == (
            ("succeeded", 1, None),
            ("queued", 1, "Nfts.AlreadyExists"),
        )
        assert (chain.item_owner(0, 1), chain.item_owner(0, 2)) == (key_of(users[0]), stranger)
        shown = await shown_items(client, tenant, product)
        assert [(item["nft"]["status"], item["nft"]["reason"]) for item in shown] == [
            ("minted", None),
            ("queued", f"Nfts.AlreadyExists (in {minted.tx.tx_hash})"),
        ]
        # Its retry finds the NFT on the final block: held outside the project.
        await skip_waits(database)
        assert await worker.run_until_idle() == 1
        [_, again] = sorted(
            (job for job in await jobs(database) if job.kind == "nft.mint"),
            key=lambda job: job.payload["product_item_id"] != items[0]["id"],
        )
        assert state(again) == ("succeeded", 2, None)
        [_, outside] = await shown_items(client, tenant, product)
        assert outside["nft"] == {
            "status": "external",
            "tx_hash": None,
            "block": None,
            "block_hash": None,
            "reason": None,
            "transfer": None,
        }
        assert len(chain.signed) == 2  # not minted again


class TestFunds:
    async def test_a_wallet_that_runs_dry_mints_what_it_can_pay_for_and_the_rest_waits(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        await issued(client, tenant, product, 15)
        assert await worker.run_one()  # the collection
        # Enough for five mints in one extrinsic, not six.
        dry = DEPOSITS.existential + fee(5) + 5 * DEPOSIT + DEPOSIT + FEE_PER_PART - 1
        chain.free[wallet] = dry
        assert await worker.run_until_idle() == 2  # ten: five minted, five wait; then five wait
        [paid] = parts_landed(chain)
        assert len(paid) == 5
        assert len(chain.signed) == 2 and chain.pool == {}  # nothing it could not pay for

        config = jobs_app.state.settings.chain("AssetHub")
        base = FEE - FEE_PER_PART

        def minting(count: int) -> str:
            return (
                f"minting {count} NFTs (deposits of {config.amount(DEPOSIT)} and a fee of about "
                f"{config.amount(FEE_PER_PART)} each)"
            )

        first = await short_of_funds(
            client,
            tenant,
            jobs_app,
            holds=dry,
            what=minting(10),
            needs=base + 10 * (DEPOSIT + FEE_PER_PART),
        )
        second = await short_of_funds(
            client,
            tenant,
            jobs_app,
            holds=dry - fee(5) - 5 * DEPOSIT,
            what=minting(5),
            needs=base + 5 * (DEPOSIT + FEE_PER_PART),
        )
        assert Counter(state(job) for job in await jobs(database) if job.kind == "nft.mint") == {
            ("succeeded", 1, None): 5,
            ("queued", 0, f"waiting: {first}"): 5,
            ("queued", 0, f"waiting: {second}"): 5,
        }
        shown = await shown_items(client, tenant, product)
        assert Counter((item["nft"]["status"], item["nft"]["reason"]) for item in shown) == {
            ("minted", None): 5,
            ("queued", first): 5,
            ("queued", second): 5,
        }
        assert [item["item_id"] for item in shown if item["nft"]["status"] == "minted"] == paid
        assert not await worker.run_one()  # they look again in a while

        chain.fund(wallet, 100 * DOT)
        await skip_waits(database)  # the while has passed
        assert await worker.run_until_idle() == 1
        assert [len(items) for items in parts_landed(chain)] == [5, 10]
        assert sorted(mints(chain)) == list(range(1, 16))  # each NFT once
        shown = await shown_items(client, tenant, product)
        assert {(item["nft"]["status"], item["nft"]["reason"]) for item in shown} == {
            ("minted", None)
        }
        assert [state(job) for job in await jobs(database)][1:] == [("succeeded", 1, None)] * 15


async def transferable(client, tenant, chain, worker, count: int) -> tuple[dict, list, list]:
    """A transferable product with ``count`` items minted, one to each of ``count`` users."""
    await funded(client, tenant, chain)
    product = await nft_product(client, tenant, is_transferable=True)
    users, items = await issued(client, tenant, product, count)
    assert await worker.run_until_idle() == 2
    return product, users, items


class TestManyHolders:
    async def test_each_holder_signs_its_own_transfer_funded_in_one_extrinsic(
        self, client, tenant, chain, worker, database
    ):
        product, users, items = await transferable(client, tenant, chain, worker, 5)
        wallet = chain.extrinsics[0].tx.signer
        sponsor = chain.free[wallet]
        [recipient] = await create_users(client, tenant, 1)
        for user, item in zip(users, items, strict=True):
            await transfer(client, tenant, product["id"], item["id"], user, recipient)
        assert await worker.run_until_idle() == 1  # the project's transfers together

        needed = 2 * FEE + DEPOSITS.existential
        funding, *moves = chain.extrinsics[2:]
        assert (funding.tx.signer, funding.call) == (wallet, "Utility.force_batch")
        assert sorted(funding.tx.parts, key=lambda part: part.dest) == sorted(
            (Fund(key_of(user), needed) for user in users), key=lambda part: part.dest
        )
        assert sorted((move.tx.signer, move.tx.parts) for move in moves) == sorted(
            (key_of(user), (Transfer(0, n, key_of(recipient)),))
            for n, user in enumerate(users, start=1)
        )
        assert [move.outcomes for move in moves] == [(PartOutcome(None),)] * 5
        assert chain.free[wallet] == sponsor - 5 * needed - fee(5)
        assert [chain.free[key_of(user)] for user in users] == [needed - FEE] * 5
        assert [chain.item_owner(0, n) for n in range(1, 6)] == [key_of(recipient)] * 5
        shown = await shown_items(client, tenant, product)
        for item in shown:
            [landed] = [m for m in moves if m.tx.parts[0].item_id == item["item_id"]]
            block = next(b for b in chain.blocks if landed in b.extrinsics)
            assert item["nft"]["transfer"] == {
                "status": "transferred",
                "tx_hash": landed.tx.tx_hash,
                "block": block.number,
                "block_hash": block.hash,
                "reason": None,
            }
        assert sorted(ledger((await extrinsics(database))[2:])) == sorted(
            [("Balances.transfer_keep_alive", 2, "final", None)]
            + [("Nfts.transfer", 0, "final", None)] * 5
        )

    async def test_holders_funded_by_a_run_that_died_are_not_funded_again(
        self, client, tenant, chain, worker, database
    ):
        product, users, items = await transferable(client, tenant, chain, worker, 3)
        wallet = chain.extrinsics[0].tx.signer
        [recipient] = await create_users(client, tenant, 1)
        for user, item in zip(users, items, strict=True):
            await transfer(client, tenant, product["id"], item["id"], user, recipient)
        chain.crash_after = "submit"  # the funding landed; the worker died
        with pytest.raises(Crash):
            await worker.run_one()
        funded_once = chain.free[wallet]
        assert chain.calls[2:] == ["Utility.force_batch"]

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls[2:] == ["Utility.force_batch"] + ["Nfts.transfer"] * 3
        assert chain.free[wallet] == funded_once
        assert [chain.item_owner(0, n) for n in range(1, 4)] == [key_of(recipient)] * 3
        assert [state(job) for job in await jobs(database) if job.kind == "nft.transfer"] == [
            ("succeeded", 2, None)
        ] * 3

    async def test_holders_the_project_wallet_cannot_fund_wait_for_funds(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        product, users, items = await transferable(client, tenant, chain, worker, 2)
        wallet = chain.extrinsics[0].tx.signer
        chain.free[wallet] = DEPOSITS.existential
        [recipient] = await create_users(client, tenant, 1)
        for user, item in zip(users, items, strict=True):
            await transfer(client, tenant, product["id"], item["id"], user, recipient)
        assert await worker.run_until_idle() == 1

        needed = 2 * FEE + DEPOSITS.existential
        reason = await short_of_funds(
            client,
            tenant,
            jobs_app,
            holds=DEPOSITS.existential,
            what="sending 2 holders the fees of their transfers",
            needs=fee(2) + 2 * needed,
        )
        moves = [job for job in await jobs(database) if job.kind == "nft.transfer"]
        assert [state(job) for job in moves] == [("queued", 0, f"waiting: {reason}")] * 2
        for item in await shown_items(client, tenant, product):
            assert item["nft"]["transfer"] == {
                "status": "queued",
                "tx_hash": None,
                "block": None,
                "block_hash": None,
                "reason": reason,
            }
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert not await worker.run_one()  # they look again in a while

        chain.fund(wallet, 100 * DOT)
        await skip_waits(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls[2:] == ["Utility.force_batch", "Nfts.transfer", "Nfts.transfer"]
        assert [chain.item_owner(0, n) for n in (1, 2)] == [key_of(recipient)] * 2
        moves = [job for job in await jobs(database) if job.kind == "nft.transfer"]
        assert [state(job) for job in moves] == [("succeeded", 1, None)] * 2
