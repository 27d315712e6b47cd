"""Webhooks against a real receiver on 127.0.0.1.

``webhooks_app`` is the app with private addresses allowed (``TESSERA_WEBHOOKS_ALLOW_PRIVATE``),
so an endpoint may point at ``receiver``: an HTTP server in a thread that records every request
and answers the status a test sets, or is down. ``dispatcher`` delivers with tiny retry delays;
``deliver_until`` runs its rounds until the receiver has what a test waits for (on PostgreSQL a
change is delivered once every older transaction has ended, so a round may come early).
"""

import asyncio
import inspect
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tessera.config import Settings
from tessera.db import Database
from tessera.main import create_app
from tessera.webhooks.dispatcher import Dispatcher
from tests.factories import Tenant

RETRY = (0.05,)  # seconds between attempts: a failing endpoint is retried at once


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """A webhook receiver: records each request and answers ``status`` (302: a redirect to
    ``/elsewhere``); ``stop`` and ``start`` take it down and bring it back on the same port."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.status = 200
        self.port = 0
        self._httpd: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def ids(self) -> list[str]:
        return [request.id for request in self.requests]

    def reset(self) -> None:
        self.requests.clear()
        self.status = 200
        if self._httpd is None:
            self.start()

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                receiver.requests.append(Received(self.command, self.path, headers, body))
                status = receiver.status
                self.send_response(status)
                if status == 302:
                    self.send_header("location", f"http://127.0.0.1:{receiver.port}/elsewhere")
                payload = b'{"ok": true}' if status < 300 else b"not now"
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._httpd.server_address[1]
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        """Down: connections to the port are refused."""
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None


@pytest.fixture(scope="session")
def receiver_server() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    if server._httpd is not None:
        server.stop()


@pytest.fixture
def receiver(receiver_server: Receiver) -> Receiver:
    receiver_server.reset()
    return receiver_server


@pytest.fixture(scope="session")
async def webhooks_app(settings: Settings, database: Database) -> AsyncIterator[FastAPI]:
    # `database` first: the schema is migrated, and every test gets the clean slate.
    application = create_app(settings.model_copy(update={"webhooks_allow_private": True}))
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(webhooks_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=webhooks_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
async def strict(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app as deployed: https to public addresses only."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
async def make_dispatcher(webhooks_app: FastAPI) -> AsyncIterator[Callable[..., Dispatcher]]:
    """Dispatchers of the app's database (private addresses allowed, tiny retry delays unless
    overridden), closed at the end of the test."""
    made: list[Dispatcher] = []

    def make(**overrides: Any) -> Dispatcher:
        options = {"allow_private": True, "timeout": 2.0, "retry_delays": RETRY} | overrides
        state = webhooks_app.state
        made.append(Dispatcher(state.database, state.box, **options))
        return made[-1]

    yield make
    for dispatcher in made:
        await dispatcher.close()


@pytest.fixture
def dispatcher(make_dispatcher: Callable[..., Dispatcher]) -> Dispatcher:
    return make_dispatcher()


async def deliver_until(
    dispatcher: Dispatcher,
    done: Callable[[], bool | Awaitable[bool]],
    *,
    within: float = 10.0,
) -> None:
    """Delivery rounds until ``done()`` (a failing endpoint waits for its retry delay)."""
    deadline = time.monotonic() + within
    while True:
        await dispatcher.deliver_due()
        result = done()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"not done after {within} s of delivery rounds")
        await asyncio.sleep(0.02)


async def create_webhook(
    client: httpx.AsyncClient, tenant: Tenant, url: str, **body: Any
) -> dict[str, Any]:
    """A webhook endpoint of the tenant's project, with its secret."""
    response = await client.post("/v1/webhooks", headers=tenant.w, json={"url": url} | body)
    assert response.status_code == 201, response.text
    return response.json()


async def changes(client: httpx.AsyncClient, tenant: Tenant, count: int) -> list[dict[str, Any]]:
    """The project's ``count`` changes in feed order (GET /v1/changes), once the feed shows
    them all: on PostgreSQL a change shows once every older transaction has ended (in any
    database of the server: another test process's too)."""
    deadline = time.monotonic() + 10
    while True:
        response = await client.get("/v1/changes", headers=tenant.r, params={"limit": 1000})
        assert response.status_code == 200, response.text
        events: list[dict[str, Any]] = response.json()["events"]
        if len(events) >= count:
            assert len(events) == count, [event["type"] for event in events]
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"the feed shows {len(events)} of {count} changes after 10 s")
        await asyncio.sleep(0.02)


async def read_webhook(client: httpx.AsyncClient, tenant: Tenant, hook_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/webhooks/{hook_id}", headers=tenant.r)
    assert response.status_code == 200, response.text
    return response.json()


async def deliveries(
    client: httpx.AsyncClient, tenant: Tenant, hook_id: str, **params: Any
) -> list[dict[str, Any]]:
    """The endpoint's delivery attempts, newest first (up to 100)."""
    response = await client.get(
        f"/v1/webhooks/{hook_id}/deliveries", headers=tenant.r, params={"limit": 100} | params
    )
    assert response.status_code == 200, response.text
    return response.json()["deliveries"]
