"""The PostgreSQL driver's own pool of the hot reads' and writes' connections."""

import asyncio
import collections
import json
import time
from collections.abc import (
    Awaitable,
    Callable,
)

import asyncpg

from tessera.errors import DatabaseUnavailable


class ConnectionPool:
    """The asyncpg connections of the hot reads and writes, kept open for the next request.

    asyncpg's own ``Pool`` wraps each connection in a proxy and does more on each acquire and
    release than a whole read costs Tessera otherwise (bench/README.md); this is a stack of
    idle connections, the last one given back on top. Up to ``size`` connections stay open; in
    a burst up to ``size + overflow`` are open at once, the ones beyond ``size`` closed as they
    come back. Past that, a request waits, first come first served, for a connection given
    back. A connection found closed (a server restart), older than ``recycle_seconds``, or
    open when ``expire()`` was called is replaced before it is used again.

    ``acquire`` gives up after ``timeout`` seconds (waiting for a connection given back, or
    for the server to open one), and when the server refuses a connection (its slots used up,
    shutting down, not listening): ``DatabaseUnavailable``, raised from the cause.
    """

    def __init__(
        self,
        dsn: str,
        *,
        size: int,
        overflow: int,
        recycle_seconds: float,
        timeout: float,
        init: Callable[[asyncpg.Connection], Awaitable[None]],
        statement_cache_size: int = 100,
    ) -> None:
        self.dsn = dsn
        self.statement_cache_size = statement_cache_size
        self.timeout = timeout
        self.size = size
        self.limit = size + overflow
        self.recycle_seconds = recycle_seconds
        self.init = init
        self.opened = 0  # open, or being opened
        self._generation = 0
        self._idle: list[tuple[asyncpg.Connection, float, int]] = []
        self._in_use: dict[asyncpg.Connection, tuple[float, int]] = {}
        # A waiter is handed a connection, or None: a place is free to open one.
        self._waiting: collections.deque[asyncio.Future[asyncpg.Connection | None]] = (
            collections.deque()
        )

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def acquire(self) -> asyncpg.Connection:
        connection = self._take_idle()
        if connection is not None:  # as a rule: no timer to set
            return connection
        try:
            async with asyncio.timeout(self.timeout):
                return await self._acquire()
        except TimeoutError as exc:
            raise DatabaseUnavailable(
                f"the database gave no connection within {self.timeout:g} s: try again shortly"
            ) from exc

    def _take_idle(self) -> asyncpg.Connection | None:
        while self._idle:
            connection, opened_at, generation = self._idle.pop()
            if self._fresh(connection, opened_at, generation):
                self._in_use[connection] = (opened_at, generation)
                return connection
            self._discard(connection)
        return None

    async def _acquire(self) -> asyncpg.Connection:
        while True:
            connection = self._take_idle()
            if connection is not None:
                return connection
            if self.opened < self.limit:
                return await self._open()
            waiter: asyncio.Future[asyncpg.Connection | None] = (
                asyncio.get_running_loop().create_future()
            )
            self._waiting.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # handed over as it was cancelled
                    if (connection := waiter.result()) is not None:
                        self.release(connection)
                    else:
                        self._hand(None)
                raise
            if handed is not None:
                return handed

    def release(self, connection: asyncpg.Connection) -> None:
        opened_at, generation = self._in_use.pop(connection)
        if not self._fresh(connection, opened_at, generation):
            self._discard(connection)
            self._hand(None)
        elif self._waiting:
            self._in_use[connection] = (opened_at, generation)
            if not self._hand(connection):
                self._in_use.pop(connection)
                self._keep(connection, opened_at, generation)
        else:
            self._keep(connection, opened_at, generation)

    def expire(self) -> None:
        """Every connection open now is replaced before its next use."""
        self._generation += 1

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection, _, _ in idle:
            self.opened -= 1
            await connection.close()

    def _keep(self, connection: asyncpg.Connection, opened_at: float, generation: int) -> None:
        if self.opened > self.size:  # an overflow connection
            self._discard(connection)
        else:
            self._idle.append((connection, opened_at, generation))

    def _hand(self, item: asyncpg.Connection | None) -> bool:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return True
        return False

    def _fresh(self, connection: asyncpg.Connection, opened_at: float, generation: int) -> bool:
        return (
            generation == self._generation
            and not connection.is_closed()
            and time.monotonic() - opened_at < self.recycle_seconds
        )

    def _discard(self, connection: asyncpg.Connection) -> None:
        self.opened -= 1
        if not connection.is_closed():
            connection.terminate()

    async def _open(self) -> asyncpg.Connection:
        self.opened += 1
        try:
            connection = await asyncpg.connect(
                self.dsn, timeout=self.timeout, statement_cache_size=self.statement_cache_size
            )
            await self.init(connection)
        except REFUSED as exc:
            self.opened -= 1
            self._hand(None)
            raise DatabaseUnavailable() from exc
        except BaseException:
            self.opened -= 1
            self._hand(None)
            raise
        self._in_use[connection] = (time.monotonic(), self._generation)
        return connection


# asyncpg's errors for a connection that is gone (raised by reads, which bypass SQLAlchemy).
# InternalClientError is what a connection says when the server's "terminating connection"
# arrived between two statements and left its protocol mid-operation: it cannot be used again.
DISCONNECTED = (
    OSError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
)
# What a server says when it will not open a connection: every slot taken (``too many
# clients``), starting up or shutting down, not listening.
REFUSED = (
    *DISCONNECTED,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.CannotConnectNowError,
)


async def json_codecs(connection: asyncpg.Connection) -> None:
    """JSON in and out as SQLAlchemy's asyncpg dialect sets it up on its connections: the
    statements' bind and result conversions are SQLAlchemy's, and expect the same."""
    await connection.set_type_codec(
        "json",
        encoder=str.encode,
        decoder=lambda value: json.loads(value.decode()),
        schema="pg_catalog",
        format="binary",
    )
    await connection.set_type_codec(
        "jsonb",
        encoder=lambda value: b"\x01" + value.encode(),
        decoder=lambda value: json.loads(value[1:].decode()),
        schema="pg_catalog",
        format="binary",
    )
