"""SQLite's single writer runs its statements on the event loop: waiting for another process's
write lock must not block the loop, and the write goes through once the lock is free."""

import asyncio
import sqlite3

import pytest

from tests.conftest import BACKEND
from tests.factories import row_counts

pytestmark = pytest.mark.skipif(BACKEND != "sqlite", reason="SQLite's database-wide write lock")


async def test_a_write_waits_for_another_process_without_blocking_the_loop(
    client, tenant, database
):
    holder = sqlite3.connect(database.url.database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # as the CLI would, in another process
    try:
        write = asyncio.create_task(
            client.post("/v1/users/create", headers=tenant.w, json=[{"email": "w@example.com"}])
        )
        await asyncio.sleep(0.2)
        assert not write.done()  # waiting for the lock
        # Meanwhile the loop serves others: reads, and the health check.
        assert (await client.get("/v1/version")).status_code == 200
        assert (await client.get("/v1/users/count", headers=tenant.r)).status_code == 200
        assert not write.done()
    finally:
        holder.execute("COMMIT")
        holder.close()
    response = await asyncio.wait_for(write, 5)
    assert response.status_code == 201, response.text
    assert (await row_counts(database))["users"] == 1
