"""SQLite connections: the loop's own, one for reads and one for the writer."""

import asyncio
import sqlite3
import time
from collections.abc import (
    Awaitable,
    Callable,
)
from typing import Any

from sqlalchemy.engine import URL

from tessera.errors import DatabaseUnavailable

SQLITE_BUSY_TIMEOUT_MS = 30_000

SQLITE_BUSY_RETRY_SECONDS = 0.005


def sqlite_connection(url: URL, *, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection of ``Database.read`` (waits for nothing: WAL) or ``Database.transaction``
    (no busy timeout: SQLite would sleep on the loop; see ``begin_immediate``), used on the
    loop's thread one statement at a time, with no transaction control by the driver."""
    connection = sqlite3.connect(
        url.database or ":memory:",
        check_same_thread=False,
        isolation_level=None,
        timeout=busy_timeout_ms / 1000,
    )
    sqlite_pragmas(connection, busy_timeout_ms=busy_timeout_ms)
    return connection


async def begin_immediate(connection: sqlite3.Connection, patience: float) -> None:
    """Take SQLite's write lock; another process (the CLI, a second server) may hold it: wait
    for it without blocking the loop, up to ``patience`` seconds (the pool's timeout)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            connection.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise DatabaseUnavailable(
                    "the database is busy (another process holds its write lock): try again shortly"
                ) from exc
        await asyncio.sleep(SQLITE_BUSY_RETRY_SECONDS)


def sqlite_commit(connection: sqlite3.Connection) -> Callable[[], Awaitable[None]]:
    async def commit() -> None:
        connection.execute("COMMIT")

    return commit


def sqlite_pragmas(dbapi_connection: Any, *, busy_timeout_ms: int) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    cursor.close()
