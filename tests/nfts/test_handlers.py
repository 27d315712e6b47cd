"""The NFT job handlers against the in-memory chain: a product's collection (created, followed
after a crash, adopted, waiting for funds), its NFTs minted to their owners' wallets with their
metadata, and their transfers mirrored on chain by the holders the project wallet funds."""

import asyncio
import uuid
from dataclasses import dataclass

import pytest
from sqlalchemy import delete, update

from tessera.chain.gateway import Collection, CreateCollection, Fund, Mint, Transfer
from tessera.models import Job, JobStatus, Product, ProductItem, UserWallet
from tessera.models.base import utcnow
from tests import orm
from tests.factories import create_event, create_users, issue_items, link_receiving
from tests.jobs.memory_chain import DEPOSITS, DOT, FEE, Crash, fee, signer_of
from tests.jobs.memory_pallets import metadata_deposit
from tests.jobs.test_worker import (
    METADATA,
    NO_COLLECTION,
    QUEUED,
    UNREACHABLE,
    expire_leases,
    extrinsics,
    funded,
    item_nft,
    job_of,
    jobs,
    key_of,
    ledger,
    nft_product,
    order_item,
    product_nft,
    public_key,
    row,
    seed_of,
    short_of_funds,
    skip_waits,
    state,
    transfer,
    until,
)


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
        [created] = await extrinsics(database)
        assert ledger([created]) == [("Nfts.create", 0, "final", None)]
        assert (created.block_number, created.block_hash, created.fee, created.data) == (
            1,
            chain.block_hash(1),
            FEE,
            None,
        )
        stored = await row(database, Product, product["id"])
        assert stored.nft_extrinsic_id == created.id

    async def test_a_wallet_emptied_after_the_request_waits_for_funds(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=3)
        chain.free[wallet] = DEPOSITS.existential + FEE  # emptied after the request checked it
        assert await worker.run_one()
        reason = await short_of_funds(
            client,
            tenant,
            jobs_app,
            holds=DEPOSITS.existential + FEE,
            what="creating the collection",
            needs=FEE + DEPOSITS.collection,
        )
        job = await job_of(database, "nft.create_collection")
        assert state(job) == ("queued", 0, f"waiting: {reason}")
        assert (await product_nft(client, tenant, product["id"]))["status"] == "queued"
        assert chain.signed == [] and await extrinsics(database) == []
        assert not await worker.run_one()  # it looks again in a while

        chain.fund(wallet, 100 * DOT)
        await skip_waits(database)
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 1, None)
        assert (await product_nft(client, tenant, product["id"]))["collection_id"] == 0

    async def test_a_creation_that_fails_in_its_block_is_retried_and_signed_anew(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=3)
        chain.manual = True
        running = asyncio.create_task(worker.run_one())
        await until(lambda: chain.pool)
        chain.free[wallet] = DEPOSITS.existential + FEE  # the fee, not the deposit, by then
        chain.build()
        assert await running
        [failed] = chain.extrinsics
        assert failed.outcomes[0].error == "Balances.InsufficientBalance"
        error = "ChainError: Nfts.create: Balances.InsufficientBalance"
        assert state(await job_of(database, "nft.create_collection")) == ("queued", 1, error)
        assert (await product_nft(client, tenant, product["id"]))["status"] == "queued"
        assert chain.collections == {}

        chain.manual = False
        chain.fund(wallet, 100 * DOT)
        await skip_waits(database)
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }
        assert ledger(await extrinsics(database)) == [
            ("Nfts.create", 0, "final", None),
            ("Nfts.create", 1, "final", None),
        ]

    async def test_a_creation_by_a_run_that_died_is_followed_not_made_again(
        self, client, tenant, chain, worker, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=5)
        chain.crash_after = "submit"
        with pytest.raises(Crash):
            await worker.run_one()
        assert chain.collections_owned_by(wallet) == [0]
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": None,
            "status": "submitted",
        }
        assert ledger(await extrinsics(database)) == [("Nfts.create", 0, "signed", None)]
        assert state(await job_of(database, "nft.create_collection")) == ("running", 1, None)
        assert not await worker.run_one()  # the lease holds

        await expire_leases(database)
        assert await worker.run_one()
        assert (await product_nft(client, tenant, product["id"]))["collection_id"] == 0
        assert chain.collections_owned_by(wallet) == [0]
        assert chain.calls == ["Nfts.create"] and len(chain.signed) == 1
        assert ledger(await extrinsics(database)) == [("Nfts.create", 0, "final", None)]
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)

    async def test_an_unrecorded_collection_of_the_wallet_is_adopted(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        # Created by a run before the ledger, which could not record it.
        chain.act(await seed_of(jobs_app, wallet), CreateCollection(wallet, 5))
        product = await nft_product(client, tenant, max_items=5)
        assert await worker.run_until_idle() == 1
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }
        assert chain.collections_owned_by(wallet) == [0]
        assert (chain.calls, chain.signed) == (["Nfts.create"], [])
        assert await extrinsics(database) == []
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 1, None)

    @pytest.mark.parametrize("pool", ["keeps", "forgets"])
    async def test_a_creation_waiting_in_the_pool_is_submitted_again_never_signed_again(
        self, client, tenant, chain, worker, database, pool
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=4)
        chain.manual = True  # no block until the test builds one
        running = asyncio.create_task(worker.run_one())
        await until(lambda: chain.pool)
        [signed] = chain.signed
        assert list(chain.pool) == [signed.tx_hash]
        assert (await product_nft(client, tenant, product["id"]))["status"] == "submitted"
        if pool == "forgets":  # the node restarted: the worker sends the same bytes again
            with chain.lock:  # not while a worker's thread looks at it
                chain.pool.clear()
            await until(lambda: chain.pool)
            assert list(chain.pool) == [signed.tx_hash]
        chain.build()
        assert await running
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 1, None)
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }
        assert chain.collection(0) == Collection(owner=wallet, items=0, max_supply=4)
        assert (chain.calls, chain.signed) == (["Nfts.create"], [signed])

    async def test_a_creation_whose_nonce_another_extrinsic_spent_is_signed_anew(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, max_items=3)
        chain.crash_before = "submit"  # recorded, never submitted
        with pytest.raises(Crash):
            await worker.run_one()
        # Meanwhile the project wallet's key spends that nonce outside Tessera.
        stranger = signer_of(b"\x07" * 32)
        chain.act(await seed_of(jobs_app, wallet), Fund(stranger, DOT))

        await expire_leases(database)
        assert await worker.run_one()
        gone = "the collection's creation: its nonce went to another extrinsic"
        assert state(await job_of(database, "nft.create_collection")) == (
            "queued",
            1,
            f"waiting: {gone}",
        )
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)
        assert await product_nft(client, tenant, product["id"]) == {
            "chain": "AssetHub",
            "collection_id": 0,
            "status": "created",
        }
        assert ledger(await extrinsics(database)) == [
            ("Nfts.create", 0, "dropped", "its nonce went to another extrinsic"),
            ("Nfts.create", 1, "final", None),
        ]
        assert chain.calls == ["Balances.transfer_keep_alive", "Nfts.create"]
        assert chain.collection(0) == Collection(owner=wallet, items=0, max_supply=3)

    async def test_recorded_collections_and_other_sizes_are_not_adopted(
        self, client, tenant, chain, worker, jobs_app
    ):
        wallet = await funded(client, tenant, chain)
        first = await nft_product(client, tenant, max_items=3)
        assert await worker.run_until_idle() == 1
        # A collection of another size made with the project wallet outside Tessera.
        made = chain.act(await seed_of(jobs_app, wallet), CreateCollection(wallet, 5))
        assert made.outcomes[0].collection_id == 1
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
        async with orm.session(database) as session:
            await session.execute(
                update(Job).values(status=JobStatus.RUNNING, last_error=None, lease_until=utcnow())
            )
            await session.commit()
        assert await worker.run_until_idle() == 1
        assert state(await job_of(database, "nft.create_collection")) == ("succeeded", 2, None)
        assert chain.calls == ["Nfts.create"] and len(chain.signed) == 1
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
        assert item["nft"] == QUEUED | {"transfer": None}
        assert await worker.run_until_idle() == 2

        [_, minted] = chain.extrinsics
        assert minted.tx.parts == (Mint(0, 1, key_of(ada), METADATA),)
        assert await item_nft(client, tenant, order_id) == {
            "status": "minted",
            "tx_hash": minted.tx.tx_hash,
            "block": 2,
            "block_hash": chain.block_hash(2),
            "reason": None,
            "transfer": None,
        }
        stored = await row(database, ProductItem, item["id"])
        [_, carried] = await extrinsics(database)
        assert (stored.nft_status, stored.nft_extrinsic_id, str(stored.nft_wallet_id)) == (
            "minted",
            carried.id,
            ada["wallets"][0]["id"],
        )
        assert ledger([carried]) == [("Nfts.mint", 1, "final", None)]
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert chain.item_owner(0, 1) == key_of(ada)
        assert chain.item_metadata(0, 1) == METADATA
        assert chain.collection(0).items == 1
        deposits = DEPOSITS.collection + DEPOSITS.item + metadata_deposit(METADATA)
        assert chain.free[wallet] == 100 * DOT - deposits - FEE - fee(1)
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)

    async def test_an_item_minted_by_a_run_that_died_is_not_minted_again(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()  # the collection
        chain.crash_after = "submit"
        with pytest.raises(Crash):
            await worker.run_one()
        signed = chain.signed[-1]
        assert chain.item_owner(0, 1) == key_of(ada)
        assert await item_nft(client, tenant, order_id) == QUEUED | {
            "status": "submitted",
            "tx_hash": signed.tx_hash,
            "transfer": None,
        }

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert chain.signed[-1] == signed  # followed, not signed again
        assert chain.item_metadata(0, 1) == METADATA
        assert await item_nft(client, tenant, order_id) == {
            "status": "minted",
            "tx_hash": signed.tx_hash,
            "block": 2,
            "block_hash": chain.block_hash(2),
            "reason": None,
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
        chain.crash_after = "submit"
        with pytest.raises(Crash):  # minted to Ada's custodial wallet, then died
            await worker.run_one()
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
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        checked = await client.get(f"/v1/products/{product['id']}/reconciliation", headers=tenant.r)
        assert checked.status_code == 200, checked.text
        assert (checked.json()["items_checked"], checked.json()["findings"]) == (1, [])

    async def test_an_nft_minted_without_its_metadata_gets_the_metadata_alone(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()  # the collection
        # Minted by the project wallet's key outside Tessera (a repair by hand), bare.
        chain.act(await seed_of(jobs_app, wallet), Mint(0, 1, key_of(ada), None))
        assert await worker.run_until_idle() == 1
        assert chain.calls == ["Nfts.create", "Nfts.mint", "Nfts.set_metadata"]
        [*_, metadata] = chain.extrinsics
        assert metadata.tx.parts == (Mint(0, 1, None, METADATA),)
        assert (chain.item_owner(0, 1), chain.item_metadata(0, 1)) == (key_of(ada), METADATA)
        assert await item_nft(client, tenant, order_id) == {
            "status": "minted",
            "tx_hash": metadata.tx.tx_hash,
            "block": 3,
            "block_hash": chain.block_hash(3),
            "reason": None,
            "transfer": None,
        }
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)

    async def test_an_nft_already_on_chain_is_recorded_not_minted_again(
        self, client, tenant, chain, worker, jobs_app, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, item = await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()  # the collection
        chain.act(await seed_of(jobs_app, wallet), Mint(0, 1, key_of(ada), METADATA))
        assert await worker.run_until_idle() == 1
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert len(chain.signed) == 1  # the collection's creation only
        # No extrinsic of Tessera's carried it: the row has none to show.
        assert await item_nft(client, tenant, order_id) == QUEUED | {
            "status": "minted",
            "transfer": None,
        }
        stored = await row(database, ProductItem, item["id"])
        assert str(stored.nft_wallet_id) == ada["wallets"][0]["id"]
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)

    async def test_fails_when_the_collection_could_not_be_created(
        self, client, tenant, chain, impatient, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        order_id, _ = await order_item(client, tenant, ada, product["id"])
        chain.unreachable = True
        assert await impatient.run_until_idle() == 2
        assert state(await job_of(database, "nft.create_collection")) == (
            "failed",
            1,
            UNREACHABLE,
        )
        assert state(await job_of(database, "nft.mint")) == ("failed", 1, NO_COLLECTION)
        assert (await product_nft(client, tenant, product["id"]))["status"] == "failed"
        assert await item_nft(client, tenant, order_id) == QUEUED | {
            "status": "failed",
            "reason": NO_COLLECTION,
            "transfer": None,
        }
        chain.unreachable = False
        assert chain.calls == []

    async def test_an_item_that_is_gone_needs_nothing(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        async with orm.session(database) as session:
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
        async with orm.session(database) as session:
            await session.execute(
                delete(UserWallet).where(UserWallet.user_id == uuid.UUID(ada["id"]))
            )
            await session.commit()
        assert await worker.run_until_idle() == 2
        mint = await job_of(database, "nft.mint")
        assert state(mint) == ("queued", 1, f"user {ada['id']} has no wallet")
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
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == QUEUED
        assert chain.item_owner(0, 1) == key_of(nft.ada)  # the database moves first

        assert await worker.run_until_idle() == 1
        assert chain.item_owner(0, 1) == key_of(nft.bob)
        assert chain.calls[2:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        needed = 2 * FEE + DEPOSITS.existential
        funding, moved = chain.extrinsics[2:]
        assert (funding.tx.signer, funding.tx.parts) == (
            nft.wallet,
            (Fund(key_of(nft.ada), needed),),
        )
        assert (moved.tx.signer, moved.tx.parts) == (
            key_of(nft.ada),
            (Transfer(0, 1, key_of(nft.bob)),),
        )
        assert chain.free[key_of(nft.ada)] == needed - FEE
        assert chain.free[nft.wallet] == sponsor - needed - FEE
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == {
            "status": "transferred",
            "tx_hash": moved.tx.tx_hash,
            "block": 4,
            "block_hash": chain.block_hash(4),
            "reason": None,
        }
        stored = await row(database, ProductItem, nft.item_id)
        assert (stored.nft_status, stored.nft_transfer_block) == ("minted", 4)
        assert state(await job_of(database, "nft.transfer")) == ("succeeded", 1, None)
        assert ledger((await extrinsics(database))[2:]) == [
            ("Balances.transfer_keep_alive", 2, "final", None),
            ("Nfts.transfer", 0, "final", None),
        ]

    async def test_a_holder_short_of_funds_gets_the_difference(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        chain.fund(key_of(nft.ada), FEE)
        sponsor = chain.free[nft.wallet]
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        assert await worker.run_until_idle() == 1
        needed = 2 * FEE + DEPOSITS.existential
        assert chain.calls[2:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        assert chain.extrinsics[2].tx.parts == (Fund(key_of(nft.ada), needed - FEE),)
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
        assert chain.calls[2:] == ["Nfts.transfer"]
        assert chain.free[key_of(nft.ada)] == DOT - FEE
        assert chain.free[nft.wallet] == sponsor
        assert chain.item_owner(0, 1) == key_of(nft.bob)

    async def test_nothing_is_submitted_when_the_chain_already_agrees(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.bob, nft.ada)
        assert await worker.run_until_idle() == 2  # one job of an item at a time
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert chain.item_owner(0, 1) == key_of(nft.ada)
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == QUEUED | {
            "status": "transferred"
        }
        assert [state(job) for job in await jobs(database) if job.kind == "nft.transfer"] == [
            ("succeeded", 1, None)
        ] * 2

    async def test_a_transfer_by_a_run_that_died_is_followed_not_repeated(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        chain.fund(key_of(nft.ada), DOT)  # no funding: the holder's transfer is all there is
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        chain.crash_after = "submit_many"  # the holders' transfers go to the pool together
        with pytest.raises(Crash):
            await worker.run_one()
        signed = chain.signed[-1]
        assert chain.item_owner(0, 1) == key_of(nft.bob)
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == QUEUED | {
            "status": "submitted",
            "tx_hash": signed.tx_hash,
        }

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls[2:] == ["Nfts.transfer"] and chain.signed[-1] == signed
        assert chain.free[key_of(nft.ada)] == DOT - FEE
        assert (await item_nft(client, tenant, nft.order_id))["transfer"] == {
            "status": "transferred",
            "tx_hash": signed.tx_hash,
            "block": 3,
            "block_hash": chain.block_hash(3),
            "reason": None,
        }
        assert state(await job_of(database, "nft.transfer")) == ("succeeded", 2, None)

    async def test_a_funding_by_a_run_that_died_is_followed_not_sent_again(
        self, client, tenant, chain, worker, database
    ):
        nft = await minted_item(client, tenant, chain, worker)
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        chain.crash_after = "submit"  # the funding
        with pytest.raises(Crash):
            await worker.run_one()
        sponsor = chain.free[nft.wallet]
        assert chain.calls[2:] == ["Balances.transfer_keep_alive"]

        await expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert chain.calls[2:] == ["Balances.transfer_keep_alive", "Nfts.transfer"]
        assert chain.free[nft.wallet] == sponsor
        assert chain.item_owner(0, 1) == key_of(nft.bob)
        moved = chain.extrinsics[-1]
        assert (await item_nft(client, tenant, nft.order_id))["transfer"]["tx_hash"] == (
            moved.tx.tx_hash
        )
        assert ledger((await extrinsics(database))[2:]) == [
            ("Balances.transfer_keep_alive", 2, "final", None),
            ("Nfts.transfer", 0, "final", None),
        ]

    async def test_an_owner_outside_the_project_is_an_error(
        self, client, tenant, other, chain, impatient, jobs_app, database
    ):
        nft = await minted_item(client, tenant, chain, impatient)
        # Ada's key moves the NFT to a user of another project, outside Tessera.
        [stranger] = await create_users(client, other, 1)
        chain.fund(key_of(nft.ada), DOT)
        seed = await seed_of(jobs_app, key_of(nft.ada))
        assert signer_of(seed) == key_of(nft.ada)
        chain.act(seed, Transfer(0, 1, key_of(stranger)))
        await transfer(client, tenant, nft.product_id, nft.item_id, nft.ada, nft.bob)
        assert await impatient.run_until_idle() == 1
        error = "the on-chain owner is not a custodial wallet of this project"
        assert state(await job_of(database, "nft.transfer")) == ("failed", 1, error)
        shown = await item_nft(client, tenant, nft.order_id)
        assert (shown["status"], shown["transfer"]) == (
            "minted",
            QUEUED | {"status": "failed", "reason": error},
        )
        assert chain.item_owner(0, 1) == key_of(stranger)
        assert chain.calls[2:] == ["Nfts.transfer"]  # only the move outside Tessera

    async def test_a_transfer_of_an_item_whose_mint_failed_fails(
        self, client, tenant, chain, impatient, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        assert await impatient.run_until_idle() == 1
        chain.unreachable = True
        order_id, item = await order_item(client, tenant, ada, product["id"])
        assert await impatient.run_one()
        assert state(await job_of(database, "nft.mint")) == ("failed", 1, UNREACHABLE)
        chain.unreachable = False
        await transfer(client, tenant, product["id"], item["id"], ada, bob)
        assert await impatient.run_one()
        assert state(await job_of(database, "nft.transfer")) == (
            "failed",
            1,
            "the item could not be minted",
        )
        shown = await item_nft(client, tenant, order_id)
        assert (shown["status"], shown["transfer"]["status"]) == ("failed", "failed")
        assert chain.calls == ["Nfts.create"]

    async def test_a_transfer_waits_for_its_mint(self, client, tenant, chain, worker, database):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        assert await worker.run_until_idle() == 1
        chain.free[wallet] = DEPOSITS.existential  # the mint waits for funds
        order_id, item = await order_item(client, tenant, ada, product["id"])
        assert await worker.run_one()
        mint = await job_of(database, "nft.mint")
        assert (mint.status, mint.attempts) == ("queued", 0)
        assert mint.last_error.startswith("waiting: waiting for funds: the project wallet")
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
        assert state(await job_of(database, "nft.mint")) == ("succeeded", 1, None)
        assert state(await job_of(database, "nft.transfer")) == ("succeeded", 1, None)
        # Minted straight to Bob, who owns the item by then: nothing to transfer.
        assert chain.item_owner(0, 1) == key_of(bob)
        assert chain.calls == ["Nfts.create", "Utility.force_batch"]
        assert (await item_nft(client, tenant, order_id))["transfer"]["status"] == "transferred"
