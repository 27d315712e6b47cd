"""What the readiness checks ask the database (``tessera.health``): that it answers, and which
migrations its schema is at. A database not migrated yet has no ``alembic_version`` table,
which each driver reports its own way."""

import sqlite3
from typing import NamedTuple

import asyncpg
from sqlalchemy import column, literal_column, select, table

from tessera.db.rows import Rows
from tessera.db.sql import AnySelect

_ONE: AnySelect = select(literal_column("1").label("one"))
_VERSIONS = select(table("alembic_version", column("version_num")).c.version_num)


class _Version(NamedTuple):
    version_num: str


async def ping(rows: Rows) -> None:
    """A statement's round trip: the database answers."""
    await rows.scalar(_ONE)


async def schema_versions(rows: Rows) -> list[str]:
    """The revisions ``alembic_version`` records; none when there is no such table."""
    try:
        return [row.version_num for row in await rows.all(_VERSIONS, _Version)]
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
    except asyncpg.exceptions.UndefinedTableError:
        pass
    return []
