"""A database copied whole while it serves, and copied back into an empty one (``tessera
backup``): the one place that knows each backend's tools for it.

- SQLite: the online backup API (``sqlite3.Connection.backup``), in one step, inside a read
  transaction of its own: the copy and what ``describe`` reads see the same snapshot (WAL lets
  the writers go on meanwhile). The copy is left in rollback-journal mode, one file.
- PostgreSQL: ``pg_dump --format=custom`` as the configured role (no superuser), run with
  ``--snapshot`` of a REPEATABLE READ transaction that stays open while it runs, in which
  ``describe`` reads too: the figures describe exactly the dump. Restored with ``pg_restore
  --no-owner --no-privileges --exit-on-error --single-transaction``.

The password reaches the tools in a passfile of the process's own (mode 0600, deleted at once),
never on a command line or in the environment of every child; errors quote the tool's own
message, which never holds it.
"""

import asyncio
import os
import secrets
import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Literal, TypeVar

import asyncpg
from sqlalchemy.engine import URL, make_url

from tessera.db.database import Database
from tessera.db.rows import Rows
from tessera.db.sqlite import SQLITE_BUSY_TIMEOUT_MS

T = TypeVar("T")
Backend = Literal["sqlite", "postgresql"]

# The data file of a backup of each backend, beside its manifest.
DATA_FILES: dict[Backend, str] = {"sqlite": "tessera.sqlite3", "postgresql": "tessera.pgdump"}
_TABLES = {
    "sqlite": "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
    "postgresql": "SELECT count(*) FROM pg_catalog.pg_tables "
    "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
}


class DumpFailed(RuntimeError):
    """A copy could not be made or put back; the message says why, in one line."""


class DatabaseNotEmpty(DumpFailed):
    """A restore's target has a table: a restore never mixes a backup with other rows."""


def backend_of(url: str | URL) -> Backend:
    return "sqlite" if make_url(url).get_backend_name() == "sqlite" else "postgresql"


async def dump(
    database: Database, directory: Path, describe: Callable[[Rows], Awaitable[T]]
) -> tuple[Backend, T]:
    """Write a consistent copy of ``database`` into ``directory`` (as ``DATA_FILES[backend]``)
    while it serves, and what ``describe`` reads of exactly that copy."""
    backend = backend_of(database.url)
    target = directory / DATA_FILES[backend]
    if backend == "sqlite":
        with _sqlite_errors():
            return backend, await _sqlite_dump(database, target, describe)
    return backend, await _postgresql_dump(database, target, describe)


async def restore(url: str, data: Path) -> None:
    """Put a backup's data file (of the backend of ``url``) into the database at ``url``, which
    must exist (PostgreSQL) and have no table: otherwise ``DatabaseNotEmpty``, and nothing is
    changed."""
    if backend_of(url) == "sqlite":
        with _sqlite_errors():
            _sqlite_restore(_sqlite_path(url), data)
        return
    conn = await _connect(url)
    try:
        if await conn.fetchval(_TABLES["postgresql"]):
            raise DatabaseNotEmpty(f"database {make_url(url).database!r} is not empty")
    finally:
        await conn.close()
    await _run_tool(
        "pg_restore",
        url,
        "--no-owner",
        "--no-privileges",
        "--exit-on-error",
        "--single-transaction",
        f"--dbname={make_url(url).database}",
        str(data),
    )
    conn = await _connect(url)
    try:  # the planner's statistics are not in a dump
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


@asynccontextmanager
async def scratch(backend: Backend, url: str) -> AsyncIterator[str]:
    """The URL of a new, empty database of ``backend`` to restore a backup into and read it,
    gone afterwards: a file in a temporary directory (SQLite), or a database made on the server
    of ``url`` by its role, which needs CREATEDB (PostgreSQL)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tessera-verify-") as directory:
            yield f"sqlite:///{Path(directory) / DATA_FILES['sqlite']}"
        return
    if backend_of(url) != "postgresql":
        raise DumpFailed(
            "a PostgreSQL dump is read by restoring it into a temporary database: "
            "set TESSERA_DATABASE_URL to a PostgreSQL server whose role has CREATEDB"
        )
    name = f"{make_url(url).database or 'tessera'}_verify_{secrets.token_hex(4)}"
    conn = await _connect(url)
    try:
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        except asyncpg.InsufficientPrivilegeError as exc:
            raise DumpFailed(
                f"a PostgreSQL dump is read by restoring it into a temporary database: "
                f"role {make_url(url).username!r} needs CREATEDB ({exc})"
            ) from None
        try:
            yield make_url(url).set(database=name).render_as_string(hide_password=False)
        finally:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def _sqlite_dump(
    database: Database, target: Path, describe: Callable[[Rows], Awaitable[T]]
) -> T:
    source = sqlite3.connect(
        _sqlite_path(database.url), isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000
    )
    with closing(source):
        source.execute("BEGIN")
        # The read transaction's snapshot starts at its first read; the backup steps inside
        # it (SQLite opens none of its own when the source has one), so both see one state.
        source.execute("SELECT count(*) FROM sqlite_master").fetchall()
        described = await describe(Rows(database, source))
        with closing(sqlite3.connect(target, isolation_level=None)) as copy:
            source.backup(copy)  # every page in one step
            copy.execute("PRAGMA journal_mode=DELETE")
        source.execute("COMMIT")
    return described


def _sqlite_restore(path: str, data: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as target:
        if target.execute(_TABLES["sqlite"]).fetchone()[0]:
            raise DatabaseNotEmpty(f"database {path!r} is not empty")
        with closing(sqlite3.connect(f"{data.resolve().as_uri()}?mode=ro", uri=True)) as source:
            source.backup(target)


@contextmanager
def _sqlite_errors() -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise DumpFailed(f"SQLite: {exc}") from None


def _sqlite_path(url: str | URL) -> str:
    path = make_url(url).database
    if not path or path == ":memory:":
        raise DumpFailed("a SQLite database in memory has nothing to back up or restore into")
    return path


async def _postgresql_dump(
    database: Database, target: Path, describe: Callable[[Rows], Awaitable[T]]
) -> T:
    assert database.pool is not None
    try:
        connection = await database.pool.acquire()
    except (OSError, asyncpg.PostgresError) as exc:
        raise DumpFailed(f"cannot connect to database {database.url.database!r}: {exc}") from None
    try:
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            snapshot = await connection.fetchval("SELECT pg_export_snapshot()")
            described = await describe(Rows(database, connection))
            url = database.url.render_as_string(hide_password=False)
            await _run_tool(
                "pg_dump",
                url,
                "--format=custom",
                f"--snapshot={snapshot}",
                f"--file={target}",
                f"--dbname={database.url.database}",
            )
    finally:
        database.pool.release(connection)
    return described


async def _connect(url: str) -> asyncpg.Connection:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        return await asyncpg.connect(dsn, timeout=30)
    except (OSError, asyncpg.PostgresError) as exc:
        raise DumpFailed(f"cannot connect to database {make_url(url).database!r}: {exc}") from None


async def _run_tool(tool: str, url: str, *args: str) -> None:
    """Run ``pg_dump`` or ``pg_restore`` on the server of ``url``; its last line of error
    becomes ``DumpFailed``."""
    executable = shutil.which(tool)
    if executable is None:
        raise DumpFailed(f"{tool} not found: install PostgreSQL's client (postgresql-client)")
    parsed = make_url(url)
    # Where the URL names none, libpq's defaults apply (a Unix socket, 5432), as for asyncpg.
    host = parsed.host or parsed.query.get("host")
    given = {"host": host, "port": parsed.port, "username": parsed.username}
    connection = [f"--{name}={value}" for name, value in given.items() if value]
    with _passfile(parsed.password) as passfile:
        env = os.environ | {"PGPASSFILE": str(passfile), "PGCONNECT_TIMEOUT": "30"}
        env.pop("PGPASSWORD", None)
        process = await asyncio.create_subprocess_exec(
            executable,
            *connection,
            "--no-password",
            *args,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, errors = await process.communicate()
    if process.returncode != 0:
        lines = errors.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise DumpFailed(f"{tool} failed: {lines[-1]}")


@contextmanager
def _passfile(password: str | None) -> Iterator[Path]:
    """A libpq passfile that gives ``password`` to any host, port, database and user (the
    tool connects to one), readable by this user only, removed afterwards."""
    escaped = (password or "").replace("\\", "\\\\").replace(":", "\\:")
    with tempfile.TemporaryDirectory(prefix="tessera-pg-") as directory:
        path = Path(directory) / "pgpass"
        path.touch(mode=0o600)
        path.write_text(f"*:*:*:*:{escaped}\n")
        yield path
