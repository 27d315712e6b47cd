"""SQLite's single writer runs its statements on the event loop: waiting for another process's
write lock must not block the loop, and the write goes through once the lock is free."""

import asyncio
import sqlite3

import pytest

from tests.conftest import BACKEND
from tests.factories import create_user, row_counts

pytestmark = pytest.mark.skipif(BACKEND != "sqlite", reason="SQLite's database-wide write lock")


@pytest.mark.parametrize("path", ["/v1/users/create", "/v1/users/reputation"])
async def test_a_write_waits_for_another_process_without_blocking_the_loop(
    client, tenant, database, path
):
    """For both kinds of write: an ORM session (users/create), a ``Database.transaction``
    (reputation)."""
    user = await create_user(client, tenant)
    body = (
        [{"email": "w@example.com"}]
        if path.endswith("create")
        else {"id": user["id"], "delta": 5, "reason": "test"}
    )
    holder = sqlite3.connect(database.url.database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # as the CLI would, in another process
    try:
        write = asyncio.create_task(client.post(path, headers=tenant.w, json=body))
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
    counts = await row_counts(database)
    assert (counts["users"], counts["reputation_entries"]) == (
        (2, 0) if path.endswith("create") else (1, 1)
    )
