"""A project's check-in keys: its first made with the project, never later inside a use-case's
transaction under a lock of its row; ``tessera db upgrade`` keys the projects that have none;
retiring the last live key makes its successor; a key made where it is first needed all the
same (a project made by the previous release while it was being upgraded) signs and verifies."""

import asyncio
import os
import subprocess
import uuid

from sqlalchemy import delete, select

from tessera.models import CheckinKey
from tessera.ticket_keys import service as ticket_keys
from tests import orm
from tests.checkins.test_checkins import admission, scan
from tests.checkins.test_offline import raw
from tests.factories import make_tenant
from tests.serving import BIN


async def upgrade(settings) -> str:
    """``tessera db upgrade`` on the session's database, with its key ring: what it says."""
    env = os.environ | {
        "TESSERA_ENV": "test",
        "TESSERA_DATABASE_URL": settings.database_url,
        "TESSERA_SECRET_KEYS": settings.secret_keys.get_secret_value(),
        "TESSERA_HASH_KEY": settings.hash_key.get_secret_value(),
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "tessera"), "db", "upgrade"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


async def keys_of(database, project_id: uuid.UUID) -> list[CheckinKey]:
    async with orm.session(database, write=False) as session:
        found = await session.scalars(select(CheckinKey).where(CheckinKey.project_id == project_id))
        return list(found)


async def keyless(database, project_id: uuid.UUID) -> None:
    """The project as a release before this one left it: no check-in key until a secret."""
    async with orm.session(database) as session:
        await session.execute(delete(CheckinKey).where(CheckinKey.project_id == project_id))
        await session.commit()


class TestFirstKey:
    async def test_a_new_project_has_its_key_before_any_ticket(self, app, database, tenant):
        [key] = await keys_of(database, tenant.project_id)
        assert key.retired_at is None
        [listed] = await ticket_keys.list_keys(database, tenant.project_id)
        assert (listed.kid, listed.signing) == (key.kid, True)

    async def test_its_first_secrets_are_signed_with_it(self, client, database, tenant):
        [key] = await keys_of(database, tenant.project_id)
        _, _, _, shown = await admission(client, tenant)
        assert raw(shown["secret"])[1:5].hex() == key.kid
        assert (await scan(client, tenant, shown["secret"])).status_code == 200

    async def test_upgrade_keys_every_project_that_has_none(self, app, database, settings):
        older, newer = await make_tenant(app, name="Older"), await make_tenant(app, name="Newer")
        await keyless(database, older.project_id)
        [kept] = await keys_of(database, newer.project_id)
        said = await upgrade(settings)
        assert "check-in keys made for 1 projects that had none" in said
        [made] = await keys_of(database, older.project_id)
        assert made.retired_at is None
        assert [k.id for k in await keys_of(database, newer.project_id)] == [kept.id]  # as it was
        assert "check-in keys made" not in await upgrade(settings)

    async def test_a_keyless_projects_first_secret_makes_one_in_its_own_transaction(
        self, app, client, database
    ):
        tenant = await make_tenant(app, name="Upgraded")
        await keyless(database, tenant.project_id)
        app.state.signers.forget(tenant.project_id)
        _, _, _, shown = await admission(client, tenant)  # reads the ticket: Signers.of
        [made] = await keys_of(database, tenant.project_id)
        assert raw(shown["secret"])[1:5].hex() == made.kid
        assert (await scan(client, tenant, shown["secret"])).status_code == 200


class TestRetire:
    async def test_retiring_the_last_live_key_makes_its_successor(self, app, database, tenant):
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        retired = await ticket_keys.retire(database, app.state.box, tenant.project_id, first.kid)
        assert retired.retired_at is not None and not retired.signing
        keys = await ticket_keys.list_keys(database, tenant.project_id)
        assert [(k.kid == first.kid, k.signing, k.retired_at is None) for k in keys] == [
            (False, True, True),
            (True, False, False),
        ]

    async def test_retiring_one_of_two_leaves_the_other_signing(self, app, database, tenant):
        [first] = await ticket_keys.list_keys(database, tenant.project_id)
        rotated = await ticket_keys.rotate(database, app.state.box, tenant.project_id)
        await ticket_keys.retire(database, app.state.box, tenant.project_id, first.kid)
        keys = await ticket_keys.list_keys(database, tenant.project_id)
        assert [(k.kid, k.signing) for k in keys] == [(rotated.kid, True), (first.kid, False)]
