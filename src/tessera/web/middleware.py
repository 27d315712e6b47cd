"""Pure ASGI middleware: a request id on every response, a body size limit and deadline, no NUL
character in the path or query, a last-resort 500, the request metrics and the access log.

A body must arrive whole within ``TESSERA_BODY_TIMEOUT_SECONDS`` of the request's start (its
head has its own deadline in tessera.web.server): a client that trickles it in gets 408 in the
``{"errors": [...]}`` shape, and the connection is closed.

It sits outside FastAPI's exception handling so that even an unexpected error answers JSON with
the request id (and logs the traceback, never returns it).

Every request is counted, with its duration, under its route template (tessera.instruments.http).
The access log (``TESSERA_ACCESS_LOG``, on by default) is one record per request on the
``tessera.access`` logger, its fields (``fields``) the request id, method, route template (never
the path, which carries ids and claim tokens, nor the query string), status, duration and, when
a credential checked out, the project id (``authenticate`` leaves it in the scope's state). Off,
it costs one boolean test per request. How records are written (JSON lines or text, by a thread
of their own) is tessera.toolkit.logs.
"""

import asyncio
import itertools
import json
import logging
import re
import secrets
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tessera.errors import (
    AppError,
    InternalError,
    InvalidInput,
    PayloadTooLarge,
    RequestBodyTooSlow,
)
from tessera.instruments.http import RequestMetrics
from tessera.schemas import NUL_REFUSED
from tessera.toolkit import logs

log = logging.getLogger("tessera.requests")

_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

# Request ids: a random prefix per process and a counter, 32 hex digits like a UUID's. Unique
# across processes without a call into the kernel's random source on every request.
_PROCESS_PREFIX = secrets.token_hex(8)
_sequence = itertools.count()


def new_request_id() -> str:
    return f"{_PROCESS_PREFIX}{next(_sequence):016x}"


class RequestContextMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        body_timeout_seconds: float = 30.0,
        access_log: bool = True,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout_seconds
        self.access_log = access_log
        self.metrics = RequestMetrics()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        request_id = _incoming_request_id(scope) or new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        header = (b"x-request-id", request_id.encode())
        status = 0  # until the response starts
        began = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await send_error(send_with_id, refusal)
            self._finish(scope, request_id, status, began)
            return

        received = 0
        refused = False  # an answer was sent here (413, 408): the app's is not
        body_deadline = asyncio.get_running_loop().time() + self.body_timeout

        async def limited_receive() -> Message:
            # Past the size limit or the body's deadline, answer here and tell the app the
            # client went away: FastAPI would turn an exception raised while it reads the body
            # into a 400.
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            try:
                async with asyncio.timeout_at(body_deadline):
                    message = await receive()
            except TimeoutError:
                refused = True
                await send_error(send_with_id, self._too_slow())
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    refused = True
                    await send_error(send_with_id, self._too_large())
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send_with_id(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if refused:
                return
            log.exception("unhandled error (request_id=%s)", request_id)
            if not status:
                await send_error(send_with_id, InternalError(request_id))
        finally:
            self._finish(scope, request_id, status, began)

    def _refusal(self, scope: Scope) -> AppError | None:
        """What refuses the request before the app sees it: a declared body over the limit, a
        NUL character."""
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            return self._too_large()
        nul = _nul_in(scope)
        if nul:
            return InvalidInput(f"{nul}: {NUL_REFUSED}")
        return None

    def _finish(self, scope: Scope, request_id: str, status: int, began: float) -> None:
        seconds = time.perf_counter() - began
        route = self.metrics.observe(scope, status, seconds)
        if self.access_log:
            _log_access(scope, request_id, route, status, seconds)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body too large (limit {self.max_body_bytes} bytes)")

    def _too_slow(self) -> RequestBodyTooSlow:
        return RequestBodyTooSlow(f"body: not received within {self.body_timeout:g} s")


def _log_access(scope: Scope, request_id: str, route: str, status: int, seconds: float) -> None:
    fields = {
        "request_id": request_id,
        "method": scope["method"],
        "route": route,
        "status": status,
        "duration_ms": round(seconds * 1000, 2),
    }
    project_id = scope["state"].get("project_id")
    if project_id is not None:
        fields["project_id"] = project_id  # a UUID, written as text by the writer thread
    logs.log_request(fields)


def _nul_in(scope: Scope) -> str | None:
    """Where a NUL character (``%00``) sits in the path or query, refused for every route."""
    if "\x00" in scope["path"]:
        return "path"
    if b"%00" in scope["query_string"]:
        return "query"
    return None


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _SAFE_REQUEST_ID.match(text) else None
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def send_error(send: Send, error: AppError) -> None:
    payload = json.dumps(error.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    for name, value in (error.headers() or {}).items():
        headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
