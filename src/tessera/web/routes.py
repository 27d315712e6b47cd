"""The route classes: ``IdempotentRoute`` keeps a write's answer with its ``Idempotency-Key``
(tessera.idempotency), ``ProjectRoute`` is a project's route (its access read from the
endpoint's signature, checked before anything else), ``project_router`` makes a router of them.
"""

import hashlib
import re
import typing
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.params import Depends
from fastapi.routing import APIRoute
from starlette.types import Message, Receive, Scope, Send

from tessera.auth.dependencies import SECURITY_SCHEMES, Access, ReadAccess
from tessera.errors import AppError, ErrorMessage, InvalidInput
from tessera.idempotency.schemas import Answer, KeyScope
from tessera.idempotency.service import IdempotencyStore
from tessera.web.handlers import PlainRoute

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

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
            for message in _replay(begun):
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
        answer = _answer_of(sent)
        if answer is None:
            await store.forget(begun)
        else:
            await store.answered(begun, answer)
        for message in sent:
            await send(message)


# Headers a replay does not repeat: each answer has its own.
_NOT_REPLAYED = frozenset({b"content-length", b"x-request-id", b"date", b"server"})


def _answer_of(messages: list[Message]) -> Answer | None:
    """The answer the app sent, or None for one that is not kept: none at all, an error of the
    server, a rate limit (the request did nothing; a retry is to run)."""
    start = next((m for m in messages if m["type"] == "http.response.start"), None)
    if start is None or start["status"] >= 500 or start["status"] == 429:
        return None
    headers = [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in start.get("headers", [])
        if name.lower() not in _NOT_REPLAYED
    ]
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return Answer(start["status"], headers, body)


def _replay(answer: Answer) -> list[Message]:
    headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers]
    headers += [
        (b"content-length", str(len(answer.body)).encode()),
        (b"idempotent-replayed", b"true"),
    ]
    return [
        {"type": "http.response.start", "status": answer.status, "headers": headers},
        {"type": "http.response.body", "body": answer.body},
    ]


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


class ProjectRoute(IdempotentRoute, PlainRoute):
    """A project route. Its endpoint names who may call it, with one ``Access`` alias among its
    parameters (``ReadAccess``, ``WriteAccess``, ``DoorReadAccess``, ``DoorWriteAccess``): a
    route without one, or with two, is refused when it is made. Its handler lets a request in
    only once that access has: the credential (401), its rate limit (429), the query string
    (400) and the permission (403), all before the body is read or validated, whichever handler
    answers (``PlainRoute``'s or FastAPI's); the endpoint's own parameter gets the principal it
    let in. tests/test_security.py proves that every route but the open ones refuses a request
    without a credential. Its OpenAPI operation names both ways to send one (the access adds no
    parameter), and its writes keep their Idempotency-Keys within the credential's project."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        security: dict[str, Any] = {"security": [{name: []} for name in SECURITY_SCHEMES]}
        options["openapi_extra"] = security | (options.get("openapi_extra") or {})
        self.access = access_of(endpoint)  # before FastAPI's __init__, which builds the handler
        super().__init__(path, endpoint, **options)

    def get_route_handler(self) -> Handler:
        return self.admitting(super().get_route_handler())

    def admitting(self, handler: Handler) -> Handler:
        """``handler`` behind the route's access."""
        access = self.access

        async def admitted(request: Request) -> Response:
            await access(request)
            return await handler(request)

        return admitted

    async def key_scope(self, request: Request) -> KeyScope | None:
        try:
            principal = await self.access(request)
        except AppError:  # refused by the route's own check, as usual
            return None
        return KeyScope(principal.project_id) if principal.can_write else None


def access_of(endpoint: Callable[..., Any]) -> Access:
    """The one ``Access`` among the endpoint's parameters."""
    hints = typing.get_type_hints(endpoint, include_extras=True)
    found = [
        declared.dependency
        for hint in hints.values()
        if typing.get_origin(hint) is Annotated
        for declared in typing.get_args(hint)[1:]
        if isinstance(declared, Depends) and isinstance(declared.dependency, Access)
    ]
    if len(found) != 1:
        raise TypeError(
            f"{endpoint.__qualname__}: a project route names who may call it with one parameter"
            f" of ReadAccess, WriteAccess, DoorReadAccess or DoorWriteAccess ({len(found)} found)"
        )
    return found[0]


def project_router(prefix: str, *, tags: list[str]) -> APIRouter:
    """A router of project routes under ``/v1{prefix}`` (``ProjectRoute``)."""
    return APIRouter(prefix=f"/v1{prefix}", tags=list(tags), route_class=ProjectRoute)


def concrete_paths_own_their_methods(router: APIRouter, *paths: str) -> None:
    """Make each of ``paths`` (concrete paths of ``router``) answer 405 to the methods it does
    not serve, instead of a templated route of another router taking it (``GET
    /v1/products/create`` as ``GET /v1/products/{id}``): OpenAPI matches concrete paths before
    templated ones. ``router`` must then be included before the templated routes."""

    async def not_allowed(principal: ReadAccess) -> None:
        raise HTTPException(status_code=405)

    for path in paths:
        router.add_api_route(
            path,
            not_allowed,
            methods=["GET", "PUT", "PATCH", "DELETE"],
            include_in_schema=False,
        )
