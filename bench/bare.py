"""The limits Tessera is measured against: bare ASGI apps under the same server settings.

- ``l1``: answers ``{"version":"2.72.0"}`` to any request;
- ``l2``: parses a small JSON body and reads one user row by primary key with the raw driver;
- ``l2w``: the same, then one INSERT and a commit.

``BENCH_DATABASE_URL`` names the database (Tessera's URL form): the SQLite file through aiosqlite,
or PostgreSQL through an asyncpg pool.
"""

import asyncio
import json
import os
import uuid

VERSION = b'{"version":"2.72.0"}'
HEADERS = [(b"content-type", b"application/json")]
USER_COLUMNS = "id, email, first_name, last_name, reference_id, is_activated"


async def _respond(send, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": body})


async def _body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def l1(scope, receive, send):
    if scope["type"] == "http":
        await _respond(send, VERSION)


class _Store:
    """One user read (and optionally one insert) with the raw driver."""

    def __init__(self, url: str) -> None:
        self.sqlite = url.startswith("sqlite")
        self.url = url
        self.db = None
        self.writer = asyncio.Lock()  # one write transaction at a time on the SQLite connection

    async def open(self) -> None:
        if self.sqlite:
            import aiosqlite

            self.db = await aiosqlite.connect(self.url.split("///", 1)[1], isolation_level=None)
            await self.db.execute("PRAGMA journal_mode=WAL")
            await self.db.execute("PRAGMA synchronous=NORMAL")
        else:
            import asyncpg

            dsn = self.url.replace("postgresql+asyncpg", "postgresql")
            self.db = await asyncpg.create_pool(dsn, min_size=32, max_size=32)
        await self.execute(
            "CREATE TABLE IF NOT EXISTS bench_writes (id VARCHAR(32) PRIMARY KEY, user_id TEXT)"
        )

    async def execute(self, sql: str, *args) -> None:
        if self.sqlite:
            await self.db.execute(sql.replace("$1", "?").replace("$2", "?"), args)
        else:
            await self.db.execute(sql, *args)

    async def user(self, user_id: str) -> dict | None:
        sql = f"SELECT {USER_COLUMNS} FROM users WHERE id = $1"
        if self.sqlite:
            async with self.db.execute(sql.replace("$1", "?"), (uuid.UUID(user_id).hex,)) as cur:
                row = await cur.fetchone()
            names = [c[0] for c in cur.description]
        else:
            record = await self.db.fetchrow(sql, uuid.UUID(user_id))
            row, names = (None, []) if record is None else (list(record.values()), list(record.keys()))
        return None if row is None else {k: str(v) for k, v in zip(names, row, strict=True)}

    async def insert(self, user_id: str) -> None:
        sql = "INSERT INTO bench_writes (id, user_id) VALUES ($1, $2)"
        if self.sqlite:
            async with self.writer:
                await self.db.execute("BEGIN IMMEDIATE")
                await self.db.execute(
                    sql.replace("$1", "?").replace("$2", "?"), (uuid.uuid4().hex, user_id)
                )
                await self.db.execute("COMMIT")
        else:
            await self.db.execute(sql, uuid.uuid4().hex, user_id)  # a commit of its own


def _reader(write: bool):
    store = _Store(os.environ["BENCH_DATABASE_URL"])

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await store.open()
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        user_id = json.loads(await _body(receive))["id"]
        row = await store.user(user_id)
        if write:
            await store.insert(user_id)
        await _respond(send, json.dumps(row).encode())

    return app


l2 = _reader(write=False)
l2w = _reader(write=True)
