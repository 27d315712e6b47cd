"""The HTTP server: uvicorn (uvloop, httptools) with limits a slow or greedy client cannot pass.

uvicorn closes a keep-alive connection that stays idle, but not one that never sends a request,
or sends it a byte at a time: a few hundred such sockets would hold a process's file
descriptors for ever. ``GuardedHttpToolsProtocol`` adds what it lacks:

- ``TESSERA_HEADER_TIMEOUT_SECONDS`` (10): a request's line and headers must arrive within this
  time of the connection opening (or, on a kept-alive connection, of the request's first byte);
  otherwise the connection gets a 408 and is closed.
- ``TESSERA_KEEP_ALIVE_SECONDS`` (5): an idle keep-alive connection is closed (uvicorn's own).
- ``TESSERA_MAX_CONNECTIONS`` (1000): past this many open connections a process answers a new
  one with 503 and closes it, before reading anything.

A request the parser refuses (a request line of 100 KB, a malformed header) gets 400 in the
``{"errors": [...]}`` shape, not uvicorn's plain text.
"""

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tessera.config import Settings, get_settings
from tessera.instruments.process import multiprocess_directory
from tessera.toolkit import logs

BAD_REQUEST = "request: not a valid HTTP request (a malformed or oversized request line or header)"


def run(settings: Settings, *, host: str, port: int, workers: int) -> None:
    import uvicorn

    # Several processes share their metrics through files (tessera.instruments.process).
    with multiprocess_directory(workers):
        uvicorn.run(
            "tessera.main:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            loop="uvloop",
            http=GuardedHttpToolsProtocol,
            timeout_keep_alive=settings.keep_alive_seconds,
            # Applied in each worker process too: JSON lines or text, as the CLI's
            # (tessera.toolkit.logs).
            log_config=logs.configuration(settings),
            log_level=settings.log_level,
            access_log=False,  # Tessera's own, with the request id: TESSERA_ACCESS_LOG
            # The client's address (claims are rate-limited by it) comes from X-Forwarded-For
            # only when the connection comes from a proxy named in TESSERA_FORWARDED_ALLOW_IPS.
            proxy_headers=settings.forwarded_allow_ips is not None,
            forwarded_allow_ips=settings.forwarded_allow_ips,
        )


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request head and a connection cap."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = get_settings()  # read in each worker process, from its environment
        self.header_timeout = settings.header_timeout_seconds
        self.max_connections = settings.max_connections
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._answer_and_close(503, {"message": "too many connections: try again shortly"})
            return
        self._expect_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # Between requests, idle is uvicorn's keep-alive timeout; a new request's first byte
        # starts its head deadline.
        if self._head_deadline is None:
            self._expect_head()

    def on_headers_complete(self) -> None:
        self._head_arrived()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        self._answer_and_close(400, {"errors": [BAD_REQUEST]})

    def _expect_head(self) -> None:
        self._head_deadline = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _head_arrived(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self._answer_and_close(408, {"message": "the request's headers took too long"})

    def _answer_and_close(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        reason = {400: b"Bad Request", 408: b"Request Timeout", 503: b"Service Unavailable"}
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, reason[status], len(payload), payload)
        )
        self.transport.close()
