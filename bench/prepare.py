"""Seed a fresh database through Tessera itself: a project (CLI), users, an event, products,
items and orders (API, in process). Writes what the scenarios need to ``data.json``."""

import asyncio
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import httpx

BATCH = 1500  # users/create's limit
ITEMS = 400  # redeemable items, spread over the first users


def tessera(url: str, *args: str) -> str:
    env = {**os.environ, "TESSERA_DATABASE_URL": url, "TESSERA_LOG_LEVEL": "warning"}
    cli = Path(sys.executable).with_name("tessera")
    return subprocess.run(
        [str(cli), *args], env=env, check=True, capture_output=True, text=True
    ).stdout


async def _seed(url: str, users: int, api_key: str) -> dict:
    from tessera.config import Settings
    from tessera.main import create_app

    app = create_app(Settings(database_url=url, worker_in_process=False, log_level="warning"))
    headers = {"x-api-key": api_key}
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://seed", timeout=600) as client,
    ):

        async def post(path: str, body: object) -> dict:
            response = await client.post(path, json=body, headers=headers)
            assert response.status_code in (200, 201), (path, response.text)
            return response.json()

        user_ids: list[str] = []
        for start in range(0, users, BATCH):
            batch = [
                {"email": f"user{n}@bench.example", "firstName": "Bench", "referenceId": f"r{n}"}
                for n in range(start, min(start + BATCH, users))
            ]
            user_ids += [user["id"] for user in (await post("/v1/users/create", batch))["users"]]
            if start and start % 100_000 == 0:
                print(f"  {start} users", flush=True)
        event = await post(
            "/v1/events/create",
            {"name": "Bench night", "start_date": 1900000000, "end_date": 1900003600,
             "location": "Hall", "address": "1 Bench Street"},
        )
        product = {"type": "admission", "price": "10.00", "event_id": event["id"]}
        plain = await post("/v1/products", {**product, "name": "Ticket"})
        redeemable = await post(
            "/v1/products", {**product, "name": "Drinks", "redemption_quantity": 1_000_000}
        )
        issued = await post(
            f"/v1/products/{redeemable['id']}/items", {"users": user_ids[:ITEMS]}
        )
        orders = [
            (await post("/v1/orders", {"user": {"id": user}, "items": [
                {"product_id": plain["id"], "quantity": 1}]}))["id"]
            for user in random.sample(user_ids, 100)
        ]
        for paged in range(20):  # ~ 100 lines on the sales page's product
            await post("/v1/orders", {"user": {"id": user_ids[paged]}, "items": [
                {"product_id": plain["id"], "quantity": 1}]})
    return {
        "api_key": api_key,
        "users": user_ids,
        "event": event["id"],
        "product": plain["id"],
        "redeemable": redeemable["id"],
        "items": [item["id"] for item in issued["items"]],
        "orders": orders,
    }


def seed(url: str, users: int, out: Path) -> dict:
    tessera(url, "db", "upgrade")
    project = json.loads(tessera(url, "project", "create", "--name", "bench"))
    data = asyncio.run(_seed(url, users, project["api_key"]))
    out.write_text(json.dumps(data))
    return data
