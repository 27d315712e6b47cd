"""Idempotent writes: a POST, PUT, PATCH or DELETE sent with ``Idempotency-Key`` is done once.

The first request with a key (in the credential's project) is recorded with a fingerprint of its
method, path, query and body, then runs; its answer (status, headers, body) is stored with the
key for ``TESSERA_IDEMPOTENCY_TTL_SECONDS``. A retry with the same key and the same request gets
that answer again, with ``Idempotent-Replayed: true``, and changes nothing. The same key with
another request is 422; while the first still runs, 409. The record is in the database, so this
holds across processes; of many requests sent at once with one key, one runs.

An answer of 500 or more is not kept: the request's transaction rolled back, and a retry with
the key runs again. A request that never finishes (its process died) leaves its key running for
``RUNNING_SECONDS``; after that a retry runs again. The answer is stored once the use-case has
committed, so a process dying between the two leaves the key to be taken over that way too: the
window in which a retry could do the work twice is that moment, not the network's.

A request without a valid write credential is not recorded (it is refused as usual); routes
without a credential (claims, the token endpoint) ignore the header.
"""

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta

from fastapi import Request
from sqlalchemy import bindparam, delete, select, update
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tessera.auth.dependencies import authenticate
from tessera.db import Database, lock_for_update, table_of
from tessera.errors import (
    AppError,
    IdempotencyKeyReused,
    IdempotencyKeyRunning,
    InvalidInput,
)
from tessera.middleware import send_error
from tessera.models import IdempotencyKey
from tessera.models.base import utcnow

HEADER = b"idempotency-key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RUNNING_SECONDS = 300
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII, no spaces
# Headers a replay does not repeat: each answer has its own.
_NOT_REPLAYED = frozenset({b"content-length", b"x-request-id", b"date", b"server"})


_KEYS = table_of(IdempotencyKey)
_FOUND = lock_for_update(
    select(_KEYS).where(
        _KEYS.c.project_id == bindparam("project_id"), _KEYS.c.key == bindparam("key")
    )
)
_TAKE_OVER = (
    update(_KEYS)
    .where(_KEYS.c.id == bindparam("id"))
    .values(
        fingerprint=bindparam("fingerprint"),
        status_code=None,
        headers=None,
        body=None,
        running_until=bindparam("running_until"),
        expires_at=bindparam("expires_at"),
        created_at=bindparam("now"),
    )
)
_ANSWERED = (
    update(_KEYS)
    .where(_KEYS.c.id == bindparam("id"))
    .values(status_code=bindparam("status"), headers=bindparam("headers"), body=bindparam("body"))
)
_FORGET = delete(_KEYS).where(_KEYS.c.id == bindparam("id"))
_EXPIRED = delete(_KEYS).where(_KEYS.c.expires_at <= bindparam("now"))


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class IdempotencyStore:
    def __init__(self, database: Database, *, ttl_seconds: int) -> None:
        self.database = database
        self.ttl = timedelta(seconds=ttl_seconds)

    async def begin(self, project_id: uuid.UUID, key: str, fingerprint: str) -> uuid.UUID | Answer:
        """The record's id when this request is to run; the stored answer of the same request;
        409 while it runs; 422 for a key used with another request."""
        now = utcnow()
        fresh = {
            "fingerprint": fingerprint,
            "running_until": now + timedelta(seconds=RUNNING_SECONDS),
            "expires_at": now + self.ttl,
        }
        row = {"project_id": project_id, "key": key, "created_at": now, **fresh}
        found = None
        while found is None:  # the record may be purged between the insert and the read
            async with self.database.transaction() as tx:
                created = await tx.insert_new(IdempotencyKey, row, unique=("project_id", "key"))
                if created is not None:
                    await tx.commit()
                    return uuid.UUID(str(created.id))
                found = await tx.first(_FOUND, project_id=project_id, key=key)
                if found is None:
                    continue
                abandoned = found.status_code is None and found.running_until <= now
                if found.expires_at <= now or abandoned:
                    await tx.execute(_TAKE_OVER, id=found.id, now=now, **fresh)
                    await tx.commit()
                    return uuid.UUID(str(found.id))
        if found.fingerprint != fingerprint:
            raise IdempotencyKeyReused
        if found.status_code is None:
            raise IdempotencyKeyRunning
        headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in json.loads(found.headers)]
        return Answer(found.status_code, headers, found.body or b"")

    async def answered(self, record: uuid.UUID, answer: Answer) -> None:
        headers = [
            (n.decode("latin-1"), v.decode("latin-1"))
            for n, v in answer.headers
            if n.lower() not in _NOT_REPLAYED
        ]
        async with self.database.transaction() as tx:
            await tx.execute(
                _ANSWERED,
                id=record,
                status=answer.status,
                headers=json.dumps(headers),
                body=answer.body,
            )
            await tx.commit()

    async def forget(self, record: uuid.UUID) -> None:
        async with self.database.transaction() as tx:
            await tx.execute(_FORGET, id=record)
            await tx.commit()


async def purge_expired(database: Database) -> int:
    """Delete the records past their time (a chore of the job worker); how many."""
    async with database.transaction() as tx:
        purged = await tx.execute(_EXPIRED, now=utcnow())
        await tx.commit()
    return purged


def fingerprint(scope: Scope, body: bytes) -> str:
    digest = hashlib.sha256()
    for part in (scope["method"].encode(), scope["path"].encode(), scope["query_string"], body):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


class IdempotencyMiddleware:
    """Pure ASGI: the body is read once here and handed on to the app as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writes = scope["type"] == "http" and scope["method"] in WRITE_METHODS
        key = _key_of(scope) if writes else None
        if key is None:
            await self.app(scope, receive, send)
            return
        if not _KEY.match(key):
            error = InvalidInput("Idempotency-Key: 1-255 printable ASCII characters, no spaces")
            await send_error(send, error)
            return
        try:
            principal = await authenticate(Request(scope))
        except AppError:
            principal = None
        if principal is None or not principal.can_write:  # refused as usual, not recorded
            await self.app(scope, receive, send)
            return

        messages, body = await _read_body(receive)
        store: IdempotencyStore = scope["app"].state.idempotency
        try:
            begun = await store.begin(principal.project_id, key, fingerprint(scope, body))
        except AppError as error:
            await send_error(send, error)
            return
        if isinstance(begun, Answer):
            await _replay(send, begun)
            return

        answer = Answer(0, [], b"")
        chunks: list[bytes] = []

        async def replay_receive() -> Message:
            return messages.pop(0) if messages else await receive()

        async def capture(message: Message) -> None:
            nonlocal answer
            if message["type"] == "http.response.start":
                answer = Answer(message["status"], list(message.get("headers", [])), b"")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay_receive, capture)
        except BaseException:
            await store.forget(begun)
            raise
        if answer.status == 0 or answer.status >= 500:
            await store.forget(begun)
        else:
            await store.answered(begun, Answer(answer.status, answer.headers, b"".join(chunks)))


def _key_of(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == HEADER:
            return str(value.decode("latin-1"))
    return None


async def _read_body(receive: Receive) -> tuple[list[Message], bytes]:
    messages, parts = [], []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return messages, b"".join(parts)


async def _replay(send: Send, answer: Answer) -> None:
    headers = [
        *answer.headers,
        (b"content-length", str(len(answer.body)).encode()),
        (b"idempotent-replayed", b"true"),
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
