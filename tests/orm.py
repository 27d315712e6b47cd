"""The models' ORM in tests: a session on a test's database to set up rows and read them back
as model objects, briefly. The application reads and writes only through ``tessera.db``
(``Database.read`` and ``Database.transaction``); its process opens one pool.

Each session has a connection of its own, closed at its end. On SQLite, a write session begins
with ``BEGIN IMMEDIATE`` and waits for the application's writer on SQLite's busy timeout, on
aiosqlite's thread, not on the event loop (SQLAlchemy's documented recipe for SQLite's
transactions); a read session begins deferred and runs beside the writer (WAL)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from tessera.db import Database

BUSY_TIMEOUT_MS = 30_000


@asynccontextmanager
async def session(database: Database, *, write: bool = True) -> AsyncIterator[AsyncSession]:
    """A session on ``database``; the test commits, anything uncommitted rolls back."""
    url = database.url
    if url.get_backend_name() == "sqlite":
        url = url.set(drivername="sqlite+aiosqlite")
    engine = create_async_engine(url, poolclass=NullPool)
    if url.get_backend_name() == "sqlite":
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql(begin)

    try:
        async with AsyncSession(engine, expire_on_commit=False) as orm:
            yield orm
    finally:
        await engine.dispose()
