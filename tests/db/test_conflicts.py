"""A transaction PostgreSQL aborts as a deadlock: ``TransactionConflict``, the use-case run
again (``rerun_on_conflict``), 503 with Retry-After once its attempts are spent; counted in
/metrics."""

import asyncio
from collections import namedtuple

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Integer, bindparam, select, text

from tessera.db import Database, rerun_on_conflict, table_of
from tessera.db.conflicts import ATTEMPTS
from tessera.errors import TransactionConflict
from tessera.models import Job, Product, User
from tessera.web.errors import install_error_handlers
from tests.conftest import BACKEND, database_at
from tests.factories import create_product, create_user, row_counts
from tests.metrics.test_metrics import labels, samples, scrape

on_postgresql = pytest.mark.skipif(
    BACKEND != "postgresql", reason="a deadlock needs row locks (SQLite has one writer)"
)
JOBS, PRODUCTS, USERS = table_of(Job), table_of(Product), table_of(User)
JobRow = namedtuple("JobRow", JOBS.c.keys())  # every column
LOCK_JOB = select(JOBS.c.id).where(JOBS.c.id == bindparam("id")).with_for_update()
LOCK_PRODUCT = select(PRODUCTS.c.id).where(PRODUCTS.c.id == bindparam("id")).with_for_update()
LOCK_USER = select(USERS.c.id).where(USERS.c.id == bindparam("id")).with_for_update()


async def conflicts(client: httpx.AsyncClient) -> dict[str, float]:
    found = samples(await scrape(client), "tessera_db_conflicts_total")
    return {outcome: found.get(labels(outcome=outcome), 0.0) for outcome in ("rerun", "refused")}


# Backends of this database waiting for a row lock.
BLOCKED = text(
    "SELECT count(*) AS n FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
).columns(n=Integer)


async def waiting_for_a_lock(database: Database, within: float = 10.0) -> None:
    """Until a transaction of the database waits for a row lock."""
    deadline = asyncio.get_running_loop().time() + within
    while not await database.read(lambda rows: rows.scalar(BLOCKED)):
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("no transaction waited for a lock")
        await asyncio.sleep(0.02)


@on_postgresql
class TestDeadlock:
    async def test_one_of_two_deadlocked_transactions_is_a_conflict(self, database, tenant):
        async with database.transaction() as tx:
            ids = [
                row.id
                for row in await tx.insert(
                    Job,
                    [
                        {"project_id": tenant.project_id, "kind": "t", "subject": s, "payload": {}}
                        for s in "ab"
                    ],
                    JobRow,
                )
            ]
            await tx.commit()
        got_first = [asyncio.Event(), asyncio.Event()]

        async def lock(mine: int) -> str:
            async with database.transaction() as tx:
                await tx.scalar(LOCK_JOB, id=ids[mine])
                got_first[mine].set()
                await got_first[1 - mine].wait()
                await tx.scalar(LOCK_JOB, id=ids[1 - mine])
                await tx.commit()
            return "committed"

        outcomes = await asyncio.gather(lock(0), lock(1), return_exceptions=True)
        assert sorted(type(o).__name__ for o in outcomes) == ["TransactionConflict", "str"]

    async def test_an_order_that_meets_a_deadlock_runs_again_and_is_created_once(
        self, client, tenant, settings
    ):
        product = await create_product(client, tenant, stock=10)
        buyer = await create_user(client, tenant)
        before = await conflicts(client)
        holder = database_at(settings.database_url, pool_size=2)
        try:
            async with holder.transaction() as tx:
                await tx.scalar(LOCK_PRODUCT, id=product["id"])
                order = asyncio.create_task(
                    client.post(
                        "/v1/orders",
                        headers=tenant.w | {"idempotency-key": "box-office-1"},
                        json={
                            "user": {"id": buyer["id"]},
                            "items": [{"product_id": product["id"], "quantity": 2}],
                        },
                    )
                )
                # The order has written its row (a key-share lock on its buyer) and waits for
                # the product; asking for the buyer's row closes the circle.
                await waiting_for_a_lock(holder)
                await tx.scalar(LOCK_USER, id=buyer["id"])
                await tx.commit()
        finally:
            await holder.dispose()
        response = await order
        assert response.status_code == 201, response.text
        after = await conflicts(client)
        assert after["rerun"] == before["rerun"] + 1 and after["refused"] == before["refused"]
        again = await client.post(
            "/v1/orders",
            headers=tenant.w | {"idempotency-key": "box-office-1"},
            json={
                "user": {"id": buyer["id"]},
                "items": [{"product_id": product["id"], "quantity": 2}],
            },
        )
        assert again.json() == response.json()
        assert again.headers["idempotent-replayed"] == "true"
        listed = await client.get(f"/v1/products/{product['id']}/sales", headers=tenant.r)
        assert [sale["quantity"] for sale in listed.json()["sales"]] == [2]


class TestRerun:
    async def test_a_use_case_runs_again_until_it_passes(self, client):
        calls = 0

        @rerun_on_conflict
        async def use_case(value: int) -> int:
            nonlocal calls
            calls += 1
            if calls < 3:
                raise TransactionConflict
            return value

        before = await conflicts(client)
        assert await use_case(7) == 7
        assert calls == 3
        after = await conflicts(client)
        assert after == {"rerun": before["rerun"] + 2, "refused": before["refused"]}

    async def test_after_its_last_attempt_the_conflict_reaches_the_caller(self, client):
        calls = 0

        @rerun_on_conflict
        async def use_case() -> None:
            nonlocal calls
            calls += 1
            raise TransactionConflict

        before = await conflicts(client)
        with pytest.raises(TransactionConflict):
            await use_case()
        assert calls == ATTEMPTS
        after = await conflicts(client)
        assert after == {
            "rerun": before["rerun"] + ATTEMPTS - 1,
            "refused": before["refused"] + 1,
        }

    async def test_any_other_error_is_not_run_again(self):
        calls = 0

        @rerun_on_conflict
        async def use_case() -> None:
            nonlocal calls
            calls += 1
            raise ValueError("a rule")

        with pytest.raises(ValueError, match="a rule"):
            await use_case()
        assert calls == 1

    async def test_a_conflict_answers_503_with_retry_after(self):
        app = FastAPI()
        install_error_handlers(app)

        @app.post("/orders")
        async def create_order() -> None:
            raise TransactionConflict

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as http:
            response = await http.post("/orders")
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json() == {
            "message": "the database gave way to another request: nothing was changed, "
            "send it again"
        }


async def test_nothing_stays_of_an_aborted_attempt(database, tenant):
    """What a conflicted attempt wrote is rolled back with it: only the last attempt's rows."""
    attempts = 0

    @rerun_on_conflict
    async def add_job() -> None:
        nonlocal attempts
        attempts += 1
        async with database.transaction() as tx:
            await tx.insert(
                Job,
                [{"project_id": tenant.project_id, "kind": "t", "subject": "s", "payload": {}}],
            )
            if attempts == 1:
                raise TransactionConflict
            await tx.commit()

    await add_job()
    assert (await row_counts(database))["jobs"] == 1
