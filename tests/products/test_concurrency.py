"""Issuing invariants under concurrency, through a real HTTP server on loopback.

Each test fires 60 requests at once (httpx, one connection each) at a uvicorn server running the
app in its own thread and event loop, on the session's database (SQLite or PostgreSQL).
"""

import asyncio
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from tessera.main import create_app
from tests.factories import create_product, create_users, issue_items, items_of

REQUESTS = 60


@pytest.fixture(scope="module")
def live_url(settings) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=port, log_level="warning", loop="asyncio"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "live server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=15)


async def _burst(url: str, calls: list[tuple[str, dict]], headers: dict) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=REQUESTS, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        return await asyncio.gather(
            *(http.post(path, json=body, headers=headers) for path, body in calls)
        )


class TestConcurrentIssuing:
    async def test_stock_is_never_oversold(self, client, tenant, database, live_url):
        product = await create_product(client, tenant, stock=10, max_per_account=2)
        users = await create_users(client, tenant, 30)
        path = f"/v1/products/{product['id']}/items"
        calls = [(path, {"users": [users[i % 30]["id"]]}) for i in range(REQUESTS)]
        responses = await _burst(live_url, calls, tenant.w)
        statuses = Counter(r.status_code for r in responses)
        assert statuses == {201: 10, 409: REQUESTS - 10}, statuses
        items = await items_of(database, product["id"])
        assert [i.item_id for i in items] == list(range(1, 11))
        assert max(Counter(i.owner_id for i in items).values()) <= 2
        issued = sorted(r.json()["items"][0]["item_id"] for r in responses if r.status_code == 201)
        assert issued == list(range(1, 11))

    async def test_per_account_limit_holds(self, client, tenant, database, live_url):
        product = await create_product(client, tenant, max_per_account=2)
        users = await create_users(client, tenant, 5)
        path = f"/v1/products/{product['id']}/items"
        calls = [(path, {"users": [users[i % 5]["id"]]}) for i in range(REQUESTS)]
        responses = await _burst(live_url, calls, tenant.w)
        assert Counter(r.status_code for r in responses) == {201: 10, 409: REQUESTS - 10}
        items = await items_of(database, product["id"])
        assert [i.item_id for i in items] == list(range(1, 11))
        assert sorted(Counter(i.owner_id for i in items).values()) == [2] * 5

    async def test_orders_and_items_share_the_stock(self, client, tenant, database, live_url):
        product = await create_product(client, tenant, stock=7)
        users = await create_users(client, tenant, 10)
        calls = []
        for i in range(REQUESTS):
            user = users[i % 10]["id"]
            if i % 2:
                calls.append((f"/v1/products/{product['id']}/items", {"users": [user]}))
            else:
                calls.append(
                    (
                        "/v1/orders",
                        {
                            "user": {"id": user},
                            "items": [{"product_id": product["id"], "quantity": 1}],
                        },
                    )
                )
        responses = await _burst(live_url, calls, tenant.w)
        assert Counter(r.status_code for r in responses) == {201: 7, 409: REQUESTS - 7}
        assert [i.item_id for i in await items_of(database, product["id"])] == list(range(1, 8))

    async def test_redemptions_stop_at_redemption_quantity(
        self, client, tenant, database, live_url
    ):
        product = await create_product(client, tenant, redemption_quantity=3)
        [user] = await create_users(client, tenant, 1)
        [item] = await issue_items(client, tenant, product["id"], user["id"])
        path = f"/v1/products/{product['id']}/items/redeem"
        responses = await _burst(
            live_url, [(path, {"product_item_id": item["id"]})] * REQUESTS, tenant.w
        )
        assert Counter(r.status_code for r in responses) == {200: 3, 409: REQUESTS - 3}
        assert [i.redemption_count for i in await items_of(database, product["id"])] == [3]


class TestConcurrentWrites:
    async def test_multi_product_orders_neither_deadlock_nor_oversell(
        self, client, tenant, database, live_url
    ):
        first = await create_product(client, tenant, stock=8)
        second = await create_product(client, tenant, stock=8)
        users = await create_users(client, tenant, 20)
        calls = []
        for i in range(REQUESTS):
            lines = [first["id"], second["id"]][:: 1 if i % 2 else -1]  # both lock orders
            calls.append(
                (
                    "/v1/orders",
                    {
                        "user": {"id": users[i % 20]["id"]},
                        "items": [{"product_id": p, "quantity": 1} for p in lines],
                    },
                )
            )
        responses = await _burst(live_url, calls, tenant.w)
        assert Counter(r.status_code for r in responses) == {201: 8, 409: REQUESTS - 8}
        for product in (first, second):
            assert [i.item_id for i in await items_of(database, product["id"])] == list(range(1, 9))

    async def test_one_email_is_created_once(self, client, tenant, live_url):
        calls = [("/v1/users/create", [{"email": "race@example.com"}])] * REQUESTS
        responses = await _burst(live_url, calls, tenant.w)
        assert Counter(r.status_code for r in responses) == {201: 1, 409: REQUESTS - 1}
        listed = await client.post(
            "/v1/users/fetch", headers=tenant.r, json={"email": "race@example.com"}
        )
        assert listed.json()["total"] == 1
