"""NFT collections, mints, transfers and balances against the real Asset Hub runtime."""

import asyncio
import uuid
from contextlib import contextmanager

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import select, update
from substrateinterface import SubstrateInterface

from tessera.main import make_worker
from tessera.models import Extrinsic, Job
from tests import orm
from tests.chain.conftest import DOT
from tests.factories import (
    create_claim_link,
    create_order,
    create_users,
    issue_items,
    items_of,
    link_receiving,
    product_body,
    row_counts,
    transfer_item,
)

pytestmark = pytest.mark.chain

NFT = {"mint_nft": True, "metadata_uri": "https://meta.example/ticket.json", "chain": "AssetHub"}


def public_key(address: str) -> bytes:
    return bytes.fromhex(ss58_decode(address))


async def project_wallet(client, tenant) -> dict:
    [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
    return wallet


async def funded(client, tenant, devchain, amount: int = 100 * DOT) -> dict:
    wallet = await project_wallet(client, tenant)
    devchain.fund(wallet["address"], amount)
    return wallet


async def nft_product(client, tenant, **extra) -> dict:
    response = await client.post(
        "/v1/products", headers=tenant.w, json=product_body(**NFT, **extra)
    )
    assert response.status_code == 201, response.text
    return response.json()


async def get_product(client, tenant, product_id: str) -> dict:
    return (await client.get(f"/v1/products/{product_id}", headers=tenant.r)).json()


class TestCollections:
    async def test_created_by_the_worker_with_max_supply_and_the_project_wallet_as_admin(
        self, chain_client, tenant, devchain, worker, gateway
    ):
        wallet = await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, max_items=3)
        assert product["nft"] == {"chain": "AssetHub", "collection_id": None, "status": "queued"}
        assert await worker.run_until_idle() == 1
        nft = (await get_product(chain_client, tenant, product["id"]))["nft"]
        assert nft["status"] == "created" and isinstance(nft["collection_id"], int)
        collection = gateway.collection(nft["collection_id"])
        assert collection.owner == public_key(wallet["address"])
        assert collection.max_supply == 3 and collection.items == 0
        assert nft["collection_id"] in gateway.collections_owned_by(public_key(wallet["address"]))
        # Issuer, Freezer and Admin roles (bits 1, 2, 4) belong to the project wallet.
        substrate = SubstrateInterface(url=devchain.url)
        try:
            roles = substrate.query(
                "Nfts", "CollectionRoleOf", [nft["collection_id"], wallet["addresses"]["AssetHub"]]
            ).value
        finally:
            substrate.close()
        assert roles == 7

    async def test_insufficient_balance_is_refused_and_nothing_recorded(
        self, chain_client, tenant, devchain, database
    ):
        wallet = await funded(chain_client, tenant, devchain, amount=5 * DOT)
        before = await row_counts(database)
        response = await chain_client.post(
            "/v1/products", headers=tenant.w, json=product_body(**NFT)
        )
        assert response.status_code == 409
        message = response.json()["message"]
        assert message.startswith(
            f"the project wallet {wallet['addresses']['AssetHub']} holds 5 DOT"
        )
        assert "creating the NFT collection needs 10.01" in message and "deposit 10 DOT" in message
        assert (await chain_client.get("/v1/products", headers=tenant.r)).json() == []
        assert await row_counts(database) == before

    async def test_wallet_addresses_and_balances_per_chain(self, chain_client, tenant, devchain):
        wallet = await funded(chain_client, tenant, devchain, amount=42 * DOT)
        assert set(wallet["addresses"]) == {"AssetHub", "WestendAssetHub"}
        assert wallet["addresses"]["AssetHub"].startswith("1")  # SS58 prefix 0
        assert public_key(wallet["addresses"]["AssetHub"]) == public_key(wallet["address"])
        response = await chain_client.get("/v1/projects/wallets/balances", headers=tenant.r)
        assert response.status_code == 200
        [entry] = response.json()
        assert entry["address"] == wallet["addresses"]["AssetHub"]
        assert (entry["type"], entry["code"], entry["message"]) == ("Polkadot", 200, "OK")
        assert entry["data"] == [
            {
                "asset_id": "native",
                "balance": str(42 * DOT),
                "name": "AssetHub",
                "symbol": "DOT",
                "decimals": 10,
                "lock": "0",
            }
        ]


class TestMinting:
    async def test_items_are_minted_with_their_ids_owners_and_metadata(
        self, chain_client, tenant, devchain, worker, gateway
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant)
        ada, bob = await create_users(chain_client, tenant, 2)
        issued = await chain_client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"users": [ada["id"], bob["id"]]},
        )
        items = issued.json()["items"]
        queued = {"status": "queued", "tx_hash": None, "block": None, "block_hash": None}
        assert [i["nft"] for i in items] == [queued | {"reason": None, "transfer": None}] * 2
        order = await create_order(chain_client, tenant, bob["id"], (product["id"], 1))
        assert order.status_code == 201
        assert await worker.run_until_idle() == 2  # the collection, then the three mints at once

        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        minted = (
            await chain_client.get(f"/v1/orders/{order.json()['id']}", headers=tenant.r)
        ).json()
        [third] = minted["product_items"]
        assert third["item_id"] == 3 and third["nft"]["status"] == "minted"
        assert third["nft"]["tx_hash"].startswith("0x") and third["nft"]["block"] > 0
        assert gateway.block_hash(third["nft"]["block"]) == third["nft"]["block_hash"]
        owners = {1: ada, 2: bob, 3: bob}
        for nft_id, user in owners.items():
            owner = gateway.item_owner(collection_id, nft_id)
            assert owner == public_key(user["wallets"][0]["address"])
            assert gateway.item_metadata(collection_id, nft_id) == NFT["metadata_uri"]
        assert gateway.collection(collection_id).items == 3

    async def test_a_claimed_item_is_minted_to_the_claimants_new_wallet(
        self, chain_client, tenant, devchain, worker, gateway
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, is_claimable=True)
        link = await create_claim_link(chain_client, tenant, product["id"])
        claimed = await chain_client.post(
            f"/v1/claims/{link['token']}", json={"email": "claimant@example.com"}
        )
        assert claimed.status_code == 201, claimed.text
        assert await worker.run_until_idle() == 2  # the collection, then the claimed item
        profile = await chain_client.post(
            "/v1/users/profile", headers=tenant.r, json={"email": "claimant@example.com"}
        )
        [wallet] = profile.json()["wallets"]
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        item_id = claimed.json()["product_item"]["item_id"]
        assert gateway.item_owner(collection_id, item_id) == public_key(wallet["address"])
        assert gateway.item_metadata(collection_id, item_id) == NFT["metadata_uri"]

    async def test_max_items_reached_refuses_further_issues(
        self, chain_client, tenant, devchain, worker, gateway
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, max_items=2)
        ada, bob = await create_users(chain_client, tenant, 2)
        path = f"/v1/products/{product['id']}/items"
        assert (
            await chain_client.post(path, headers=tenant.w, json={"users": [ada["id"], bob["id"]]})
        ).status_code == 201
        refused = await chain_client.post(path, headers=tenant.w, json={"users": [ada["id"]]})
        assert refused.status_code == 409
        assert refused.json() == {
            "message": "the NFT collection holds at most 2 items (2 issued, 1 requested)"
        }
        await worker.run_until_idle()
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        assert gateway.collection(collection_id).items == 2
        assert gateway.collection(collection_id).max_supply == 2


class Crash(BaseException):
    """A worker dying right after the chain accepted its transaction (not an Exception)."""


class CrashAfter:
    """The real gateway, except that the ``nth`` call of one method dies after it has run."""

    def __init__(self, gateway, method: str, nth: int = 1) -> None:
        self._gateway, self._method, self._left = gateway, method, nth

    def __getattr__(self, name: str):
        real = getattr(self._gateway, name)
        if name != self._method:
            return real

        def run_then_die(*args, **kwargs):
            result = real(*args, **kwargs)
            self._left -= 1
            if self._left == 0:
                raise Crash
            return result

        return run_then_die


@contextmanager
def crashing(chains, gateway, method: str, nth: int = 1):
    """Within the block, the chain's gateway dies right after the ``nth`` call of ``method``
    has run (``submit``: the extrinsic is in the pool, the worker never learns it)."""
    chains.gateways["AssetHub"] = CrashAfter(gateway, method, nth)
    try:
        yield
    finally:
        chains.gateways["AssetHub"] = gateway


async def landed(probe, within: float = 15.0):
    """``probe()``'s first truthy answer: a submitted extrinsic lands in the block Chopsticks
    builds for it, a moment after the submission returned."""
    for _ in range(int(within / 0.1)):
        if found := probe():
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"not landed within {within} s")


async def _expire_leases(database) -> None:
    async with orm.session(database) as session:
        await session.execute(
            update(Job).where(Job.status == "running").values(lease_until=Job.created_at)
        )
        await session.commit()


async def _extrinsics(database) -> list[Extrinsic]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Extrinsic).order_by(Extrinsic.created_at)))


class TestCrashSafety:
    async def test_a_worker_killed_after_submit_neither_mints_nor_creates_twice(
        self, chain_client, chain_app, tenant, devchain, database, gateway, worker
    ):
        wallet = await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, max_items=5)
        [ada] = await create_users(chain_client, tenant, 1)
        await issue_items(chain_client, tenant, product["id"], ada["id"])
        state = chain_app.state

        # The first worker dies once it has submitted the creation it recorded.
        chains = state.chains
        with crashing(chains, gateway, "submit"):
            with pytest.raises(Crash):
                await make_worker(worker.context, state.settings).run_one()
        owned = await landed(lambda: gateway.collections_owned_by(public_key(wallet["address"])))
        assert len(owned) == 1
        assert (await get_product(chain_client, tenant, product["id"]))["nft"] == {
            "chain": "AssetHub",
            "collection_id": None,
            "status": "submitted",
        }
        [creation] = await _extrinsics(database)
        assert (creation.call, creation.status, creation.nonce) == ("Nfts.create", "signed", 0)

        # A restarted worker (after the lease) follows what was recorded: no second creation.
        await _expire_leases(database)
        restarted = make_worker(worker.context, state.settings)
        assert await restarted.run_one()
        assert (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ] == owned[0]
        assert gateway.collections_owned_by(public_key(wallet["address"])) == owned

        # The next worker dies once it has submitted the mint.
        with crashing(chains, gateway, "submit"):
            with pytest.raises(Crash):
                await make_worker(worker.context, state.settings).run_one()
        assert await landed(lambda: gateway.collection(owned[0]).items == 1)
        assert (await items_of(database, product["id"]))[0].nft_status == "submitted"
        await _expire_leases(database)
        assert await restarted.run_until_idle() == 1
        assert gateway.collection(owned[0]).items == 1  # not minted twice
        assert gateway.item_owner(owned[0], 1) == public_key(ada["wallets"][0]["address"])
        assert gateway.item_metadata(owned[0], 1) == NFT["metadata_uri"]
        async with orm.session(database, write=False) as session:
            jobs = list(await session.scalars(select(Job).order_by(Job.created_at)))
        assert [(j.kind, j.status, j.attempts) for j in jobs] == [
            ("nft.create_collection", "succeeded", 2),
            ("nft.mint", "succeeded", 2),
        ]
        # One extrinsic each, nonces 0 and 1, both final: nothing signed again.
        assert [(e.call, e.nonce, e.status) for e in await _extrinsics(database)] == [
            ("Nfts.create", 0, "final"),
            ("Nfts.mint", 1, "final"),
        ]


class TestTransfers:
    async def test_transfer_is_mirrored_on_chain_with_the_fee_sponsored(
        self, chain_client, tenant, devchain, worker, gateway
    ):
        wallet = await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, is_transferable=True)
        ada, bob = await create_users(chain_client, tenant, 2)
        [item] = await issue_items(chain_client, tenant, product["id"], ada["id"])
        await worker.run_until_idle()
        ada_key = public_key(ada["wallets"][0]["address"])
        assert gateway.balance(ada_key).free == 0  # custodial wallets hold nothing
        sponsor_before = gateway.balance(public_key(wallet["address"])).free

        moved = await transfer_item(chain_client, tenant, product["id"], item["id"], ada, bob)
        assert moved.status_code == 200 and moved.json()["new_owner"]["id"] == bob["id"]
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        assert gateway.item_owner(collection_id, 1) == ada_key  # the database moves first
        assert await worker.run_until_idle() == 1
        assert gateway.item_owner(collection_id, 1) == public_key(bob["wallets"][0]["address"])
        assert gateway.balance(ada_key).free > 0  # the project wallet paid its fee and deposit
        assert gateway.balance(public_key(wallet["address"])).free < sponsor_before

        order = await create_order(chain_client, tenant, bob["id"], (product["id"], 1))
        listed = (
            await chain_client.get(f"/v1/orders/{order.json()['id']}", headers=tenant.r)
        ).json()
        assert listed["product_items"][0]["nft"]["status"] == "queued"


class TestFunds:
    async def test_mints_the_wallet_cannot_pay_for_wait_and_go_on_once_it_is_funded(
        self, chain_client, tenant, devchain, database, gateway, worker
    ):
        wallet = await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant)
        holders = await create_users(chain_client, tenant, 6)
        assert await worker.run_until_idle() == 1  # the collection
        # Enough for two NFTs or so (each: 0.21 DOT of deposits and about 0.1 of fee).
        devchain.fund(wallet["address"], DOT // 2 + 10**8)
        await issue_items(chain_client, tenant, product["id"], *(u["id"] for u in holders))
        assert await worker.run_until_idle() == 1  # one batch: what the wallet can pay for
        items = await items_of(database, product["id"])
        minted = [item for item in items if item.nft_status == "minted"]
        waiting = [item for item in items if item.nft_status == "queued"]
        assert minted and waiting and len(minted) + len(waiting) == 6
        reason = waiting[0].nft_reason
        assert reason.startswith(
            f"waiting for funds: the project wallet {wallet['addresses']['AssetHub']} holds "
        ), reason
        assert all(item.nft_reason == reason for item in waiting)
        listed = await chain_client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        shown = {i["item_id"]: i["nft"] for i in listed.json()["items"]}
        assert shown[waiting[0].item_id]["reason"] == reason
        async with orm.session(database, write=False) as session:
            jobs = list(await session.scalars(select(Job).where(Job.kind == "nft.mint")))
        held = [job for job in jobs if job.status == "queued"]
        assert len(held) == len(waiting)
        assert all(job.attempts == 0 and job.last_error == f"waiting: {reason}" for job in held)
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        assert gateway.collection(collection_id).items == len(minted)
        # Nothing was signed that the wallet could not pay for.
        assert [e.status for e in await _extrinsics(database) if e.call == "Nfts.mint"] == ["final"]

        devchain.fund(wallet["address"], 100 * DOT)
        await _due_now(database)  # the wait (FUNDS_DELAY) has passed
        assert await worker.run_until_idle() == 1
        items = await items_of(database, product["id"])
        assert [(i.nft_status, i.nft_reason) for i in items] == [("minted", None)] * 6
        assert gateway.collection(collection_id).items == 6  # each NFT once
        for item in items:
            holder = next(u for u in holders if u["id"] == str(item.owner_id))
            owner = gateway.item_owner(collection_id, item.item_id)
            assert owner == public_key(holder["wallets"][0]["address"])


async def _due_now(database) -> None:
    async with orm.session(database) as session:
        await session.execute(
            update(Job).where(Job.status == "queued").values(run_after=Job.created_at)
        )
        await session.commit()


class TestUserBalances:
    async def test_one_entry_per_wallet_from_the_chain(self, chain_client, tenant, devchain):
        [ada] = await create_users(chain_client, tenant, 1)
        devchain.fund(ada["wallets"][0]["address"], 3 * DOT)
        response = await chain_client.post(
            "/v1/users/balances",
            headers=tenant.r,
            json={"email": ada["email"], "chain": "AssetHub"},
        )
        assert response.status_code == 200
        [entry] = response.json()
        assert set(entry) == {"address", "type", "code", "message", "generated_at", "data"}
        assert public_key(entry["address"]) == public_key(ada["wallets"][0]["address"])
        assert entry["data"][0]["balance"] == str(3 * DOT) and entry["data"][0]["symbol"] == "DOT"
        missing = await chain_client.post(
            "/v1/users/balances", headers=tenant.r, json={"id": str(uuid.uuid4())}
        )
        assert missing.status_code == 404
        assert (
            await chain_client.post("/v1/users/balances", json={"email": ada["email"]})
        ).status_code == 401


class TestInProcessWorker:
    async def test_serve_runs_a_worker_that_creates_the_collection(
        self, settings, devchain, tenant
    ):
        import asyncio

        import httpx

        from tessera.main import create_app

        app = create_app(
            settings.model_copy(
                update={
                    "chain_assethub_rpc_url": devchain.url,
                    "worker_in_process": True,
                    "worker_poll_seconds": 0.2,
                }
            )
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                await funded(client, tenant, devchain)
                product = await nft_product(client, tenant)
                for _ in range(150):
                    nft = (await get_product(client, tenant, product["id"]))["nft"]
                    if nft["status"] == "created":
                        break
                    await asyncio.sleep(0.2)
                assert nft["status"] == "created" and nft["collection_id"] is not None


class TestTransferCrashSafety:
    async def test_a_worker_killed_after_a_transfer_does_not_transfer_again(
        self, chain_client, chain_app, tenant, devchain, database, worker, gateway
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, is_transferable=True)
        ada, bob = await create_users(chain_client, tenant, 2)
        [item] = await issue_items(chain_client, tenant, product["id"], ada["id"])
        await worker.run_until_idle()
        await chain_client.post(
            f"/v1/products/{product['id']}/transfer",
            headers=tenant.w,
            json={
                "product_item_id": item["id"],
                "sender_email": ada["email"],
                "recipient_email": bob["email"],
            },
        )
        chains = chain_app.state.chains
        # The project wallet funds Ada's custodial wallet (submit), then her transfer is
        # submitted with the other holders' (submit_many: hers alone here).
        with crashing(chains, gateway, "submit_many"):
            with pytest.raises(Crash):
                await worker.run_one()
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        bob_key = public_key(bob["wallets"][0]["address"])
        assert await landed(lambda: gateway.item_owner(collection_id, 1) == bob_key)
        ada_balance = gateway.balance(public_key(ada["wallets"][0]["address"])).free

        await _expire_leases(database)
        assert await worker.run_until_idle() == 1
        assert gateway.item_owner(collection_id, 1) == bob_key
        # Neither sponsored nor signed again: Ada's balance did not move.
        assert gateway.balance(public_key(ada["wallets"][0]["address"])).free == ada_balance
        [done] = await items_of(database, product["id"])
        assert done.nft_transfer_status == "transferred"


class TestWalletsUsersHold:
    """A user links a wallet they hold and makes it the receiving wallet: mints and transfers
    in land there on the real runtime; Tessera never tries to move an NFT out of it."""

    async def test_mints_go_to_the_receiving_wallet_and_stay_there(
        self, chain_client, tenant, devchain, worker, gateway, database
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, is_transferable=True)
        ada, bob = await create_users(chain_client, tenant, 2)
        keypair, wallet = await link_receiving(chain_client, tenant, ada)
        [item] = await issue_items(chain_client, tenant, product["id"], ada["id"])
        assert await worker.run_until_idle() == 2  # the collection, the mint
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        assert gateway.item_owner(collection_id, 1) == keypair.public_key

        before = await row_counts(database)
        moved = await transfer_item(chain_client, tenant, product["id"], item["id"], ada, bob)
        assert moved.status_code == 409
        assert moved.json()["message"] == (
            f"the NFT of this item sits in {wallet['address']}, a wallet its owner holds: "
            "Tessera cannot move it; the owner transfers it on chain"
        )
        unlinked = await chain_client.delete(f"/v1/users/wallets/{wallet['id']}", headers=tenant.w)
        assert unlinked.status_code == 409
        assert await row_counts(database) == before
        assert gateway.item_owner(collection_id, 1) == keypair.public_key

    async def test_a_transfer_in_lands_in_the_recipients_receiving_wallet(
        self, chain_client, tenant, devchain, worker, gateway
    ):
        await funded(chain_client, tenant, devchain)
        product = await nft_product(chain_client, tenant, is_transferable=True)
        ada, bob = await create_users(chain_client, tenant, 2)
        [item] = await issue_items(chain_client, tenant, product["id"], ada["id"])
        await worker.run_until_idle()
        keypair, _ = await link_receiving(chain_client, tenant, bob)
        moved = await transfer_item(chain_client, tenant, product["id"], item["id"], ada, bob)
        assert moved.status_code == 200, moved.text
        assert await worker.run_until_idle() == 1
        collection_id = (await get_product(chain_client, tenant, product["id"]))["nft"][
            "collection_id"
        ]
        assert gateway.item_owner(collection_id, 1) == keypair.public_key
