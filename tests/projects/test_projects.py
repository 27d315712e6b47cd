"""Projects and their credentials (``tessera.projects.service``, which the CLI runs): a project
made with its custodial wallet, its first check-in key, a ``write`` API key and a token client;
its rules; API keys issued, listed, revoked, expiring, each permission doing what it may; token
clients created, listed, revoked, rotated; tokens of the project's own; identities bound and
moved. Each credential is then used over HTTP; another project's and an unknown project's are
404."""

import asyncio
import re
import time
import uuid
from datetime import timedelta

import httpx
import jwt
import pytest
from scalecodec.utils.ss58 import ss58_decode, ss58_encode
from sqlalchemy import func, select, update
from substrateinterface import Keypair, KeypairType

from tessera.chain.keys import open_seed
from tessera.errors import (
    ApiKeyNotFound,
    ClientNotFound,
    ClientRevoked,
    ProjectNotFound,
)
from tessera.models import (
    ApiKey,
    CheckinKey,
    IdentityBinding,
    OAuthClient,
    Project,
    ProjectWallet,
    User,
)
from tessera.projects import service as projects
from tessera.ticket_keys import service as ticket_keys
from tessera.toolkit.crypto import Sealed, keyed_hash
from tests import orm
from tests.conftest import OIDC_AUDIENCE, OIDC_ISSUER
from tests.factories import create_user

API_KEY = re.compile(r"^tsk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
CLIENT_ID = re.compile(r"^tsc_[0-9a-f]{20}$")
REFUSED = {"message": "invalid, expired or revoked credential"}
BAD_CLIENT = {"message": "invalid client_id or client_secret"}
READ_ONLY = {"message": "this credential is read-only; a write credential is required"}
DOOR_ONLY = {
    "message": "this is a check-in key: it may scan tickets, annul and upload scans and read "
    "the sync, nothing else"
}


def hash_key(app) -> bytes:
    return app.state.settings.hash_key_bytes


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def forget_credentials(app) -> None:
    """What every process's credential cache does within its lifetime (at most 2 s)."""
    app.state.authenticator.cache.clear()


async def rows_of(database, model, project_id: uuid.UUID) -> list:
    async with orm.session(database, write=False) as session:
        query = select(model).where(model.project_id == project_id)
        if hasattr(model, "created_at"):
            query = query.order_by(model.created_at)
        return list(await session.scalars(query))


async def count(database, model) -> int:
    async with orm.session(database, write=False) as session:
        return await session.scalar(select(func.count()).select_from(model))


async def reads(client, headers) -> int:
    return (await client.get("/v1/users/count", headers=headers)).status_code


async def writes(client, headers) -> tuple[int, dict]:
    response = await client.post(
        "/v1/users/create", headers=headers, json=[{"email": f"{uuid.uuid4().hex}@example.com"}]
    )
    return response.status_code, response.json()


async def token_of(client, client_id: str, secret: str, **extra) -> httpx.Response:
    return await client.post(
        "/v1/auth/token", data={"client_id": client_id, "client_secret": secret} | extra
    )


class TestCreateProject:
    async def test_a_project_with_its_wallet_key_api_key_and_client(self, app, client, database):
        created = await projects.create_project(
            database, name="Made", box=app.state.box, hash_key=hash_key(app), ss58_prefix=0
        )
        async with orm.session(database, write=False) as session:
            project = await session.get(Project, created.project_id)
        assert (
            project.name,
            project.user_count,
            project.active_user_count,
            project.require_activation,
            project.ticket_emails,
            project.paper,
            project.ticket_pdf_in_emails,
        ) == ("Made", 0, 0, False, False, "a4", False)

        [wallet] = await rows_of(database, ProjectWallet, created.project_id)
        assert (wallet.type, wallet.custody) == ("Polkadot", "custodial")
        assert wallet.address == ss58_encode(wallet.public_key, ss58_format=0)  # the prefix given
        seed = open_seed(
            app.state.box,
            public_key=wallet.public_key,
            secret=Sealed(wallet.secret_key_id, wallet.secret_blob),
        )
        pair = Keypair.create_from_seed(seed.hex(), crypto_type=KeypairType.SR25519)
        assert pair.public_key == wallet.public_key

        [checkin] = await ticket_keys.list_keys(database, created.project_id)
        assert (checkin.signing, checkin.retired_at) == (True, None)

        [key] = await rows_of(database, ApiKey, created.project_id)
        assert API_KEY.match(created.api_key)
        assert (key.prefix, key.permission, key.name, key.expires_at, key.revoked_at) == (
            API_KEY.match(created.api_key).group(1),
            "write",
            "default",
            None,
            None,
        )
        assert key.key_hash == keyed_hash(hash_key(app), created.api_key)  # never the key

        [token_client] = await rows_of(database, OAuthClient, created.project_id)
        assert CLIENT_ID.match(created.client_id)
        assert (token_client.client_id, token_client.permission, token_client.revoked_at) == (
            created.client_id,
            "write",
            None,
        )
        assert token_client.secret_hash == keyed_hash(hash_key(app), created.client_secret)

        headers = {"x-api-key": created.api_key}
        assert (await writes(client, headers))[0] == 201
        issued = await token_of(client, created.client_id, created.client_secret)
        assert issued.status_code == 200, issued.text
        assert (await writes(client, bearer(issued.json()["access_token"])))[0] == 201
        async with orm.session(database, write=False) as session:
            made = await session.scalar(
                select(func.count()).where(User.project_id == created.project_id)
            )
        assert made == 2

    async def test_each_project_its_own(self, app, database, tenant, other):
        mine = await rows_of(database, ProjectWallet, tenant.project_id)
        theirs = await rows_of(database, ProjectWallet, other.project_id)
        assert len(mine) == len(theirs) == 1 and mine[0].public_key != theirs[0].public_key
        assert mine[0].address == ss58_encode(mine[0].public_key, ss58_format=42)
        [my_key] = await rows_of(database, CheckinKey, tenant.project_id)
        [their_key] = await rows_of(database, CheckinKey, other.project_id)
        assert my_key.public_key != their_key.public_key


class TestProjectRules:
    async def test_nothing_given_reads_the_project_as_it_is(self, database, tenant):
        before = await database.read(projects.repository.get_project, tenant.project_id)
        assert await projects.set_project_rules(database, project_id=tenant.project_id) == before

    async def test_the_rules_given_change_and_the_others_stay(self, database, tenant):
        before = await database.read(projects.repository.get_project, tenant.project_id)
        changed = await projects.set_project_rules(
            database, project_id=tenant.project_id, ticket_emails=True, paper="letter"
        )
        assert changed.updated_at > before.updated_at
        assert changed == before._replace(
            ticket_emails=True, paper="letter", updated_at=changed.updated_at
        )
        again = await projects.set_project_rules(
            database, project_id=tenant.project_id, require_activation=True, ticket_emails=False
        )
        assert again == changed._replace(
            require_activation=True, ticket_emails=False, updated_at=again.updated_at
        )

    async def test_the_rule_reaches_every_credential_of_the_project(
        self, app, client, database, tenant, other
    ):
        await projects.set_project_rules(
            database, project_id=tenant.project_id, require_activation=True
        )
        forget_credentials(app)
        user = await create_user(client, tenant)
        product = await client.post(
            "/v1/products", headers=tenant.w, json={"type": "perks", "name": "Perk"}
        )
        issued = await client.post(
            f"/v1/products/{product.json()['id']}/items",
            headers=tenant.w,
            json={"users": [user["id"]]},
        )
        assert issued.status_code == 409, issued.text
        theirs = await create_user(client, other)
        product = await client.post(
            "/v1/products", headers=other.w, json={"type": "perks", "name": "Perk"}
        )
        issued = await client.post(
            f"/v1/products/{product.json()['id']}/items",
            headers=other.w,
            json={"users": [theirs["id"]]},
        )
        assert issued.status_code == 201, issued.text  # another project's rule is its own

    @pytest.mark.parametrize("rules", [{}, {"ticket_emails": True}])
    async def test_an_unknown_project_is_404(self, database, tenant, rules):
        with pytest.raises(ProjectNotFound):
            await projects.set_project_rules(database, project_id=uuid.uuid4(), **rules)


class TestApiKeys:
    async def test_issued_with_a_name_and_an_expiry(self, app, client, database, tenant):
        before = time.time()
        issued = await projects.issue_api_key(
            database,
            project_id=tenant.project_id,
            permission="read",
            hash_key=hash_key(app),
            expires_in=3600,
            name="dashboard",
        )
        after = time.time()
        assert API_KEY.match(issued.api_key) and issued.permission == "read"
        assert before + 3600 <= issued.expires_at.timestamp() <= after + 3600
        rows = {row.id: row for row in await rows_of(database, ApiKey, tenant.project_id)}
        row = rows[issued.id]
        assert (row.name, row.permission, row.expires_at, row.prefix) == (
            "dashboard",
            "read",
            issued.expires_at,
            API_KEY.match(issued.api_key).group(1),
        )
        assert await reads(client, {"x-api-key": issued.api_key}) == 200

    async def test_an_unknown_project_gets_none(self, app, database, tenant):
        before = await count(database, ApiKey)
        with pytest.raises(ProjectNotFound):
            await projects.issue_api_key(
                database, project_id=uuid.uuid4(), permission="write", hash_key=hash_key(app)
            )
        assert await count(database, ApiKey) == before

    async def test_each_permission_does_what_it_may(self, app, client, database, tenant):
        made = {
            permission: await projects.issue_api_key(
                database,
                project_id=tenant.project_id,
                permission=permission,
                hash_key=hash_key(app),
            )
            for permission in ("write", "read", "checkin")
        }
        write, read, door = ({"x-api-key": made[p].api_key} for p in ("write", "read", "checkin"))
        assert (await writes(client, write))[0] == 201
        assert await reads(client, write) == 200
        assert await writes(client, read) == (403, READ_ONLY)
        assert await reads(client, read) == 200
        assert await writes(client, door) == (403, DOOR_ONLY)
        response = await client.get("/v1/users/count", headers=door)
        assert (response.status_code, response.json()) == (403, DOOR_ONLY)

    async def test_listed_oldest_first_the_projects_only(self, app, database, tenant, other):
        issued = await projects.issue_api_key(
            database, project_id=tenant.project_id, permission="checkin", hash_key=hash_key(app)
        )
        keys = await projects.list_api_keys(database, project_id=tenant.project_id)
        assert [(k.name, k.permission) for k in keys] == [
            ("default", "write"),
            (None, "read"),
            (None, "checkin"),
        ]
        assert keys[-1].id == issued.id
        assert keys[0].key_hash == keyed_hash(hash_key(app), tenant.write_key)
        theirs = await projects.list_api_keys(database, project_id=other.project_id)
        assert {k.project_id for k in theirs} == {other.project_id} and len(theirs) == 2
        with pytest.raises(ProjectNotFound):
            await projects.list_api_keys(database, project_id=uuid.uuid4())

    async def test_revoked_at_once_and_again_keeps_its_first_time(
        self, app, client, database, tenant
    ):
        issued = await projects.issue_api_key(
            database, project_id=tenant.project_id, permission="write", hash_key=hash_key(app)
        )
        headers = {"x-api-key": issued.api_key}
        assert await reads(client, headers) == 200
        revoked = await projects.revoke_api_key(
            database, project_id=tenant.project_id, key_id=issued.id
        )
        assert revoked.id == issued.id and revoked.revoked_at is not None
        forget_credentials(app)
        response = await client.get("/v1/users/count", headers=headers)
        assert (response.status_code, response.json()) == (401, REFUSED)
        again = await projects.revoke_api_key(
            database, project_id=tenant.project_id, key_id=issued.id
        )
        assert again == revoked
        assert await reads(client, tenant.w) == 200  # the project's other keys go on

    async def test_another_projects_or_an_unknown_key_is_404_and_stays(
        self, app, client, database, tenant, other
    ):
        [theirs, _] = await projects.list_api_keys(database, project_id=other.project_id)
        for project_id, key_id in (
            (tenant.project_id, theirs.id),
            (tenant.project_id, uuid.uuid4()),
            (uuid.uuid4(), theirs.id),
        ):
            with pytest.raises(ApiKeyNotFound) as refused:
                await projects.revoke_api_key(database, project_id=project_id, key_id=key_id)
            assert (refused.value.status_code, refused.value.message) == (
                404,
                "api key not found",
            )
        [still, _] = await projects.list_api_keys(database, project_id=other.project_id)
        assert still == theirs
        forget_credentials(app)
        assert await reads(client, other.w) == 200

    async def test_an_expired_key_is_refused(self, app, client, database, tenant):
        issued = await projects.issue_api_key(
            database,
            project_id=tenant.project_id,
            permission="read",
            hash_key=hash_key(app),
            expires_in=60,
        )
        headers = {"x-api-key": issued.api_key}
        assert await reads(client, headers) == 200
        async with orm.session(database) as session:  # a minute later
            await session.execute(
                update(ApiKey)
                .where(ApiKey.id == issued.id)
                .values(expires_at=issued.expires_at - timedelta(seconds=61))
            )
            await session.commit()
        forget_credentials(app)
        response = await client.get("/v1/users/count", headers=headers)
        assert (response.status_code, response.json()) == (401, REFUSED)


class TestTokenClients:
    async def test_created_with_its_permission(self, app, client, database, tenant):
        created = await projects.create_token_client(
            database, project_id=tenant.project_id, permission="read", hash_key=hash_key(app)
        )
        assert CLIENT_ID.match(created.client_id) and created.permission == "read"
        issued = await token_of(client, created.client_id, created.client_secret)
        assert issued.status_code == 200, issued.text
        token = issued.json()["access_token"]
        claims = jwt.decode(token, options={"verify_signature": False})
        assert (claims["pid"], claims["scope"], claims["sub"]) == (
            str(tenant.project_id),
            "read",
            created.client_id,
        )
        assert await reads(client, bearer(token)) == 200
        assert await writes(client, bearer(token)) == (403, READ_ONLY)
        refused = await token_of(client, created.client_id, created.client_secret, scope="write")
        assert (refused.status_code, refused.json()) == (
            401,
            {"message": "this client may only request the read scope"},
        )

    async def test_an_unknown_project_gets_none(self, app, database, tenant):
        before = await count(database, OAuthClient)
        with pytest.raises(ProjectNotFound):
            await projects.create_token_client(
                database, project_id=uuid.uuid4(), permission="write", hash_key=hash_key(app)
            )
        assert await count(database, OAuthClient) == before

    async def test_listed_oldest_first_the_projects_only(self, app, database, tenant, other):
        created = await projects.create_token_client(
            database, project_id=tenant.project_id, permission="read", hash_key=hash_key(app)
        )
        listed = await projects.list_token_clients(database, project_id=tenant.project_id)
        assert [(c.client_id, c.permission) for c in listed] == [
            (tenant.client_id, "write"),
            (created.client_id, "read"),
        ]
        assert listed[1].secret_hash == keyed_hash(hash_key(app), created.client_secret)
        [theirs] = await projects.list_token_clients(database, project_id=other.project_id)
        assert theirs.client_id == other.client_id
        with pytest.raises(ProjectNotFound):
            await projects.list_token_clients(database, project_id=uuid.uuid4())

    async def test_revoked_it_gets_no_token_and_its_tokens_stop(
        self, app, client, database, tenant
    ):
        token = (await token_of(client, tenant.client_id, tenant.client_secret)).json()
        headers = bearer(token["access_token"])
        assert await reads(client, headers) == 200
        revoked = await projects.revoke_token_client(
            database, project_id=tenant.project_id, client_id=tenant.client_id
        )
        assert revoked.client_id == tenant.client_id and revoked.revoked_at is not None
        refused = await token_of(client, tenant.client_id, tenant.client_secret)
        assert (refused.status_code, refused.json()) == (401, BAD_CLIENT)
        forget_credentials(app)
        response = await client.get("/v1/users/count", headers=headers)
        assert (response.status_code, response.json()) == (401, REFUSED)
        again = await projects.revoke_token_client(
            database, project_id=tenant.project_id, client_id=tenant.client_id
        )
        assert again == revoked
        with pytest.raises(ClientRevoked) as rotated:
            await projects.rotate_token_client(
                database,
                project_id=tenant.project_id,
                client_id=tenant.client_id,
                hash_key=hash_key(app),
            )
        assert (rotated.value.status_code, rotated.value.message) == (
            409,
            "the token client is revoked; create a new one",
        )
        assert await projects.list_token_clients(database, project_id=tenant.project_id) == [
            revoked
        ]

    async def test_rotated_the_old_secret_and_its_tokens_stop(self, app, client, database, tenant):
        old = (await token_of(client, tenant.client_id, tenant.client_secret)).json()
        assert await reads(client, bearer(old["access_token"])) == 200
        # Tokens carry whole seconds: the rotation comes in the next one.
        await asyncio.sleep(1.01 - time.time() % 1)
        rotated = await projects.rotate_token_client(
            database,
            project_id=tenant.project_id,
            client_id=tenant.client_id,
            hash_key=hash_key(app),
        )
        assert (rotated.client_id, rotated.permission) == (tenant.client_id, "write")
        assert rotated.client_secret != tenant.client_secret
        [row] = await projects.list_token_clients(database, project_id=tenant.project_id)
        assert row.rotated_at is not None and row.revoked_at is None
        refused = await token_of(client, tenant.client_id, tenant.client_secret)
        assert (refused.status_code, refused.json()) == (401, BAD_CLIENT)
        forget_credentials(app)
        response = await client.get("/v1/users/count", headers=bearer(old["access_token"]))
        assert (response.status_code, response.json()) == (401, REFUSED)
        fresh = await token_of(client, tenant.client_id, rotated.client_secret)
        assert fresh.status_code == 200, fresh.text
        assert await reads(client, bearer(fresh.json()["access_token"])) == 200

    @pytest.mark.parametrize("action", ["revoke", "rotate"])
    async def test_another_projects_or_an_unknown_client_is_404_and_stays(
        self, app, client, database, tenant, other, action
    ):
        before = await projects.list_token_clients(database, project_id=other.project_id)
        for project_id, client_id in (
            (tenant.project_id, other.client_id),
            (tenant.project_id, "tsc_" + "0" * 20),
            (uuid.uuid4(), other.client_id),
        ):
            with pytest.raises(ClientNotFound) as refused:
                if action == "revoke":
                    await projects.revoke_token_client(
                        database, project_id=project_id, client_id=client_id
                    )
                else:
                    await projects.rotate_token_client(
                        database, project_id=project_id, client_id=client_id, hash_key=hash_key(app)
                    )
            assert (refused.value.status_code, refused.value.message) == (
                404,
                "token client not found",
            )
        assert await projects.list_token_clients(database, project_id=other.project_id) == before
        assert (await token_of(client, other.client_id, other.client_secret)).status_code == 200


class TestIssueToken:
    async def test_a_token_of_the_projects_own_with_its_scope(self, app, client, database, tenant):
        issuer = app.state.authenticator.issuer
        token = await projects.issue_token(
            database, issuer, project_id=tenant.project_id, scope="read", ttl=10**6
        )
        claims = jwt.decode(token, options={"verify_signature": False})
        assert (claims["pid"], claims["scope"], claims["sub"]) == (
            str(tenant.project_id),
            "read",
            "cli",
        )
        assert claims["exp"] - claims["iat"] == 86400  # at most a day
        assert await reads(client, bearer(token)) == 200
        assert await writes(client, bearer(token)) == (403, READ_ONLY)
        write = await projects.issue_token(
            database, issuer, project_id=tenant.project_id, scope="write"
        )
        claims = jwt.decode(write, options={"verify_signature": False})
        assert claims["scope"] == "read write"
        assert claims["exp"] - claims["iat"] == app.state.settings.token_ttl_seconds
        assert (await writes(client, bearer(write)))[0] == 201

    async def test_an_unknown_project_gets_none(self, app, database, tenant):
        with pytest.raises(ProjectNotFound):
            await projects.issue_token(
                database, app.state.authenticator.issuer, project_id=uuid.uuid4(), scope="read"
            )


class TestIdentities:
    @staticmethod
    def oidc(jwks_server, subject: str) -> dict[str, str]:
        now = int(time.time())
        claims = {"iss": OIDC_ISSUER, "aud": OIDC_AUDIENCE, "sub": subject}
        token = jwt.encode(
            claims | {"iat": now, "exp": now + 300},
            jwks_server.private_key,
            algorithm="RS256",
            headers={"kid": jwks_server.kid},
        )
        return bearer(token)

    async def test_a_bound_subject_acts_for_its_project_with_its_permission(
        self, app, client, database, tenant, jwks_server
    ):
        headers = self.oidc(jwks_server, "reader-1")
        response = await client.get("/v1/users/count", headers=headers)
        assert (response.status_code, response.json()) == (
            401,
            {"message": "this identity is not bound to a project"},
        )
        binding = await projects.bind_identity(
            database,
            project_id=tenant.project_id,
            issuer=OIDC_ISSUER,
            subject="reader-1",
            permission="read",
        )
        assert (binding.project_id, binding.issuer, binding.subject, binding.permission) == (
            tenant.project_id,
            OIDC_ISSUER,
            "reader-1",
            "read",
        )
        assert await reads(client, headers) == 200
        assert await writes(client, headers) == (403, READ_ONLY)

    async def test_bound_again_it_moves_with_its_new_permission(
        self, app, client, database, tenant, other, jwks_server
    ):
        first = await projects.bind_identity(
            database,
            project_id=tenant.project_id,
            issuer=OIDC_ISSUER,
            subject="svc-9",
            permission="read",
        )
        mine = await create_user(client, tenant)
        headers = self.oidc(jwks_server, "svc-9")
        profile = await client.post("/v1/users/profile", headers=headers, json={"id": mine["id"]})
        assert profile.status_code == 200
        moved = await projects.bind_identity(
            database,
            project_id=other.project_id,
            issuer=OIDC_ISSUER,
            subject="svc-9",
            permission="write",
        )
        assert moved == first._replace(project_id=other.project_id, permission="write")
        assert await count(database, IdentityBinding) == 1
        forget_credentials(app)
        profile = await client.post("/v1/users/profile", headers=headers, json={"id": mine["id"]})
        assert (profile.status_code, profile.json()) == (404, {"message": "user not found"})
        status, answer = await writes(client, headers)
        assert status == 201
        [made] = answer["users"]
        profile = await client.post("/v1/users/profile", headers=other.r, json={"id": made["id"]})
        assert profile.status_code == 200  # made in the project it is bound to now

    async def test_an_unknown_project_binds_nothing_and_moves_nothing(self, app, database, tenant):
        bound = await projects.bind_identity(
            database,
            project_id=tenant.project_id,
            issuer=OIDC_ISSUER,
            subject="svc-3",
            permission="read",
        )
        for subject in ("svc-3", "svc-4"):
            with pytest.raises(ProjectNotFound):
                await projects.bind_identity(
                    database,
                    project_id=uuid.uuid4(),
                    issuer=OIDC_ISSUER,
                    subject=subject,
                    permission="write",
                )
        async with orm.session(database, write=False) as session:
            rows = list(await session.scalars(select(IdentityBinding)))
        assert [(r.id, r.project_id, r.subject, r.permission) for r in rows] == [
            (bound.id, tenant.project_id, "svc-3", "read")
        ]


class TestProjectWalletsShown:
    async def test_the_wallet_as_the_database_keeps_it(self, client, database, tenant):
        [row] = await rows_of(database, ProjectWallet, tenant.project_id)
        response = await client.get("/v1/projects/wallets", headers=tenant.r)
        [shown] = response.json()
        assert bytes.fromhex(ss58_decode(shown["address"])) == row.public_key
        assert (shown["id"], shown["address"], shown["type"], shown["custody"]) == (
            str(row.id),
            row.address,
            row.type,
            row.custody,
        )
        assert "secret_blob" not in shown and "secret_key_id" not in shown
