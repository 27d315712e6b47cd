"""The data layer: one pool per process, reads, write transactions, and the backends'
differences.

SQLite is a single-writer database. Write transactions therefore start with ``BEGIN IMMEDIATE``
(so a transaction never fails half-way when it upgrades from a read to a write lock) and, inside
one process, queue on an asyncio lock instead of spinning on SQLite's busy handler. Other
processes (the CLI next to a running server) wait on ``busy_timeout``. Reads use plain deferred
transactions and run alongside the writer thanks to WAL.

PostgreSQL runs READ COMMITTED; use-cases that check-then-write lock the row they depend on with
``SELECT ... FOR NO KEY UPDATE`` (see ``lock_for_update``), which SQLite's whole-database write lock
already provides.

- ``database``: ``Database``, its connections, ``read`` and ``transaction``;
- ``conflicts``: ``rerun_on_conflict``, a use-case run again when PostgreSQL aborts its
  transaction as a deadlock;
- ``rows``: what reads and writes are given (``Rows``, ``Transaction``), typed rows;
- ``compiled``: Core statements compiled once per backend, their arguments, their rows;
- ``pool``: the PostgreSQL driver's pool, the process's only one;
- ``sqlite``: SQLite's connections and its ``BEGIN IMMEDIATE`` writer;
- ``sql``: backend-specific SQL (row locks, advisory locks, functions spelt per backend);
- ``requests``: FastAPI dependencies and the requests that only read.
"""

from tessera.db.compiled import table_of, with_defaults
from tessera.db.conflicts import rerun_on_conflict
from tessera.db.database import Database
from tessera.db.pool import DISCONNECTED, ConnectionPool
from tessera.db.requests import (
    DatabaseDep,
    attach,
    database_of,
    get_database,
)
from tessera.db.rows import Joined, Rows, Transaction
from tessera.db.sql import (
    AnySelect,
    NotIndexed,
    UtcDay,
    lock_for_share,
    lock_for_update,
    serialize,
    serialize_each,
    skip_locked,
)
from tessera.db.sqlite import SQLITE_BUSY_TIMEOUT_MS

__all__ = [
    "DISCONNECTED",
    "SQLITE_BUSY_TIMEOUT_MS",
    "AnySelect",
    "ConnectionPool",
    "Database",
    "DatabaseDep",
    "Joined",
    "NotIndexed",
    "Rows",
    "Transaction",
    "UtcDay",
    "attach",
    "database_of",
    "get_database",
    "lock_for_share",
    "lock_for_update",
    "rerun_on_conflict",
    "serialize",
    "serialize_each",
    "skip_locked",
    "table_of",
    "with_defaults",
]
