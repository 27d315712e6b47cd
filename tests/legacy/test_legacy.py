"""Mufi's older calls: thin aliases with the older shapes, marked deprecated in the OpenAPI."""

import pytest

from tests.factories import create_event, create_product, create_user, issue_items, row_counts

LEGACY = [
    ("post", "/v1/products/create"),
    ("post", "/v1/products/items/create"),
    ("post", "/v1/products/items/redeem"),
    ("post", "/v1/user"),
]


async def test_the_older_calls_are_deprecated_in_the_openapi(client):
    spec = (await client.get("/openapi.json")).json()
    for method, path in LEGACY:
        assert spec["paths"][path][method]["deprecated"] is True, path


class TestLegacyProductCreate:
    async def test_redeemable_item_is_created_as_perks(self, client, tenant):
        event = await create_event(client, tenant)
        response = await client.post(
            "/v1/products/create",
            headers=tenant.w,
            json={"type": "redeemable_item", "name": "Voucher", "event_id": event["id"]},
        )
        assert response.status_code == 201, response.text
        created = response.json()
        assert (created["type"], created["name"], created["event"]["id"]) == (
            "redeemable_item",
            "Voucher",
            event["id"],
        )
        assert {"id", "created_at", "updated_at", "event_id"} <= set(created)
        today = await client.get(f"/v1/products/{created['id']}", headers=tenant.r)
        assert today.json()["type"] == "perks" and today.json()["redemption_quantity"] == 1

    async def test_blank_event_is_a_general_product(self, client, tenant):
        response = await client.post(
            "/v1/products/create",
            headers=tenant.w,
            json={"type": "redeemable_item", "name": "General", "event_id": ""},
        )
        assert response.status_code == 201 and response.json()["event"] is None

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"type": "admission", "name": "A"}, "type: "),
            ({"type": "redeemable_item"}, "name: "),
            ({"type": "redeemable_item", "name": "A", "price": "1"}, "price: "),
            ({"type": "redeemable_item", "name": "A", "mint_nft": True}, "metadata_uri: "),
        ],
    )
    async def test_bad_bodies_are_400_and_change_nothing(
        self, client, database, tenant, body, error
    ):
        before = await row_counts(database)
        response = await client.post("/v1/products/create", headers=tenant.w, json=body)
        assert response.status_code == 400, response.text
        assert any(e.startswith(error) for e in response.json()["errors"]), response.json()
        assert await row_counts(database) == before

    async def test_another_projects_event_is_404(self, client, tenant, other):
        theirs = await create_event(client, other)
        response = await client.post(
            "/v1/products/create",
            headers=tenant.w,
            json={"type": "redeemable_item", "name": "A", "event_id": theirs["id"]},
        )
        assert (response.status_code, response.json()) == (404, {"message": "event not found"})


class TestLegacyItems:
    async def test_create_then_redeem(self, client, tenant):
        product = await create_product(client, tenant, type="perks")
        user = await create_user(client, tenant)
        created = await client.post(
            "/v1/products/items/create",
            headers=tenant.w,
            json={"product_id": product["id"], "users": [user["id"]]},
        )
        assert created.status_code == 201, created.text
        [item] = created.json()["items"]
        assert set(item) == {
            "id",
            "created_at",
            "updated_at",
            "product_id",
            "item_id",
            "user_id",
            "redeemed_at",
        }
        assert (item["product_id"], item["user_id"], item["item_id"], item["redeemed_at"]) == (
            product["id"],
            user["id"],
            1,
            None,
        )
        redeemed = await client.post(
            "/v1/products/items/redeem", headers=tenant.w, json={"product_item_id": item["id"]}
        )
        assert redeemed.status_code == 200, redeemed.text
        assert redeemed.json()["id"] == item["id"] and redeemed.json()["redeemed_at"] > 0
        again = await client.post(
            "/v1/products/items/redeem", headers=tenant.w, json={"product_item_id": item["id"]}
        )
        assert again.status_code == 409 and set(again.json()) == {"message"}

    @pytest.mark.parametrize(
        "body",
        [{"users": []}, {"users": ["not-a-uuid"]}, {}, {"users": ["x"] * 551}],
    )
    async def test_bad_item_bodies_are_400(self, client, database, tenant, body):
        product = await create_product(client, tenant)
        before = await row_counts(database)
        response = await client.post(
            "/v1/products/items/create",
            headers=tenant.w,
            json={"product_id": product["id"]} | body,
        )
        assert response.status_code == 400 and response.json()["errors"]
        assert await row_counts(database) == before

    async def test_another_projects_product_user_and_item_are_404(self, client, tenant, other):
        theirs = await create_product(client, other)
        their_user = await create_user(client, other)
        [their_item] = await issue_items(client, other, theirs["id"], their_user["id"])
        mine = await create_product(client, tenant)
        my_user = await create_user(client, tenant)
        cases = [
            ("/v1/products/items/create", {"product_id": theirs["id"], "users": [my_user["id"]]}),
            ("/v1/products/items/create", {"product_id": mine["id"], "users": [their_user["id"]]}),
            ("/v1/products/items/redeem", {"product_item_id": their_item["id"]}),
        ]
        for path, body in cases:
            response = await client.post(path, headers=tenant.w, json=body)
            assert response.status_code == 404, (path, response.text)
            assert set(response.json()) == {"message"}


class TestLegacyUser:
    async def test_creates_one_user_with_a_custodial_wallet(self, client, tenant):
        response = await client.post(
            "/v1/user",
            headers=tenant.w,
            json={"firstName": "Ada", "lastName": "Lovelace", "email": "Ada@Example.com"},
        )
        assert response.status_code == 201, response.text
        user = response.json()
        assert set(user) == {"id", "firstName", "lastName", "email", "wallets"}
        assert (user["firstName"], user["lastName"], user["email"]) == (
            "Ada",
            "Lovelace",
            "ada@example.com",
        )
        [wallet] = user["wallets"]
        assert (wallet["type"], wallet["custody"]) == ("Polkadot", "custodial")
        profile = await client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
        assert profile.json()["wallets"][0]["address"] == wallet["address"]

    async def test_reference_id_is_shown_when_given(self, client, tenant):
        body = {"firstName": "A", "lastName": "B", "email": "r@example.com", "referenceId": "r-1"}
        response = await client.post("/v1/user", headers=tenant.w, json=body)
        assert response.status_code == 201 and response.json()["referenceId"] == "r-1"

    async def test_missing_names_duplicates_and_unknown_fields_are_refused(
        self, client, database, tenant
    ):
        before = await row_counts(database)
        for body in (
            {"firstName": "A", "email": "x@example.com"},
            {"firstName": "A", "lastName": "B", "email": "not-an-email"},
            {"firstName": "A", "lastName": "B", "email": "x@example.com", "age": 3},
        ):
            response = await client.post("/v1/user", headers=tenant.w, json=body)
            assert response.status_code == 400 and response.json()["errors"], body
        assert await row_counts(database) == before
        body = {"firstName": "A", "lastName": "B", "email": "dup@example.com"}
        assert (await client.post("/v1/user", headers=tenant.w, json=body)).status_code == 201
        again = await client.post("/v1/user", headers=tenant.w, json=body)
        assert again.status_code == 409 and set(again.json()) == {"message"}


async def test_other_methods_of_an_older_path_are_405_not_another_route(client, tenant):
    response = await client.get("/v1/products/create", headers=tenant.r)
    assert (response.status_code, response.headers["allow"]) == (405, "POST")
    assert set(response.json()) == {"message"}
