import uuid

import pytest

from tests.factories import create_order, create_product, create_user, row_counts


class TestCreateOrder:
    async def test_needs_write(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        body = {"user": {"id": user["id"]}, "items": [{"product_id": product["id"], "quantity": 1}]}
        assert (await client.post("/v1/orders", json=body)).status_code == 401
        assert (await client.post("/v1/orders", headers=tenant.r, json=body)).status_code == 403

    async def test_completed_order_issues_items_at_order_price(self, client, tenant):
        ticket = await create_product(client, tenant, price="25.00")
        perk = await create_product(client, tenant, price="2.5")
        user = await create_user(client, tenant)
        response = await create_order(
            client, tenant, user["id"], (ticket["id"], 2), (perk["id"], 1)
        )
        assert response.status_code == 201
        order = response.json()
        assert set(order) == {
            "id",
            "order_number",
            "status",
            "user_id",
            "total",
            "items",
            "product_items",
            "created_at",
            "updated_at",
        }
        assert order["status"] == "completed" and order["user_id"] == user["id"]
        assert order["order_number"].startswith("TS-") and order["total"] == 52.5
        assert [
            (i["product_id"], i["product_name"], i["quantity"], i["unit_price"])
            for i in order["items"]
        ] == [(ticket["id"], ticket["name"], 2, 25.0), (perk["id"], perk["name"], 1, 2.5)]
        issued = sorted((i["product_id"], i["item_id"]) for i in order["product_items"])
        assert issued == sorted([(ticket["id"], 1), (ticket["id"], 2), (perk["id"], 1)])
        fetched = await client.get(f"/v1/orders/{order['id']}", headers=tenant.r)
        assert fetched.status_code == 200
        assert {k: v for k, v in fetched.json().items() if k != "product_items"} == {
            k: v for k, v in order.items() if k != "product_items"
        }
        # The same items, each as created, listed by product and number.
        items = fetched.json()["product_items"]
        assert sorted(items, key=lambda i: i["id"]) == sorted(
            order["product_items"], key=lambda i: i["id"]
        )
        assert [(i["product_id"], i["item_id"]) for i in items] == issued

    async def test_user_by_email_or_reference(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        for ref in ({"email": user["email"]}, {"referenceId": user["referenceId"]}):
            response = await client.post(
                "/v1/orders",
                headers=tenant.w,
                json={"user": ref, "items": [{"product_id": product["id"], "quantity": 1}]},
            )
            assert response.status_code == 201 and response.json()["user_id"] == user["id"]

    async def test_completed_order_follows_the_issuing_rules_all_or_nothing(
        self, client, tenant, database
    ):
        plenty = await create_product(client, tenant)
        scarce = await create_product(client, tenant, stock=1)
        user = await create_user(client, tenant)
        before = await row_counts(database)
        response = await create_order(
            client, tenant, user["id"], (plenty["id"], 1), (scarce["id"], 2)
        )
        assert response.status_code == 409
        assert response.json() == {"message": "product is out of stock: 1 left, 2 requested"}
        sales = await client.get(f"/v1/products/{plenty['id']}/sales", headers=tenant.r)
        assert sales.json()["pagination"]["total"] == 0
        assert await row_counts(database) == before

    async def test_duplicate_order_number_is_409(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        assert (
            await create_order(client, tenant, user["id"], (product["id"], 1), order_number="A-1")
        ).status_code == 201
        response = await create_order(
            client, tenant, user["id"], (product["id"], 1), order_number="A-1"
        )
        assert (response.status_code, response.json()) == (
            409,
            {"message": "order_number already used: A-1"},
        )

    async def test_inactive_product_is_409(self, client, tenant):
        product = await create_product(client, tenant, active=False)
        user = await create_user(client, tenant)
        response = await create_order(
            client, tenant, user["id"], (product["id"], 1), status="pending"
        )
        assert (response.status_code, response.json()) == (
            409,
            {"message": f"product is not active: {product['id']}"},
        )

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            ({"items": []}, "items: List should have at least 1 item"),
            (
                {"items": [{"product_id": "P", "quantity": 0}]},
                "items.0.quantity: Input should be greater than or equal to 1",
            ),
            (
                {"items": [{"product_id": "P", "quantity": 551}]},
                "items.0.quantity: Input should be less than or equal to 550",
            ),
            (
                {
                    "items": [
                        {"product_id": "P", "quantity": 300},
                        {"product_id": "P", "quantity": 251},
                    ]
                },
                "items: at most 550 items per order, got 551",
            ),
            ({"status": "shipped"}, "status: Input should be 'completed' or 'pending'"),
            ({"user": {}}, "user: one of email, referenceId or id is required"),
            ({"order_number": "has space"}, "order_number: String should match pattern"),
        ],
    )
    async def test_invalid_is_400(self, client, tenant, body, error):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        base = {"user": {"id": user["id"]}, "items": [{"product_id": product["id"], "quantity": 1}]}
        if "items" in body:
            body = {"items": [i | {"product_id": product["id"]} for i in body["items"]]}
        response = await client.post("/v1/orders", headers=tenant.w, json=base | body)
        assert response.status_code == 400
        assert any(e.startswith(error) for e in response.json()["errors"]), response.json()

    async def test_other_projects_are_404(self, client, tenant, other):
        product = await create_product(client, tenant)
        theirs = await create_product(client, other)
        user = await create_user(client, tenant)
        their_user = await create_user(client, other)
        response = await create_order(client, tenant, their_user["id"], (product["id"], 1))
        assert (response.status_code, response.json()) == (404, {"message": "user not found"})
        response = await create_order(client, tenant, user["id"], (theirs["id"], 1))
        assert (response.status_code, response.json()) == (
            404,
            {"message": f"product not found: {theirs['id']}"},
        )
        their_order = (
            await create_order(client, other, their_user["id"], (theirs["id"], 1), status="pending")
        ).json()
        for path in (
            f"/v1/orders/{their_order['id']}/complete",
            f"/v1/orders/{their_order['id']}/cancel",
        ):
            assert (await client.post(path, headers=tenant.w)).status_code == 404
        assert (
            await client.get(f"/v1/orders/{their_order['id']}", headers=tenant.r)
        ).status_code == 404
        assert (await client.get(f"/v1/orders/{uuid.uuid4()}", headers=tenant.r)).status_code == 404


class TestCompleteAndCancel:
    async def test_need_write(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        order = (
            await create_order(client, tenant, user["id"], (product["id"], 1), status="pending")
        ).json()
        for action in ("complete", "cancel"):
            assert (await client.post(f"/v1/orders/{order['id']}/{action}")).status_code == 401
            response = await client.post(f"/v1/orders/{order['id']}/{action}", headers=tenant.r)
            assert response.status_code == 403

    async def test_pending_then_completed(self, client, tenant):
        product = await create_product(client, tenant, price="5")
        user = await create_user(client, tenant)
        pending = (
            await create_order(client, tenant, user["id"], (product["id"], 2), status="pending")
        ).json()
        assert pending["status"] == "pending" and pending["product_items"] == []
        done = await client.post(f"/v1/orders/{pending['id']}/complete", headers=tenant.w)
        assert done.status_code == 200
        assert done.json()["status"] == "completed"
        assert [i["item_id"] for i in done.json()["product_items"]] == [1, 2]
        again = await client.post(f"/v1/orders/{pending['id']}/complete", headers=tenant.w)
        assert (again.status_code, again.json()) == (
            409,
            {"message": "only a pending order can be completed; this one is completed"},
        )
        cancel = await client.post(f"/v1/orders/{pending['id']}/cancel", headers=tenant.w)
        assert cancel.json() == {
            "message": "only a pending order can be cancelled; this one is completed"
        }

    async def test_completion_that_breaks_a_rule_leaves_the_order_pending(self, client, tenant):
        product = await create_product(client, tenant, max_per_account=1)
        user = await create_user(client, tenant)
        pending = (
            await create_order(client, tenant, user["id"], (product["id"], 2), status="pending")
        ).json()
        response = await client.post(f"/v1/orders/{pending['id']}/complete", headers=tenant.w)
        assert response.status_code == 409
        assert (await client.get(f"/v1/orders/{pending['id']}", headers=tenant.r)).json()[
            "status"
        ] == "pending"

    async def test_cancel(self, client, tenant):
        product = await create_product(client, tenant)
        user = await create_user(client, tenant)
        pending = (
            await create_order(client, tenant, user["id"], (product["id"], 1), status="pending")
        ).json()
        response = await client.post(f"/v1/orders/{pending['id']}/cancel", headers=tenant.w)
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        sales = (await client.get(f"/v1/products/{product['id']}/sales", headers=tenant.r)).json()
        assert [s["order_status"] for s in sales["sales"]] == ["cancelled"]
        response = await client.post(f"/v1/orders/{pending['id']}/complete", headers=tenant.w)
        assert response.status_code == 409

    async def test_invalid_order_id_is_400(self, client, tenant):
        response = await client.post("/v1/orders/nope/complete", headers=tenant.w)
        assert response.status_code == 400 and response.json()["errors"][0].startswith("id: ")
