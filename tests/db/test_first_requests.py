"""Many concurrent first requests of a new project, on a served Tessera (two processes on
PostgreSQL, one on SQLite), ticket email on: its first orders, issues and claims at once; then
its first transfers, scans and uploads at once. Every one answers 2xx, none of them met a
deadlock (``tessera_db_conflicts_total`` stays at 0: docs/design.md, Locks), no error line is
logged. A new project's first burst of orders deadlocked on its first check-in key until that
key was made with the project."""

import asyncio
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from bench.event import is_error
from bench.mailbox import Mailbox
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import BACKEND
from tests.serving import fresh_database, serve, settings_env, tessera

ORDERS, ISSUES, CLAIMS, TRANSFERS, SCANS, UPLOADS = 48, 16, 16, 16, 16, 4


@pytest.fixture
def served(tmp_path):
    url = fresh_database(BACKEND, tmp_path, "first_requests")
    with Mailbox() as mailbox:
        env = settings_env(
            url,
            smtp_url=mailbox.url,
            mail_from="tickets@first.test",
            worker_in_process=False,
            log_level="info",
        )
        workers = "2" if BACKEND == "postgresql" else "1"
        log = tmp_path / "serve.log"
        with serve(env, log, "--workers", workers) as base:
            yield base, env, log


def conflicts(text: str) -> dict[str, float]:
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "tessera_db_conflicts_total"
    }


async def test_a_new_projects_first_requests_all_at_once(served):
    base, env, log = served
    project = tessera("project", "create", "--name", "First day", env=env)
    tessera("project", "set", "--project", project["project_id"], "--ticket-emails", env=env)
    door = tessera(
        "apikey", "create", "--project", project["project_id"], "--permission", "checkin", env=env
    )
    key = {"x-api-key": project["api_key"]}
    answers: Counter[int] = Counter()
    async with httpx.AsyncClient(base_url=base, headers=key, timeout=60) as api:

        async def call(method: str, path: str, **options) -> httpx.Response:
            response = await api.request(method, path, **options)
            answers[response.status_code] += 1
            assert response.status_code < 300, (path, response.status_code, response.text)
            return response

        event = (
            await call(
                "POST",
                "/v1/events/create",
                json={
                    "name": "Opening",
                    "location": "Hall",
                    "address": "1 Road",
                    "start_date": 1_900_000_000,
                    "end_date": 1_900_010_000,
                },
            )
        ).json()
        product = (
            await call(
                "POST",
                "/v1/products",
                json={
                    "type": "admission",
                    "name": "Opening pass",
                    "event_id": event["id"],
                    "stock": 1000,
                    "is_transferable": True,
                    "is_claimable": True,
                },
            )
        ).json()
        items = f"/v1/products/{product['id']}/items"
        users = (
            await call(
                "POST",
                "/v1/users/create",
                json=[{"email": f"guest-{i}@first.test"} for i in range(ORDERS + 2 * ISSUES)],
            )
        ).json()["users"]
        links = [
            (await call("POST", f"/v1/products/{product['id']}/claim-links", json={})).json()
            for _ in range(CLAIMS)
        ]
        buyers, takers = users[:ORDERS], users[ORDERS:]
        first = [
            call(
                "POST",
                "/v1/orders",
                json={
                    "user": {"id": u["id"]},
                    "items": [{"product_id": product["id"], "quantity": 1 + i % 3}],
                },
            )
            for i, u in enumerate(buyers)
        ]
        first += [
            call("POST", items, json={"users": [takers[2 * i]["id"], takers[2 * i + 1]["id"]]})
            for i in range(ISSUES)
        ]
        first += [
            call("POST", f"/v1/claims/{link['token']}", json={"email": f"claimer-{i}@first.test"})
            for i, link in enumerate(links)
        ]
        done = await asyncio.gather(*first)
        orders = [response.json() for response in done[:ORDERS]]

        # Then, at once: tickets passed on, scanned at the door, and scans made offline
        # uploaded by several doors (each holder's tickets at more than one).
        sold = [item for order in orders for item in order["product_items"]]
        moving, staying = sold[:TRANSFERS], sold[TRANSFERS:]
        secrets = [
            (await call("GET", f"{items}/{item['id']}/ticket")).json()["secret"]
            for item in staying[: SCANS + UPLOADS * 8]
        ]
        made = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
        uploads = [
            [
                {
                    "secret": secret,
                    "nonce": uuid.uuid4().hex,
                    "event_id": event["id"],
                    "scanned_at": (made + timedelta(seconds=door_number + 10 * n)).isoformat(),
                    "device": f"door-{door_number}",
                }
                for n, secret in enumerate(secrets[SCANS:])
                if n % UPLOADS != door_number or n % 2
            ]
            for door_number in range(UPLOADS)
        ]
        second = [
            call(
                "POST",
                f"/v1/products/{product['id']}/transfer",
                json={
                    "product_item_id": item["id"],
                    "sender_user_id": item["user"]["id"],
                    "recipient_user_id": takers[i]["id"],
                },
            )
            for i, item in enumerate(moving)
        ]
        second += [
            call(
                "POST",
                "/v1/checkins",
                headers={"x-api-key": door["api_key"]},
                json={"secret": secret, "nonce": f"online-{i}", "event_id": event["id"]},
            )
            for i, secret in enumerate(secrets[:SCANS])
        ]
        second += [
            call(
                "POST",
                "/v1/checkins/batch",
                headers={"x-api-key": door["api_key"]},
                json={"scans": scans},
            )
            for scans in uploads
        ]
        await asyncio.gather(*second)
        metrics = (await call("GET", "/metrics")).text
    assert set(answers) <= {200, 201}, answers
    assert conflicts(metrics) == {"rerun": 0.0, "refused": 0.0}
    errors = [line for line in log.read_text().splitlines() if is_error(line)]
    assert errors == []
