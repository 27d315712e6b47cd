"""Webhook endpoint use-cases: register, list, read, change, delete, deliveries, replay."""

import base64
import secrets
import uuid
from typing import Any

from tessera.auth.principal import Principal
from tessera.changes import service as feed
from tessera.db import Database, Rows, rerun_on_conflict
from tessera.errors import DeliveryNotFound, WebhookNotFound
from tessera.models import DeliveryStatus, WebhookEndpoint
from tessera.models.base import new_id, utcnow
from tessera.schemas import PageParams, Pagination
from tessera.toolkit.crypto import Sealed, SecretBox
from tessera.webhooks import repository
from tessera.webhooks.addresses import check_reachable, check_url
from tessera.webhooks.repository import UPDATE_FIELDS, DeliveryRow, EndpointRow
from tessera.webhooks.schemas import (
    DeliveryList,
    DeliveryRead,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookRead,
    WebhookUpdate,
)

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
SECRET_BYTES = 32  # Standard Webhooks: between 24 and 64


def secret_aad(endpoint_id: uuid.UUID) -> bytes:
    """Binds a sealed secret to its endpoint: a blob copied to another row does not open."""
    return b"webhook:" + endpoint_id.bytes


def open_secret(box: SecretBox, endpoint: EndpointRow | WebhookEndpoint) -> str:
    sealed = Sealed(endpoint.secret_key_id, endpoint.secret_blob)
    return box.open(sealed, aad=secret_aad(endpoint.id)).decode()


@rerun_on_conflict
async def create_webhook(
    database: Database,
    principal: Principal,
    *,
    body: WebhookCreate,
    box: SecretBox,
    allow_private: bool,
) -> WebhookCreated:
    """Register an endpoint; it receives the changes committed from now on. The signing secret
    is in this answer only (Tessera keeps it sealed, to sign)."""
    url = check_url(body.url, allow_private=allow_private)
    await check_reachable(url, allow_private=allow_private)
    endpoint_id = new_id()
    secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
    sealed = box.seal(secret.encode(), aad=secret_aad(endpoint_id))
    now = utcnow()
    async with database.transaction() as tx:
        start, snapshot = await feed.end(tx)
        endpoint = await repository.add_endpoint(
            tx,
            {
                "id": endpoint_id,
                "project_id": principal.project_id,
                "url": url,
                "event_types": _types(body.event_types),
                "secret_key_id": sealed.key_id,
                "secret_blob": sealed.blob,
                "secret_hint": secret[: len(SECRET_PREFIX) + 4],
                "enabled": True,
                "after_txid": start.txid,
                "after_seq": start.seq,
                "start_snapshot": snapshot,
                "next_attempt_at": now,
                "failures": 0,
                "created_at": now,
                "updated_at": now,
            },
        )
        await tx.commit()
    return WebhookCreated(**WebhookRead.of(endpoint).model_dump(), secret=secret)


def _types(types: list[Any] | None) -> list[str] | None:
    return None if types is None else sorted({str(t) for t in types})


async def _read_endpoint(
    rows: Rows, project_id: uuid.UUID, endpoint_id: uuid.UUID, *, lock: bool = False
) -> EndpointRow:
    endpoint = await repository.read_endpoint(rows, project_id, endpoint_id, lock=lock)
    if endpoint is None:
        raise WebhookNotFound
    return endpoint


async def get_webhook(
    database: Database, principal: Principal, *, endpoint_id: uuid.UUID
) -> WebhookRead:
    return WebhookRead.of(await database.read(_read_endpoint, principal.project_id, endpoint_id))


async def list_webhooks(
    database: Database, principal: Principal, *, paging: PageParams
) -> WebhookList:
    found, total = await database.read(repository.read_endpoints, principal.project_id, paging)
    return WebhookList(
        webhooks=[WebhookRead.of(row) for row in found],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )


@rerun_on_conflict
async def update_webhook(
    database: Database,
    principal: Principal,
    *,
    endpoint_id: uuid.UUID,
    body: WebhookUpdate,
    allow_private: bool,
) -> WebhookRead:
    """Change the URL or the event types, or enable or disable the endpoint. Enabling starts
    its retries afresh, from the first change it has not accepted."""
    sent = body.model_dump(exclude_unset=True)
    if sent.get("url") is not None:
        check_url(sent["url"], allow_private=allow_private)
        await check_reachable(sent["url"], allow_private=allow_private)
    async with database.transaction() as tx:
        endpoint = await _read_endpoint(tx, principal.project_id, endpoint_id, lock=True)
        values = {name: getattr(endpoint, name) for name in UPDATE_FIELDS}
        if sent.get("url") is not None:
            values["url"] = sent["url"]
        if "event_types" in sent:
            values["event_types"] = _types(sent["event_types"])
        now = utcnow()
        if sent.get("enabled") is True and not endpoint.enabled:
            values |= {
                "enabled": True,
                "disabled_reason": None,
                "failures": 0,
                "failing_since": None,
                "next_attempt_at": now,
            }
        elif sent.get("enabled") is False and endpoint.enabled:
            values |= {"enabled": False, "disabled_reason": "disabled through the API"}
        if all(values[name] == getattr(endpoint, name) for name in UPDATE_FIELDS):
            return WebhookRead.of(endpoint)  # no change: nothing written, updated_at stays
        updated = await repository.update_endpoint(tx, endpoint.id, values, now=now)
        await tx.commit()
    return WebhookRead.of(updated)


@rerun_on_conflict
async def delete_webhook(
    database: Database, principal: Principal, *, endpoint_id: uuid.UUID
) -> None:
    """Delete an endpoint and its delivery attempts; nothing more is sent to it."""
    async with database.transaction() as tx:
        if not await repository.delete_endpoint(tx, principal.project_id, endpoint_id):
            raise WebhookNotFound
        await tx.commit()


async def list_deliveries(
    database: Database, principal: Principal, *, endpoint_id: uuid.UUID, paging: PageParams
) -> DeliveryList:
    """The endpoint's delivery attempts, newest first."""

    async def read(rows: Rows) -> tuple[list[DeliveryRow], int]:
        await _read_endpoint(rows, principal.project_id, endpoint_id)
        return await repository.read_deliveries(rows, endpoint_id, paging)

    found, total = await database.read(read)
    return DeliveryList(
        deliveries=[DeliveryRead.of(row) for row in found],
        pagination=Pagination(page=paging.page, limit=paging.limit, total=total),
    )


@rerun_on_conflict
async def replay_delivery(
    database: Database, principal: Principal, *, endpoint_id: uuid.UUID, delivery_id: uuid.UUID
) -> DeliveryRead:
    """Send a delivery's change to the endpoint once more, out of the feed's order (the
    receiver knows it by its ``webhook-id``); the new attempt is ``pending`` until the worker
    sends it, whether or not the endpoint is enabled."""
    async with database.transaction() as tx:
        await _read_endpoint(tx, principal.project_id, endpoint_id)
        earlier = await repository.read_delivery(tx, endpoint_id, delivery_id)
        if earlier is None:
            raise DeliveryNotFound
        replay = await repository.add_delivery(
            tx,
            {
                "endpoint_id": endpoint_id,
                "change_id": earlier.change_id,
                "change_type": earlier.change_type,
                "replay": True,
                "status": DeliveryStatus.PENDING,
            },
        )
        await tx.commit()
    return DeliveryRead.of(replay)
