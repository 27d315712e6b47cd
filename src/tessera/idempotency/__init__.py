"""Idempotent writes: a POST, PUT, PATCH or DELETE sent with ``Idempotency-Key`` is done once.

The first request with a key (in its scope: the write credential's project, or the claim link
of a public claim) is recorded with a fingerprint of its method, path, query and body, then
runs; its answer (status, headers, body) is stored with the key for
``TESSERA_IDEMPOTENCY_TTL_SECONDS`` before it is sent, so that a retry made the moment the first
answer arrives finds it. A retry with the same key and the same request gets that answer again,
with ``Idempotent-Replayed: true``, and changes nothing. The same key with another request is
422; while the first still runs, 409. The record is in the database, so this holds across
processes; of many requests sent at once with one key, one runs.

It wraps a route's handler (``idempotent``), so the route has been chosen first: a method the
path does not answer is a 405, whatever the key. An answer of 500 or more, and a 429, are not
kept: the request did nothing, and a retry with the key runs again. A request that never
finishes (its process died) leaves its key running for ``RUNNING_SECONDS``; after that a retry
runs again. The answer is stored once the use-case has committed, so a process dying between
the two leaves the key to be taken over that way too: the window in which a retry could do the
work twice is that moment, not the network's.

A request whose scope cannot be told (no valid write credential, an unknown claim link) is not
recorded: it is answered, or refused, as usual.
"""

import hashlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.types import Message, Receive, Scope, Send

from tessera.db import Database
from tessera.errors import ErrorMessage, IdempotencyKeyReused, IdempotencyKeyRunning, InvalidInput
from tessera.idempotency import repository
from tessera.models.base import utcnow

HEADER = b"idempotency-key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RUNNING_SECONDS = 300
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII, no spaces
# Headers a replay does not repeat: each answer has its own.
_NOT_REPLAYED = frozenset({b"content-length", b"x-request-id", b"date", b"server"})


@dataclass(frozen=True, slots=True)
class KeyScope:
    """Whose keys: a project's (``within`` empty) or one claim link's of it."""

    project_id: uuid.UUID
    within: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def of(cls, messages: list[Message]) -> "Answer | None":
        """The answer the app sent, or None for one that is not kept: none at all, an error
        of the server, a rate limit (the request did nothing; a retry is to run)."""
        start = next((m for m in messages if m["type"] == "http.response.start"), None)
        if start is None or start["status"] >= 500 or start["status"] == 429:
            return None
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in start.get("headers", [])
            if name.lower() not in _NOT_REPLAYED
        ]
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        return cls(start["status"], headers, body)

    def replay(self) -> list[Message]:
        headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in self.headers]
        headers += [
            (b"content-length", str(len(self.body)).encode()),
            (b"idempotent-replayed", b"true"),
        ]
        return [
            {"type": "http.response.start", "status": self.status, "headers": headers},
            {"type": "http.response.body", "body": self.body},
        ]


class IdempotencyStore:
    def __init__(self, database: Database, *, ttl_seconds: int) -> None:
        self.database = database
        self.ttl = timedelta(seconds=ttl_seconds)

    async def begin(self, scope: KeyScope, key: str, fingerprint: str) -> uuid.UUID | Answer:
        """The record's id when this request is to run; the stored answer of the same request;
        409 while it runs; 422 for a key used with another request."""
        now = utcnow()
        running_until = now + timedelta(seconds=RUNNING_SECONDS)
        expires_at = now + self.ttl
        row = {
            "project_id": scope.project_id,
            "scope": scope.within,
            "key": key,
            "created_at": now,
            "fingerprint": fingerprint,
            "running_until": running_until,
            "expires_at": expires_at,
        }
        found = None
        while found is None:  # the record may be purged between the insert and the read
            async with self.database.transaction() as tx:
                created = await repository.create(tx, row)
                if created is not None:
                    await tx.commit()
                    return created
                found = await repository.lock_record(
                    tx, project_id=scope.project_id, scope=scope.within, key=key
                )
                if found is None:
                    continue
                abandoned = found.status_code is None and found.running_until <= now
                if found.expires_at <= now or abandoned:
                    await repository.take_over(
                        tx,
                        found.id,
                        now=now,
                        fingerprint=fingerprint,
                        running_until=running_until,
                        expires_at=expires_at,
                    )
                    await tx.commit()
                    return found.id
        if found.fingerprint != fingerprint:
            raise IdempotencyKeyReused
        if found.status_code is None:
            raise IdempotencyKeyRunning
        headers = [(name, value) for name, value in json.loads(found.headers or "[]")]
        return Answer(found.status_code, headers, found.body or b"")

    async def answered(self, record: uuid.UUID, answer: Answer) -> None:
        async with self.database.transaction() as tx:
            await repository.set_answer(
                tx,
                record,
                status=answer.status,
                headers=json.dumps(answer.headers),
                body=answer.body,
            )
            await tx.commit()

    async def forget(self, record: uuid.UUID) -> None:
        async with self.database.transaction() as tx:
            await repository.delete_record(tx, record)
            await tx.commit()


async def purge_expired(database: Database) -> int:
    """Delete the records past their time (a chore of the job worker); how many."""
    async with database.transaction() as tx:
        purged = await repository.delete_expired(tx, utcnow())
        await tx.commit()
    return purged


def fingerprint(scope: Scope, body: bytes) -> str:
    digest = hashlib.sha256()
    for part in (scope["method"].encode(), scope["path"].encode(), scope["query_string"], body):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "Makes the request safe to retry: the first answer is kept with the key for 24 h "
        "(TESSERA_IDEMPOTENCY_TTL_SECONDS) and a retry with the same key and request gets it again "
        "(Idempotent-Replayed: true) without doing anything; the key with another request is 422, "
        "and while the first request runs, 409. Keys belong to the credential's project (a claim: "
        "to its claim link). Answers of 429 and 5xx are not kept."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
}


class IdempotentRoute(APIRoute):
    """A route whose writes take an ``Idempotency-Key``, kept in the scope ``key_scope`` names.

    It works around the route's whole ASGI app (``handle``, once routing has chosen the route
    for the request's method): the answer is complete, and every dependency of the route has
    exited (a session has given back SQLite's one writer), before the answer is kept and sent.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        if WRITE_METHODS & set(options.get("methods") or ()):
            extra = options.get("openapi_extra") or {}
            parameters = [*extra.get("parameters", []), IDEMPOTENCY_KEY]
            options["openapi_extra"] = extra | {"parameters": parameters}
            options["responses"] = {
                409: {
                    "model": ErrorMessage,
                    "description": "A request with this Idempotency-Key is still running.",
                },
                422: {
                    "model": ErrorMessage,
                    "description": "The Idempotency-Key was sent before with another request.",
                },
            } | (options.get("responses") or {})
        super().__init__(path, endpoint, **options)

    async def key_scope(self, request: Request) -> KeyScope | None:
        """Whose keys the request's are; None to answer it without recording it."""
        raise NotImplementedError

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _key_of(scope) if scope["method"] in WRITE_METHODS else None
        if key is None or not self.methods or scope["method"] not in self.methods:
            await super().handle(scope, receive, send)  # no key, or a 405
            return
        if not _KEY.match(key):
            raise InvalidInput("Idempotency-Key: 1-255 printable ASCII characters, no spaces")
        owner = await self.key_scope(Request(scope))
        if owner is None:
            await super().handle(scope, receive, send)
            return
        messages, body = await _read_body(receive)
        if messages[-1]["type"] == "http.disconnect":
            return  # the client went away, or its body was refused (413, 408): nothing ran
        store: IdempotencyStore = scope["app"].state.idempotency
        begun = await store.begin(owner, key, fingerprint(scope, body))
        if isinstance(begun, Answer):
            for message in begun.replay():
                await send(message)
            return

        async def replay_receive() -> Message:
            return messages.pop(0) if messages else await receive()

        sent: list[Message] = []

        async def keep(message: Message) -> None:
            sent.append(message)

        try:
            await super().handle(scope, replay_receive, keep)
        except BaseException:
            await store.forget(begun)
            raise
        answer = Answer.of(sent)
        if answer is None:
            await store.forget(begun)
        else:
            await store.answered(begun, answer)
        for message in sent:
            await send(message)


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
