"""Reading ``GET /v1/changes`` as a client does: a page, every page, and the changes once shown.

On PostgreSQL a change is shown once every transaction that began before it has ended, in any
database of the server (the snapshot's xmin is the server's): another session's transaction can
hold a change back for a moment after its request answered. ``shown`` therefore waits for the
changes a test expects, and a test that expects no change makes one more after (``marker``) and
waits for it: every change written before it is shown with it or not at all.
"""

import asyncio
import time
from typing import Any

import httpx

from tests.factories import Tenant, create_user

WAIT_SECONDS = 10.0


async def page(client: httpx.AsyncClient, tenant: Tenant, **params: Any) -> dict[str, Any]:
    """One page of the tenant's feed (read key); ``after=None`` is left out."""
    query = {name: value for name, value in params.items() if value is not None}
    response = await client.get("/v1/changes", headers=tenant.r, params=query)
    assert response.status_code == 200, response.text
    return response.json()


async def read_all(
    client: httpx.AsyncClient, tenant: Tenant, *, after: str | None = None, limit: int = 1000
) -> tuple[list[dict[str, Any]], str]:
    """Every change shown now after ``after``, page by page, and the last page's cursor."""
    events: list[dict[str, Any]] = []
    while True:
        body = await page(client, tenant, after=after, limit=limit)
        events += body["events"]
        after = body["cursor"]
        if len(body["events"]) < limit:
            return events, after


async def shown(
    client: httpx.AsyncClient, tenant: Tenant, count: int, *, after: str | None = None
) -> list[dict[str, Any]]:
    """The changes after ``after`` once at least ``count`` are shown (or the wait is over)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        events, _ = await read_all(client, tenant, after=after)
        if len(events) >= count or time.monotonic() > deadline:
            return events
        await asyncio.sleep(0.02)


def typed(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each change as (type, data), what the tests compare."""
    return [(event["type"], event["data"]) for event in events]


async def marker(client: httpx.AsyncClient, tenant: Tenant) -> tuple[str, dict[str, Any]]:
    """A change made after the others (a new user), as ``typed`` shows it."""
    return ("user.created", await create_user(client, tenant))


async def of_type(client: httpx.AsyncClient, tenant: Tenant, type_: str) -> list[dict[str, Any]]:
    """The changes of ``type_`` made so far: those shown with a marker made after them."""
    marked = await marker(client, tenant)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        events, _ = await read_all(client, tenant)
        if marked in typed(events):
            return [event for event in events if event["type"] == type_]
        assert time.monotonic() < deadline, "the marker change never showed"
        await asyncio.sleep(0.02)


async def cursor_now(client: httpx.AsyncClient, tenant: Tenant) -> str:
    """A cursor after every change made so far (and a marker change made now)."""
    marked = await marker(client, tenant)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        events, cursor = await read_all(client, tenant)
        if marked in typed(events):
            return cursor
        assert time.monotonic() < deadline, "the marker change never showed"
        await asyncio.sleep(0.02)
