"""GET /v1/orders: the project's orders with their lines, oldest first, filtered and paged."""

import uuid

import pytest

from tests.factories import create_order, create_product, create_users

SUMMARY_KEYS = {
    "id",
    "order_number",
    "status",
    "user_id",
    "total",
    "items",
    "created_at",
    "updated_at",
}


def _summary(order: dict) -> dict:
    """An order as the list shows it: the order's answer without its issued items."""
    return {key: value for key, value in order.items() if key != "product_items"}


async def _orders(client, tenant):
    """Three orders of two users over two products: completed, pending, then cancelled."""
    ticket = await create_product(client, tenant, price="10")
    perk = await create_product(client, tenant, price="2.5")
    ada, bob = await create_users(client, tenant, 2)
    completed = await create_order(client, tenant, ada["id"], (ticket["id"], 2))
    pending = await create_order(
        client, tenant, bob["id"], (perk["id"], 1), status="pending", order_number="WEB-2"
    )
    cancelled = await create_order(
        client, tenant, ada["id"], (ticket["id"], 1), (perk["id"], 3), status="pending"
    )
    assert {r.status_code for r in (completed, pending, cancelled)} == {201}
    cancel = await client.post(f"/v1/orders/{cancelled.json()['id']}/cancel", headers=tenant.w)
    assert cancel.status_code == 200
    orders = [completed.json(), pending.json(), cancel.json()]
    return orders, (ticket, perk), (ada, bob)


class TestListOrders:
    async def test_needs_a_credential(self, client, tenant):
        assert (await client.get("/v1/orders")).status_code == 401

    async def test_another_projects_orders_and_ids_are_not_seen(self, client, tenant, other):
        theirs = await create_product(client, other)
        [their_user] = await create_users(client, other, 1)
        response = await create_order(client, other, their_user["id"], (theirs["id"], 1))
        assert response.status_code == 201
        empty = {"orders": [], "pagination": {"page": 1, "limit": 20, "total": 0}}
        for params in (
            {},
            {"user_id": their_user["id"]},
            {"product_id": theirs["id"]},
            {"status": "completed"},
        ):
            listed = await client.get("/v1/orders", headers=tenant.r, params=params)
            assert (listed.status_code, listed.json()) == (200, empty), params

    @pytest.mark.parametrize(
        ("params", "error"),
        [
            ({"page": 0}, "page: Input should be greater than or equal to 1"),
            ({"page": 1_000_001}, "page: Input should be less than or equal to 1000000"),
            ({"limit": 0}, "limit: Input should be greater than or equal to 1"),
            ({"limit": 101}, "limit: Input should be less than or equal to 100"),
            (
                {"status": "shipped"},
                "status: Input should be 'pending', 'completed' or 'cancelled'",
            ),
            ({"user_id": "ada"}, "user_id: Input should be a valid UUID"),
            ({"product_id": "42"}, "product_id: Input should be a valid UUID"),
            ({"sort": "newest"}, "sort: unknown query parameter"),
        ],
    )
    async def test_bounds_are_400(self, client, tenant, params, error):
        response = await client.get("/v1/orders", headers=tenant.r, params=params)
        assert response.status_code == 400
        [message] = response.json()["errors"]
        assert message.startswith(error), message

    async def test_lists_every_order_with_its_lines_oldest_first(self, client, tenant):
        orders, (ticket, perk), (ada, bob) = await _orders(client, tenant)
        response = await client.get("/v1/orders", headers=tenant.r)
        assert response.status_code == 200
        body = response.json()
        assert body == {
            "orders": [_summary(order) for order in orders],
            "pagination": {"page": 1, "limit": 20, "total": 3},
        }
        assert [set(order) for order in body["orders"]] == [SUMMARY_KEYS] * 3
        assert [(o["status"], o["user_id"], o["total"]) for o in body["orders"]] == [
            ("completed", ada["id"], 20.0),
            ("pending", bob["id"], 2.5),
            ("cancelled", ada["id"], 17.5),
        ]
        assert [
            (line["product_id"], line["product_name"], line["quantity"], line["unit_price"])
            for line in body["orders"][2]["items"]
        ] == [(ticket["id"], ticket["name"], 1, 10.0), (perk["id"], perk["name"], 3, 2.5)]
        assert body["orders"][1]["order_number"] == "WEB-2"

    async def test_filters_add_up(self, client, tenant):
        orders, (ticket, perk), (ada, bob) = await _orders(client, tenant)
        ids = [order["id"] for order in orders]

        async def listed(**params):
            response = await client.get("/v1/orders", headers=tenant.r, params=params)
            assert response.status_code == 200, response.text
            body = response.json()
            return [order["id"] for order in body["orders"]], body["pagination"]["total"]

        assert await listed(status="completed") == ([ids[0]], 1)
        assert await listed(status="pending") == ([ids[1]], 1)
        assert await listed(status="cancelled") == ([ids[2]], 1)
        assert await listed(user_id=ada["id"]) == ([ids[0], ids[2]], 2)
        assert await listed(product_id=perk["id"]) == ([ids[1], ids[2]], 2)
        assert await listed(product_id=ticket["id"]) == ([ids[0], ids[2]], 2)
        assert await listed(user_id=ada["id"], product_id=perk["id"]) == ([ids[2]], 1)
        assert await listed(status="completed", product_id=perk["id"]) == ([], 0)
        assert await listed(status="pending", user_id=bob["id"], product_id=perk["id"]) == (
            [ids[1]],
            1,
        )
        assert await listed(user_id=str(uuid.uuid4())) == ([], 0)

    async def test_pages(self, client, tenant):
        orders, (ticket, _perk), (ada, _bob) = await _orders(client, tenant)
        second = await client.get("/v1/orders", headers=tenant.r, params={"page": 2, "limit": 2})
        assert second.json() == {
            "orders": [_summary(orders[2])],
            "pagination": {"page": 2, "limit": 2, "total": 3},
        }
        filtered = await client.get(
            "/v1/orders",
            headers=tenant.r,
            params={"user_id": ada["id"], "product_id": ticket["id"], "page": 2, "limit": 1},
        )
        assert filtered.json() == {
            "orders": [_summary(orders[2])],
            "pagination": {"page": 2, "limit": 1, "total": 2},
        }
        past = await client.get("/v1/orders", headers=tenant.r, params={"page": 3, "limit": 2})
        assert past.json() == {"orders": [], "pagination": {"page": 3, "limit": 2, "total": 3}}
