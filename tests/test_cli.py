"""The `tessera` command against the session's database, used together with the API."""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest

from tests import orm
from tests.conftest import OIDC_AUDIENCE, OIDC_ISSUER
from tests.factories import create_product, create_user

TESSERA = str(Path(sys.executable).with_name("tessera"))


@pytest.fixture
def cli(settings):
    base = os.environ | {
        "TESSERA_ENV": "test",
        "TESSERA_DATABASE_URL": settings.database_url,
        "TESSERA_SECRET_KEYS": settings.secret_keys.get_secret_value(),
        "TESSERA_HASH_KEY": settings.hash_key.get_secret_value(),
    }

    async def run(
        *args: str, ok: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # In a thread: blocking the event loop would freeze this process's open transactions
        # (the API-key usage flush) and the CLI would wait on SQLite's write lock.
        result = await asyncio.to_thread(
            subprocess.run,
            [TESSERA, *args],
            env=base | (env or {}),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if ok:
            assert result.returncode == 0, result.stderr
        return result

    return run


class TestCli:
    async def test_project_keys_tokens_and_revocation(self, cli, client):
        created = json.loads((await cli("project", "create", "--name", "Cli Co")).stdout)
        assert set(created) == {"project_id", "api_key", "client_id", "client_secret"}
        write = {"x-api-key": created["api_key"]}
        response = await client.post(
            "/v1/users/create", headers=write, json=[{"email": "c@example.com"}]
        )
        assert response.status_code == 201
        token = await client.post(
            "/v1/auth/token",
            data={"client_id": created["client_id"], "client_secret": created["client_secret"]},
        )
        assert token.status_code == 200

        project = created["project_id"]
        read = json.loads(
            (
                await cli(
                    "apikey",
                    "create",
                    "--project",
                    project,
                    "--permission",
                    "read",
                    "--expires-in",
                    "600",
                )
            ).stdout
        )
        assert set(read) == {"id", "api_key", "permission", "expires_at"}
        assert read["permission"] == "read" and read["expires_at"]
        headers = {"x-api-key": read["api_key"]}
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 200
        denied = await client.post(
            "/v1/users/create", headers=headers, json=[{"email": "d@example.com"}]
        )
        assert denied.status_code == 403

        listed = json.loads((await cli("apikey", "list", "--project", project)).stdout)
        assert sorted(k["permission"] for k in listed) == ["read", "write"]
        assert read["api_key"] not in json.dumps(listed) and created["api_key"] not in json.dumps(
            listed
        )
        await cli("apikey", "revoke", "--project", project, "--id", read["id"])
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 401

        bearer = (
            await cli("token", "--project", project, "--scope", "read", "--ttl", "120")
        ).stdout.strip()
        claims = jwt.decode(bearer, options={"verify_signature": False})
        assert claims["exp"] - claims["iat"] == 120 and claims["pid"] == project
        auth = {"Authorization": f"Bearer {bearer}"}
        assert (await client.get("/v1/users/count", headers=auth)).json() == {"count": 0}
        denied = await client.post(
            "/v1/users/create", headers=auth, json=[{"email": "e@example.com"}]
        )
        assert denied.status_code == 403

    async def test_project_set_require_activation_applies_within_two_seconds(
        self, cli, client, tenant
    ):
        project = str(tenant.project_id)
        user = await create_user(client, tenant)
        product = await create_product(client, tenant)
        path, body = f"/v1/products/{product['id']}/items", {"users": [user["id"]]}
        assert (await client.post(path, headers=tenant.w, json=body)).status_code == 201
        shown = json.loads(
            (await cli("project", "set", "--project", project, "--require-activation")).stdout
        )
        assert shown == {
            "id": project,
            "name": "Acme",
            "require_activation": True,
            "ticket_emails": False,
            "paper": "a4",
            "ticket_pdf_in_emails": False,
        }
        started = time.monotonic()
        while (answer := await client.post(path, headers=tenant.w, json=body)).status_code == 201:
            assert time.monotonic() - started < 2.0, "the rule is not applied"
            await asyncio.sleep(0.05)
        assert answer.status_code == 409
        shown = json.loads(
            (await cli("project", "set", "--project", project, "--no-require-activation")).stdout
        )
        assert shown["require_activation"] is False
        unknown = await cli(
            "project", "set", "--project", "00000000-0000-0000-0000-000000000000", ok=False
        )
        assert unknown.returncode == 1 and unknown.stderr.strip() == "error: project not found"

    async def test_identity_bind(self, cli, client, tenant, jwks_server):
        bound = json.loads(
            (
                await cli(
                    "identity",
                    "bind",
                    "--project",
                    str(tenant.project_id),
                    "--issuer",
                    OIDC_ISSUER,
                    "--subject",
                    "robot@acme",
                )
            ).stdout
        )
        assert bound["permission"] == "write" and bound["subject"] == "robot@acme"
        now = int(time.time())
        token = jwt.encode(
            {"iss": OIDC_ISSUER, "aud": OIDC_AUDIENCE, "sub": "robot@acme", "exp": now + 60},
            jwks_server.private_key,
            algorithm="RS256",
            headers={"kid": jwks_server.kid},
        )
        response = await client.post(
            "/v1/users/create",
            headers={"Authorization": f"Bearer {token}"},
            json=[{"email": "robot-made@example.com"}],
        )
        assert response.status_code == 201

    async def test_demo_fills_a_project(self, cli, client, tenant):
        await cli("demo", "--project", str(tenant.project_id))
        products = (await client.get("/v1/products", headers=tenant.r)).json()
        assert [p["name"] for p in products] == ["Festival pass", "Drink voucher"]
        sales = await client.get(f"/v1/products/{products[0]['id']}/sales", headers=tenant.r)
        assert sales.json()["pagination"]["total"] == 2
        users = await client.post("/v1/users/fetch", headers=tenant.r, json={})
        assert users.json()["total"] == 4

    async def test_errors_are_one_line_and_exit_1(self, cli, tenant):
        result = await cli(
            "apikey", "create", "--project", "00000000-0000-0000-0000-000000000000", ok=False
        )
        assert result.returncode == 1 and result.stderr.strip() == "error: project not found"
        result = await cli(
            "apikey",
            "create",
            "--project",
            str(tenant.project_id),
            "--permission",
            "admin",
            ok=False,
        )
        assert result.returncode == 2 and "admin" in result.stderr

    async def test_db_upgrade_is_idempotent(self, cli):
        await cli("db", "upgrade")


class TestJobsCli:
    async def test_list_and_retry_a_failed_job(self, cli, tenant, database):
        from sqlalchemy import select

        from tessera.jobs.queue import enqueue
        from tessera.models import Job

        async with database.transaction() as tx:
            [job] = await enqueue(
                tx,
                [
                    {
                        "project_id": tenant.project_id,
                        "kind": "nft.unknown",
                        "subject": "test",
                        "payload": {},
                        "status": "failed",
                        "attempts": 8,
                        "last_error": "RuntimeError: boom",
                    }
                ],
            )
            await tx.commit()
        listed = json.loads((await cli("jobs", "list", "--status", "failed")).stdout)
        assert [(j["id"], j["kind"], j["attempts"], j["last_error"]) for j in listed] == [
            (str(job.id), "nft.unknown", 8, "RuntimeError: boom")
        ]
        assert str(job.id) in [j["id"] for j in json.loads((await cli("jobs", "list")).stdout)]
        assert json.loads((await cli("jobs", "list", "--status", "running")).stdout) == []
        retried = json.loads((await cli("jobs", "retry", str(job.id))).stdout)
        assert (retried["id"], retried["status"], retried["attempts"]) == (str(job.id), "queued", 0)
        async with orm.session(database, write=False) as session:
            again = await session.scalar(select(Job).where(Job.id == job.id))
        assert (again.status, again.attempts, again.last_error) == ("queued", 0, None)
        missing = await cli("jobs", "retry", "00000000-0000-0000-0000-000000000000", ok=False)
        assert missing.returncode == 1 and missing.stderr.strip() == "error: job not found"


class TestWebhookCli:
    async def test_create_list_and_delete(self, cli, client, tenant):
        project = str(tenant.project_id)
        created = json.loads(
            (
                await cli(
                    "webhook",
                    "create",
                    "--project",
                    project,
                    "--url",
                    "https://93.184.216.34/hook",
                    "--event-type",
                    "user.created",
                    "--event-type",
                    "item.issued",
                )
            ).stdout
        )
        assert created["secret"].startswith("whsec_")
        assert created["event_types"] == ["item.issued", "user.created"]
        shown = await client.get(f"/v1/webhooks/{created['id']}", headers=tenant.r)
        assert shown.status_code == 200 and "secret" not in shown.json()
        listed = json.loads((await cli("webhook", "list", "--project", project)).stdout)
        assert [hook["id"] for hook in listed] == [created["id"]]
        assert all("secret" not in hook for hook in listed)
        refused = await cli(
            "webhook", "create", "--project", project, "--url", "https://10.0.0.1/", ok=False
        )
        assert refused.returncode == 1
        assert refused.stderr.startswith("error: url: ") and "10.0.0.1" in refused.stderr
        await cli("webhook", "delete", "--project", project, "--id", created["id"])
        gone = await client.get(f"/v1/webhooks/{created['id']}", headers=tenant.r)
        assert gone.status_code == 404
        missing = await cli(
            "webhook", "delete", "--project", project, "--id", created["id"], ok=False
        )
        assert missing.stderr.strip() == "error: webhook endpoint not found"


class TestSecretsRotation:
    async def test_rotate_reseals_every_secret_under_the_new_key(
        self, cli, client, tenant, settings, database
    ):
        import base64
        import secrets

        from sqlalchemy import select

        from tessera.chain.keys import open_seed
        from tessera.config import parse_key_ring
        from tessera.models import ProjectWallet, UserWallet, WebhookEndpoint
        from tessera.toolkit.crypto import Sealed, SecretBox
        from tessera.webhooks.service import open_secret
        from tests.factories import create_users

        await create_users(client, tenant, 3)
        hook = await client.post(
            "/v1/webhooks", headers=tenant.w, json={"url": "https://93.184.216.34/hook"}
        )
        assert hook.status_code == 201, hook.text
        old_ring = settings.secret_keys.get_secret_value()
        ring = f"k2:{base64.b64encode(secrets.token_bytes(32)).decode()},{old_ring}"
        back = f"{old_ring},{ring.split(',')[0]}"
        try:
            result = await cli("secrets", "rotate", env={"TESSERA_SECRET_KEYS": ring})
            counts = json.loads(result.stdout)
            assert counts["active_key_id"] == "k2"
            assert (counts["user_wallets"], counts["project_wallets"]) == (3, 1)
            assert counts["webhook_secrets"] == 1
            only_new = SecretBox({"k2": parse_key_ring(ring)["k2"]})
            async with orm.session(database, write=False) as session:
                rows = [
                    *await session.scalars(select(UserWallet)),
                    *await session.scalars(select(ProjectWallet)),
                ]
            assert {row.secret_key_id for row in rows} == {"k2"}
            for row in rows:  # the old key is no longer needed to open them
                seed = open_seed(
                    only_new,
                    public_key=row.public_key,
                    secret=Sealed(row.secret_key_id, row.secret_blob),
                )
                assert len(seed) == 32
            async with orm.session(database, write=False) as session:
                endpoint = await session.scalar(select(WebhookEndpoint))
            assert endpoint.secret_key_id == "k2"
            assert open_secret(only_new, endpoint) == hook.json()["secret"]
            again = json.loads(
                (await cli("secrets", "rotate", env={"TESSERA_SECRET_KEYS": ring})).stdout
            )
            assert (again["user_wallets"], again["project_wallets"], again["signing_keys"]) == (
                0,
                0,
                0,
            )
        finally:  # signing keys outlive tests: seal them with k1 again for the app's key ring
            await cli("secrets", "rotate", env={"TESSERA_SECRET_KEYS": back})


class TestTokenClients:
    """``tessera client create|list|revoke|rotate``: a client's lifecycle, as an operator runs it
    from another process while the API serves tokens."""

    async def _token(self, client, client_id: str, secret: str):
        return await client.post(
            "/v1/auth/token", data={"client_id": client_id, "client_secret": secret}
        )

    async def _refused_within(self, client, token: str, seconds: float = 2.0) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        started = time.monotonic()
        while (await client.get("/v1/users/count", headers=headers)).status_code == 200:
            assert time.monotonic() - started < seconds, "still accepted"
            await asyncio.sleep(0.05)
        answer = await client.get("/v1/users/count", headers=headers)
        assert (answer.status_code, answer.json()) == (
            401,
            {"message": "invalid, expired or revoked credential"},
        )

    async def test_create_list_rotate_revoke(self, cli, client, tenant):
        project = str(tenant.project_id)
        created = json.loads(
            (await cli("client", "create", "--project", project, "--permission", "read")).stdout
        )
        assert set(created) == {"client_id", "client_secret", "permission"}
        first = await self._token(client, created["client_id"], created["client_secret"])
        assert first.status_code == 200
        old_token = first.json()["access_token"]
        assert jwt.decode(old_token, options={"verify_signature": False})["scope"] == "read"
        headers = {"Authorization": f"Bearer {old_token}"}
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 200

        listed = json.loads((await cli("client", "list", "--project", project)).stdout)
        mine = [c for c in listed if c["client_id"] == created["client_id"]]
        assert [(c["permission"], c["rotated_at"], c["revoked_at"]) for c in mine] == [
            ("read", None, None)
        ]
        assert created["client_secret"] not in json.dumps(listed)

        await asyncio.sleep(1.1)  # tokens carry whole seconds: the rotation is a second later
        rotated = json.loads(
            (
                await cli(
                    "client", "rotate", "--project", project, "--client-id", created["client_id"]
                )
            ).stdout
        )
        assert rotated["client_id"] == created["client_id"]
        assert rotated["client_secret"] != created["client_secret"]
        refused = await self._token(client, created["client_id"], created["client_secret"])
        assert refused.status_code == 401
        await self._refused_within(client, old_token)
        fresh = await self._token(client, rotated["client_id"], rotated["client_secret"])
        assert fresh.status_code == 200
        new_token = fresh.json()["access_token"]
        assert (
            await client.get("/v1/users/count", headers={"Authorization": f"Bearer {new_token}"})
        ).status_code == 200

        revoked = json.loads(
            (
                await cli(
                    "client", "revoke", "--project", project, "--client-id", created["client_id"]
                )
            ).stdout
        )
        assert revoked["revoked_at"] is not None
        assert (
            await self._token(client, rotated["client_id"], rotated["client_secret"])
        ).status_code == 401
        await self._refused_within(client, new_token)
        again = await cli(
            "client", "rotate", "--project", project, "--client-id", created["client_id"], ok=False
        )
        assert again.returncode == 1
        assert again.stderr.strip() == "error: the token client is revoked; create a new one"

    async def test_another_projects_or_an_unknown_client_is_not_found(self, cli, tenant, other):
        for action in ("revoke", "rotate"):
            for project, client_id in (
                (str(other.project_id), tenant.client_id),  # a client of another project
                (str(tenant.project_id), "tsc_unknown"),
            ):
                result = await cli(
                    "client", action, "--project", project, "--client-id", client_id, ok=False
                )
                assert result.returncode == 1
                assert result.stderr.strip() == "error: token client not found"


def _png(size: tuple[int, int], *, noise: bool = False) -> bytes:
    """A PNG of that size: one colour, or random pixels (which do not compress)."""
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    if noise:
        image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    else:
        image = Image.new("RGB", size, (0, 0, 200))
    image.save(out, "PNG")
    return out.getvalue()


class TestWalletsFromTheCli:
    async def test_project_set_logo(self, cli, app, tenant, tmp_path: Path):
        from tessera.db import database_of
        from tessera.passes.repository import has_logo, logo_of

        database = database_of(app)
        project = str(tenant.project_id)
        logo = tmp_path / "logo.png"
        logo.write_bytes(_png((120, 40)))
        shown = json.loads(
            (await cli("project", "set-logo", "--project", project, str(logo))).stdout
        )
        assert shown == {"project_id": project, "logo": "project"}
        assert await database.read(logo_of, tenant.project_id) == logo.read_bytes()

        not_png = tmp_path / "logo.jpg"
        not_png.write_bytes(b"\xff\xd8\xff\xe0 a JPEG, they say")
        refused = await cli("project", "set-logo", "--project", project, str(not_png), ok=False)
        assert refused.returncode == 1
        assert refused.stderr.startswith("error: logo: not a PNG image (")
        assert await database.read(logo_of, tenant.project_id) == logo.read_bytes()  # unchanged

        shown = json.loads(
            (await cli("project", "set-logo", "--project", project, "--remove")).stdout
        )
        assert shown == {"project_id": project, "logo": "tessera"}
        assert await database.read(has_logo, tenant.project_id) is False

    async def test_project_set_logo_refusals(self, cli, database, tenant, tmp_path: Path):
        from tessera.passes.repository import has_logo

        project = str(tenant.project_id)
        neither = await cli("project", "set-logo", "--project", project, ok=False)
        assert neither.returncode == 1
        assert neither.stderr.strip() == "error: give a PNG file, or --remove"
        logo = tmp_path / "logo.png"
        logo.write_bytes(_png((10, 10)))
        both = await cli(
            "project", "set-logo", "--project", project, str(logo), "--remove", ok=False
        )
        assert both.returncode == 1
        assert both.stderr.strip() == "error: give a PNG file, or --remove"
        huge = tmp_path / "huge.png"
        huge.write_bytes(_png((5000, 10)))
        too_wide = await cli("project", "set-logo", "--project", project, str(huge), ok=False)
        assert too_wide.returncode == 1
        assert too_wide.stderr.strip() == "error: logo: at most 4096 pixels a side"
        heavy = tmp_path / "heavy.png"
        heavy.write_bytes(_png((600, 600), noise=True))
        assert heavy.stat().st_size > 512 * 1024
        too_big = await cli("project", "set-logo", "--project", project, str(heavy), ok=False)
        assert too_big.returncode == 1
        assert too_big.stderr.strip() == "error: logo: at most 512 KiB"
        not_png = tmp_path / "logo.gif"
        not_png.write_bytes(b"GIF89a not a PNG")
        refused = await cli("project", "set-logo", "--project", project, str(not_png), ok=False)
        assert refused.returncode == 1
        assert refused.stderr.startswith("error: logo: not a PNG image (")
        assert await database.read(has_logo, tenant.project_id) is False  # still none
        unknown = await cli(
            "project",
            "set-logo",
            "--project",
            "00000000-0000-0000-0000-000000000000",
            str(logo),
            ok=False,
        )
        assert unknown.returncode == 1 and unknown.stderr.strip() == "error: project not found"

    async def test_serve_refuses_a_wallet_file_it_cannot_read(self, cli, tmp_path: Path):
        missing = tmp_path / "pass.pem"
        wallet = {
            "TESSERA_APPLE_PASS_TYPE_ID": "pass.test.tickets",
            "TESSERA_APPLE_TEAM_ID": "TESTTEAM42",
            "TESSERA_APPLE_PASS_CERTIFICATE": str(missing),
            "TESSERA_APPLE_PASS_KEY": str(tmp_path / "key.pem"),
            "TESSERA_APPLE_WWDR_CERTIFICATE": str(tmp_path / "wwdr.pem"),
        }
        refused = await cli("serve", "--port", "9", env=wallet, ok=False)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"error: TESSERA_APPLE_PASS_CERTIFICATE: {missing}: not a PEM certificate "
            "(FileNotFoundError)"
        )
