"""A product's NFTs reconciled with the in-memory chain, and repaired: the comparison, the
repair's rules and jobs, the recorded result and its change, the scheduled check. The same code
runs against the real runtime in tests/chain/test_reconciliation.py."""

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from substrateinterface import Keypair, KeypairType

from tessera.chain.gateway import Mint
from tessera.jobs.worker import Worker
from tessera.models import Job, Product, ProductItem, Reconciliation
from tessera.models.base import utcnow
from tessera.reconciliation.tasks import reconcile_chore
from tests import orm
from tests.changes.feed import of_type
from tests.factories import create_product, create_users, issue_items, link_receiving, row_counts
from tests.jobs.memory_chain import DEPOSITS, DOT, MemoryChain
from tests.jobs.test_worker import METADATA, UNREACHABLE, funded, key_of, nft_product, public_key

OUTSIDER = Keypair.create_from_uri("//Outsider", crypto_type=KeypairType.SR25519)


def url(product: dict) -> str:
    return f"/v1/products/{product['id']}/reconciliation"


async def check(client, tenant, product: dict) -> dict:
    response = await client.get(url(product), headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def repair(client, tenant, product: dict, **body) -> dict:
    response = await client.post(f"{url(product)}/repair", headers=tenant.w, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def kinds(answer: dict) -> list[tuple[str, int | None]]:
    return sorted((f["kind"], f["item_id"]) for f in answer.get("findings", answer.get("actions")))


async def minted(client, tenant, chain: MemoryChain, worker: Worker, count: int = 3):
    """A product with ``count`` items minted, one per user, and the users."""
    await funded(client, tenant, chain)
    product = await nft_product(client, tenant)
    users = await create_users(client, tenant, count)
    for user in users:
        await issue_items(client, tenant, product["id"], user["id"])
    assert await worker.run_until_idle() == 2  # the collection, then the mints at once
    return product, users


def mints(chain: MemoryChain) -> list[int]:
    """The NFTs minted (not their metadata alone), in the order they landed."""
    return [
        part.item_id
        for applied in chain.extrinsics
        for part, fate in zip(applied.tx.parts, applied.outcomes, strict=True)
        if isinstance(part, Mint) and part.owner is not None and fate.error is None
    ]


def drop(chain: MemoryChain, nft: int, collection: int = 0) -> None:
    """The NFT burnt behind Tessera's back."""
    chain.collections[collection].items.discard(nft)
    chain.owners.pop((collection, nft))
    chain.metadata.pop((collection, nft), None)


async def jobs(database) -> list[Job]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Job).order_by(Job.created_at)))


async def age(database, model, **values) -> None:
    """Every row of ``model`` last changed an hour ago (stuck past the 900 s figure)."""
    async with orm.session(database) as session:
        await session.execute(update(model).values(updated_at=utcnow() - timedelta(hours=1)))
        await session.commit()


class TestComparison:
    async def test_a_product_the_chain_agrees_with_is_clean(self, client, tenant, chain, worker):
        product, _ = await minted(client, tenant, chain, worker)
        answer = await check(client, tenant, product)
        assert answer == {
            "product_id": product["id"],
            "chain": "AssetHub",
            "collection_id": 0,
            "checked_at": answer["checked_at"],
            "items_checked": 3,
            "findings": [],
        }

    async def test_drift_behind_tesseras_back_is_reported_exactly(
        self, client, tenant, chain, worker
    ):
        product, (ada, bob, cy) = await minted(client, tenant, chain, worker)
        drop(chain, 1)
        chain.owners[0, 2] = key_of(cy)  # given to another user's custodial wallet
        chain.metadata[0, 3] = "https://elsewhere.example/x.json"
        chain.owners[0, 99] = OUTSIDER.public_key  # an NFT no item accounts for
        chain.collections[0].items.add(99)

        answer = await check(client, tenant, product)
        assert kinds(answer) == [
            ("metadata_mismatch", 3),
            ("missing_on_chain", 1),
            ("owner_mismatch", 2),
            ("unexpected_on_chain", 99),
        ]
        found = {f["kind"]: f for f in answer["findings"]}
        missing = found["missing_on_chain"]["database"]
        assert (missing["nft_status"], missing["user_id"]) == ("minted", ada["id"])
        assert public_key(missing["wallet"]) == key_of(ada)  # in the chain's address format
        assert found["missing_on_chain"]["chain"] is None
        assert found["owner_mismatch"]["database"]["user_id"] == bob["id"]
        assert found["owner_mismatch"]["chain"]["user_id"] == cy["id"]
        assert public_key(found["owner_mismatch"]["chain"]["owner"]) == key_of(cy)
        assert found["metadata_mismatch"]["database"] == {"metadata": METADATA}
        assert found["metadata_mismatch"]["chain"] == {
            "metadata": "https://elsewhere.example/x.json"
        }
        assert found["unexpected_on_chain"]["database"] is None
        assert found["unexpected_on_chain"]["chain"]["user_id"] is None

    async def test_the_collection_owner_and_size_are_compared(self, client, tenant, chain, worker):
        product, _ = await minted(client, tenant, chain, worker, count=1)
        chain.collections[0].max_supply = 7
        answer = await check(client, tenant, product)
        [finding] = answer["findings"]
        assert (finding["kind"], finding["item_id"]) == ("collection_mismatch", None)
        assert finding["database"]["max_supply"] is None and finding["chain"]["max_supply"] == 7
        del chain.collections[0]
        [gone] = (await check(client, tenant, product))["findings"]
        assert (gone["kind"], gone["chain"]) == ("collection_mismatch", None)

    async def test_a_job_waiting_past_the_stuck_figure_is_stuck(
        self, client, tenant, chain, impatient, database
    ):
        wallet = await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        assert await impatient.run_until_idle() == 1
        [ada] = await create_users(client, tenant, 1)
        chain.free[wallet] = DEPOSITS.existential  # the mint waits for funds
        await issue_items(client, tenant, product["id"], ada["id"])
        assert await impatient.run_until_idle() == 1
        assert (await check(client, tenant, product))["findings"] == []  # not for long yet
        await age(database, ProductItem)
        [stuck] = (await check(client, tenant, product))["findings"]
        assert (stuck["kind"], stuck["item_id"]) == ("stuck", 1)
        assert stuck["database"]["nft_status"] == "queued"
        assert not await impatient.run_one()  # it waits for funds a while before it looks again

        chain.fund(wallet, 100 * DOT)
        [action] = (await repair(client, tenant, product, dry_run=False))["actions"]
        [mint] = [job for job in await jobs(database) if job.kind == "nft.mint"]
        assert (action["action"], action["job_id"]) == ("retry", str(mint.id))
        assert (mint.status, mint.attempts) == ("queued", 0)
        assert mint.last_error.startswith("waiting: waiting for funds")
        assert await impatient.run_until_idle() == 1
        assert (await check(client, tenant, product))["findings"] == []
        assert chain.item_owner(0, 1) == key_of(ada)

    async def test_a_stuck_collection(self, client, tenant, chain, impatient, database):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant)
        chain.unreachable = True
        assert await impatient.run_until_idle() == 1
        [failed] = await jobs(database)
        assert (failed.status, failed.last_error) == ("failed", UNREACHABLE)
        chain.unreachable = False
        await age(database, Product)
        [stuck] = (await check(client, tenant, product))["findings"]
        assert (stuck["kind"], stuck["item_id"], stuck["database"]["nft_status"]) == (
            "stuck",
            None,
            "failed",
        )
        [action] = (await repair(client, tenant, product, dry_run=False))["actions"]
        [job] = await jobs(database)
        assert (action["action"], action["job_id"], job.status) == ("retry", str(job.id), "queued")


class TestRules:
    async def test_a_product_without_nfts_is_409(self, client, tenant, chain):
        product = await create_product(client, tenant)
        response = await client.get(url(product), headers=tenant.r)
        assert response.status_code == 409
        assert "does not mint NFTs" in response.json()["message"]

    async def test_another_projects_product_is_404(self, client, tenant, other, chain, worker):
        product, _ = await minted(client, tenant, chain, worker, count=1)
        assert (await client.get(url(product), headers=other.r)).status_code == 404
        response = await client.post(f"{url(product)}/repair", headers=other.w, json={})
        assert response.status_code == 404

    async def test_an_unreachable_chain_is_503(self, client, tenant, chain, worker):
        product, _ = await minted(client, tenant, chain, worker, count=1)
        chain.unreachable = True
        response = await client.get(url(product), headers=tenant.r)
        assert response.status_code == 503
        assert "unavailable" in response.json()["message"]

    async def test_repair_wants_a_write_credential_and_a_boolean(
        self, client, tenant, chain, worker
    ):
        product, _ = await minted(client, tenant, chain, worker, count=1)
        path = f"{url(product)}/repair"
        assert (await client.post(path, headers=tenant.r, json={})).status_code == 403
        for body in ({"dry_run": "no"}, {"dry_run": None}, {"dryRun": False, "x": 1}):
            response = await client.post(path, headers=tenant.w, json=body)
            assert response.status_code == 400, body
            assert "errors" in response.json()


class TestRepair:
    async def test_a_dry_run_changes_nothing(self, client, tenant, chain, worker, database):
        product, (_, _, cy) = await minted(client, tenant, chain, worker)
        drop(chain, 1)
        chain.owners[0, 2] = key_of(cy)
        await check(client, tenant, product)  # the drift recorded once
        counts, calls, owners = await row_counts(database), list(chain.calls), dict(chain.owners)
        for body in ({}, {"dry_run": True}):
            answer = await repair(client, tenant, product, **body)
            assert answer["dry_run"] is True
            assert [
                (a["kind"], a["item_id"], a["action"], a["job_id"]) for a in answer["actions"]
            ] == [
                ("missing_on_chain", 1, "mint", None),
                ("owner_mismatch", 2, "transfer_back", None),
            ]
        no_body = await client.post(f"{url(product)}/repair", headers=tenant.w)
        assert no_body.status_code == 200 and no_body.json()["dry_run"] is True
        assert await row_counts(database) == counts
        assert (chain.calls, chain.owners) == (calls, owners)

    async def test_the_repair_leaves_a_clean_reconciliation(
        self, client, tenant, chain, worker, database
    ):
        product, (ada, bob, cy) = await minted(client, tenant, chain, worker)
        drop(chain, 1)
        chain.owners[0, 2] = key_of(cy)
        chain.metadata[0, 3] = "https://elsewhere.example/x.json"
        chain.owners[0, 99] = OUTSIDER.public_key
        chain.collections[0].items.add(99)

        answer = await repair(client, tenant, product, dry_run=False)
        actions = {a["kind"]: a for a in answer["actions"]}
        assert {kind: a["action"] for kind, a in actions.items()} == {
            "missing_on_chain": "mint",
            "owner_mismatch": "transfer_back",
            "metadata_mismatch": "set_metadata",
            "unexpected_on_chain": "report",
        }
        assert actions["unexpected_on_chain"]["job_id"] is None
        queued = {a["job_id"] for a in answer["actions"] if a["job_id"]}
        assert len(queued) == 3
        # Called again while they wait: the same actions, with the jobs already queued.
        again = await repair(client, tenant, product, dry_run=False)
        assert again["actions"] == answer["actions"]
        assert len(await jobs(database)) == 1 + 3 + 3  # collection, mints, repairs: none new

        # The mint and the metadata in one batch, then the transfer back.
        assert await worker.run_until_idle() == 2
        assert kinds(await check(client, tenant, product)) == [("unexpected_on_chain", 99)]
        assert chain.item_owner(0, 1) == key_of(ada)
        assert chain.item_owner(0, 2) == key_of(bob)
        assert chain.item_metadata(0, 3) == METADATA
        assert mints(chain) == [1, 2, 3, 1]  # the missing one, once

    async def test_the_item_follows_its_nft_out_of_a_wallet_its_user_holds(
        self, client, tenant, chain, worker, database
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        keypair, _ = await link_receiving(client, tenant, ada)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        assert await worker.run_until_idle() == 2
        assert chain.item_owner(0, 1) == keypair.public_key
        chain.owners[0, 1] = key_of(bob)  # Ada gave it to Bob on chain

        [action] = (await repair(client, tenant, product, dry_run=False))["actions"]
        assert (action["kind"], action["action"]) == ("owner_mismatch", "follow")
        assert await worker.run_until_idle() == 1
        assert (await check(client, tenant, product))["findings"] == []
        shown = await client.get(
            f"/v1/products/{product['id']}/items/1/transfers", headers=tenant.r
        )
        [moved] = shown.json()["transfers"]
        assert (moved["from_user"]["id"], moved["to_user"]["id"], moved["source"]) == (
            ada["id"],
            bob["id"],
            "chain",
        )
        [change] = await of_type(client, tenant, "item.transferred")
        assert change["data"]["new_owner"]["id"] == bob["id"]
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["user"]["id"] == bob["id"]
        assert item["id"] == items.json()["items"][0]["id"]

    async def test_an_nft_outside_the_project_marks_its_item_external(
        self, client, tenant, chain, worker
    ):
        await funded(client, tenant, chain)
        product = await nft_product(client, tenant, is_transferable=True)
        ada, bob = await create_users(client, tenant, 2)
        keypair, _ = await link_receiving(client, tenant, ada)
        [item] = await issue_items(client, tenant, product["id"], ada["id"])
        assert await worker.run_until_idle() == 2
        chain.owners[0, 1] = OUTSIDER.public_key  # sold on a marketplace

        [action] = (await repair(client, tenant, product, dry_run=False))["actions"]
        assert action["action"] == "mark_external"
        assert await worker.run_until_idle() == 1
        assert (await check(client, tenant, product))["findings"] == []
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["nft"]["status"] == "external"
        redeem = await client.post(
            f"/v1/products/{product['id']}/items/redeem",
            headers=tenant.w,
            json={"product_item_id": item["id"]},
        )
        assert redeem.status_code == 409 and "no user of the project" in redeem.json()["message"]
        moved = await client.post(
            f"/v1/products/{product['id']}/transfer",
            headers=tenant.w,
            json={
                "product_item_id": item["id"],
                "sender_user_id": ada["id"],
                "recipient_user_id": bob["id"],
            },
        )
        assert moved.status_code == 409

        chain.owners[0, 1] = keypair.public_key  # bought back
        [back] = (await repair(client, tenant, product, dry_run=False))["actions"]
        assert back["action"] == "follow"
        assert await worker.run_until_idle() == 1
        items = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert items.json()["items"][0]["nft"]["status"] == "minted"
        assert (await check(client, tenant, product))["findings"] == []


class TestRecorded:
    async def test_a_drift_is_announced_once_when_it_appears(
        self, client, tenant, chain, worker, database
    ):
        product, _ = await minted(client, tenant, chain, worker)
        await check(client, tenant, product)
        assert await of_type(client, tenant, "nft.drift_found") == []
        drop(chain, 1)
        first = await check(client, tenant, product)
        await check(client, tenant, product)
        [change] = await of_type(client, tenant, "nft.drift_found")
        assert change["data"]["findings"] == first["findings"]
        drop(chain, 2)
        await check(client, tenant, product)
        assert len(await of_type(client, tenant, "nft.drift_found")) == 2
        async with orm.session(database, write=False) as session:
            [row] = list(await session.scalars(select(Reconciliation)))
        assert (row.items_checked, len(row.findings)) == (3, 2)

    async def test_the_scheduled_check_visits_active_products_once(
        self, client, tenant, chain, worker, database
    ):
        product, _ = await minted(client, tenant, chain, worker)
        other, _ = await minted(client, tenant, chain, worker, count=1)
        old, other_id = utcnow() - timedelta(days=2), uuid.UUID(other["id"])
        async with orm.session(database) as session:  # no NFT activity for two days
            await session.execute(
                update(Product).where(Product.id == other_id).values(updated_at=old)
            )
            await session.execute(
                update(ProductItem).where(ProductItem.product_id == other_id).values(updated_at=old)
            )
            await session.commit()
        drop(chain, 1)
        interval, queue_checks = reconcile_chore(3600)
        assert interval == 3600
        assert await queue_checks(database) == 1
        assert await queue_checks(database) == 0  # queued already
        assert await worker.run_until_idle() == 1
        assert await queue_checks(database) == 0  # checked within the hour
        async with orm.session(database, write=False) as session:
            [row] = list(await session.scalars(select(Reconciliation)))
        assert str(row.product_id) == product["id"]
        assert [f["kind"] for f in row.findings] == ["missing_on_chain"]
        assert len(await of_type(client, tenant, "nft.drift_found")) == 1

    def test_the_scheduled_check_can_be_off(self):
        assert reconcile_chore(0) is None


@pytest.mark.parametrize("count", [250])
async def test_a_large_collection_is_read_in_one_pass(client, tenant, chain, worker, count):
    """The comparison reads the collection once (``collection_items``), not NFT by NFT."""
    await funded(client, tenant, chain)
    product = await nft_product(client, tenant)
    users = await create_users(client, tenant, count)
    response = await client.post(
        f"/v1/products/{product['id']}/items",
        headers=tenant.w,
        json={"users": [user["id"] for user in users]},
    )
    assert response.status_code == 201, response.text
    assert await worker.run_until_idle() == 1 + count // 10  # the collection, then ten at once
    assert mints(chain) == list(range(1, count + 1))
    reads = []
    original = chain.collection_items
    chain.collection_items = lambda collection: reads.append(collection) or original(collection)
    chain.item_owner = chain.item_metadata = None  # a read NFT by NFT would fail
    answer = await check(client, tenant, product)
    assert (answer["items_checked"], answer["findings"], reads) == (count, [], [0])
    assert public_key(users[0]["wallets"][0]["address"]) == chain.owners[0, 1]
