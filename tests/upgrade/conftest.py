"""An empty database of the suite's backend for each test: a new SQLite file, or a new
PostgreSQL database beside the suite's own, dropped afterwards."""

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import BACKEND, _worker
from tests.serving import drop_postgres_database, recreate_postgres_database


@pytest.fixture
def empty_database_url(tmp_path: Path) -> Iterator[str]:
    """A database with no table yet."""
    if BACKEND == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'upgrade.db'}"
        return
    base = os.environ.get("TESSERA_TEST_DATABASE_URL")
    if not base:
        pytest.fail("TESSERA_TEST_BACKEND=postgresql needs TESSERA_TEST_DATABASE_URL")
    name = f"{make_url(base).database or 'tessera'}_upgrade_{_worker()}"
    asyncio.run(recreate_postgres_database(base, name))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(drop_postgres_database(base, name))
