"""``keyring.service.reseal_all``: every secret sealed with another key than the active one is
sealed again with it, a batch at a time, and opens with the new key alone; a second pass finds
nothing. (``tessera secrets rotate`` runs it: tests/test_cli.py.)"""

import base64
import secrets

from sqlalchemy import select

from tessera.chain.keys import open_seed
from tessera.config import parse_key_ring
from tessera.keyring import service
from tessera.models import ProjectWallet, UserWallet
from tessera.toolkit.crypto import Sealed, SecretBox
from tests import orm
from tests.factories import create_users


async def wallets(database) -> list[UserWallet | ProjectWallet]:
    async with orm.session(database, write=False) as session:
        return [
            *await session.scalars(select(UserWallet)),
            *await session.scalars(select(ProjectWallet)),
        ]


async def test_reseals_in_batches_under_the_new_key_then_finds_nothing(
    client, tenant, settings, database, monkeypatch
):
    await create_users(client, tenant, 5)
    old_ring = settings.secret_keys.get_secret_value()
    new = f"k2:{base64.b64encode(secrets.token_bytes(32)).decode()}"
    box = SecretBox(parse_key_ring(f"{new},{old_ring}"))
    monkeypatch.setattr(service, "BATCH", 2)  # five wallets of users: three batches
    try:
        done = await service.reseal_all(database, box)
        assert done.active_key_id == "k2"
        assert (done.user_wallets, done.project_wallets) == (5, 1)
        only_new = SecretBox(parse_key_ring(new))
        rows = await wallets(database)
        assert {row.secret_key_id for row in rows} == {"k2"}
        for row in rows:
            assert row.secret_key_id is not None and row.secret_blob is not None
            secret = Sealed(row.secret_key_id, row.secret_blob)
            assert len(open_seed(only_new, public_key=row.public_key, secret=secret)) == 32
        again = await service.reseal_all(database, box)
        assert (again.user_wallets, again.project_wallets, again.signing_keys) == (0, 0, 0)
    finally:  # signing keys outlive tests: sealed with the suite's key again
        back = SecretBox(parse_key_ring(f"{old_ring},{new}"))
        await service.reseal_all(database, back)
    suites = SecretBox(parse_key_ring(old_ring)).active_key_id
    assert {row.secret_key_id for row in await wallets(database)} == {suites}
