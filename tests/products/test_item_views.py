"""The read-only views of a product's items: the items (by owner), one item, and an item's
transfers."""

import uuid

import pytest
from sqlalchemy import select

from tessera.models import ItemTransfer
from tests import orm
from tests.factories import create_product, create_users, issue_items, transfer_item
from tests.products.test_items import owner

ITEM_KEY_ERROR = (
    "item_id: must be an item_id (an integer from 1 to 9007199254740992) or the item's id"
)


class TestListProductItems:
    async def test_needs_a_credential(self, client, tenant):
        product = await create_product(client, tenant)
        assert (await client.get(f"/v1/products/{product['id']}/items")).status_code == 401

    async def test_another_projects_product_is_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        [their_user] = await create_users(client, other, 1)
        await issue_items(client, other, theirs["id"], their_user["id"])
        for product_id in (theirs["id"], str(uuid.uuid4())):
            response = await client.get(f"/v1/products/{product_id}/items", headers=tenant.r)
            assert (response.status_code, response.json()) == (
                404,
                {"message": "product not found"},
            )

    @pytest.mark.parametrize(
        ("params", "error"),
        [
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"page": 1_000_001}, "page: Input should be less than or equal to 1000000"),
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
            ({"limit": "ten"}, "limit: Input should be a valid integer"),
            ({"owner_id": "not-a-uuid"}, "owner_id: Input should be a valid UUID"),
            ({"owner_email": "nobody"}, "owner_email: value is not a valid email address"),
            ({"owner": "x"}, "owner: unknown query parameter"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, params, error):
        product = await create_product(client, tenant)
        response = await client.get(
            f"/v1/products/{product['id']}/items", headers=tenant.r, params=params
        )
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error), message

    async def test_lists_the_items_by_item_id_with_owner_and_redemption_state(self, client, tenant):
        product = await create_product(client, tenant, redemption_quantity=2)
        other_product = await create_product(client, tenant)
        a, b = await create_users(client, tenant, 2)
        issued = await issue_items(client, tenant, product["id"], b["id"], a["id"], b["id"])
        await issue_items(client, tenant, other_product["id"], a["id"])
        redeemed = await client.post(
            f"/v1/products/{product['id']}/items/redeem",
            headers=tenant.w,
            json={"product_item_id": issued[1]["id"]},
        )
        assert redeemed.status_code == 200
        assert (redeemed.json()["redemption_count"], redeemed.json()["is_fully_redeemed"]) == (
            1,
            False,
        )

        response = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        assert response.status_code == 200
        assert response.json() == {
            "items": [issued[0], redeemed.json(), issued[2]],
            "pagination": {"page": 1, "limit": 20, "total": 3},
        }
        assert [i["item_id"] for i in issued] == [1, 2, 3]
        assert [i["user"] for i in issued] == [owner(b), owner(a), owner(b)]
        assert issued[0]["product"] == {
            "id": product["id"],
            "name": product["name"],
            "type": "admission",
            "redemption_quantity": 2,
        }
        assert issued[0]["nft"] is None

    async def test_pages(self, client, tenant):
        product = await create_product(client, tenant)
        [user] = await create_users(client, tenant, 1)
        issued = await issue_items(client, tenant, product["id"], *[user["id"]] * 5)
        path = f"/v1/products/{product['id']}/items"
        second = await client.get(path, headers=tenant.r, params={"page": 2, "limit": 2})
        assert second.json() == {
            "items": issued[2:4],
            "pagination": {"page": 2, "limit": 2, "total": 5},
        }
        last = await client.get(path, headers=tenant.r, params={"page": 3, "limit": 2})
        assert [i["item_id"] for i in last.json()["items"]] == [5]
        past = await client.get(path, headers=tenant.r, params={"page": 4, "limit": 2})
        assert past.json() == {"items": [], "pagination": {"page": 4, "limit": 2, "total": 5}}

    async def test_filters_by_the_current_owner_id_and_or_email(self, client, tenant, other):
        product = await create_product(client, tenant, is_transferable=True)
        a, b = await create_users(client, tenant, 2)
        issued = await issue_items(client, tenant, product["id"], a["id"], b["id"], a["id"])
        moved = await transfer_item(client, tenant, product["id"], issued[2]["id"], a, b)
        assert moved.status_code == 200
        # A user of another project with the same email owns nothing here.
        [twin] = await create_users(client, other, 1, email=b["email"])
        assert twin["email"] == b["email"]
        path = f"/v1/products/{product['id']}/items"

        async def listed(**params):
            response = await client.get(path, headers=tenant.r, params=params)
            assert response.status_code == 200, response.text
            body = response.json()
            return [i["item_id"] for i in body["items"]], body["pagination"]["total"]

        assert await listed(owner_id=a["id"]) == ([1], 1)
        assert await listed(owner_id=b["id"]) == ([2, 3], 2)
        assert await listed(owner_email=b["email"].upper()) == ([2, 3], 2)
        assert await listed(owner_id=b["id"], owner_email=b["email"]) == ([2, 3], 2)
        assert await listed(owner_id=b["id"], owner_email=a["email"]) == ([], 0)
        assert await listed(owner_id=twin["id"]) == ([], 0)
        assert await listed(owner_id=b["id"], page=2, limit=1) == ([3], 2)
        response = await client.get(path, headers=tenant.r, params={"owner_id": b["id"]})
        assert [i["user"] for i in response.json()["items"]] == [owner(b), owner(b)]


class TestGetProductItem:
    async def test_needs_a_credential(self, client, tenant):
        product = await create_product(client, tenant)
        assert (await client.get(f"/v1/products/{product['id']}/items/1")).status_code == 401

    async def test_another_projects_product_or_item_is_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        mine = await create_product(client, tenant)
        [their_user] = await create_users(client, other, 1)
        [user] = await create_users(client, tenant, 1)
        [their_item] = await issue_items(client, other, theirs["id"], their_user["id"])
        await issue_items(client, tenant, mine["id"], user["id"])
        product_gone = {"message": "product not found"}
        item_gone = {"message": "product item not found"}
        for path, body in (
            (f"{theirs['id']}/items/1", product_gone),
            (f"{theirs['id']}/items/{their_item['id']}", product_gone),
            (f"{uuid.uuid4()}/items/1", product_gone),
            (f"{mine['id']}/items/2", item_gone),
            (f"{mine['id']}/items/{their_item['id']}", item_gone),
            (f"{mine['id']}/items/{uuid.uuid4()}", item_gone),
        ):
            response = await client.get(f"/v1/products/{path}", headers=tenant.r)
            assert (response.status_code, response.json()) == (404, body), path

    @pytest.mark.parametrize("item_id", ["0", "-1", "9007199254740993", "abc"])
    async def test_a_key_that_is_neither_a_number_nor_an_id_is_400(self, client, tenant, item_id):
        product = await create_product(client, tenant)
        response = await client.get(
            f"/v1/products/{product['id']}/items/{item_id}", headers=tenant.r
        )
        assert (response.status_code, response.json()) == (400, {"errors": [ITEM_KEY_ERROR]})

    async def test_reads_the_item_by_number_or_id_as_the_list_shows_it(self, client, tenant):
        product = await create_product(client, tenant, is_transferable=True)
        a, b = await create_users(client, tenant, 2)
        issued = await issue_items(client, tenant, product["id"], a["id"], b["id"])
        moved = await transfer_item(client, tenant, product["id"], issued[0]["id"], a, b)
        assert moved.status_code == 200
        listed = await client.get(f"/v1/products/{product['id']}/items", headers=tenant.r)
        for item, key in zip(listed.json()["items"], ("1", issued[1]["id"]), strict=True):
            response = await client.get(
                f"/v1/products/{product['id']}/items/{key}", headers=tenant.r
            )
            assert (response.status_code, response.json()) == (200, item)
        first = await client.get(f"/v1/products/{product['id']}/items/1", headers=tenant.r)
        assert first.json()["user"] == owner(b)


async def _transfer_ids(database, item_id: str) -> list[str]:
    async with orm.session(database, write=False) as session:
        found = await session.scalars(
            select(ItemTransfer.id)
            .where(ItemTransfer.item_id == uuid.UUID(item_id))
            .order_by(ItemTransfer.created_at)
        )
        return [str(transfer_id) for transfer_id in found]


class TestItemTransfers:
    @staticmethod
    async def _moved(client, tenant):
        """Item 1 moved a -> b -> c, item 2 moved b -> a, item 3 never moved."""
        product = await create_product(client, tenant, is_transferable=True)
        a, b, c = await create_users(client, tenant, 3)
        items = await issue_items(client, tenant, product["id"], a["id"], b["id"], c["id"])
        moves = []
        for item, sender, recipient in ((0, a, b), (1, b, a), (0, b, c)):
            response = await transfer_item(
                client, tenant, product["id"], items[item]["id"], sender, recipient
            )
            assert response.status_code == 200, response.text
            moves.append(response.json())
        return product, items, (a, b, c), moves

    async def test_needs_a_credential(self, client, tenant):
        product = await create_product(client, tenant)
        response = await client.get(f"/v1/products/{product['id']}/items/1/transfers")
        assert response.status_code == 401

    async def test_another_projects_product_or_item_is_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        mine = await create_product(client, tenant)
        another = await create_product(client, tenant)
        [their_user] = await create_users(client, other, 1)
        [user] = await create_users(client, tenant, 1)
        [their_item] = await issue_items(client, other, theirs["id"], their_user["id"])
        [item] = await issue_items(client, tenant, mine["id"], user["id"])
        product_gone = {"message": "product not found"}
        item_gone = {"message": "product item not found"}
        for path, body in (
            (f"{theirs['id']}/items/1", product_gone),
            (f"{theirs['id']}/items/{their_item['id']}", product_gone),
            (f"{uuid.uuid4()}/items/1", product_gone),
            (f"{mine['id']}/items/2", item_gone),
            (f"{mine['id']}/items/{their_item['id']}", item_gone),
            (f"{mine['id']}/items/{uuid.uuid4()}", item_gone),
            (f"{another['id']}/items/1", item_gone),
            (f"{another['id']}/items/{item['id']}", item_gone),
        ):
            response = await client.get(f"/v1/products/{path}/transfers", headers=tenant.r)
            assert (response.status_code, response.json()) == (404, body), path

    @pytest.mark.parametrize(
        ("item_id", "params", "error"),
        [
            ("0", {}, ITEM_KEY_ERROR),
            ("-1", {}, ITEM_KEY_ERROR),
            ("9007199254740993", {}, ITEM_KEY_ERROR),
            ("abc", {}, ITEM_KEY_ERROR),
            ("1", {"page": 0}, "page: Input should be greater than or equal to 1"),
            ("1", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ("1", {"limit": 101}, "limit: Input should be less than or equal to 100"),
            ("1", {"since": 1}, "since: unknown query parameter"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, item_id, params, error):
        product = await create_product(client, tenant)
        response = await client.get(
            f"/v1/products/{product['id']}/items/{item_id}/transfers",
            headers=tenant.r,
            params=params,
        )
        assert (response.status_code, response.json()) == (400, {"errors": [error]})

    async def test_lists_an_items_transfers_oldest_first_by_item_id_or_id(
        self, client, tenant, database
    ):
        product, items, (a, b, c), moves = await self._moved(client, tenant)
        first, second = await _transfer_ids(database, items[0]["id"])
        expected = {
            "transfers": [
                {
                    "id": first,
                    "from_user": owner(a),
                    "to_user": owner(b),
                    "transferred_at": moves[0]["transferred_at"],
                    "source": "api",
                },
                {
                    "id": second,
                    "from_user": owner(b),
                    "to_user": owner(c),
                    "transferred_at": moves[2]["transferred_at"],
                    "source": "api",
                },
            ],
            "pagination": {"page": 1, "limit": 20, "total": 2},
        }
        for key in ("1", items[0]["id"], items[0]["id"].upper()):
            response = await client.get(
                f"/v1/products/{product['id']}/items/{key}/transfers", headers=tenant.r
            )
            assert response.status_code == 200
            assert response.json() == expected, key

    async def test_pages_and_an_item_never_moved(self, client, tenant, database):
        product, items, (a, b, c), moves = await self._moved(client, tenant)
        path = f"/v1/products/{product['id']}/items"
        second = await client.get(
            f"{path}/1/transfers", headers=tenant.r, params={"page": 2, "limit": 1}
        )
        assert second.json() == {
            "transfers": [
                {
                    "id": (await _transfer_ids(database, items[0]["id"]))[1],
                    "from_user": owner(b),
                    "to_user": owner(c),
                    "transferred_at": moves[2]["transferred_at"],
                    "source": "api",
                }
            ],
            "pagination": {"page": 2, "limit": 1, "total": 2},
        }
        [back] = await _transfer_ids(database, items[1]["id"])
        response = await client.get(f"{path}/{items[1]['id']}/transfers", headers=tenant.r)
        assert response.json()["transfers"] == [
            {
                "id": back,
                "from_user": owner(b),
                "to_user": owner(a),
                "transferred_at": moves[1]["transferred_at"],
                "source": "api",
            }
        ]
        never = await client.get(f"{path}/3/transfers", headers=tenant.r)
        assert never.json() == {"transfers": [], "pagination": {"page": 1, "limit": 20, "total": 0}}
