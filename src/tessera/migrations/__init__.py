"""The database schema's migrations (Alembic), shipped inside the package.

``tessera db upgrade`` and the tests call ``upgrade``; it needs no alembic.ini, so it works from
an installed wheel in any directory. Developers make new revisions from the checkout with
``alembic revision --autogenerate -m "..."`` (alembic.ini at the root points here).
``tessera db status`` calls ``status``: what the database is at and what an upgrade would apply.

Migrations are written expand-then-contract, so that the processes of the previous release
keep serving on the upgraded schema until they are restarted (docs/upgrades.md):

- A migration only adds: new tables, nullable columns or columns with a server default (the
  previous release inserts rows without them), new indexes, built on PostgreSQL without
  blocking writes where it allows (``postgresql_concurrently=True`` in an autocommit block) on
  a table that may be large.
- A column or table is dropped or renamed, a column made NOT NULL or its default removed, only
  in a later release, once no release still in service reads or writes it: the release that
  stops using it ships first, the contraction after it.
- Data is backfilled in batches (a bounded ``UPDATE ... WHERE id IN (...)`` at a time), never in
  one statement that holds every row's lock for the length of the upgrade.

``tests/upgrade/`` holds them to it: a database built by a pinned earlier release is upgraded and
read back, and served by that release again; the migrations after the newest pin are checked
for the steps a mechanical look can find (drops, renames, NOT NULL without a default, indexes
built under a blocking lock).
"""

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

HERE = Path(__file__).resolve().parent

UP_TO_DATE, UPGRADE_PENDING, NEWER_THAN_CODE = 0, 3, 4


def config(database_url: str) -> Config:
    alembic = Config()
    alembic.set_main_option("script_location", str(HERE))
    alembic.set_main_option("file_template", "%%(year)d-%%(month).2d-%%(day).2d_%%(slug)s")
    alembic.attributes["database_url"] = database_url
    return alembic


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(config(database_url), revision)


def head() -> str:
    """The revision the package's models are at: what an up-to-date database records."""
    revision = ScriptDirectory(str(HERE)).get_current_head()  # refuses several heads
    assert revision is not None
    return revision


def revisions() -> frozenset[str]:
    """Every revision the package knows."""
    return frozenset(script.revision for script in ScriptDirectory(str(HERE)).walk_revisions())


class Pending(NamedTuple):
    """A migration an upgrade would apply: its revision and the first line of its message."""

    revision: str
    message: str


class Status(NamedTuple):
    """Where a database's schema stands against this code's migrations."""

    current: tuple[str, ...]
    """The revisions the database records: none when it was never migrated."""
    head: str
    pending: list[Pending]
    """Oldest first; empty when up to date, or when ``unknown`` is not."""
    unknown: tuple[str, ...]
    """Recorded revisions this code does not know: a newer release migrated the database."""

    @property
    def exit_code(self) -> int:
        """``tessera db status``'s: 0 up to date, 3 an upgrade pending, 4 the database newer
        than this code (a script can tell them apart; 1 stays for errors, 2 for usage)."""
        if self.unknown:
            return NEWER_THAN_CODE
        return UPGRADE_PENDING if self.pending else UP_TO_DATE

    def lines(self) -> list[str]:
        """What ``tessera db status`` prints: one fact a line, each pending migration on one."""
        current = ", ".join(self.current) or "none (never migrated)"
        if self.unknown:
            current += " (unknown to this code: a newer release migrated the database)"
        pending = [f"pending: {script.revision} {script.message}" for script in self.pending]
        return [f"current: {current}", f"head: {self.head}", *pending]


def status(database_url: str, *, connect_args: Mapping[str, Any] | None = None) -> Status:
    """The database's revisions and the migrations ``upgrade`` would apply, read with Alembic's
    own API; it changes nothing. ``connect_args``: the driver's, as the migrations' engine gets
    them (``Settings.engine_connect_args``)."""
    scripts = ScriptDirectory(str(HERE))
    current = asyncio.run(_current_revisions(database_url, dict(connect_args or {})))
    unknown = tuple(revision for revision in current if revision not in revisions())
    pending = [] if unknown else _pending(scripts, current)
    return Status(current=current, head=head(), pending=pending, unknown=unknown)


def _pending(scripts: ScriptDirectory, current: tuple[str, ...]) -> list[Pending]:
    newest_first = scripts.iterate_revisions("heads", current or "base")
    return [
        Pending(script.revision, " ".join(script.doc.split()))
        for script in reversed(list(newest_first))
    ]


async def _current_revisions(database_url: str, connect_args: dict[str, Any]) -> tuple[str, ...]:
    engine = create_async_engine(database_url, connect_args=connect_args)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_heads)
    finally:
        await engine.dispose()


def _heads(connection: Connection) -> tuple[str, ...]:
    return MigrationContext.configure(connection).get_current_heads()
