"""The same writes write the same rows on SQLite and on PostgreSQL, column by column.

The hot writes take a path of their own per backend (PostgreSQL issues a product's items in one
statement, ``tessera.db.issuing``; SQLite bumps the product, then inserts), so one scenario of
writes goes through the API of an app on each database, and every row of every table the
scenario writes is compared. Values generated apart are matched apart: an id (or a new wallet's
keys) is replaced by where it stands (the scenario's own names, else its table, column and rank
among the table's rows), a timestamp by whether it is set and in UTC (each app has its own
clock). Two columns are each backend's own by design and left out: ``changes.txid``
(PostgreSQL's transaction id, 0 on SQLite) and ``changes.seq`` (a counter shared with every
earlier test on that database).

It runs in the PostgreSQL run of the suite, next to an app of its own on a SQLite file.
"""

import asyncio
import datetime as dt
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Table, select

from tessera import migrations
from tessera.config import Settings
from tessera.db import Database, database_of
from tessera.main import create_app
from tessera.models import Base
from tests import orm
from tests.conftest import BACKEND
from tests.factories import Tenant, make_tenant

pytestmark = pytest.mark.skipif(
    BACKEND != "postgresql", reason="compares with PostgreSQL: runs in the PostgreSQL run"
)

WRITTEN = {
    "users",
    "user_wallets",
    "events",
    "attendees",
    "products",
    "orders",
    "order_items",
    "product_items",
    "redemptions",
    "item_transfers",
    "changes",
    "jobs",
}
OUTBOXES = ("changes", "jobs")
# Parents before children (the order of Base.metadata), the outboxes last: their payloads name
# rows of every other table.
TABLES = sorted(
    (t for t in Base.metadata.sorted_tables if t.name in WRITTEN), key=lambda t: t.name in OUTBOXES
)
OWN_BY_DESIGN = {("changes", "txid"), ("changes", "seq")}
# Changes are named by their place in the feed, (txid, seq): commit order on both backends (one
# use-case's changes can hold the same object, an order created and completed at once).
# Values made at random for each row, matched like ids: a new wallet's keys and address.
RANDOM = {
    ("user_wallets", "address"),
    ("user_wallets", "public_key"),
    ("user_wallets", "secret_blob"),
}
START = int(time.time()) + 86400


async def scenario(client: httpx.AsyncClient, tenant: Tenant) -> dict[str, str]:
    """Every hot write once or more, with fixed input; the ids it was answered, by name."""
    w = tenant.w
    names: dict[str, str] = {}

    async def post(path: str, body: Any, status: int) -> Any:
        response = await client.post(path, headers=w, json=body)
        assert response.status_code == status, (path, response.text)
        return response.json()

    users = [
        {"email": f"u{n}@example.com", "firstName": f"F{n}", "lastName": f"L{n}"} for n in range(3)
    ]
    for n, user in enumerate((await post("/v1/users/create", users, 201))["users"]):
        names[f"user{n}"] = user["id"]
    event = await post(
        "/v1/events/create",
        {
            "name": "Parity",
            "start_date": START,
            "end_date": START + 3600,
            "location": "Hall",
            "address": "1 Street",
        },
        201,
    )
    names["event"] = event["id"]
    product = await post(
        "/v1/products",
        {
            "type": "admission",
            "name": "Ticket",
            "description": "In",
            "event_id": event["id"],
            "redemption_quantity": 3,
            "max_per_account": 5,
            "stock": 100,
            "price": "12.50",
            "is_transferable": True,
        },
        201,
    )
    names["product"] = product["id"]
    issued = await post(
        f"/v1/products/{product['id']}/items", {"users": [names["user0"], names["user1"]]}, 201
    )
    for n, item in enumerate(issued["items"]):
        names[f"issued{n}"] = item["id"]
    order = await post(
        "/v1/orders",
        {
            "user": {"id": names["user2"]},
            "items": [{"product_id": product["id"], "quantity": 2}],
            "order_number": "P-1",
        },
        201,
    )
    names["order"] = order["id"]
    await post(
        "/v1/events/attendees/register",
        {"event_id": event["id"], "user_id": names["user0"]},
        200,
    )
    path = f"/v1/products/{product['id']}/items/redeem"
    await post(path, {"product_item_id": names["issued0"], "nonce": "gate-1"}, 200)
    await post(path, {"product_item_id": names["issued0"], "nonce": "gate-1"}, 200)  # counted once
    await post(path, {"product_item_id": names["issued1"]}, 200)
    await post(
        f"/v1/products/{product['id']}/transfer",
        {
            "product_item_id": names["issued1"],
            "sender_user_id": names["user1"],
            "recipient_user_id": names["user2"],
        },
        200,
    )
    return names


async def table_rows(database: Database, table: Table, project_id: uuid.UUID) -> list[dict]:
    statement = select(table)
    if "project_id" in table.c:
        statement = statement.where(table.c.project_id == project_id)
    async with orm.session(database, write=False) as session:
        return [dict(row._mapping) for row in await session.execute(statement)]


class Canon:
    """Rows with their generated values replaced by what they stand for."""

    def __init__(self, names: dict[str, str], project_id: uuid.UUID) -> None:
        self.labels: dict[Any, str] = {uuid.UUID(v): k for k, v in names.items()}
        self.labels[project_id] = "project"

    def value(self, value: Any) -> Any:
        if isinstance(value, uuid.UUID | bytes | str) and value in self.labels:
            return self.labels[value]
        if isinstance(value, str):
            try:
                return self.labels.get(uuid.UUID(value), value)
            except ValueError:
                pass
            if value[:1] in ("{", "["):
                return self.value(json.loads(value))
            try:
                return self.value(dt.datetime.fromisoformat(value))
            except ValueError:
                return value
        if isinstance(value, dt.datetime):
            return ("timestamp", value.utcoffset() == dt.timedelta(0))
        if isinstance(value, dict):  # an answer in the outbox
            return {k: self.field(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def field(self, key: str, value: Any) -> Any:
        """A column's or a JSON field's value: a time in unix seconds stands for a time."""
        if key.endswith(("_at", "At", "On")) and isinstance(value, int):
            return ("unix seconds",)
        return self.value(value)

    def name(self, table: Table, rows: list[dict]) -> None:
        """Name the generated values of ``table``'s rows that the scenario did not name: by
        the row's rank among the table's rows, ordered by everything else they hold."""
        made = [
            c.name
            for c in table.c
            if (c.name == "id" or c.primary_key or (table.name, c.name) in RANDOM)
            and (table.name, c.name) not in OWN_BY_DESIGN
        ]

        def rest(row: dict) -> str:
            return repr(
                sorted(
                    (k, self.field(k, v))
                    for k, v in row.items()
                    if k not in made and (table.name, k) not in OWN_BY_DESIGN
                )
            )

        ranked = (
            sorted(rows, key=lambda row: (row["txid"], row["seq"]))
            if table.name == "changes"
            else sorted(rows, key=rest)
        )
        for rank, row in enumerate(ranked):
            for column in made:
                raw = row[column]
                if raw is not None and raw not in self.labels:
                    self.labels[raw] = f"{table.name}.{column}#{rank}"

    def rows(self, table: Table, rows: list[dict]) -> list[dict]:
        shown = [
            {k: self.field(k, v) for k, v in row.items() if (table.name, k) not in OWN_BY_DESIGN}
            for row in rows
        ]
        return sorted(shown, key=repr)


async def written(app: FastAPI) -> dict[str, list[dict]]:
    tenant = await make_tenant(app)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as client:
        names = await scenario(client, tenant)
    canon = Canon(names, tenant.project_id)
    database: Database = database_of(app)
    found = {t.name: await table_rows(database, t, tenant.project_id) for t in TABLES}
    for table in TABLES:
        canon.name(table, found[table.name])
    return {t.name: canon.rows(t, found[t.name]) for t in TABLES}


@pytest.fixture
async def sqlite_app(settings: Settings, tmp_path: Path) -> AsyncIterator[FastAPI]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'parity.db'}"
    await asyncio.to_thread(migrations.upgrade, url)
    application = create_app(settings.model_copy(update={"database_url": url}))
    async with application.router.lifespan_context(application):
        yield application


async def test_both_backends_write_the_same_rows(app: FastAPI, sqlite_app: FastAPI):
    assert database_of(sqlite_app).is_sqlite and not database_of(app).is_sqlite
    on_postgresql = await written(app)
    on_sqlite = await written(sqlite_app)
    for name in ("users", "user_wallets", "events", "attendees", "products", "orders"):
        assert on_postgresql[name], name  # the scenario wrote them
    assert len(on_postgresql["product_items"]) == 4
    assert len(on_postgresql["redemptions"]) == 2
    assert len(on_postgresql["item_transfers"]) == 1
    assert len(on_postgresql["changes"]) >= 10
    for table in TABLES:
        for mine, theirs in zip(on_sqlite[table.name], on_postgresql[table.name], strict=True):
            assert mine == theirs, (table.name, mine, theirs)
