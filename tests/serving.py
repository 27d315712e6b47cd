"""`tessera serve` as a real process on 127.0.0.1, for the tests that need a socket."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
from sqlalchemy.engine import make_url

from tessera import migrations

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _connect(base_url: str) -> asyncpg.Connection:
    url = make_url(base_url)
    return await asyncpg.connect(
        user=url.username,
        password=url.password,
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        database=url.database or "postgres",
        timeout=10,
    )


async def _drop(conn: asyncpg.Connection, name: str) -> None:
    """DROP ... WITH (FORCE) ends the other sessions on the database, but not an autovacuum
    worker (the superuser's: "must be a member of the role whose process is being terminated"),
    which a test that made and dropped many tables can start there. It is done in moments."""
    for _ in range(100):
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except asyncpg.exceptions.InsufficientPrivilegeError:
            await asyncio.sleep(0.1)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def drop_postgres_database(base_url: str, name: str) -> None:
    conn = await _connect(base_url)
    try:
        await _drop(conn, name)
    finally:
        await conn.close()


async def recreate_postgres_database(base_url: str, name: str) -> None:
    conn = await _connect(base_url)
    try:
        await _drop(conn, name)
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def fresh_database(backend: str, directory: Path, name: str) -> str:
    """A new, migrated database of its own: a file for SQLite, ``<base>_<name>`` on PostgreSQL
    (``TESSERA_TEST_DATABASE_URL``)."""
    if backend == "postgresql":
        base = os.environ["TESSERA_TEST_DATABASE_URL"]
        database = f"{make_url(base).database or 'tessera'}_{name}"
        url = make_url(base).set(database=database).render_as_string(hide_password=False)
        with ThreadPoolExecutor(1) as pool:  # outside any running event loop
            pool.submit(asyncio.run, recreate_postgres_database(base, database)).result()
    else:
        url = f"sqlite+aiosqlite:///{directory / f'{name}.db'}"
    migrations.upgrade(url)
    return url


def tessera(*args: str, env: dict[str, str]) -> dict:
    """Run a CLI command; its JSON answer."""
    done = subprocess.run(
        [str(BIN / "tessera"), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def settings_env(database_url: str, **settings: object) -> dict[str, str]:
    """The environment of a server or CLI on ``database_url``: TESSERA_<NAME> for each setting.
    Of the suite's own environment only what says how the database is reached goes along
    (``TESSERA_DB_TRANSACTION_POOLER``: the suite runs through PgBouncer, make test-pgbouncer)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TESSERA_") or k == "TESSERA_DB_TRANSACTION_POOLER"
    }
    env |= {"TESSERA_DATABASE_URL": database_url, "TESSERA_LOG_LEVEL": "warning"}
    env |= {f"TESSERA_{name.upper()}": str(value) for name, value in settings.items()}
    return env


@contextmanager
def serve(
    env: dict[str, str], log: Path, *args: str, program: Sequence[str] = (str(BIN / "tessera"),)
) -> Iterator[str]:
    """The server's base URL while it runs (``args``: more options of ``tessera serve``;
    ``program``: the command that is ``tessera``, another release's in tests/upgrade/)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*program, "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_until_answering(url, process, log)
            yield url
        finally:
            process.terminate()
            process.wait(10)


def _wait_until_answering(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/v1/version", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert process.poll() is None, f"tessera serve exited: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "tessera serve did not start"
        time.sleep(0.1)
