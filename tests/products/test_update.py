"""PATCH /v1/products/{id}: the fields sent change, under the product's row lock."""

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime

import pytest
from scalecodec.utils.ss58 import ss58_decode
from sqlalchemy import select, update

from tessera.chain.registry import Chains
from tessera.models import Job, Product, Redemption
from tests import orm
from tests.factories import (
    create_event,
    create_product,
    create_user,
    create_users,
    issue_items,
    items_of,
    row_counts,
    transfer_item,
)
from tests.jobs.memory_chain import DOT, MemoryChain

METADATA = "https://meta.example/ticket.json"
NFT = {"mint_nft": True, "metadata_uri": METADATA, "chain": "WestendAssetHub"}
# Every field a PATCH takes, each with another value than create_product's (mint_nft aside:
# switching it on has rules of its own, below).
EVERY_FIELD = {
    "name": "Renamed",
    "description": "Changed",
    "price": "12.50",
    "active": False,
    "is_claimable": True,
    "is_transferable": True,
    "stock": 5,
    "max_per_account": 2,
    "redemption_quantity": 3,
    "min_rep_balance": 4,
    "mint_nft": False,
    "chain": "AssetHub",
    "metadata_uri": "ipfs://bafy/meta.json",
    "max_items": 7,
}
NOT_NULLABLE = [
    "name",
    "price",
    "active",
    "is_claimable",
    "is_transferable",
    "redemption_quantity",
    "min_rep_balance",
    "mint_nft",
]


async def patch(client, tenant, product_id: str, body: dict, headers=None):
    return await client.patch(
        f"/v1/products/{product_id}", headers=tenant.w if headers is None else headers, json=body
    )


async def get(client, tenant, product_id: str) -> dict:
    response = await client.get(f"/v1/products/{product_id}", headers=tenant.r)
    assert response.status_code == 200
    return response.json()


async def issue(client, tenant, product_id: str, user: dict):
    """One item to ``user``, refused or not."""
    return await client.post(
        f"/v1/products/{product_id}/items", headers=tenant.w, json={"users": [user["id"]]}
    )


async def redeem(client, tenant, product_id: str, item_id: str):
    return await client.post(
        f"/v1/products/{product_id}/items/redeem",
        headers=tenant.w,
        json={"product_item_id": item_id},
    )


async def stored(database, product_id: str) -> Product:
    async with orm.session(database, write=False) as session:
        product = await session.get(Product, uuid.UUID(product_id))
        assert product is not None
        return product


async def collection_jobs(database) -> list[Job]:
    async with orm.session(database, write=False) as session:
        return list(await session.scalars(select(Job).where(Job.kind == "nft.create_collection")))


async def set_quantity(client, tenant, product_id: str, quantity: int) -> None:
    response = await patch(client, tenant, product_id, {"redemption_quantity": quantity})
    assert response.status_code == 200, response.text


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.fixture
def chain(app) -> Iterator[MemoryChain]:
    """WestendAssetHub (configured in the tests' settings) as an in-memory chain."""
    memory = MemoryChain()
    configured = app.state.chains
    app.state.chains = Chains(app.state.settings, connect=lambda url, timeout: memory)
    yield memory
    app.state.chains = configured


async def fund(client, tenant, chain: MemoryChain, amount: int = 100 * DOT) -> str:
    """Give the project wallet ``amount``; its address."""
    [wallet] = (await client.get("/v1/projects/wallets", headers=tenant.r)).json()
    chain.fund(bytes.fromhex(ss58_decode(wallet["address"])), amount)
    return wallet["address"]


class TestUpdateProduct:
    async def test_needs_write(self, client, tenant):
        product = await create_product(client, tenant)
        path = f"/v1/products/{product['id']}"
        for body in ({"name": "New"}, {"name": None}):  # the credential is checked first
            response = await client.patch(path, json=body)
            assert response.status_code == 401
            response = await patch(client, tenant, product["id"], body, headers=tenant.r)
            assert response.status_code == 403
            assert response.json() == {
                "message": "this credential is read-only; a write credential is required"
            }
        assert await get(client, tenant, product["id"]) == product

    async def test_another_projects_product_or_event_is_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        mine = await create_product(client, tenant)
        their_event = await create_event(client, other)
        for product_id in (theirs["id"], str(uuid.uuid4())):
            response = await patch(client, tenant, product_id, {"name": "Mine now"})
            assert response.status_code == 404
            assert response.json() == {"message": "product not found"}
        response = await patch(client, tenant, mine["id"], {"event_id": their_event["id"]})
        assert response.status_code == 404 and response.json() == {"message": "event not found"}
        assert await get(client, other, theirs["id"]) == theirs
        assert await get(client, tenant, mine["id"]) == mine

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"name": ""}, "name: String should have at least 1 character"),
            ({"name": "x" * 256}, "name: String should have at most 255 characters"),
            ({"description": ""}, "description: String should have at least 1 character"),
            (
                {"price": "12.345"},
                "price: String should match pattern '^[0-9]{1,12}(\\.[0-9]{1,2})?$'",
            ),
            ({"price": 12}, "price: Input should be a valid string"),
            ({"stock": 0}, "stock: Input should be greater than or equal to 1"),
            ({"stock": 1.5}, "stock: Input should be a valid integer"),
            (
                {"redemption_quantity": 0},
                "redemption_quantity: Input should be greater than or equal to 1",
            ),
            ({"max_per_account": 0}, "max_per_account: Input should be greater than or equal to 1"),
            ({"max_items": 0}, "max_items: Input should be greater than or equal to 1"),
            (
                {"min_rep_balance": -1},
                "min_rep_balance: Input should be greater than or equal to 0",
            ),
            ({"active": "yes"}, "active: Input should be a valid boolean"),
            (
                {"metadata_uri": "not a uri"},
                "metadata_uri: String should match pattern '^[a-zA-Z][a-zA-Z0-9+.-]*://[!-~]+$'",
            ),
            ({"chain": "Ethereum"}, "chain: Input should be 'AssetHub' or 'WestendAssetHub'"),
            (
                {"event_id": "not-a-uuid"},
                "event_id: Input should be a valid UUID, invalid character: found `n` at 0",
            ),
            ({"type": "perks"}, "type: unknown field"),
            ({"is_transferrable": True}, "is_transferrable: unknown field"),
        ]
        + [({name: None}, f"{name}: may not be null") for name in NOT_NULLABLE],
    )
    async def test_bounds_are_400(self, client, tenant, body, error):
        product = await create_product(client, tenant)
        response = await patch(client, tenant, product["id"], body)
        assert response.status_code == 400 and response.json() == {"errors": [error]}
        assert await get(client, tenant, product["id"]) == product

    async def test_every_problem_is_listed(self, client, tenant):
        product = await create_product(client, tenant)
        response = await patch(client, tenant, product["id"], {"name": None, "stock": 0})
        assert response.status_code == 400
        assert response.json() == {
            "errors": [
                "name: may not be null",
                "stock: Input should be greater than or equal to 1",
            ]
        }

    async def test_every_field_changes(self, client, tenant):
        first, second = await create_event(client, tenant), await create_event(client, tenant)
        product = await create_product(client, tenant, event_id=first["id"])
        body = EVERY_FIELD | {"event_id": second["id"]}
        response = await patch(client, tenant, product["id"], body)
        assert response.status_code == 200
        updated = response.json()
        assert updated == product | body | {"event": second, "updated_at": updated["updated_at"]}
        assert moment(updated["updated_at"]) > moment(product["updated_at"])
        assert await get(client, tenant, product["id"]) == updated

    async def test_only_the_fields_sent_change(self, client, tenant):
        product = await create_product(client, tenant, stock=10, price="3")
        response = await patch(client, tenant, product["id"], {"price": "4.50"})
        assert response.status_code == 200
        updated = response.json()
        assert updated == product | {"price": "4.50", "updated_at": updated["updated_at"]}
        assert moment(updated["updated_at"]) > moment(product["updated_at"])

    async def test_null_or_blank_clears_what_may_be_empty(self, client, tenant):
        event = await create_event(client, tenant)
        product = await create_product(
            client,
            tenant,
            event_id=event["id"],
            stock=3,
            max_per_account=1,
            metadata_uri=METADATA,
            chain="AssetHub",
            max_items=3,
        )
        cleared = {
            "description": None,
            "event_id": None,
            "stock": None,
            "max_per_account": None,
            "metadata_uri": None,
            "chain": None,
            "max_items": None,
        }
        response = await patch(client, tenant, product["id"], cleared)
        assert response.status_code == 200
        assert response.json() == product | cleared | {
            "event": None,
            "updated_at": response.json()["updated_at"],
        }
        again = await create_product(client, tenant, event_id=event["id"], stock=3, max_items=3)
        blank = {"event_id": "", "stock": "", "max_per_account": "", "max_items": ""}
        response = await patch(client, tenant, again["id"], blank)
        assert response.status_code == 200
        assert response.json() == again | dict.fromkeys([*blank, "event"]) | {
            "updated_at": response.json()["updated_at"]
        }

    async def test_an_empty_body_or_the_stored_values_change_nothing(self, client, tenant):
        event = await create_event(client, tenant)
        product = await create_product(client, tenant, event_id=event["id"], stock=4)
        response = await patch(client, tenant, product["id"], {})
        assert response.status_code == 200 and response.json() == product
        same = {k: product[k] for k in [*EVERY_FIELD, "event_id"]}
        response = await patch(client, tenant, product["id"], same)
        assert response.status_code == 200 and response.json() == product
        assert await get(client, tenant, product["id"]) == product

    async def test_an_inactive_product_issues_nothing(self, client, tenant, database):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        assert (await patch(client, tenant, product["id"], {"active": False})).status_code == 200
        response = await issue(client, tenant, product["id"], user)
        assert response.status_code == 409
        assert response.json() == {"message": "product is not active"}
        assert await items_of(database, product["id"]) == []
        assert (await patch(client, tenant, product["id"], {"active": True})).status_code == 200
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        assert item["item_id"] == 1

    async def test_is_transferable_switches_transfers(self, client, tenant):
        product = await create_product(client, tenant)
        sender, recipient = await create_users(client, tenant, 2)
        [item] = await issue_items(client, tenant, product["id"], sender["id"])
        refused = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert refused.status_code == 409
        assert refused.json() == {"message": "product items of this product are not transferable"}
        assert (
            await patch(client, tenant, product["id"], {"is_transferable": True})
        ).status_code == 200
        moved = await transfer_item(client, tenant, product["id"], item["id"], sender, recipient)
        assert moved.status_code == 200 and moved.json()["new_owner"]["id"] == recipient["id"]
        assert (
            await patch(client, tenant, product["id"], {"is_transferable": False})
        ).status_code == 200
        back = await transfer_item(client, tenant, product["id"], item["id"], recipient, sender)
        assert back.status_code == 409
        assert back.json() == {"message": "product items of this product are not transferable"}


class TestUpdateRules:
    async def test_stock_cannot_go_below_the_items_issued(self, client, tenant, database):
        product = await create_product(client, tenant, stock=5)
        users = await create_users(client, tenant, 4)
        await issue_items(client, tenant, product["id"], *[u["id"] for u in users[:3]])
        response = await patch(client, tenant, product["id"], {"stock": 2, "name": "Less"})
        assert response.status_code == 409
        assert response.json() == {
            "message": "stock cannot be 2, below the items already issued (3)"
        }
        assert await get(client, tenant, product["id"]) == product
        response = await patch(client, tenant, product["id"], {"stock": 3})
        assert response.status_code == 200 and response.json()["stock"] == 3
        sold_out = await issue(client, tenant, product["id"], users[3])
        assert sold_out.status_code == 409
        assert sold_out.json() == {"message": "product is out of stock: 0 left, 1 requested"}
        response = await patch(client, tenant, product["id"], {"stock": None})
        assert response.status_code == 200 and response.json()["stock"] is None
        [item] = await issue_items(client, tenant, product["id"], users[3]["id"])
        assert item["item_id"] == 4
        assert (await stored(database, product["id"])).issued_count == 4

    async def test_redemption_quantity_cannot_go_below_a_redemption_count(self, client, tenant):
        product = await create_product(client, tenant, redemption_quantity=5)
        users = await create_users(client, tenant, 2)
        often, once = await issue_items(client, tenant, product["id"], *[u["id"] for u in users])
        for _ in range(3):
            assert (await redeem(client, tenant, product["id"], often["id"])).status_code == 200
        assert (await redeem(client, tenant, product["id"], once["id"])).status_code == 200
        for quantity in (2, 1):
            response = await patch(client, tenant, product["id"], {"redemption_quantity": quantity})
            assert response.status_code == 409
            assert response.json() == {
                "message": f"redemption_quantity cannot be {quantity}, below the "
                "redemption_count of an item already redeemed (3)"
            }
        assert await get(client, tenant, product["id"]) == product
        response = await patch(client, tenant, product["id"], {"redemption_quantity": 3})
        assert response.status_code == 200 and response.json()["redemption_quantity"] == 3
        full = await redeem(client, tenant, product["id"], often["id"])
        assert full.status_code == 409
        assert full.json() == {"message": "product item is fully redeemed"}
        again = await redeem(client, tenant, product["id"], once["id"])
        assert again.status_code == 200
        assert (again.json()["redemption_count"], again.json()["redemption_quantity"]) == (2, 3)

    async def test_nfts_cannot_be_switched_on_after_issuing(self, client, tenant, database, chain):
        await fund(client, tenant, chain)
        product = await create_product(client, tenant, metadata_uri=METADATA)
        user = await create_user(client, tenant)
        await issue_items(client, tenant, product["id"], user["id"])
        response = await patch(client, tenant, product["id"], NFT)
        assert response.status_code == 409
        assert response.json() == {
            "message": "mint_nft cannot be switched on: items were already issued without an "
            "NFT (1)"
        }
        assert await get(client, tenant, product["id"]) == product
        assert await collection_jobs(database) == []
        assert chain.calls == []


class TestNftSettings:
    async def nft_product(self, client, tenant, **extra) -> dict:
        product = await create_product(client, tenant, **NFT, **extra)
        assert product["nft"] == {
            "chain": "WestendAssetHub",
            "collection_id": None,
            "status": "queued",
        }
        return product

    @pytest.mark.parametrize(
        "body",
        [
            {"mint_nft": False},
            {"chain": "AssetHub"},
            {"chain": None},
            {"metadata_uri": "https://meta.example/other.json"},
            {"metadata_uri": None},
            {"max_items": 5},
            {"max_items": None},
        ],
    )
    async def test_are_fixed_once_the_collection_is_queued(self, client, tenant, chain, body):
        await fund(client, tenant, chain)
        product = await self.nft_product(client, tenant, max_items=10)
        response = await patch(client, tenant, product["id"], body | {"name": "Renamed"})
        assert response.status_code == 409
        [field] = body
        assert response.json() == {
            "message": f"{field} cannot change once the product's NFT collection exists or is "
            "queued (collection status: queued)"
        }
        assert await get(client, tenant, product["id"]) == product

    async def test_are_fixed_once_the_collection_exists(self, client, tenant, chain, database):
        await fund(client, tenant, chain)
        product = await self.nft_product(client, tenant)
        async with orm.session(database) as session:  # as the worker leaves it
            await session.execute(
                update(Product)
                .where(Product.id == uuid.UUID(product["id"]))
                .values(nft_status="created", nft_collection_id=7)
            )
            await session.commit()
        body = {"chain": "AssetHub", "max_items": 3, "metadata_uri": METADATA}
        response = await patch(client, tenant, product["id"], body)
        assert response.status_code == 409
        assert response.json() == {
            "message": "chain, max_items cannot change once the product's NFT collection exists "
            "or is queued (collection status: created)"
        }

    async def test_the_stored_values_are_no_change(self, client, tenant, chain, database):
        await fund(client, tenant, chain)
        product = await self.nft_product(client, tenant, max_items=10)
        jobs = await collection_jobs(database)
        whole = {k: product[k] for k in EVERY_FIELD} | {"name": "Renamed", "stock": 10}
        response = await patch(client, tenant, product["id"], whole)
        assert response.status_code == 200
        assert response.json() == product | {
            "name": "Renamed",
            "stock": 10,
            "updated_at": response.json()["updated_at"],
        }
        assert len(jobs) == 1
        assert [job.id for job in await collection_jobs(database)] == [jobs[0].id]

    async def test_switching_them_on_queues_the_collection(self, client, tenant, chain, database):
        await fund(client, tenant, chain)
        product = await create_product(client, tenant, metadata_uri=METADATA, max_items=3)
        response = await patch(client, tenant, product["id"], {"mint_nft": True, "chain": None})
        assert response.status_code == 400
        assert response.json() == {"errors": ["chain: required when mint_nft is true"]}
        response = await patch(
            client, tenant, product["id"], {"mint_nft": True, "chain": "WestendAssetHub"}
        )
        assert response.status_code == 200
        updated = response.json()
        assert updated == product | {
            "mint_nft": True,
            "chain": "WestendAssetHub",
            "nft": {"chain": "WestendAssetHub", "collection_id": None, "status": "queued"},
            "updated_at": updated["updated_at"],
        }
        assert await get(client, tenant, product["id"]) == updated
        [job] = await collection_jobs(database)
        assert (job.status, job.payload) == ("queued", {"product_id": product["id"]})
        assert (await stored(database, product["id"])).nft_status == "queued"
        assert chain.calls == []  # the worker creates it
        response = await patch(client, tenant, product["id"], {"max_items": 4})
        assert response.status_code == 409

    async def test_switching_them_on_needs_metadata_uri_and_chain(self, client, tenant, chain):
        await fund(client, tenant, chain)
        product = await create_product(client, tenant)
        response = await patch(client, tenant, product["id"], {"mint_nft": True})
        assert response.status_code == 400
        assert response.json() == {
            "errors": [
                "metadata_uri: required when mint_nft is true",
                "chain: required when mint_nft is true",
            ]
        }
        assert await get(client, tenant, product["id"]) == product

    async def test_switching_them_on_needs_a_configured_chain(self, client, tenant, database):
        product = await create_product(client, tenant, metadata_uri=METADATA)
        response = await patch(
            client, tenant, product["id"], {"mint_nft": True, "chain": "AssetHub"}
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": "chain AssetHub is not configured: set TESSERA_CHAIN_ASSETHUB_RPC_URL"
        }
        assert await get(client, tenant, product["id"]) == product
        assert await collection_jobs(database) == []

    async def test_switching_them_on_needs_a_reachable_chain(self, client, tenant, database):
        product = await create_product(client, tenant, metadata_uri=METADATA)
        before = await row_counts(database)
        response = await patch(
            client, tenant, product["id"], {"mint_nft": True, "chain": "WestendAssetHub"}
        )
        assert response.status_code == 503
        assert response.json()["message"].startswith("chain WestendAssetHub is unavailable")
        assert await get(client, tenant, product["id"]) == product
        assert await row_counts(database) == before

    async def test_switching_them_on_needs_a_wallet_that_can_pay(
        self, client, tenant, chain, database
    ):
        wallet = await fund(client, tenant, chain, DOT)
        product = await create_product(client, tenant, metadata_uri=METADATA)
        response = await patch(
            client, tenant, product["id"], {"mint_nft": True, "chain": "WestendAssetHub"}
        )
        assert response.status_code == 409
        assert response.json() == {
            "message": f"the project wallet {wallet} holds 0.01 WND on WestendAssetHub; creating "
            "the NFT collection needs 0.10011 WND (deposit 0.1 WND, fee 0.00001 WND, existential "
            "deposit 0.0001 WND)"
        }
        assert await get(client, tenant, product["id"]) == product
        assert await collection_jobs(database) == []


class TestConcurrentUpdates:
    """Updates racing the writes their rules read; on PostgreSQL each request has its own
    connection and transaction, on SQLite they queue for the write lock."""

    async def test_stock_never_drops_below_the_items_issued(self, client, tenant, database):
        product = await create_product(client, tenant, stock=30)
        users = await create_users(client, tenant, 30)
        await issue_items(client, tenant, product["id"], *[u["id"] for u in users[:10]])
        values = [10 + (7 * i) % 20 for i in range(20)]  # 10..29, shuffled
        calls = []
        for user, stock in zip(users[10:], values, strict=True):
            calls += [
                issue(client, tenant, product["id"], user),
                patch(client, tenant, product["id"], {"stock": stock}),
            ]
        responses = await asyncio.gather(*calls)
        issues, patches = responses[::2], responses[1::2]

        assert {r.status_code for r in issues} <= {201, 409}
        assert {r.status_code for r in patches} <= {200, 409}
        for response in issues:
            if response.status_code == 409:  # never a negative count left
                assert response.json() == {
                    "message": "product is out of stock: 0 left, 1 requested"
                }
        issued = 10 + sum(r.status_code == 201 for r in issues)
        items = await items_of(database, product["id"])
        assert [i.item_id for i in items] == list(range(1, issued + 1))
        row = await stored(database, product["id"])
        assert row.issued_count == issued and row.stock is not None and issued <= row.stock
        accepted = []
        for stock, response in zip(values, patches, strict=True):
            if response.status_code == 200:
                assert response.json()["stock"] == stock
                accepted.append(stock)
            else:
                message = response.json()["message"]
                prefix = f"stock cannot be {stock}, below the items already issued ("
                assert message.startswith(prefix), message
                assert stock < int(message.removeprefix(prefix).rstrip(")")) <= issued
        assert row.stock in (accepted or [30])

    async def test_redemption_quantity_never_drops_below_a_redemption(
        self, client, tenant, database
    ):
        """Each round, every product's one item may be redeemed once more, while its quantity
        is lowered to the item's count: exactly one of the two succeeds, never both."""
        products = [await create_product(client, tenant, redemption_quantity=2) for _ in range(10)]
        user = await create_user(client, tenant)
        items = [(await issue_items(client, tenant, p["id"], user["id"]))[0] for p in products]
        for product, item in zip(products, items, strict=True):
            assert (await redeem(client, tenant, product["id"], item["id"])).status_code == 200
        for count in range(1, 4):
            calls = []
            for n, (product, item) in enumerate(zip(products, items, strict=True)):
                pair = [
                    redeem(client, tenant, product["id"], item["id"]),
                    patch(client, tenant, product["id"], {"redemption_quantity": count}),
                ]
                calls += pair if n % 2 else pair[::-1]
            responses = await asyncio.gather(*calls)
            for n in range(len(products)):
                pair = responses[2 * n : 2 * n + 2]
                redeemed, patched = pair if n % 2 else pair[::-1]
                statuses = (redeemed.status_code, patched.status_code)
                assert statuses in {(200, 409), (409, 200)}, (count, statuses)
                if redeemed.status_code == 200:
                    assert redeemed.json()["redemption_count"] == count + 1
                    assert patched.json() == {
                        "message": f"redemption_quantity cannot be {count}, below the "
                        f"redemption_count of an item already redeemed ({count + 1})"
                    }
                else:
                    assert redeemed.json() == {"message": "product item is fully redeemed"}
            # The next round: every item redeemed count + 1 times, one redemption left.
            for product, item in zip(products, items, strict=True):
                [row] = await items_of(database, product["id"])
                if row.redemption_count == count:  # the update won
                    await set_quantity(client, tenant, product["id"], count + 1)
                    assert (
                        await redeem(client, tenant, product["id"], item["id"])
                    ).status_code == 200
                await set_quantity(client, tenant, product["id"], count + 2)
        for product in products:
            [row] = await items_of(database, product["id"])
            quantity = (await stored(database, product["id"])).redemption_quantity
            assert row.redemption_count == 4 and quantity == 5
        async with orm.session(database, write=False) as session:
            redemptions = list(await session.scalars(select(Redemption)))
        assert len(redemptions) == 40
