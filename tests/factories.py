"""Explicit async factories: each returns what it made and takes overrides for any field."""

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from substrateinterface import Keypair, KeypairType

from tessera.db import database_of
from tessera.projects.service import create_project, issue_api_key
from tests import orm

_seq = itertools.count(1)


@dataclass(frozen=True)
class Tenant:
    project_id: uuid.UUID
    write_key: str
    read_key: str
    client_id: str
    client_secret: str

    @property
    def w(self) -> dict[str, str]:
        """Headers with the project's write API key."""
        return {"x-api-key": self.write_key}

    @property
    def r(self) -> dict[str, str]:
        """Headers with a read-only API key."""
        return {"x-api-key": self.read_key}


async def make_tenant(app: FastAPI, *, name: str = "Acme") -> Tenant:
    settings = app.state.settings
    hash_key = settings.hash_key.get_secret_value().encode()
    database = database_of(app)
    created = await create_project(
        database, name=name, box=app.state.box, hash_key=hash_key, ss58_prefix=42
    )
    read = await issue_api_key(
        database, project_id=created.project_id, permission="read", hash_key=hash_key
    )
    return Tenant(
        created.project_id, created.api_key, read.api_key, created.client_id, created.client_secret
    )


async def door_key(app: FastAPI, tenant: Tenant) -> dict[str, str]:
    """Headers with a new check-in key of the tenant's project (the door's credential)."""
    hash_key = app.state.settings.hash_key.get_secret_value().encode()
    key = await issue_api_key(
        database_of(app), project_id=tenant.project_id, permission="checkin", hash_key=hash_key
    )
    return {"x-api-key": key.api_key}


def user_body(**overrides: Any) -> dict[str, Any]:
    n = next(_seq)
    return {
        "email": f"user{n}@example.com",
        "firstName": f"First{n}",
        "lastName": f"Last{n}",
        "referenceId": f"ref-{n}",
    } | overrides


async def create_users(
    client: httpx.AsyncClient, tenant: Tenant, count: int = 1, **overrides: Any
) -> list[dict[str, Any]]:
    response = await client.post(
        "/v1/users/create", headers=tenant.w, json=[user_body(**overrides) for _ in range(count)]
    )
    assert response.status_code == 201, response.text
    return response.json()["users"]


async def create_user(
    client: httpx.AsyncClient, tenant: Tenant, **overrides: Any
) -> dict[str, Any]:
    return (await create_users(client, tenant, 1, **overrides))[0]


def event_body(**overrides: Any) -> dict[str, Any]:
    n = next(_seq)
    now = int(time.time())
    return {
        "name": f"Event {n}",
        "start_date": now + 86400,
        "end_date": now + 2 * 86400,
        "location": "Main Hall",
        "address": "1 Test Street",
        "description": "A test event",
        "reference_id": f"event-{n}",
    } | overrides


async def create_event(
    client: httpx.AsyncClient, tenant: Tenant, **overrides: Any
) -> dict[str, Any]:
    response = await client.post(
        "/v1/events/create", headers=tenant.w, json=event_body(**overrides)
    )
    assert response.status_code == 201, response.text
    return response.json()


def product_body(**overrides: Any) -> dict[str, Any]:
    n = next(_seq)
    return {
        "type": "admission",
        "name": f"Product {n}",
        "description": "A test product",
    } | overrides


async def create_product(
    client: httpx.AsyncClient, tenant: Tenant, **overrides: Any
) -> dict[str, Any]:
    response = await client.post("/v1/products", headers=tenant.w, json=product_body(**overrides))
    assert response.status_code == 201, response.text
    return response.json()


async def issue_items(
    client: httpx.AsyncClient, tenant: Tenant, product_id: str, *user_ids: str
) -> list[dict[str, Any]]:
    response = await client.post(
        f"/v1/products/{product_id}/items", headers=tenant.w, json={"users": list(user_ids)}
    )
    assert response.status_code == 201, response.text
    return response.json()["items"]


async def create_order(
    client: httpx.AsyncClient, tenant: Tenant, user_id: str, *lines: tuple[str, int], **extra: Any
) -> httpx.Response:
    body = {
        "user": {"id": user_id},
        "items": [{"product_id": p, "quantity": q} for p, q in lines],
    } | extra
    return await client.post("/v1/orders", headers=tenant.w, json=body)


async def transfer_item(
    client: httpx.AsyncClient,
    tenant: Tenant,
    product_id: str,
    item_id: str,
    sender: dict[str, Any],
    recipient: dict[str, Any],
) -> httpx.Response:
    """``POST /v1/products/{id}/transfer`` of an item between two users, by id."""
    return await client.post(
        f"/v1/products/{product_id}/transfer",
        headers=tenant.w,
        json={
            "product_item_id": item_id,
            "sender_user_id": sender["id"],
            "recipient_user_id": recipient["id"],
        },
    )


async def items_of(database: Any, product_id: str) -> list[Any]:
    """A product's items straight from the database, by item_id."""
    from sqlalchemy import select

    from tessera.models import ProductItem

    async with orm.session(database, write=False) as session:
        return list(
            await session.scalars(
                select(ProductItem)
                .where(ProductItem.product_id == uuid.UUID(product_id))
                .order_by(ProductItem.item_id)
            )
        )


async def row_counts(database: Any) -> dict[str, int]:
    """Rows per table (signing keys and the rate limits' counts aside: an attempt let through
    counts, whatever it did): equal before and after means nothing changed."""
    from sqlalchemy import func, select

    from tessera.models import Base, RateBucket, RateHit, SigningKey

    apart = {SigningKey.__tablename__, RateHit.__tablename__, RateBucket.__tablename__}
    async with orm.session(database, write=False) as session:
        return {
            table.name: await session.scalar(select(func.count()).select_from(table)) or 0
            for table in Base.metadata.sorted_tables
            if table.name not in apart
        }


async def create_claim_link(
    client: httpx.AsyncClient, tenant: Tenant, product_id: str, **body: Any
) -> dict[str, Any]:
    """A claim link of the product (which must be claimable), with its token."""
    response = await client.post(
        f"/v1/products/{product_id}/claim-links", headers=tenant.w, json=body
    )
    assert response.status_code == 201, response.text
    return response.json()


# Wallets the users hold: linked by signing a challenge with the wallet's key.


async def challenge(client, tenant, user, keypair) -> dict:
    response = await client.post(
        "/v1/users/wallets/challenge",
        headers=tenant.w,
        json={"id": user["id"], "address": keypair.ss58_address},
    )
    assert response.status_code == 201, response.text
    return response.json()


async def link(client, tenant, user, keypair, message: str | bytes, signer=None):
    data = message.encode() if isinstance(message, str) else message
    signature = "0x" + (signer or keypair).sign(data).hex()
    return await client.post(
        "/v1/users/wallets",
        headers=tenant.w,
        json={"email": user["email"], "address": keypair.ss58_address, "signature": signature},
    )


async def linked(client, tenant, user, keypair) -> dict:
    issued = await challenge(client, tenant, user, keypair)
    response = await link(client, tenant, user, keypair, issued["message"])
    assert response.status_code == 201, response.text
    return response.json()


async def link_receiving(client, tenant, user) -> tuple[Keypair, dict]:
    """The user links a new wallet they hold (its keypair, the test's) and chooses it to
    receive their NFTs: the keypair and that wallet."""
    keypair = Keypair.create_from_uri(f"//{uuid.uuid4().hex}", crypto_type=KeypairType.SR25519)
    answer = await linked(client, tenant, user, keypair)
    [wallet] = [w for w in answer["wallets"] if w["custody"] == "user-controlled"]
    chosen = await client.post(
        "/v1/users/wallets/receiving",
        headers=tenant.w,
        json={"id": user["id"], "wallet_id": wallet["id"]},
    )
    assert chosen.status_code == 200, chosen.text
    assert chosen.json()["receivingWalletId"] == wallet["id"], chosen.text
    return keypair, wallet
