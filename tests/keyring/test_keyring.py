"""The key ring's secrets (``tessera.keyring``): re-sealing under a new first key takes every kind
of sealed secret (users' and projects' custodial wallets, the token issuer's signing keys,
webhook secrets, check-in keys), keeps each secret and its binding to its row, and leaves what is
sealed with the active key already; a ring that lacks a key names it and changes nothing; the
ids of the keys in use, each once."""

import base64
import secrets
import uuid
from collections.abc import AsyncIterator

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sqlalchemy import select
from substrateinterface import Keypair, KeypairType

from tessera.config import parse_key_ring
from tessera.keyring import repository, service
from tessera.keyring.schemas import Resealed
from tessera.models import (
    CheckinKey,
    ProjectWallet,
    SigningKey,
    UserWallet,
    WebhookEndpoint,
)
from tessera.toolkit.crypto import SecretBox
from tests import orm
from tests.factories import create_users, linked

KINDS = (UserWallet, ProjectWallet, SigningKey, WebhookEndpoint, CheckinKey)


def new_key(kid: str) -> str:
    return f"{kid}:{base64.b64encode(secrets.token_bytes(32)).decode()}"


class Rings:
    """The suite's ring (``k1``) and new keys to put before it; whatever a test re-sealed is
    sealed with the suite's key again after it (signing keys outlive tests)."""

    def __init__(self, suites: str) -> None:
        self.suites = suites
        self.k2, self.k3 = new_key("k2"), new_key("k3")

    def box(self, *keys: str) -> SecretBox:
        return SecretBox(parse_key_ring(",".join(keys)))


@pytest.fixture
async def rings(settings, database) -> AsyncIterator[Rings]:
    made = Rings(settings.secret_keys.get_secret_value())
    try:
        yield made
    finally:
        await service.reseal_all(database, made.box(made.suites, made.k2, made.k3))


async def sealed(database) -> dict[str, list]:
    """Every sealed secret by table, as stored (equal means unchanged)."""
    return {kind.__tablename__: await database.read(repository.sealed, kind) for kind in KINDS}


async def signing_keys(database) -> int:
    async with orm.session(database, write=False) as session:
        return len(list(await session.scalars(select(SigningKey.kid))))


async def webhook(client, tenant) -> dict:
    response = await client.post(
        "/v1/webhooks", headers=tenant.w, json={"url": "https://93.184.216.34/tessera"}
    )
    assert response.status_code == 201, response.text
    return response.json()


async def a_token(client, tenant) -> None:
    """A token minted: the issuer has a signing key (sealed) in the database."""
    response = await client.post(
        "/v1/auth/token",
        data={"client_id": tenant.client_id, "client_secret": tenant.client_secret},
    )
    assert response.status_code == 200, response.text


async def updated_at(database, model, row_id) -> object:
    async with orm.session(database, write=False) as session:
        return (await session.get(model, row_id)).updated_at


class TestResealAll:
    async def test_every_kind_of_secret_under_the_new_first_key(
        self, client, database, tenant, rings
    ):
        users = await create_users(client, tenant, 2)
        holder = Keypair.create_from_uri(f"//{uuid.uuid4().hex}", crypto_type=KeypairType.SR25519)
        await linked(client, tenant, users[0], holder)  # user-controlled: no secret
        hook = await webhook(client, tenant)
        await a_token(client, tenant)
        issuers = await signing_keys(database)
        assert issuers >= 1
        before = await sealed(database)
        [wallet_row] = before["project_wallets"]
        wallet_updated = await updated_at(database, ProjectWallet, wallet_row.id)
        hook_updated = await updated_at(database, WebhookEndpoint, uuid.UUID(hook["id"]))

        done = await service.reseal_all(database, rings.box(rings.k2, rings.suites))
        assert done == Resealed(
            active_key_id="k2",
            user_wallets=2,
            project_wallets=1,
            signing_keys=issuers,
            webhook_secrets=1,
            checkin_keys=1,
        )
        assert await database.read(repository.key_ids) == ["k2"]
        after = await sealed(database)
        only_new = rings.box(rings.k2)
        suites = rings.box(rings.suites)
        for kind in KINDS:
            rows, was = after[kind.__tablename__], before[kind.__tablename__]
            assert len(rows) == len(was) and {row.secret_key_id for row in rows} <= {"k2"}
            for row, old in zip(rows, was, strict=True):
                assert row.secret_blob != old.secret_blob
                # The same secret, opened with the new key alone.
                assert service.open_secret(only_new, kind, row) == service.open_secret(
                    suites, kind, old
                )
        [hook_row] = after["webhook_endpoints"]
        assert service.open_secret(only_new, WebhookEndpoint, hook_row).decode() == hook["secret"]
        [checkin] = after["checkin_keys"]
        async with orm.session(database, write=False) as session:
            public = await session.scalar(
                select(CheckinKey.public_key).where(CheckinKey.id == checkin.id)
            )
        seed = service.open_secret(only_new, CheckinKey, checkin)
        assert (
            Ed25519PrivateKey.from_private_bytes(seed)
            .public_key()
            .public_bytes(Encoding.Raw, PublicFormat.Raw)
            == public
        )
        async with orm.session(database, write=False) as session:
            held = await session.scalar(
                select(UserWallet).where(UserWallet.public_key == holder.public_key)
            )
        assert (held.secret_key_id, held.secret_blob) == (None, None)  # nothing to re-seal
        # A table that keeps when a row changed says so.
        assert await updated_at(database, ProjectWallet, wallet_row.id) > wallet_updated
        assert await updated_at(database, WebhookEndpoint, uuid.UUID(hook["id"])) > hook_updated

        again = await service.reseal_all(database, rings.box(rings.k2, rings.suites))
        assert again == Resealed(
            active_key_id="k2",
            user_wallets=0,
            project_wallets=0,
            signing_keys=0,
            webhook_secrets=0,
            checkin_keys=0,
        )
        assert await sealed(database) == after

    async def test_only_what_another_key_sealed_and_any_of_them(
        self, client, database, tenant, rings
    ):
        await create_users(client, tenant, 1)
        await service.reseal_all(database, rings.box(rings.k2, rings.suites))
        # The app seals with the suite's key still: a new user's wallet is under k1.
        await create_users(client, tenant, 1)
        assert await database.read(repository.key_ids) == ["k1", "k2"]
        done = await service.reseal_all(database, rings.box(rings.k3, rings.k2, rings.suites))
        issuers = await signing_keys(database)
        assert done == Resealed(
            active_key_id="k3",
            user_wallets=2,
            project_wallets=1,
            signing_keys=issuers,
            webhook_secrets=0,
            checkin_keys=1,
        )
        assert await database.read(repository.key_ids) == ["k3"]
        await create_users(client, tenant, 1)
        done = await service.reseal_all(database, rings.box(rings.k3, rings.k2, rings.suites))
        assert (done.user_wallets, done.project_wallets, done.signing_keys) == (1, 0, 0)

    @pytest.mark.parametrize("wallets", [4, 5], ids=["whole-batches", "a-part-batch"])
    async def test_a_batch_at_a_time(self, client, database, tenant, rings, monkeypatch, wallets):
        await create_users(client, tenant, wallets)
        monkeypatch.setattr(service, "BATCH", 2)
        done = await service.reseal_all(database, rings.box(rings.k2, rings.suites))
        assert (done.user_wallets, done.project_wallets) == (wallets, 1)
        rows = (await sealed(database))["user_wallets"]
        assert len(rows) == wallets and {row.secret_key_id for row in rows} == {"k2"}

    async def test_a_ring_missing_the_sealing_key_names_it_and_changes_nothing(
        self, client, database, tenant, rings
    ):
        await create_users(client, tenant, 3)
        before = await sealed(database)
        with pytest.raises(KeyError) as missing:
            await service.reseal_all(database, rings.box(rings.k2))
        assert missing.value.args == ("secret key 'k1' is not in TESSERA_SECRET_KEYS",)
        assert await sealed(database) == before

    async def test_a_key_of_that_id_that_did_not_seal_them_changes_nothing(
        self, client, database, tenant, rings
    ):
        await create_users(client, tenant, 3)
        before = await sealed(database)
        with pytest.raises(InvalidTag):
            await service.reseal_all(database, rings.box(rings.k2, new_key("k1")))
        assert await sealed(database) == before


class TestOpenSecret:
    async def test_a_secret_opens_on_its_own_row_only(self, client, database, tenant, rings):
        await create_users(client, tenant, 2)
        box = rings.box(rings.suites)
        first, second = (await sealed(database))["user_wallets"]
        assert len(service.open_secret(box, UserWallet, first)) == 32
        assert service.open_secret(box, UserWallet, first) != service.open_secret(
            box, UserWallet, second
        )
        copied = first._replace(secret_blob=second.secret_blob)
        with pytest.raises(InvalidTag):
            service.open_secret(box, UserWallet, copied)

    async def test_a_ring_without_its_key_names_the_key(self, client, database, tenant, rings):
        [row] = (await sealed(database))["project_wallets"]
        with pytest.raises(KeyError) as missing:
            service.open_secret(rings.box(rings.k2, rings.k3), ProjectWallet, row)
        assert missing.value.args == ("secret key 'k1' is not in TESSERA_SECRET_KEYS",)


class TestKeyIds:
    async def test_each_key_in_use_once_and_never_a_missing_secret(
        self, client, database, tenant, other, rings
    ):
        user = (await create_users(client, tenant, 1))[0]
        await linked(
            client,
            tenant,
            user,
            Keypair.create_from_uri(f"//{uuid.uuid4().hex}", crypto_type=KeypairType.SR25519),
        )
        assert await database.read(repository.key_ids) == ["k1"]
        await service.reseal_all(database, rings.box(rings.k2, rings.suites))
        await create_users(client, other, 1)
        assert await database.read(repository.key_ids) == ["k1", "k2"]
