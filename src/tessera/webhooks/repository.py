"""Webhook endpoint and delivery statements: the API's (service.py) and the dispatcher's
claims, leases and attempts (dispatcher.py). Endpoints and deliveries are read whole, in their
table's column order (``IdMixin``'s ``id`` comes last)."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, exists, func, or_, select, tuple_, update

from tessera.db import Rows, Transaction, lock_for_update, table_of
from tessera.db.queue import Final, claim
from tessera.models import Change, DeliveryStatus, WebhookDelivery, WebhookEndpoint
from tessera.schemas import PageParams

ENDPOINTS_PER_ROUND = 20  # endpoints, and replays, a dispatcher takes per round


class EndpointRow(NamedTuple):
    project_id: uuid.UUID
    url: str
    event_types: list[str] | None
    secret_key_id: str
    secret_blob: bytes
    secret_hint: str
    enabled: bool
    disabled_reason: str | None
    after_txid: int
    after_seq: int
    start_snapshot: str | None
    next_attempt_at: datetime
    failures: int
    failing_since: datetime | None
    leased_by: str | None
    leased_until: datetime | None
    created_at: datetime
    updated_at: datetime
    id: uuid.UUID


class DeliveryRow(NamedTuple):
    endpoint_id: uuid.UUID
    change_id: uuid.UUID
    change_type: str
    replay: bool
    status: str
    response_status: int | None
    response_body: str | None
    error: str | None
    duration_ms: int | None
    created_at: datetime
    id: uuid.UUID


class ReplayedChange(NamedTuple):
    """What a replay sends of its change."""

    id: uuid.UUID
    type: str
    created_at: datetime
    data: str


_ENDPOINTS, _DELIVERIES = table_of(WebhookEndpoint), table_of(WebhookDelivery)
_CHANGES = table_of(Change)

# The API's: every statement starts from the caller's project.
_OF_PROJECT = _ENDPOINTS.c.project_id == bindparam("project_id")
_ENDPOINT = select(_ENDPOINTS).where(_OF_PROJECT, _ENDPOINTS.c.id == bindparam("id"))
_LOCK_ENDPOINT = lock_for_update(_ENDPOINT)
_ENDPOINT_PAGE = (
    select(_ENDPOINTS)
    .where(_OF_PROJECT)
    .order_by(_ENDPOINTS.c.created_at, _ENDPOINTS.c.id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_ENDPOINT_TOTAL = select(func.count()).where(_OF_PROJECT)
_DELETE = delete(_ENDPOINTS).where(_OF_PROJECT, _ENDPOINTS.c.id == bindparam("id"))
_DELIVERY_PAGE = (
    select(_DELIVERIES)
    .where(_DELIVERIES.c.endpoint_id == bindparam("endpoint_id"))
    .order_by(_DELIVERIES.c.created_at.desc(), _DELIVERIES.c.id.desc())
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_DELIVERY_TOTAL = select(func.count()).where(_DELIVERIES.c.endpoint_id == bindparam("endpoint_id"))
_DELIVERY = select(_DELIVERIES).where(
    _DELIVERIES.c.endpoint_id == bindparam("endpoint_id"), _DELIVERIES.c.id == bindparam("id")
)
# What a change through the API may write (update_endpoint).
UPDATE_FIELDS = (
    "url",
    "event_types",
    "enabled",
    "disabled_reason",
    "failures",
    "failing_since",
    "next_attempt_at",
)
_UPDATE = (
    update(_ENDPOINTS)
    .where(_ENDPOINTS.c.id == bindparam("id"))
    .values({name: bindparam(name) for name in (*UPDATE_FIELDS, "updated_at")})
    .returning(*_ENDPOINTS.c)
)

# The dispatcher's: enabled endpoints that are due, not leased, with a change after their place.
_PENDING_CHANGE = exists().where(
    _CHANGES.c.project_id == _ENDPOINTS.c.project_id,
    tuple_(_CHANGES.c.txid, _CHANGES.c.seq)
    > tuple_(_ENDPOINTS.c.after_txid, _ENDPOINTS.c.after_seq),
    Final(_CHANGES.c.txid),
)
_DUE = (
    _ENDPOINTS.c.enabled.is_(True),
    _ENDPOINTS.c.next_attempt_at <= bindparam("now"),
    or_(_ENDPOINTS.c.leased_until.is_(None), _ENDPOINTS.c.leased_until < bindparam("now")),
    _PENDING_CHANGE,
)
_CLAIM = claim(
    _ENDPOINTS,
    due=_DUE,
    order_by=(_ENDPOINTS.c.next_attempt_at,),
    limit=ENDPOINTS_PER_ROUND,
    values={"leased_by": bindparam("me"), "leased_until": bindparam("until")},
)
# Whether there is anything to do, read before any write: an idle round takes no write lock
# (SQLite has one writer) and no row lock.
_ANY_DUE = select(_ENDPOINTS.c.id).where(*_DUE).limit(1)
_MINE = and_(_ENDPOINTS.c.id == bindparam("id"), _ENDPOINTS.c.leased_by == bindparam("me"))
_ACCEPTED = (
    update(_ENDPOINTS)
    .where(_MINE)
    .values(
        after_txid=bindparam("txid"),
        after_seq=bindparam("seq"),
        failures=0,
        failing_since=None,
        leased_until=bindparam("until"),
    )
)
_FAILED = (
    update(_ENDPOINTS)
    .where(_MINE)
    .values(
        failures=bindparam("failures"),
        failing_since=bindparam("failing_since"),
        next_attempt_at=bindparam("next_attempt_at"),
        enabled=bindparam("enabled"),
        disabled_reason=bindparam("disabled_reason"),
        updated_at=bindparam("now"),
        leased_by=None,
        leased_until=None,
    )
)
_RELEASE = (
    update(_ENDPOINTS)
    .where(_MINE)
    .values(
        after_txid=bindparam("txid"), after_seq=bindparam("seq"), leased_by=None, leased_until=None
    )
)
_PENDING_REPLAY = _DELIVERIES.c.status == DeliveryStatus.PENDING
_ANY_REPLAY = select(_DELIVERIES.c.id).where(_PENDING_REPLAY).limit(1)
_TAKE_REPLAYS = claim(
    _DELIVERIES,
    due=(_PENDING_REPLAY,),
    order_by=(_DELIVERIES.c.created_at,),
    limit=ENDPOINTS_PER_ROUND,
    values={"status": "sending"},
)
_SETTLE_REPLAY = (
    update(_DELIVERIES)
    .where(_DELIVERIES.c.id == bindparam("id"))
    .values(
        status=bindparam("status"),
        response_status=bindparam("response_status"),
        response_body=bindparam("response_body"),
        error=bindparam("error"),
        duration_ms=bindparam("duration_ms"),
    )
)
_ENDPOINT_BY_ID = select(_ENDPOINTS).where(_ENDPOINTS.c.id == bindparam("id"))
_CHANGE = select(_CHANGES.c.id, _CHANGES.c.type, _CHANGES.c.created_at, _CHANGES.c.data).where(
    _CHANGES.c.id == bindparam("id")
)


# The API's.


async def read_endpoint(
    rows: Rows, project_id: uuid.UUID, endpoint_id: uuid.UUID, *, lock: bool = False
) -> EndpointRow | None:
    """The project's endpoint; ``lock`` takes its row lock (``lock_for_update``)."""
    statement = _LOCK_ENDPOINT if lock else _ENDPOINT
    return await rows.first(statement, EndpointRow, project_id=project_id, id=endpoint_id)


async def read_endpoints(
    rows: Rows, project_id: uuid.UUID, paging: PageParams
) -> tuple[list[EndpointRow], int]:
    """A page of the project's endpoints (oldest first) and their total."""
    found = await rows.all(
        _ENDPOINT_PAGE, EndpointRow, project_id=project_id, limit=paging.limit, offset=paging.offset
    )
    total: int = await rows.scalar(_ENDPOINT_TOTAL, project_id=project_id)
    return found, total


async def add_endpoint(tx: Transaction, values: dict[str, Any]) -> EndpointRow:
    [endpoint] = await tx.insert(WebhookEndpoint, [values], EndpointRow)
    return endpoint


async def update_endpoint(
    tx: Transaction, endpoint_id: uuid.UUID, values: dict[str, Any], *, now: datetime
) -> EndpointRow:
    """``values`` (every one of ``UPDATE_FIELDS``) written on the endpoint; the row after."""
    updated = await tx.first(_UPDATE, EndpointRow, **values, id=endpoint_id, updated_at=now)
    assert updated is not None  # locked by the caller: still there
    return updated


async def delete_endpoint(tx: Transaction, project_id: uuid.UUID, endpoint_id: uuid.UUID) -> bool:
    """Delete the project's endpoint (its deliveries go with it); whether there was one."""
    return bool(await tx.execute(_DELETE, project_id=project_id, id=endpoint_id))


async def read_deliveries(
    rows: Rows, endpoint_id: uuid.UUID, paging: PageParams
) -> tuple[list[DeliveryRow], int]:
    """A page of the endpoint's deliveries (newest first) and their total."""
    found = await rows.all(
        _DELIVERY_PAGE,
        DeliveryRow,
        endpoint_id=endpoint_id,
        limit=paging.limit,
        offset=paging.offset,
    )
    total: int = await rows.scalar(_DELIVERY_TOTAL, endpoint_id=endpoint_id)
    return found, total


async def read_delivery(
    rows: Rows, endpoint_id: uuid.UUID, delivery_id: uuid.UUID
) -> DeliveryRow | None:
    return await rows.first(_DELIVERY, DeliveryRow, endpoint_id=endpoint_id, id=delivery_id)


async def add_delivery(tx: Transaction, values: dict[str, Any]) -> DeliveryRow:
    [delivery] = await tx.insert(WebhookDelivery, [values], DeliveryRow)
    return delivery


# The dispatcher's.


class DueWork(NamedTuple):
    replays: bool  # a replay is pending
    endpoints: bool  # an endpoint is due with a change to send


async def due_work(rows: Rows, now: datetime) -> DueWork:
    endpoint: uuid.UUID | None = await rows.scalar(_ANY_DUE, now=now)
    replay: uuid.UUID | None = await rows.scalar(_ANY_REPLAY)
    return DueWork(replays=replay is not None, endpoints=endpoint is not None)


async def claim_endpoints(
    tx: Transaction, *, me: str, now: datetime, until: datetime
) -> list[EndpointRow]:
    """Lease up to ``ENDPOINTS_PER_ROUND`` due endpoints to ``me`` until ``until`` (on
    PostgreSQL skipping those another dispatcher is claiming)."""
    return await tx.all(_CLAIM, EndpointRow, now=now, me=me, until=until)


async def move_past(
    tx: Transaction, endpoint_id: uuid.UUID, *, me: str, txid: int, seq: int, until: datetime
) -> bool:
    """An accepted change: the endpoint's place moves past it, its failures are forgotten and
    its lease renewed; False when ``me`` no longer holds the lease."""
    moved = await tx.execute(_ACCEPTED, id=endpoint_id, me=me, txid=txid, seq=seq, until=until)
    return bool(moved)


async def back_off(
    tx: Transaction,
    endpoint_id: uuid.UUID,
    *,
    me: str,
    failures: int,
    failing_since: datetime,
    next_attempt_at: datetime,
    enabled: bool,
    disabled_reason: str | None,
    now: datetime,
) -> bool:
    """A failed attempt: the endpoint waits until ``next_attempt_at`` (or is disabled), its
    lease let go; False when ``me`` no longer holds the lease."""
    kept = await tx.execute(
        _FAILED,
        id=endpoint_id,
        me=me,
        failures=failures,
        failing_since=failing_since,
        next_attempt_at=next_attempt_at,
        enabled=enabled,
        disabled_reason=disabled_reason,
        now=now,
    )
    return bool(kept)


async def release(tx: Transaction, endpoint_id: uuid.UUID, *, me: str, txid: int, seq: int) -> None:
    """The end of a round: the endpoint's place (past the changes passed over), its lease
    let go."""
    await tx.execute(_RELEASE, id=endpoint_id, me=me, txid=txid, seq=seq)


async def take_replays(tx: Transaction) -> list[DeliveryRow]:
    """The oldest pending replays, marked ``sending`` (on PostgreSQL skipping those another
    dispatcher is taking)."""
    return await tx.all(_TAKE_REPLAYS, DeliveryRow)


async def read_replayed(
    rows: Rows, delivery: DeliveryRow
) -> tuple[EndpointRow | None, ReplayedChange | None]:
    """A replay's endpoint and change, each None once deleted (the change: purged)."""
    endpoint = await rows.first(_ENDPOINT_BY_ID, EndpointRow, id=delivery.endpoint_id)
    return endpoint, await rows.first(_CHANGE, ReplayedChange, id=delivery.change_id)


async def settle_replay(tx: Transaction, delivery_id: uuid.UUID, outcome: dict[str, Any]) -> None:
    """The replay's ``outcome``: its status and the receiver's answer."""
    await tx.execute(_SETTLE_REPLAY, id=delivery_id, **outcome)
