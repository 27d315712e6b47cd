"""Webhook delivery: the job worker's companion loop that sends each endpoint its changes.

Every poll it takes a lease on the enabled endpoints that are due and have changes after their
place in the feed (on PostgreSQL, ``SKIP LOCKED``: several workers share the endpoints, never
one endpoint), and sends each of them its changes one at a time, in feed order:

- accepted (any 2xx): the endpoint's place moves past the change, with the lease renewed;
- anything else (another status, a timeout, a refused address): the attempt is recorded and the
  endpoint is retried after a growing delay (``RETRY_DELAYS``, with jitter), from that change;
  an endpoint that has failed for ``DISABLE_AFTER`` is disabled. Until the change is accepted
  nothing after it is sent: at-least-once, in order per endpoint.

A worker that dies mid-delivery leaves the lease to pass: the change is sent again (the receiver
recognises it by its ``webhook-id``). Every attempt is a ``webhook_deliveries`` row; a replay
asked for through the API is one written ``pending``, which the loop sends and settles.

Each request is signed per the Standard Webhooks specification (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of
``id.timestamp.body`` under the endpoint's secret), goes to the address checked just before
(``addresses.resolve``), follows no redirect and reads at most a KiB of the answer.
"""

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from tessera import __build__
from tessera.changes import service as feed
from tessera.changes.schemas import ChangeRead, Place
from tessera.config import Settings
from tessera.db import Database
from tessera.jobs.worker import run_rounds
from tessera.models import DeliveryStatus
from tessera.models.base import utcnow
from tessera.toolkit.crypto import SecretBox
from tessera.webhooks import repository
from tessera.webhooks.addresses import UnsafeAddress, resolve
from tessera.webhooks.repository import DeliveryRow, EndpointRow
from tessera.webhooks.service import open_secret

log = logging.getLogger("tessera.webhooks")

# Seconds between attempts after the 1st, 2nd, ... failure in a row; then the last, until
# DISABLE_AFTER: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, then every 6 h.
RETRY_DELAYS = (5, 30, 120, 600, 1800, 3600, 7200, 14400, 21600)
DISABLE_AFTER = timedelta(days=3)
LEASE_SECONDS = 60.0
BATCH = 100  # changes read per endpoint and round
BODY_KEPT = 1024
USER_AGENT = f"Tessera-Webhooks/{__build__}"


@dataclass(frozen=True, slots=True)
class Outcome:
    accepted: bool
    response_status: int | None
    response_body: str | None
    error: str | None
    duration_ms: int

    def columns(self) -> dict[str, Any]:
        return {
            "status": DeliveryStatus.SUCCEEDED if self.accepted else DeliveryStatus.FAILED,
            "response_status": self.response_status,
            "response_body": self.response_body,
            "error": self.error,
            "duration_ms": self.duration_ms,
        }


def retry_delay(failures: int, delays: Sequence[float] = RETRY_DELAYS) -> float:
    """Seconds before the next attempt after ``failures`` failures in a row, ±10%."""
    return delays[min(failures, len(delays)) - 1] * random.uniform(0.9, 1.1)  # noqa: S311


class Dispatcher:
    def __init__(
        self,
        database: Database,
        box: SecretBox,
        *,
        allow_private: bool,
        timeout: float,
        poll_seconds: float = 1.0,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        disable_after: timedelta = DISABLE_AFTER,
    ) -> None:
        self.database = database
        self.box = box
        self.allow_private = allow_private
        self.timeout = timeout
        self.poll_seconds = poll_seconds
        self.retry_delays = retry_delays
        self.disable_after = disable_after
        self.me = uuid.uuid4().hex[:8]
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def from_settings(cls, database: Database, box: SecretBox, settings: Settings) -> "Dispatcher":
        return cls(
            database,
            box,
            allow_private=settings.webhooks_allow_private,
            timeout=settings.webhook_timeout_seconds,
            poll_seconds=settings.worker_poll_seconds,
        )

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.timeout, follow_redirects=False, trust_env=False
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop``; the worker runs this beside its jobs."""
        try:
            await run_rounds(
                stop, self.deliver_due, poll_seconds=self.poll_seconds, what="webhooks delivery"
            )
        finally:
            await self.close()

    async def deliver_due(self) -> int:
        """One round: the replays asked for, and every due endpoint's pending changes (the
        endpoints at once, each in order); how many requests were sent."""
        due = await self.database.read(repository.due_work, utcnow())
        sent = await self._replays() if due.replays else 0
        endpoints = await self._claim() if due.endpoints else []
        counts = await asyncio.gather(*(self._deliver(endpoint) for endpoint in endpoints))
        return sent + sum(counts)

    async def _claim(self) -> list[EndpointRow]:
        now = utcnow()
        async with self.database.transaction() as tx:
            endpoints = await repository.claim_endpoints(
                tx, me=self.me, now=now, until=now + timedelta(seconds=LEASE_SECONDS)
            )
            await tx.commit()
        return endpoints

    async def _deliver(self, endpoint: EndpointRow) -> int:
        """Send the endpoint its changes in order until one is not accepted; then it waits."""
        place = Place(endpoint.after_txid, endpoint.after_seq)
        changes = await self.database.read(
            partial(feed.read_after, seen_by=endpoint.start_snapshot),
            endpoint.project_id,
            place,
            BATCH,
        )
        types = set(endpoint.event_types) if endpoint.event_types is not None else None
        secret = open_secret(self.box, endpoint)
        sent = 0
        for change in changes:
            before_start = getattr(change, "seen", False)  # committed before the endpoint
            if before_start or (types is not None and change.type not in types):
                place = feed.place_of(change)  # passed over, recorded with the next write
                continue
            outcome = await self.send(endpoint.url, secret, change)
            sent += 1
            if not await self._record(endpoint, change, outcome):
                return sent  # failed, or the lease was lost: stop here
            place = feed.place_of(change)
        async with self.database.transaction() as tx:
            await repository.release(tx, endpoint.id, me=self.me, txid=place.txid, seq=place.seq)
            await tx.commit()
        return sent

    async def _record(self, endpoint: EndpointRow, change: Any, outcome: Outcome) -> bool:
        """Record the attempt and move the endpoint on (accepted) or back off; False when the
        endpoint is not to be sent more now."""
        now = utcnow()
        async with self.database.transaction() as tx:
            await repository.add_delivery(
                tx,
                {
                    "endpoint_id": endpoint.id,
                    "change_id": change.id,
                    "change_type": change.type,
                    "replay": False,
                    "created_at": now,
                    **outcome.columns(),
                },
            )
            if outcome.accepted:
                kept = await repository.move_past(
                    tx,
                    endpoint.id,
                    me=self.me,
                    txid=change.txid,
                    seq=change.seq,
                    until=now + timedelta(seconds=LEASE_SECONDS),
                )
            else:
                failures = endpoint.failures + 1
                since = endpoint.failing_since or now
                give_up = now - since >= self.disable_after
                kept = await repository.back_off(
                    tx,
                    endpoint.id,
                    me=self.me,
                    failures=failures,
                    failing_since=since,
                    next_attempt_at=now
                    + timedelta(seconds=retry_delay(failures, self.retry_delays)),
                    enabled=not give_up,
                    disabled_reason=(
                        f"failing since {since.isoformat()}: {outcome.error}"[:255]
                        if give_up
                        else None
                    ),
                    now=now,
                )
                if give_up and kept:
                    log.warning("webhooks: endpoint %s disabled: %s", endpoint.id, outcome.error)
            await tx.commit()
        if not kept:
            log.warning("webhooks: lost the lease of endpoint %s", endpoint.id)
        return kept and outcome.accepted

    async def _replays(self) -> int:
        async with self.database.transaction() as tx:
            taken = await repository.take_replays(tx)
            await tx.commit()
        for delivery in taken:
            endpoint, change = await self.database.read(repository.read_replayed, delivery)
            if endpoint is None:
                continue  # deleted meanwhile, with its deliveries
            if change is None:
                outcome = Outcome(False, None, None, "the event is no longer kept", 0)
            else:
                outcome = await self.send(endpoint.url, open_secret(self.box, endpoint), change)
            await self._settle(delivery, outcome)
        return len(taken)

    async def _settle(self, replay: DeliveryRow, outcome: Outcome) -> None:
        async with self.database.transaction() as tx:
            await repository.settle_replay(tx, replay.id, outcome.columns())
            await tx.commit()

    async def send(self, url: str, secret: str, change: Any) -> Outcome:
        """One signed request of ``change`` to ``url``."""
        body = ChangeRead.of(change).model_dump_json()
        message_id = str(change.id)
        at = utcnow()
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": message_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": Webhook(secret).sign(message_id, _whole_second(at), body),
        }
        started = time.perf_counter()
        try:
            target = await resolve(url, allow_private=self.allow_private)
            request = self.client.build_request(
                "POST",
                target.url,
                content=body.encode(),
                headers=headers | {"host": target.host},
                extensions={"sni_hostname": target.server_name},
            )
            response = await self.client.send(request, stream=True)
            try:
                kept = b""
                async for chunk in response.aiter_raw():
                    kept += chunk
                    if len(kept) >= BODY_KEPT:
                        break
            finally:
                await response.aclose()
        except (UnsafeAddress, httpx.HTTPError, OSError) as exc:
            return Outcome(False, None, None, _error(exc), _ms(started))
        accepted = 200 <= response.status_code < 300
        return Outcome(
            accepted,
            response.status_code,
            kept[:BODY_KEPT].decode("utf-8", "replace"),
            None if accepted else f"the receiver answered {response.status_code}",
            _ms(started),
        )


def _whole_second(at: datetime) -> datetime:
    return at.replace(microsecond=0)


def _ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


def _error(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
