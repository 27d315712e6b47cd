"""``tessera db status``: the database's revision, the code's head and what an upgrade would
apply, oldest first, with an exit code for each state (0 up to date, 3 an upgrade pending, 4 a
revision this code does not know). ``test_upgrade.py`` runs it on a database of the previous
release."""

import asyncio
import subprocess

from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine

from tessera import migrations
from tests.serving import BIN, settings_env
from tests.upgrade.releases import PREVIOUS


def every_revision() -> list[str]:
    scripts = ScriptDirectory(str(migrations.HERE))
    return [script.revision for script in reversed(list(scripts.walk_revisions()))]


def record_revision(url: str, revision: str) -> None:
    """The database says it is at ``revision``, as a newer release's migration would leave it."""

    def write(connection: Connection) -> None:
        connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
        connection.commit()

    async def main() -> None:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                await connection.run_sync(write)
        finally:
            await engine.dispose()

    asyncio.run(main())


class TestDbStatus:
    def test_never_migrated_every_migration_is_pending(self, empty_database_url: str):
        status = migrations.status(empty_database_url)
        assert (status.current, status.exit_code) == ((), migrations.UPGRADE_PENDING)
        assert [script.revision for script in status.pending] == every_revision()
        assert status.pending[0] == ("0001", "initial schema")
        assert status.lines()[:3] == [
            "current: none (never migrated)",
            f"head: {migrations.head()}",
            "pending: 0001 initial schema",
        ]

    def test_the_previous_release_has_what_came_after_it_pending(self, empty_database_url: str):
        migrations.upgrade(empty_database_url, PREVIOUS.head)
        status = migrations.status(empty_database_url)
        after = every_revision()[every_revision().index(PREVIOUS.head) + 1 :]
        assert status.current == (PREVIOUS.head,)
        assert [script.revision for script in status.pending] == after
        assert status.exit_code == (migrations.UPGRADE_PENDING if after else 0)

        migrations.upgrade(empty_database_url)
        status = migrations.status(empty_database_url)
        assert (status.current, status.pending, status.exit_code) == ((migrations.head(),), [], 0)
        assert status.lines() == [f"current: {migrations.head()}", f"head: {migrations.head()}"]

    def test_a_revision_this_code_does_not_know_is_a_newer_release(self, empty_database_url: str):
        migrations.upgrade(empty_database_url)
        record_revision(empty_database_url, "9999")
        done = subprocess.run(
            [str(BIN / "tessera"), "db", "status"],
            env=settings_env(empty_database_url),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == migrations.NEWER_THAN_CODE == 4, done.stderr
        assert done.stdout.splitlines() == [
            "current: 9999 (unknown to this code: a newer release migrated the database)",
            f"head: {migrations.head()}",
        ]
