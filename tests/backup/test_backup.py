"""``tessera backup``: a backup taken from a real ``tessera serve`` while it takes concurrent
writes restores into a new database with every write acknowledged before it started, each whole
(a batch of users with their wallets, an order with its lines and their items), as the
manifest counts them, and the server serves it; ``verify`` opens every secret with the right
ring and names the key a ring lacks; ``restore`` leaves a database with a table alone. On the
suite's backend (SQLite, and PostgreSQL in its run). The restored keys sign on the real
runtime: tests/chain/test_backup.py."""

import asyncio
import base64
import json
import secrets
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select, text

from tessera.backup import service
from tessera.db.dumps import DatabaseNotEmpty
from tessera.models import Order, OrderItem, ProductItem, User, UserWallet
from tests.backup.databases import empty_database, reading, row_counts, sealed_secrets
from tests.conftest import BACKEND
from tests.factories import create_users
from tests.serving import BIN, fresh_database, serve, settings_env, tessera

# pg_dump and pg_restore need PostgreSQL itself, not a transaction pooler (they set session
# settings): behind PgBouncer they reach it by TESSERA_DATABASE_DIRECT_URL, which
# test_the_commands_that_need_a_session_connect_to_the_direct_url shows them using.
pytestmark = pytest.mark.direct_postgresql

WRITERS = 4
HASH_KEY = secrets.token_hex(32)
LINES = (2, 3)  # an order's quantities: 1 order, 2 lines, 5 items in one transaction


def ring(*kids: str) -> str:
    return ",".join(f"{kid}:{base64.b64encode(secrets.token_bytes(32)).decode()}" for kid in kids)


async def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "tessera"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Load:
    """Writers that each create two users, then order for one of them, until stopped; every
    answer kept with when it arrived."""

    def __init__(self, api: httpx.AsyncClient, products: tuple[str, str]) -> None:
        self.api, self.products = api, products
        self.users: list[tuple[float, str]] = []
        self.orders: list[tuple[float, str]] = []
        self.stop = asyncio.Event()
        self.going = asyncio.Event()  # set once ten orders are in

    async def writer(self, n: int) -> None:
        while not self.stop.is_set():
            body = [{"email": f"w{n}-{len(self.users)}-{i}@load.test"} for i in range(2)]
            made = await self.api.post("/v1/users/create", json=body)
            assert made.status_code == 201, made.text
            ids = [user["id"] for user in made.json()["users"]]
            self.users += [(time.monotonic(), user_id) for user_id in ids]
            order = await self.api.post(
                "/v1/orders",
                json={
                    "user": {"id": ids[0]},
                    "items": [
                        {"product_id": p, "quantity": q}
                        for p, q in zip(self.products, LINES, strict=True)
                    ],
                },
            )
            assert order.status_code == 201, order.text
            self.orders.append((time.monotonic(), order.json()["id"]))
            if len(self.orders) >= 10:
                self.going.set()
            await asyncio.sleep(0.02)  # load, not a stress: the backup's process needs a core

    def acknowledged_before(self, moment: float) -> tuple[set[str], set[str]]:
        """The users and orders whose answers arrived before ``moment``."""
        return (
            {user for at, user in self.users if at < moment},
            {order for at, order in self.orders if at < moment},
        )


async def test_a_backup_under_write_load_restores_every_acknowledged_write_whole(tmp_path):
    source = await asyncio.to_thread(fresh_database, BACKEND, tmp_path, "backup_source")
    keys = ring("k1")
    env = settings_env(source, secret_keys=keys, hash_key=HASH_KEY, worker_in_process=False)
    project = tessera("project", "create", "--name", "Backed up", env=env)
    backup = tmp_path / "backup"
    with serve(env, tmp_path / "serve.log") as base:
        headers = {"x-api-key": project["api_key"]}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as api:
            products = []
            for name in ("Pass", "Drinks"):
                made = await api.post("/v1/products", json={"type": "admission", "name": name})
                products.append(made.json()["id"])
            load = Load(api, (products[0], products[1]))
            writers = [asyncio.create_task(load.writer(n)) for n in range(WRITERS)]
            await load.going.wait()
            started = time.monotonic()
            taken = await cli("backup", "create", str(backup), env=env)
            done = time.monotonic()
            await asyncio.sleep(0.2)
            load.stop.set()
            await asyncio.gather(*writers)
    assert taken.returncode == 0, taken.stderr
    users, orders = load.acknowledged_before(started)
    assert any(started <= at < done for at, _ in load.orders), "no write while it ran"

    restored = await empty_database(BACKEND, tmp_path, "backup_restored")
    restored_env = env | {"TESSERA_DATABASE_URL": restored}
    put_back = await cli("backup", "restore", str(backup), env=restored_env)
    assert put_back.returncode == 0, put_back.stderr
    report = json.loads(put_back.stdout)
    assert report["schema_head"] == report["code_head"] and "next:" not in put_back.stderr

    async with reading(restored) as session:
        found_users = set(map(str, await session.scalars(select(User.id))))
        found_orders = set(map(str, await session.scalars(select(Order.id))))
        wallets = await session.execute(
            select(User.id, func.count(UserWallet.id))
            .outerjoin(UserWallet, UserWallet.user_id == User.id)
            .group_by(User.id)
        )
        lines = await session.execute(
            select(Order.id, OrderItem.quantity, func.count(ProductItem.id))
            .outerjoin(OrderItem, OrderItem.order_id == Order.id)
            .outerjoin(ProductItem, ProductItem.order_item_id == OrderItem.id)
            .group_by(Order.id, OrderItem.id, OrderItem.quantity)
        )
        by_order: dict[str, list[tuple[int, int]]] = {}
        for order_id, quantity, items in lines:
            by_order.setdefault(str(order_id), []).append((quantity, items))
    assert users <= found_users and orders <= found_orders  # everything acknowledged before
    assert {count for _, count in wallets} == {1}  # each user with their wallet
    assert {tuple(sorted(order)) for order in by_order.values()} == {((2, 2), (3, 3))}
    assert report["secrets_opened"] == await sealed_secrets(restored) > len(found_users)

    manifest = json.loads((backup / "manifest.json").read_text())
    assert manifest["row_counts"] == await row_counts(restored)
    assert manifest["key_ids"] == ["k1"] and manifest["backend"] == BACKEND

    with serve(restored_env, tmp_path / "restored.log") as base:
        order_id = sorted(orders)[0]
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as api:
            answer = await api.get(f"/v1/orders/{order_id}")
            assert answer.status_code == 200, answer.text
            assert len(answer.json()["product_items"]) == sum(LINES)


@pytest.fixture
def backed_up(database, settings, tmp_path) -> Callable[[], Awaitable[Path]]:
    """Takes a backup of the suite's database, in this process."""

    async def take() -> Path:
        await service.create(database, tmp_path / "backup")
        return tmp_path / "backup"

    return take


def suite_env(settings, **changed: str) -> dict[str, str]:
    keys = settings.secret_keys.get_secret_value()
    hash_key = settings.hash_key.get_secret_value()
    return settings_env(settings.database_url, secret_keys=keys, hash_key=hash_key) | changed


async def test_verify_opens_every_secret_and_names_a_key_the_ring_lacks(
    client, tenant, settings, backed_up
):
    await create_users(client, tenant, 2)
    backup = await backed_up()
    keys = settings.secret_keys.get_secret_value()  # k1

    def verify(key_ring: str) -> Awaitable[subprocess.CompletedProcess[str]]:
        env = suite_env(settings, TESSERA_SECRET_KEYS=key_ring)
        return cli("backup", "verify", str(backup), env=env)

    # The ring after a rotation (a new active key, the backup's kept after it); a ring without
    # the backup's key; one with another key of the same id.
    rotated, without, impostor = await asyncio.gather(
        verify(f"{ring('k2')},{keys}"), verify(ring("k2")), verify(ring("k1"))
    )
    assert rotated.returncode == 0, rotated.stderr
    opened = json.loads(rotated.stdout)["secrets_opened"]
    assert opened == await sealed_secrets(settings.database_url) > 2
    assert without.returncode == 1 and without.stdout == ""
    assert without.stderr.startswith("error: the backup's secrets need key 'k1', which ")
    assert len(without.stderr.splitlines()) == 1
    assert impostor.returncode == 1
    assert impostor.stderr.startswith(
        "error: a secret of user_wallets sealed with key 'k1' does not open"
    )


async def test_restore_refuses_a_database_with_a_table_and_changes_nothing(
    app, client, tenant, settings, backed_up, tmp_path
):
    backup = await backed_up()
    # Any table: one of another application's is refused too.
    another = await empty_database(BACKEND, tmp_path, "backup_another")
    async with reading(another) as session:
        await session.execute(text("CREATE TABLE notes (note text)"))
        await session.execute(text("INSERT INTO notes VALUES ('kept')"))
        await session.commit()
    with pytest.raises(DatabaseNotEmpty):
        await service.restore(app.state.box, another, backup)
    async with reading(another) as session:
        assert list(await session.scalars(text("SELECT note FROM notes"))) == ["kept"]

    await create_users(client, tenant, 1)
    before = await row_counts(settings.database_url)

    refused, again = await asyncio.gather(
        cli("backup", "restore", str(backup), env=suite_env(settings)),
        cli("backup", "create", str(backup), env=suite_env(settings)),
    )
    assert refused.returncode == 1
    assert refused.stderr.endswith("is not empty\n") and len(refused.stderr.splitlines()) == 1
    assert await row_counts(settings.database_url) == before
    assert again.returncode == 1
    assert again.stderr == f"error: {backup} exists: a backup is written into a new directory\n"


async def test_the_commands_that_need_a_session_connect_to_the_direct_url(
    client, tenant, settings, tmp_path
):
    """Behind a pooler (TESSERA_DATABASE_URL, TESSERA_DB_TRANSACTION_POOLER=true), `db status`
    and `backup create|verify` connect to TESSERA_DATABASE_DIRECT_URL: here the pooler's
    address answers nothing, and they work."""
    await create_users(client, tenant, 1)
    nowhere = (
        "postgresql+asyncpg://tessera:tessera@127.0.0.1:9/tessera"
        if BACKEND == "postgresql"
        else f"sqlite+aiosqlite:///{tmp_path / 'no-such-folder' / 'tessera.db'}"
    )
    env = suite_env(
        settings,
        TESSERA_DATABASE_URL=nowhere,
        TESSERA_DATABASE_DIRECT_URL=settings.database_url,
        TESSERA_DB_TRANSACTION_POOLER="true",
    )
    status = await cli("db", "status", env=env)
    assert status.returncode == 0, status.stderr
    taken = await cli("backup", "create", str(tmp_path / "backup"), env=env)
    assert taken.returncode == 0, taken.stderr
    checked = await cli("backup", "verify", str(tmp_path / "backup"), env=env)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["secrets_opened"] > 0
    assert (
        await cli("db", "status", env=env | {"TESSERA_DATABASE_DIRECT_URL": ""})
    ).returncode == 1
