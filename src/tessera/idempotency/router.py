"""The HTTP side of idempotent writes: the ``Idempotency-Key`` header and the route class
that keeps a write's answer with it (see the package)."""

import hashlib
import re
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.types import Message, Receive, Scope, Send

from tessera.errors import ErrorMessage, InvalidInput
from tessera.idempotency.schemas import Answer, KeyScope
from tessera.idempotency.service import IdempotencyStore

HEADER = b"idempotency-key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII, no spaces


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
