"""The migrations build exactly the schema the ORM models describe, and they run both ways.

Each test starts from an empty database of the suite's backend (a new SQLite file, or a new
PostgreSQL database beside the suite's own, dropped afterwards), never from the session's one.
"""

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tessera import migrations
from tessera.models import Base
from tests.conftest import BACKEND, _recreate_postgres_database, _worker


async def _drop_postgres_database(base_url: str, name: str) -> None:
    engine = create_async_engine(base_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await engine.dispose()


@pytest.fixture
async def empty_database_url(tmp_path) -> AsyncIterator[str]:
    if BACKEND == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'migrations.db'}"
    elif BACKEND == "postgresql":
        base = os.environ.get("TESSERA_TEST_DATABASE_URL")
        if not base:
            pytest.fail("TESSERA_TEST_BACKEND=postgresql needs TESSERA_TEST_DATABASE_URL")
        name = f"{make_url(base).database or 'tessera'}_migrations_{_worker()}"
        await _recreate_postgres_database(base, name)
        try:
            yield make_url(base).set(database=name).render_as_string(hide_password=False)
        finally:
            await _drop_postgres_database(base, name)
    else:
        pytest.fail(f"unknown TESSERA_TEST_BACKEND {BACKEND!r}")


# Alembic's env.py runs its own event loop (asyncio.run), so commands go to a thread.
async def _upgrade(url: str, revision: str = "head") -> None:
    await asyncio.to_thread(migrations.upgrade, url, revision)


async def _downgrade(url: str, revision: str) -> None:
    await asyncio.to_thread(command.downgrade, migrations.config(url), revision)


async def _inspect(url: str, look: Any) -> Any:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(look)
    finally:
        await engine.dispose()


def _differences(connection: Connection) -> list[Any]:
    """What `alembic revision --autogenerate` would write, server defaults included."""
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": True}
    )
    return compare_metadata(context, Base.metadata)


def _state(connection: Connection) -> tuple[set[str], str | None]:
    revision = MigrationContext.configure(connection).get_current_revision()
    return set(inspect(connection).get_table_names()), revision


HEAD = ScriptDirectory(str(migrations.HERE)).get_current_head()


class TestMigrations:
    async def test_upgrade_from_empty_matches_the_models(self, empty_database_url):
        assert await _inspect(empty_database_url, _state) == (set(), None)
        await _upgrade(empty_database_url)
        assert await _inspect(empty_database_url, _differences) == []
        tables, revision = await _inspect(empty_database_url, _state)
        assert (tables, revision) == (set(Base.metadata.tables) | {"alembic_version"}, HEAD)

    async def test_downgrade_to_base_and_upgrade_again(self, empty_database_url):
        await _upgrade(empty_database_url)
        await _downgrade(empty_database_url, "base")
        assert await _inspect(empty_database_url, _state) == ({"alembic_version"}, None)
        await _upgrade(empty_database_url)
        assert await _inspect(empty_database_url, _differences) == []
        assert (await _inspect(empty_database_url, _state))[1] == HEAD
