"""The migrations build exactly the schema the ORM models describe, and they run both ways.

Each test starts from an empty database of the suite's backend (a new SQLite file, or a new
PostgreSQL database beside the suite's own, dropped afterwards), never from the session's one.
"""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tessera import migrations
from tessera.models import Base
from tests.conftest import BACKEND, _worker
from tests.serving import drop_postgres_database, recreate_postgres_database


@pytest.fixture
async def empty_database_url(tmp_path) -> AsyncIterator[str]:
    if BACKEND == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'migrations.db'}"
    elif BACKEND == "postgresql":
        base = os.environ.get("TESSERA_TEST_DATABASE_URL")
        if not base:
            pytest.fail("TESSERA_TEST_BACKEND=postgresql needs TESSERA_TEST_DATABASE_URL")
        name = f"{make_url(base).database or 'tessera'}_migrations_{_worker()}"
        await recreate_postgres_database(base, name)
        try:
            yield make_url(base).set(database=name).render_as_string(hide_password=False)
        finally:
            await drop_postgres_database(base, name)
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

    async def test_counters_and_numbers_start_from_the_users_already_there(
        self, empty_database_url
    ):
        """0005 counts a project's users; 0015 numbers them in the order they were listed."""
        await _upgrade(empty_database_url, "0004")

        # Raw rows as each driver takes them: SQLite stores text, asyncpg wants typed values.
        def value(native: uuid.UUID | datetime) -> object:
            if BACKEND != "sqlite":
                return native
            return native.hex if isinstance(native, uuid.UUID) else native.isoformat(" ")

        project = value(uuid.uuid4())
        now = value(datetime(2026, 1, 1, tzinfo=UTC))
        # Created a second apart, the later one first in the table.
        users = [
            (uuid.uuid4(), active, value(datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)))
            for second, active in ((3, True), (1, False), (2, True))
        ]

        def seed(connection: Connection) -> None:
            connection.execute(
                text(
                    "INSERT INTO projects (id, name, created_at, updated_at) "
                    "VALUES (:id, 'p', :now, :now)"
                ),
                {"id": project, "now": now},
            )
            for user_id, active, created in users:
                connection.execute(
                    text(
                        "INSERT INTO users (id, project_id, email, is_activated, reputation, "
                        "created_at, updated_at) VALUES (:id, :project, :email, :active, 0, "
                        ":created, :created)"
                    ),
                    {
                        "id": value(user_id),
                        "project": project,
                        "email": f"{user_id}@example.com",
                        "active": active,
                        "created": created,
                    },
                )
            connection.commit()

        await _inspect(empty_database_url, seed)
        await _upgrade(empty_database_url)

        def counters(connection: Connection) -> tuple[int, int]:
            row = connection.execute(text("SELECT user_count, active_user_count FROM projects"))
            return tuple(row.one())

        assert await _inspect(empty_database_url, counters) == (3, 2)

        def numbers(connection: Connection) -> list[str]:
            rows = connection.execute(text("SELECT email FROM users ORDER BY number"))
            return list(rows.scalars())

        by_creation = [f"{user_id}@example.com" for user_id, _, _ in (users[1], users[2], users[0])]
        assert await _inspect(empty_database_url, numbers) == by_creation
