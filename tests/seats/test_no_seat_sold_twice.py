"""No seat sold twice, whatever the concurrency: 64 clients at once hold and buy overlapping
seats of one small plan, on a served Tessera (two processes on PostgreSQL, one on SQLite).
Holds by seat and best-available ones, completed orders, pending orders completed or cancelled,
items issued with a hold, holds released. Every answer is a success or a 409 (nothing else: no
5xx), and at the end each seat is sold to one item at most, and exactly the seats the successful
sales were given."""

import asyncio
import random
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env, tessera

CLIENTS, ROUNDS, ROWS, SEATS_A_ROW = 64, 3, 4, 8


@pytest.fixture
def served(tmp_path):
    url = fresh_database(BACKEND, tmp_path, "seats_at_once")
    env = settings_env(url, worker_in_process=False)
    workers = "2" if BACKEND == "postgresql" else "1"
    with serve(env, tmp_path / "serve.log", "--workers", workers) as base:
        yield base, env


async def test_holds_and_sales_of_the_same_seats_from_many_clients(served) -> None:
    base, env = served
    project = tessera("project", "create", "--name", "Full House", env=env)
    key = {"x-api-key": project["api_key"]}
    answers: Counter[tuple[str, int]] = Counter()
    sold: list[str] = []  # the seat ids the successful sales answered with
    async with httpx.AsyncClient(base_url=base, headers=key, timeout=60) as api:

        async def call(name: str, method: str, path: str, **options: Any) -> httpx.Response:
            response = await api.request(method, path, **options)
            answers[name, response.status_code] += 1
            assert response.status_code < 300 or response.status_code == 409, (
                name,
                response.status_code,
                response.text,
            )
            return response

        event = (
            await call(
                "event",
                "POST",
                "/v1/events/create",
                json={
                    "name": "Premiere",
                    "location": "Hall",
                    "address": "1 Road",
                    "start_date": 1_900_000_000,
                    "end_date": 1_900_010_000,
                },
            )
        ).json()
        plan = {
            "areas": [
                {
                    "name": "Stalls",
                    "rows": [
                        {
                            "name": chr(65 + r),
                            "seats": [
                                {"number": str(n), "category": "all"}
                                for n in range(1, SEATS_A_ROW + 1)
                            ],
                        }
                        for r in range(ROWS)
                    ],
                }
            ]
        }
        stored = (await call("plan", "PUT", f"/v1/events/{event['id']}/seating", json=plan)).json()
        seat_ids = [s["id"] for row in stored["areas"][0]["rows"] for s in row["seats"]]
        product = (
            await call(
                "product",
                "POST",
                "/v1/products",
                json={
                    "type": "admission",
                    "name": "Seat",
                    "event_id": event["id"],
                    "seat_category": "all",
                },
            )
        ).json()
        users = (
            await call(
                "users",
                "POST",
                "/v1/users/create",
                json=[
                    {"email": f"buyer{n}@example.com", "firstName": "B", "lastName": str(n)}
                    for n in range(CLIENTS)
                ],
            )
        ).json()["users"]

        async def client(n: int) -> None:
            chance = random.Random(n)  # noqa: S311 - a client's choices, not a secret
            user = users[n]["id"]
            for _ in range(ROUNDS):
                if chance.random() < 0.5:
                    wanted = {"seats": chance.sample(seat_ids, chance.randint(1, 3))}
                else:
                    wanted = {"count": chance.randint(1, 3)}
                held = await call(
                    "hold", "POST", "/v1/seat-holds", json={"product_id": product["id"]} | wanted
                )
                if held.status_code != 201:
                    continue
                hold = held.json()
                line = {
                    "product_id": product["id"],
                    "quantity": len(hold["seats"]),
                    "hold_id": hold["id"],
                }
                way = chance.choice(["order", "pending", "items", "release"])
                if way == "release":
                    await call("release", "DELETE", f"/v1/seat-holds/{hold['id']}")
                    continue
                if way == "items":
                    body = {"users": [user] * len(hold["seats"]), "hold_id": hold["id"]}
                    answer = await call(
                        "items", "POST", f"/v1/products/{product['id']}/items", json=body
                    )
                    items = answer.json()["items"]
                else:
                    status = "completed" if way == "order" else "pending"
                    order = await call(
                        "order",
                        "POST",
                        "/v1/orders",
                        json={"user": {"id": user}, "items": [line], "status": status},
                    )
                    if way == "pending":
                        end = chance.choice(["complete", "cancel"])
                        path = f"/v1/orders/{order.json()['id']}/{end}"
                        order = await call(end, "POST", path)
                    items = order.json()["product_items"]
                    if way == "pending" and end == "cancel":
                        assert items == []  # its seats are free again
                        continue
                assert sorted(item["seat"]["id"] for item in items) == sorted(
                    seat["id"] for seat in hold["seats"]
                )
                sold.extend(item["seat"]["id"] for item in items)

        await asyncio.gather(*(client(n) for n in range(CLIENTS)))

        seats = (await call("seats", "GET", f"/v1/events/{event['id']}/seats")).json()["seats"]
        items = []
        for page in range(1, 100):
            listed = await call(
                "list",
                "GET",
                f"/v1/products/{product['id']}/items",
                params={"page": page, "limit": 100},
            )
            found = listed.json()["items"]
            items += found
            if len(found) < 100:
                break
    on_items = [item["seat"]["id"] for item in items]
    assert len(on_items) == len(set(on_items))  # no seat on two items
    assert sorted(on_items) == sorted(sold)  # and each sale's seats are its items'
    assert {s["id"] for s in seats if s["status"] == "sold"} == set(sold)
    assert not any(s["status"] == "held" for s in seats)  # every hold was sold or released
    assert len(sold) > 0 and answers["hold", 409] > 0  # the clients did meet each other
    assert all(status < 500 for _, status in answers)
