"""Seed a fresh benchmark database through Tessera's own code.

- the schema: Tessera's migrations;
- a project with its write API key (``projects.service.create_project``, as ``tessera project
  create``) and a read key (``issue_api_key``, as ``tessera apikey create``);
- ``USERS`` users, each with a custodial wallet of its own: the keys come from
  ``chain.keys.new_custodial_key`` (in a process pool: ~50 us each) and the rows are bulk-inserted
  through Tessera's tables, as ``users.service.create_users`` writes them; every 10th user is
  activated, and the project's user counters (when this Tessera has them) are set to match;
- events, products, items and orders through the service functions the API runs.

It writes ``<backend>-data.json`` (what the scenarios need) and ``<backend>-ids/*.txt`` (one id a
line, read by bench/request.lua) into the results folder.
"""

import asyncio
import inspect
import json
import multiprocessing
import os
import random
import time
import uuid
from datetime import timedelta
from pathlib import Path

import asyncpg
from sqlalchemy import bindparam, update

from tessera import migrations
from tessera.auth.principal import Principal
from tessera.chain.keys import new_custodial_key
from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database
from tessera.events import service as events
from tessera.events.schemas import EventCreate
from tessera.models import Project, User, UserWallet
from tessera.models import base as models_base
from tessera.models.base import utcnow
from tessera.orders import service as orders
from tessera.orders.schemas import OrderCreate
from tessera.products import service as products
from tessera.products.item_schemas import ItemsIssue
from tessera.products.schemas import ProductCreate
from tessera.projects.schemas import ApiKeyCreated, ProjectCreated
from tessera.projects.service import create_project, issue_api_key
from tessera.toolkit.crypto import SecretBox

CHUNK = 10_000  # users per key batch and per insert transaction
SAMPLE = 200_000  # user ids written for the scenarios (a random sample beyond that)
EVENTS = 4
FILLER_PRODUCTS = 22  # so that products?limit=20 reads a full page
DRINK_ITEMS = 1_000
SEED_ORDERS = 200
ISSUE_BATCH = 500  # below the items endpoint's limit of 550


def fresh_database(backend: str, folder: Path, pg_url: str) -> str:
    """A new, empty database: a SQLite file in the results folder, or ``pg_url``'s database
    dropped and created again."""
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{(folder / 'sqlite.db').resolve()}"
    asyncio.run(_recreate_postgres(pg_url))
    return pg_url


async def _recreate_postgres(url: str) -> None:
    dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    server, name = dsn.rsplit("/", 1)
    admin = await asyncpg.connect(f"{server}/postgres")
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()


def seed(url: str, users: int, folder: Path, backend: str) -> dict:
    started = time.monotonic()
    migrations.upgrade(url)
    processes = max(1, min(os.cpu_count() or 1, users // CHUNK))
    with multiprocessing.Pool(processes, initializer=init_keys) as pool:
        data = asyncio.run(_seed(url, users, pool))
    data |= {"backend": backend, "database_url": url}
    data["seed_seconds"] = round(time.monotonic() - started, 1)
    write_ids(folder / f"{backend}-ids", data.pop("ids"))
    data["ids_dir"] = str(folder / f"{backend}-ids")
    (folder / f"{backend}-data.json").write_text(json.dumps(data, indent=2))
    return data


def write_ids(directory: Path, ids: dict[str, list[str]]) -> None:
    directory.mkdir(exist_ok=True)
    for name, values in ids.items():
        (directory / f"{name}.txt").write_text("\n".join(values) + "\n")


# -- keys, in worker processes ----------------------------------------------------------------

_box = None


def init_keys() -> None:
    global _box
    _box = SecretBox(Settings().key_ring)


def _keys(count: int) -> list[dict]:
    prefix = Settings().ss58_prefix
    return [new_custodial_key(_box, ss58_prefix=prefix).columns() for _ in range(count)]


# -- the seeding itself -----------------------------------------------------------------------


async def in_tree(use_case, database: Database, *args, **kwargs):
    """``use_case`` of the tree under test, given the database; in a tree from before the one
    data layer (an A/B run against an older baseline), an ORM session of it, which the use-case
    commits."""
    if "session" not in inspect.signature(use_case).parameters:
        return await use_case(database, *args, **kwargs)
    async with database.session() as session:
        return await use_case(session, *args, **kwargs)


async def new_project(
    database: Database, settings: Settings, name: str
) -> tuple[ProjectCreated, ApiKeyCreated]:
    """A project (its wallet, its write key) and a read key of it, through Tessera's own code."""
    hash_key = settings.hash_key.get_secret_value().encode()
    project = await in_tree(
        create_project,
        database,
        name=name,
        box=SecretBox(settings.key_ring),
        hash_key=hash_key,
        ss58_prefix=settings.ss58_prefix,
    )
    read_key = await in_tree(
        issue_api_key,
        database,
        project_id=project.project_id,
        permission="read",
        hash_key=hash_key,
        name=f"{name}-read",
    )
    return project, read_key


async def _seed(url: str, users: int, pool) -> dict:
    settings = Settings(database_url=url)
    database = Database(url)
    try:
        project, read_key = await new_project(database, settings, "bench")
        principal = Principal(project.project_id, True, "bench:seed")
        user_ids = await insert_users(database, principal.project_id, users, pool)
        data = await fill(database, settings, principal, user_ids)
    finally:
        await database.dispose()
    sample = user_ids if len(user_ids) <= SAMPLE else random.sample(user_ids, SAMPLE)
    random.shuffle(sample)  # registrations walk this list: random places in the index
    data["ids"]["users"] = sample
    return data | {
        "project_id": str(project.project_id),
        "write_key": project.api_key,
        "read_key": read_key.api_key,
        "users": users,
    }


async def insert_users(database, project_id: uuid.UUID, users: int, pool) -> list[str]:
    """``users`` users with one custodial wallet each, in transactions of ``CHUNK``."""
    sizes = [min(CHUNK, users - start) for start in range(0, users, CHUNK)]
    ids: list[str] = []
    activated = 0
    start_time = utcnow()
    # Ids and numbers as Tessera writes them (a tree without them, for an A/B run, gets
    # random ids and no numbers).
    new_id = getattr(models_base, "new_id", uuid.uuid4)
    numbered = "number" in User.__table__.c
    for chunk, keys in enumerate(pool.imap(_keys, sizes)):
        user_rows, wallet_rows = [], []
        for offset, key in enumerate(keys):
            n = chunk * CHUNK + offset
            at = start_time + timedelta(microseconds=n)  # listing order = creation order
            user_id = new_id()
            active = n % 10 == 0
            activated += active
            user_rows.append(
                ({"number": n + 1} if numbered else {})
                | {
                    "id": user_id,
                    "project_id": project_id,
                    "email": f"user{n}@bench.example",
                    "first_name": "Bench",
                    "last_name": f"User {n}",
                    "reference_id": f"ref-{n}",
                    "is_activated": active,
                    "activated_on": at if active else None,
                    "reputation": 0,
                    "created_at": at,
                    "updated_at": at,
                }
            )
            wallet_rows.append(
                {
                    "id": new_id(),
                    "user_id": user_id,
                    "project_id": project_id,
                    "created_at": at,
                    **key,
                }
            )
            ids.append(str(user_id))
        async with database.transaction() as tx:
            await tx.insert(User, user_rows)
            await tx.insert(UserWallet, wallet_rows)
            await tx.commit()
        if len(ids) % 100_000 == 0:
            print(f"   {len(ids)} users", flush=True)
    if "user_count" in Project.__table__.c:  # Tessera keeps per-project counters since 0005
        projects = Project.__table__
        counters = (
            update(projects)
            .where(projects.c.id == bindparam("project"))
            .values(
                user_count=bindparam("users"),
                active_user_count=bindparam("active"),
                updated_at=bindparam("at"),
            )
        )
        async with database.transaction() as tx:
            await tx.execute(
                counters, project=project_id, users=users, active=activated, at=utcnow()
            )
            await tx.commit()
    return ids


async def fill(database, settings, principal, user_ids: list[str]) -> dict:
    """Events, products, drink items and completed orders, each through its service."""
    chains = Chains(settings)  # nothing mints: no chain is dialled
    now = int(time.time())
    event_ids = []
    for n in range(EVENTS):
        body = EventCreate(
            name=f"Bench night {n}",
            start_date=now + 86400,
            end_date=now + 90000,
            location="Main Hall",
            address="1 Bench Street",
            reference_id=f"bench-event-{n}",
            description="Seeded by bench/seed.py",
        )
        event_ids.append((await in_tree(events.create_event, database, principal, body=body)).id)

    async def product(**fields) -> uuid.UUID:
        created = await products.create_product(
            database, principal, chains=chains, body=ProductCreate(**fields)
        )
        return created.id

    ticket = await product(
        type="admission",
        name="Ticket",
        event_id=event_ids[0],
        description="Admission",
        price="25.00",
    )
    drinks = await product(
        type="perks", name="Drinks", description="Many drinks", redemption_quantity=1_000_000_000
    )
    shop = await product(
        type="presale", name="Shop", description="Issued by the write scenarios", price="5.00"
    )
    fillers = [
        await product(
            type="perks",
            name=f"Extra {n}",
            description="Filler",
            event_id=event_ids[n % EVENTS] if n % 2 else None,
            price="1.50",
        )
        for n in range(FILLER_PRODUCTS)
    ]

    items = []
    holders = [uuid.UUID(u) for u in user_ids[:DRINK_ITEMS]]
    for start in range(0, len(holders), ISSUE_BATCH):
        body = ItemsIssue(users=holders[start : start + ISSUE_BATCH])
        issued = await products.issue_items(database, principal, product_id=drinks, body=body)
        items += [str(item.row.id) for item in issued]

    order_ids = []
    for n in range(min(SEED_ORDERS, len(user_ids))):
        body = OrderCreate.model_validate(
            {
                "user": {"id": user_ids[n]},
                "order_number": f"SEED-{n}",
                "items": [{"product_id": str(ticket), "quantity": 1}],
            }
        )
        created_order = await orders.create_order(database, principal, body=body)
        # The order as the API answers it (an older baseline returned its rows' view).
        order_ids.append(str(getattr(created_order, "order", created_order).id))

    return {
        "event": str(event_ids[0]),
        "ticket": str(ticket),
        "drinks": str(drinks),
        "shop": str(shop),
        "ids": {
            "events": [str(e) for e in event_ids],
            "products": [str(p) for p in (ticket, drinks, shop, *fillers)],
            "items": items,
            "orders": order_ids,
        },
    }
