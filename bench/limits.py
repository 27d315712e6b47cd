"""The limits Tessera is measured against: bare ASGI apps, no framework, under the same server
settings as Tessera (see bench/servers.py).

- ``l1``: answers ``{"version":"2.72.0"}`` to any request;
- ``l2``: parses the JSON body (``{"id": "<uuid>"}``), reads that row of Tessera's ``users``
  table by primary key with the raw driver, and answers it as JSON;
- ``l2w``: the same, then one INSERT into ``bench_writes`` (in autocommit: its own commit).

``BENCH_DATABASE_URL`` is the database in Tessera's URL form: ``sqlite+aiosqlite:///path`` (the
same file Tessera uses, through the standard library's ``sqlite3`` called on the event loop's
thread, as Tessera reads and writes it: a statement takes microseconds, less than handing it to
a thread) or ``postgresql+asyncpg://...`` (an asyncpg pool of as many connections as Tessera's
default pool size).
"""

import json
import os
import sqlite3
import uuid

from tessera.config import Settings

VERSION = b'{"version":"2.72.0"}'
JSON_HEADERS = [(b"content-type", b"application/json")]
POOL_SIZE: int = Settings.model_fields["db_pool_size"].default
SELECT_USER = (
    "SELECT id, email, first_name, last_name, reference_id, is_activated, activated_on, "
    "created_at FROM users WHERE id = $1"
)
INSERT_WRITE = "INSERT INTO bench_writes (id, user_id) VALUES ($1, $2)"
CREATE_WRITES = "CREATE TABLE IF NOT EXISTS bench_writes (id VARCHAR(32) PRIMARY KEY, user_id TEXT)"


async def respond(send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def l1(scope, receive, send) -> None:
    if scope["type"] == "http":
        await respond(send, 200, VERSION)


class SqliteStore:
    """Two sqlite3 connections (one reads, one writes), WAL as Tessera sets it, called on the
    event loop's thread."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def open(self) -> None:
        self.reader = self._connect()
        self.writer = self._connect()
        self.writer.execute(CREATE_WRITES)

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
            connection.execute(f"PRAGMA {pragma}")
        return connection

    async def user(self, user_id: uuid.UUID) -> dict | None:
        # SQLAlchemy's Uuid type stores 32 hex digits on SQLite.
        cursor = self.reader.execute(SELECT_USER.replace("$1", "?"), (user_id.hex,))
        row = cursor.fetchone()
        names = [column[0] for column in cursor.description]
        return None if row is None else dict(zip(names, row, strict=True))

    async def insert(self, user_id: uuid.UUID) -> None:
        sql = INSERT_WRITE.replace("$1", "?").replace("$2", "?")
        self.writer.execute(sql, (uuid.uuid4().hex, str(user_id)))

    async def close(self) -> None:
        self.reader.close()
        self.writer.close()


class PostgresStore:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def open(self) -> None:
        import asyncpg

        self.pool = await asyncpg.create_pool(self.dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
        await self.pool.execute(CREATE_WRITES)

    async def user(self, user_id: uuid.UUID) -> dict | None:
        record = await self.pool.fetchrow(SELECT_USER, user_id)
        return None if record is None else dict(record)

    async def insert(self, user_id: uuid.UUID) -> None:
        await self.pool.execute(INSERT_WRITE, uuid.uuid4().hex, str(user_id))

    async def close(self) -> None:
        await self.pool.close()


def store_for(url: str) -> SqliteStore | PostgresStore:
    if url.startswith("sqlite"):
        return SqliteStore(url.split(":///", 1)[1])
    return PostgresStore(url.replace("postgresql+asyncpg://", "postgresql://", 1))


def user_app(*, write: bool):
    """L2 (``write=False``) or L2w: one user read by primary key, and one insert for L2w."""
    state = {}

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(state, receive, send)
            return
        store = state["store"]
        try:
            user_id = uuid.UUID(json.loads(await read_body(receive))["id"])
        except (ValueError, KeyError, TypeError):
            await respond(send, 400, b'{"errors":["id: a uuid is required"]}')
            return
        row = await store.user(user_id)
        if row is None:
            await respond(send, 404, b'{"message":"user not found"}')
            return
        if write:
            await store.insert(user_id)
        await respond(send, 200, json.dumps(row, default=str).encode())

    return app


async def lifespan(state: dict, receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            state["store"] = store_for(os.environ["BENCH_DATABASE_URL"])
            await state["store"].open()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await state["store"].close()
            await send({"type": "lifespan.shutdown.complete"})
            return


l2 = user_app(write=False)
l2w = user_app(write=True)
