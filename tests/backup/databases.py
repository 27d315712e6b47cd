"""Databases of the backup tests: an empty one to restore into, and rows read back from one."""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from tessera.db import table_of
from tessera.keyring.repository import SEALED
from tessera.models import Base
from tests import orm
from tests.conftest import database_at
from tests.serving import recreate_postgres_database


async def empty_database(backend: str, directory: Path, name: str) -> str:
    """A database with no table: a file not made yet (SQLite), or ``<base>_<name>`` made anew
    (PostgreSQL, ``TESSERA_TEST_DATABASE_URL``)."""
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{directory / f'{name}.db'}"
    base = os.environ["TESSERA_TEST_DATABASE_URL"]
    database = f"{make_url(base).database or 'tessera'}_{name}"
    await recreate_postgres_database(base, database)
    return make_url(base).set(database=database).render_as_string(hide_password=False)


@asynccontextmanager
async def reading(url: str) -> AsyncIterator[AsyncSession]:
    """An ORM session on the database at ``url``, to read it back."""
    database = database_at(url)
    try:
        async with orm.session(database, write=False) as session:
            yield session
    finally:
        await database.dispose()


async def row_counts(url: str) -> dict[str, int]:
    """Rows per table of the models, as a manifest counts them."""
    async with reading(url) as session:
        return {
            table.name: await session.scalar(select(func.count()).select_from(table)) or 0
            for table in Base.metadata.sorted_tables
        }


async def sealed_secrets(url: str) -> int:
    """The secrets sealed with the key ring (wallets', signing, webhook and check-in keys)."""
    async with reading(url) as session:
        total = 0
        for model in SEALED:
            table = table_of(model)
            counted = select(func.count()).where(table.c.secret_key_id.is_not(None))
            total += await session.scalar(counted) or 0
        return total
