import uuid

import pytest

from tests.factories import (
    create_product,
    create_user,
    create_users,
    issue_items,
    row_counts,
)

ITEM_KEYS = {
    "id",
    "created_at",
    "updated_at",
    "product_id",
    "item_id",
    "redemption_count",
    "redemption_quantity",
    "is_fully_redeemed",
    "redeemed_at",
    "user",
    "product",
    "nft",
}


def owner(user: dict) -> dict:
    return {
        "id": user["id"],
        "email": user["email"],
        "first_name": user["firstName"],
        "last_name": user["lastName"],
    }


class TestIssueItems:
    async def test_needs_write(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        path, body = f"/v1/products/{product['id']}/items", {"users": [user["id"]]}
        assert (await client.post(path, json=body)).status_code == 401
        assert (await client.post(path, headers=tenant.r, json=body)).status_code == 403

    async def test_issues_sequential_items_by_id_and_email(self, client, tenant):
        product = await create_product(client, tenant, redemption_quantity=2)
        a, b = await create_users(client, tenant, 2)
        response = await client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"product_id": product["id"], "users": [a["id"]], "emails": [b["email"].upper()]},
        )
        assert response.status_code == 201
        items = response.json()["items"]
        assert [set(i) for i in items] == [ITEM_KEYS, ITEM_KEYS]
        assert [i["item_id"] for i in items] == [1, 2]
        assert [i["user"] for i in items] == [owner(a), owner(b)]
        assert items[0]["product"] == {
            "id": product["id"],
            "name": product["name"],
            "type": product["type"],
            "redemption_quantity": 2,
        }
        assert (
            items[0]["redemption_count"],
            items[0]["redemption_quantity"],
            items[0]["is_fully_redeemed"],
            items[0]["redeemed_at"],
        ) == (0, 2, False, None)
        more = await issue_items(client, tenant, product["id"], a["id"])
        assert [i["item_id"] for i in more] == [3]

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({}, "at least one of users or emails is required"),
            ({"users": [], "emails": []}, "at least one of users or emails is required"),
            ({"users": ["nope"]}, "users.0: Input should be a valid UUID"),
            ({"emails": ["nope"]}, "emails.0: value is not a valid email address"),
            ({"users": [str(uuid.uuid4())] * 551}, "users: List should have at most 550 items"),
            (
                {"users": [str(uuid.uuid4())] * 300, "emails": ["a@example.com"] * 251},
                "at most 550 recipients in all (users + emails), got 551",
            ),
            ({"users": "x"}, "users: Input should be a valid list"),
        ],
    )
    async def test_invalid_is_400(self, client, tenant, body, error):
        product = await create_product(client, tenant)
        response = await client.post(
            f"/v1/products/{product['id']}/items", headers=tenant.w, json=body
        )
        assert response.status_code == 400
        assert any(e.startswith(error) for e in response.json()["errors"]), response.json()

    async def test_mismatched_product_id_is_400(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        response = await client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"product_id": str(uuid.uuid4()), "users": [user["id"]]},
        )
        assert response.status_code == 400
        assert response.json() == {"errors": ["product_id: does not match the product in the path"]}

    async def test_other_projects_product_or_users_are_404_and_issue_nothing(
        self, client, tenant, other
    ):
        product = await create_product(client, tenant)
        theirs = await create_product(client, other)
        mine = await create_user(client, tenant)
        their_user = await create_user(client, other)
        response = await client.post(
            f"/v1/products/{theirs['id']}/items", headers=tenant.w, json={"users": [mine["id"]]}
        )
        assert response.status_code == 404 and response.json() == {"message": "product not found"}
        response = await client.post(  # both unknown: the product's 404 comes first
            f"/v1/products/{theirs['id']}/items",
            headers=tenant.w,
            json={"users": [their_user["id"]]},
        )
        assert response.status_code == 404 and response.json() == {"message": "product not found"}
        response = await client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"users": [mine["id"], their_user["id"]]},
        )
        assert response.status_code == 404
        assert response.json() == {
            "message": f"users not found in this project: {their_user['id']}"
        }
        assert [
            i["item_id"] for i in await issue_items(client, tenant, product["id"], mine["id"])
        ] == [1]

    @pytest.mark.parametrize(
        ("product", "held", "request_count", "message"),
        [
            ({"active": False}, 0, 1, "product is not active"),
            ({"stock": 2}, 1, 2, "product is out of stock: 1 left, 2 requested"),
            (
                {"max_per_account": 2},
                2,
                1,
                "max_per_account is 2: {email} holds 2 and would hold 3",
            ),
            (
                {"max_per_account": 2},
                0,
                3,
                "max_per_account is 2: {email} holds 0 and would hold 3",
            ),
            ({"min_rep_balance": 1}, 0, 1, "min_rep_balance is 1: {email} has 0"),
        ],
    )
    async def test_issuing_rules_are_409_and_all_or_nothing(
        self, client, tenant, database, product, held, request_count, message
    ):
        created = await create_product(client, tenant, **product)
        user = await create_user(client, tenant)
        if held:
            await issue_items(client, tenant, created["id"], *[user["id"]] * held)
        before = await row_counts(database)
        response = await client.post(
            f"/v1/products/{created['id']}/items",
            headers=tenant.w,
            json={"users": [user["id"]] * request_count},
        )
        assert response.status_code == 409
        assert response.json() == {"message": message.format(email=user["email"])}
        assert await row_counts(database) == before

    async def test_reputation_unlocks_the_product(self, client, tenant):
        product = await create_product(client, tenant, min_rep_balance=2)
        user = await create_user(client, tenant)
        await client.post(
            "/v1/users/reputation",
            headers=tenant.w,
            json={"id": user["id"], "delta": 2, "reason": "regular"},
        )
        assert len(await issue_items(client, tenant, product["id"], user["id"])) == 1


class TestRedeem:
    async def _item(self, client, tenant, **product):
        created = await create_product(client, tenant, **product)
        user = await create_user(client, tenant)
        [item] = await issue_items(client, tenant, created["id"], user["id"])
        return created, item

    async def test_needs_write(self, client, tenant):
        product, item = await self._item(client, tenant)
        path, body = f"/v1/products/{product['id']}/items/redeem", {"product_item_id": item["id"]}
        assert (await client.post(path, json=body)).status_code == 401
        assert (await client.post(path, headers=tenant.r, json=body)).status_code == 403

    async def test_multi_use_until_fully_redeemed(self, client, tenant):
        product, item = await self._item(client, tenant, redemption_quantity=2)
        path = f"/v1/products/{product['id']}/items/redeem"
        first = await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        assert first.status_code == 200
        assert set(first.json()) == ITEM_KEYS
        assert (first.json()["redemption_count"], first.json()["is_fully_redeemed"]) == (1, False)
        assert isinstance(first.json()["redeemed_at"], int)
        second = await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        assert (second.json()["redemption_count"], second.json()["is_fully_redeemed"]) == (2, True)
        third = await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        assert third.status_code == 409 and third.json() == {
            "message": "product item is fully redeemed"
        }

    async def test_same_nonce_counts_once_and_returns_the_same_result(self, client, tenant):
        product, item = await self._item(client, tenant, redemption_quantity=3)
        path = f"/v1/products/{product['id']}/items/redeem"
        body = {"product_item_id": item["id"], "nonce": "scan-1"}
        first = await client.post(path, headers=tenant.w, json=body)
        await client.post(
            path, headers=tenant.w, json={"product_item_id": item["id"], "nonce": "scan-2"}
        )
        replay = await client.post(path, headers=tenant.w, json=body)
        assert replay.status_code == 200 and replay.json() == first.json() | {
            "updated_at": replay.json()["updated_at"]
        }
        assert replay.json()["redemption_count"] == 1
        third = await client.post(path, headers=tenant.w, json={"product_item_id": item["id"]})
        assert third.json()["redemption_count"] == 3

    async def test_rules(self, client, tenant, other):
        product, item = await self._item(client, tenant)
        their_product, their_item = await self._item(client, other)
        elsewhere = await create_product(client, tenant)
        cases = [
            (product["id"], {}, 400, {"errors": ["product_item_id: field required"]}),
            (product["id"], {"product_item_id": "x"}, 400, None),
            (product["id"], {"product_item_id": item["id"], "nonce": ""}, 400, None),
            (product["id"], {"product_item_id": item["id"], "nonce": "n" * 129}, 400, None),
            (
                their_product["id"],
                {"product_item_id": their_item["id"]},
                404,
                {"message": "product not found"},
            ),
            (
                product["id"],
                {"product_item_id": their_item["id"]},
                404,
                {"message": "product item not found"},
            ),
            (
                elsewhere["id"],
                {"product_item_id": item["id"]},
                404,
                {"message": "product item not found"},
            ),
        ]
        for product_id, body, status, expected in cases:
            response = await client.post(
                f"/v1/products/{product_id}/items/redeem", headers=tenant.w, json=body
            )
            assert response.status_code == status, body
            if expected is not None:
                assert response.json() == expected
