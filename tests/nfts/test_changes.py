"""The changes the NFT jobs write (``nft.*``), against the in-memory chain: each with the
product or the item as the API shows it once the job has recorded its outcome."""

from tessera.jobs.service import retry_job
from tessera.main import job_handlers
from tests.changes.feed import marker, read_all, shown, typed
from tests.factories import create_users, issue_items
from tests.jobs.test_worker import (
    NO_COLLECTION,
    QUEUED,
    UNREACHABLE,
    funded,
    job_of,
    key_of,
    nft_product,
    skip_waits,
    state,
    transfer,
)


async def product_shown(client, tenant, product_id: str) -> dict:
    response = await client.get(f"/v1/products/{product_id}", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def item_shown(client, tenant, product_id: str) -> dict:
    """The product's one item as GET /v1/products/{id}/items answers it."""
    response = await client.get(f"/v1/products/{product_id}/items", headers=tenant.r)
    assert response.status_code == 200, response.text
    [item] = response.json()["items"]
    return item


async def cursor_after(client, tenant, count: int) -> str:
    assert len(await shown(client, tenant, count)) == count
    _, cursor = await read_all(client, tenant)
    return cursor


class TestNftChanges:
    async def test_collection_created_then_minted(self, client, tenant, chain, worker):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        [issued] = await issue_items(client, tenant, product["id"], ada["id"])
        assert issued["nft"]["status"] == "queued"
        after = await cursor_after(client, tenant, 3)
        assert await worker.run_until_idle() == 2
        created = await product_shown(client, tenant, product["id"])
        assert created["nft"] == {"chain": "AssetHub", "collection_id": 0, "status": "created"}
        minted = await item_shown(client, tenant, product["id"])
        [_, landed] = chain.extrinsics
        assert minted["nft"] == {
            "status": "minted",
            "tx_hash": landed.tx.tx_hash,
            "block": 2,
            "block_hash": chain.block_hash(2),
            "reason": None,
            "transfer": None,
        }
        assert chain.item_owner(0, 1) == key_of(ada)
        assert typed(await shown(client, tenant, 2, after=after)) == [
            ("nft.collection_created", created),
            ("nft.minted", minted),
        ]
        # Everything in the order it happened, the requests' changes first.
        assert [event["type"] for event in (await read_all(client, tenant))[0]] == [
            "product.created",
            "user.created",
            "item.issued",
            "nft.collection_created",
            "nft.minted",
        ]

    async def test_transferred_once_the_chain_agrees(self, client, tenant, chain, worker):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        assert await worker.run_until_idle() == 2
        after = await cursor_after(client, tenant, 6)
        await transfer(client, tenant, product["id"], item["id"], ada, bob)
        [moved] = await shown(client, tenant, 1, after=after)
        assert moved["type"] == "item.transferred"
        assert moved["data"]["new_owner"]["id"] == bob["id"]
        assert (await item_shown(client, tenant, product["id"]))["nft"]["transfer"]["status"] == (
            "queued"
        )
        assert await worker.run_until_idle() == 1
        assert chain.item_owner(0, 1) == key_of(bob)
        transferred = await item_shown(client, tenant, product["id"])
        assert transferred["user"]["id"] == bob["id"]
        landed = chain.extrinsics[-1]
        assert transferred["nft"]["transfer"] == {
            "status": "transferred",
            "tx_hash": landed.tx.tx_hash,
            "block": 4,
            "block_hash": chain.block_hash(4),
            "reason": None,
        }
        assert typed(await shown(client, tenant, 2, after=after)) == [
            ("item.transferred", moved["data"]),
            ("nft.transferred", transferred),
        ]

    async def test_failed_only_when_the_job_gives_up(self, client, tenant, chain, worker, database):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        after = await cursor_after(client, tenant, 1)
        chain.unreachable = True  # after the request checked the wallet
        assert await worker.run_one()
        assert state(await job_of(database, "nft.create_collection"))[:2] == ("queued", 1)
        last = await marker(client, tenant)
        assert typed(await shown(client, tenant, 1, after=after)) == [last]  # it will retry

        after = await cursor_after(client, tenant, 2)
        for _ in range(1, worker.max_attempts):
            await skip_waits(database)
            assert await worker.run_one()
        error = UNREACHABLE
        assert state(await job_of(database, "nft.create_collection")) == (
            "failed",
            worker.max_attempts,
            error,
        )
        failed = await product_shown(client, tenant, product["id"])
        assert failed["nft"]["status"] == "failed"
        assert typed(await shown(client, tenant, 1, after=after)) == [
            (
                "nft.failed",
                {
                    "job": "nft.create_collection",
                    "error": error,
                    "product": failed,
                },
            )
        ]

    async def test_a_failed_mint_then_retried_by_hand(
        self, client, tenant, chain, impatient, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        assert await impatient.run_until_idle() == 1
        chain.unreachable = True
        [ada] = await create_users(client, tenant, 1)
        await issue_items(client, tenant, product["id"], ada["id"])
        after = await cursor_after(client, tenant, 4)
        assert await impatient.run_until_idle() == 1
        job = await job_of(database, "nft.mint")
        error = UNREACHABLE
        assert state(job) == ("failed", 1, error)
        failed = await item_shown(client, tenant, product["id"])
        assert failed["nft"] == QUEUED | {"status": "failed", "reason": error, "transfer": None}

        chain.unreachable = False
        await retry_job(impatient.context, job_handlers(), job_id=job.id)
        assert (await item_shown(client, tenant, product["id"]))["nft"]["status"] == "queued"
        assert await impatient.run_until_idle() == 1
        minted = await item_shown(client, tenant, product["id"])
        assert minted["nft"]["status"] == "minted"
        # Queued again by hand is no change of its own; the mint that then succeeds is.
        assert typed(await shown(client, tenant, 2, after=after)) == [
            (
                "nft.failed",
                {"job": "nft.mint", "error": error, "product_item": failed},
            ),
            ("nft.minted", minted),
        ]

    async def test_a_mint_fails_with_its_collection(self, client, tenant, chain, impatient):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        [ada] = await create_users(client, tenant, 1)
        await issue_items(client, tenant, product["id"], ada["id"])
        after = await cursor_after(client, tenant, 3)
        chain.unreachable = True
        assert await impatient.run_until_idle() == 2
        failed_product = await product_shown(client, tenant, product["id"])
        failed_item = await item_shown(client, tenant, product["id"])
        assert failed_item["nft"]["status"] == failed_product["nft"]["status"] == "failed"
        assert typed(await shown(client, tenant, 2, after=after)) == [
            (
                "nft.failed",
                {
                    "job": "nft.create_collection",
                    "error": UNREACHABLE,
                    "product": failed_product,
                },
            ),
            (
                "nft.failed",
                {
                    "job": "nft.mint",
                    "error": NO_COLLECTION,
                    "product_item": failed_item,
                },
            ),
        ]
