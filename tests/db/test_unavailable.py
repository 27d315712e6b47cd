"""When the database says no: a connection refused (its slots used up, a restart) or not given
within ``TESSERA_DB_POOL_TIMEOUT_SECONDS`` answers 503 with ``Retry-After`` and a message, never
500, and changes nothing; the same requests succeed once the database takes them again.

Each backend is refused its own way, on a database of this test's own: PostgreSQL's connection
limit for the database set to 0 and its open connections ended (what a server whose slots are
all taken, or one that restarted, does to a client); SQLite's write lock held by another
connection (another process's transaction) past the timeout.
"""

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from tessera.config import Settings
from tessera.db import ConnectionPool, database_of
from tessera.errors import DatabaseUnavailable
from tessera.main import create_app
from tests.conftest import BACKEND, _worker
from tests.factories import (
    create_product,
    create_user,
    event_body,
    make_tenant,
    row_counts,
    user_body,
)
from tests.serving import drop_postgres_database, fresh_database

# PostgreSQL's own refusals: behind PgBouncer the pooler answers (make test-pgbouncer).
pytestmark = pytest.mark.direct_postgresql

TIMEOUT = 1.0
REFUSED = "the database is unavailable: try again shortly"
BUSY = "the database is busy (another process holds its write lock): try again shortly"


@asynccontextmanager
async def serving(
    settings: Settings, url: str, pool_timeout: float = TIMEOUT
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(
        settings.model_copy(update={"database_url": url, "db_pool_timeout_seconds": pool_timeout})
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
            yield app, http


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def refused(url: str) -> AsyncIterator[None]:
    """The database refuses this test's app until the block ends."""
    if BACKEND == "postgresql":
        admin = await asyncpg.connect(dsn(url))
        name = make_url(url).database
        try:
            await admin.execute(f'ALTER DATABASE "{name}" CONNECTION LIMIT 0')
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND usename = current_user"  # not autovacuum's, say
            )
            yield
        finally:
            await admin.execute(f'ALTER DATABASE "{name}" CONNECTION LIMIT -1')
            await admin.close()
        return
    other = sqlite3.connect(make_url(url).database or "", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.fixture
async def own_database(tmp_path) -> AsyncIterator[str]:
    name = f"unavailable_{_worker()}"
    url = await asyncio.to_thread(fresh_database, BACKEND, tmp_path, name)
    yield url
    if BACKEND == "postgresql":
        await drop_postgres_database(
            os.environ["TESSERA_TEST_DATABASE_URL"], make_url(url).database or name
        )


async def test_writes_answer_503_with_retry_after_while_refused_and_succeed_after(
    settings, own_database
):
    async with serving(settings, own_database) as (app, http):
        tenant = await make_tenant(app)
        product = await create_product(http, tenant)
        ada = await create_user(http, tenant)
        before = await row_counts(database_of(app))

        def writes() -> list[tuple[str, Any]]:
            return [
                ("/v1/users/create", [user_body()]),
                ("/v1/events/create", event_body()),  # through an ORM session
                (f"/v1/products/{product['id']}/items", {"users": [ada["id"]]}),
            ]

        async with refused(own_database):
            for path, body in writes():
                began = time.monotonic()
                response = await http.post(path, headers=tenant.w, json=body)
                assert response.status_code == 503, response.text
                assert response.headers["retry-after"] == str(DatabaseUnavailable.retry_after)
                assert response.json()["message"] in (REFUSED, BUSY), response.text
                assert time.monotonic() - began < TIMEOUT + 5  # given up, not hung
            ready = await http.get("/v1/health/ready")
            if BACKEND == "postgresql":
                assert ready.status_code == 503
                assert ready.json()["checks"]["database"]["ok"] is False
            else:  # SQLite still reads (WAL) while another process writes
                assert ready.json()["checks"]["database"]["ok"] is True
        assert await row_counts(database_of(app)) == before  # nothing changed

        for path, body in writes():
            response = await http.post(path, headers=tenant.w, json=body)
            assert response.status_code == 201, response.text
        after = await row_counts(database_of(app))
        assert (after["users"], after["events"], after["product_items"]) == (
            before["users"] + 1,
            before["events"] + 1,
            1,
        )


@pytest.mark.skipif(BACKEND != "postgresql", reason="the connection pool is PostgreSQL's")
async def test_a_request_waits_for_a_pooled_connection_no_longer_than_the_timeout(own_database):
    async def nothing(connection: asyncpg.Connection) -> None:
        return None

    pool = ConnectionPool(
        dsn(own_database), size=1, overflow=0, recycle_seconds=60, timeout=0.3, init=nothing
    )
    held = await pool.acquire()
    try:
        began = time.monotonic()
        with pytest.raises(DatabaseUnavailable, match=r"no connection within 0\.3 s"):
            await pool.acquire()
        assert time.monotonic() - began >= 0.3
    finally:
        pool.release(held)
    again = await pool.acquire()  # the waiter that gave up took nothing with it
    assert again is held
    pool.release(again)
    await pool.close()


def connection_budget(settings: Settings) -> int:
    """The most connections one process opens: its one pool and the overflow (Settings,
    ``db_pool_size``)."""
    return settings.db_pool_size + settings.db_max_overflow


def test_the_defaults_fit_two_servers_and_a_worker_in_a_default_postgresql():
    default_max_connections, reserved_for_superusers = 100, 3
    assert 3 * connection_budget(Settings()) <= default_max_connections - reserved_for_superusers


@pytest.mark.skipif(BACKEND != "postgresql", reason="the connection pool is PostgreSQL's")
async def test_a_process_under_load_opens_no_more_connections_than_its_budget(
    settings, own_database
):
    default_timeout = Settings().db_pool_timeout_seconds
    async with serving(settings, own_database, default_timeout) as (app, http):
        tenant = await make_tenant(app)
        product = await create_product(http, tenant)
        ada = await create_user(http, tenant)
        budget = connection_budget(app.state.settings)
        admin = await asyncpg.connect(dsn(own_database))
        most = 0
        stop = asyncio.Event()

        async def sample() -> None:
            nonlocal most
            while not stop.is_set():
                open_ = await admin.fetchval(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    " AND usename = current_user"
                )
                most = max(most, open_)
                await asyncio.sleep(0.01)

        async def one(n: int) -> int:
            if n % 3 == 0:
                response = await http.post("/v1/events/create", headers=tenant.w, json=event_body())
            elif n % 3 == 1:
                response = await http.post(
                    f"/v1/products/{product['id']}/items",
                    headers=tenant.w,
                    json={"users": [ada["id"]]},
                )
            else:
                response = await http.get(f"/v1/products/{product['id']}", headers=tenant.r)
            return response.status_code

        sampler = asyncio.create_task(sample())
        try:
            statuses = await asyncio.gather(*(one(n) for n in range(300)))
        finally:
            stop.set()
            await sampler
            await admin.close()
        assert set(statuses) <= {200, 201}, statuses
        assert 0 < most <= budget
