"""API keys, Tessera's own tokens, external OIDC tokens: all map to one project principal."""

import asyncio
import time
from datetime import timedelta

import jwt
import pytest
from sqlalchemy import select, update

from tessera.db import database_of
from tessera.models import ApiKey, SigningKey
from tessera.models.base import utcnow
from tessera.projects.service import issue_api_key, revoke_api_key
from tests import orm
from tests.conftest import OIDC_AUDIENCE, OIDC_ISSUER
from tests.factories import create_user


async def _token(client, tenant, **extra) -> dict:
    body = {"client_id": tenant.client_id, "client_secret": tenant.client_secret} | extra
    response = await client.post(
        "/v1/auth/token", data={"grant_type": "client_credentials", **body}
    )
    assert response.status_code == 200, response.text
    return response.json()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _recorded(database, monkeypatch) -> list[str]:
    """The SQL of every statement the database runs from now on (reads and transactions:
    where credentials are looked up)."""
    statements: list[str] = []
    compiled = database.compiled

    def recording(statement, sizes):
        found = compiled(statement, sizes)
        statements.append(found.sql)
        return found

    monkeypatch.setattr(database, "compiled", recording)
    return statements


async def _refused_within(client, headers: dict[str, str], *, seconds: float) -> None:
    """The credential is refused within ``seconds``, and stays refused."""
    started = time.monotonic()
    while (await client.get("/v1/users/count", headers=headers)).status_code == 200:
        assert time.monotonic() - started < seconds, "still accepted"
        await asyncio.sleep(0.05)
    for _ in range(3):
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 401


class TestApiKeys:
    async def test_missing_credential_is_401_message(self, client, tenant):
        response = await client.get("/v1/users/count")
        assert response.status_code == 401
        assert set(response.json()) == {"message"}

    @pytest.mark.parametrize(
        "key", ["nonsense", "tsk_000000000000_secret", "tsk__", "x" * 500, "tsk_abc"]
    )
    async def test_malformed_or_unknown_key_is_401(self, client, tenant, key):
        response = await client.get("/v1/users/count", headers={"x-api-key": key})
        assert response.status_code == 401
        assert response.json() == {"message": "invalid, expired or revoked credential"}

    async def test_right_prefix_wrong_secret_is_401(self, client, tenant):
        scheme, prefix, _ = tenant.write_key.split("_", 2)
        forged = f"{scheme}_{prefix}_{'A' * 43}"
        assert (
            await client.get("/v1/users/count", headers={"x-api-key": forged})
        ).status_code == 401

    async def test_only_a_keyed_hash_is_stored(self, tenant, database):
        async with orm.session(database, write=False) as session:
            rows = list(await session.scalars(select(ApiKey)))
        stored = " ".join(f"{r.prefix} {r.key_hash}" for r in rows)
        secret = tenant.write_key.split("_", 2)[2]  # tsk_<prefix>_<secret>; "_" may be in it
        assert rows and tenant.write_key not in stored and secret not in stored

    @pytest.mark.parametrize("sent_as", ["x-api-key", "bearer"])
    async def test_revoked_key_is_401_within_two_seconds(
        self, client, tenant, database, app, sent_as
    ):
        # Revoked straight in the database, as another process (the CLI) would.
        issued = await issue_api_key(
            database,
            project_id=tenant.project_id,
            permission="write",
            hash_key=app.state.authenticator.hash_key,
        )
        headers = (
            {"x-api-key": issued.api_key} if sent_as == "x-api-key" else _bearer(issued.api_key)
        )
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 200
        await revoke_api_key(database, project_id=tenant.project_id, key_id=issued.id)
        await _refused_within(client, headers, seconds=2.0)

    async def test_expired_key_is_401_within_two_seconds(self, client, tenant, database, app):
        issued = await issue_api_key(
            database,
            project_id=tenant.project_id,
            permission="read",
            hash_key=app.state.authenticator.hash_key,
            expires_in=3600,
        )
        headers = {"x-api-key": issued.api_key}
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 200
        async with orm.session(database) as session:
            await session.execute(
                update(ApiKey)
                .where(ApiKey.id == issued.id)
                .values(expires_at=utcnow() - timedelta(seconds=1))
            )
            await session.commit()
        await _refused_within(client, headers, seconds=2.0)

    async def test_a_key_is_not_trusted_past_its_expiry(
        self, client, tenant, database, app, monkeypatch
    ):
        # Remembered far longer than it lives: only its own expiry can end the cache's trust.
        monkeypatch.setattr(app.state.authenticator.cache, "ttl", 60.0)
        app.state.authenticator.cache.clear()
        issued = await issue_api_key(
            database,
            project_id=tenant.project_id,
            permission="read",
            hash_key=app.state.authenticator.hash_key,
            expires_in=1,
        )
        async with orm.session(database) as session:
            await session.execute(
                update(ApiKey)
                .where(ApiKey.id == issued.id)
                .values(expires_at=utcnow() + timedelta(seconds=2.5))
            )
            await session.commit()
        headers = {"x-api-key": issued.api_key}
        # Trusted, and remembered (the cache keeps it at most until its expiry)...
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 200
        await asyncio.sleep(2.6)
        # ...and refused once it has expired, though it was remembered.
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 401

    async def test_a_known_key_makes_no_query(self, client, tenant, database, app, monkeypatch):
        monkeypatch.setattr(app.state.authenticator.cache, "ttl", 60.0)  # no expiry mid-test
        app.state.authenticator.cache.clear()
        statements = _recorded(database, monkeypatch)
        for _ in range(3):
            assert (await client.get("/v1/users/count", headers=tenant.r)).status_code == 200
        assert len([s for s in statements if "api_keys" in s]) == 1  # the first request only

    async def test_requests_in_flight_share_one_check(
        self, client, tenant, database, app, monkeypatch
    ):
        """An entry that expires under load is refreshed by one query, not one per request."""
        monkeypatch.setattr(app.state.authenticator.cache, "ttl", 60.0)
        app.state.authenticator.cache.clear()
        statements = _recorded(database, monkeypatch)
        answers = await asyncio.gather(
            *(client.get("/v1/users/count", headers=tenant.r) for _ in range(20))
        )
        assert [a.status_code for a in answers] == [200] * 20
        assert len([s for s in statements if "api_keys" in s]) == 1
        assert app.state.authenticator.cache._checking == {}  # nothing kept after the check

    async def test_read_key_gets_403_on_writes(self, client, tenant):
        response = await client.post(
            "/v1/users/create", headers=tenant.r, json=[{"email": "a@example.com"}]
        )
        assert response.status_code == 403
        assert response.json() == {
            "message": "this credential is read-only; a write credential is required"
        }

    async def test_last_use_is_recorded(self, client, tenant, database, app):
        await client.get("/v1/users/count", headers=tenant.r)
        await app.state.authenticator.usage.flush(database)
        async with orm.session(database, write=False) as session:
            used = {
                r.permission: r.last_used_at
                for r in await session.scalars(
                    select(ApiKey).where(ApiKey.project_id == tenant.project_id)
                )
            }
        assert used["read"] is not None and abs((utcnow() - used["read"]).total_seconds()) < 60
        assert used["write"] is None


class TestApiKeysAsBearer:
    """Mufi's guide sends the API key itself as ``Authorization: Bearer``: a bearer credential
    that starts with ``tsk_`` is an API key, with the same checks and the same answers."""

    async def test_write_and_read_keys_work_as_bearer(self, client, tenant):
        created = await client.post(
            "/v1/users/create", headers=_bearer(tenant.write_key), json=[{"email": "b@example.com"}]
        )
        assert created.status_code == 201, created.text
        counted = await client.get("/v1/users/count", headers=_bearer(tenant.read_key))
        assert (counted.status_code, counted.json()) == (200, {"count": 0})  # none activated
        refused = await client.post(
            "/v1/users/create", headers=_bearer(tenant.read_key), json=[{"email": "c@example.com"}]
        )
        assert refused.status_code == 403
        assert refused.json() == {
            "message": "this credential is read-only; a write credential is required"
        }

    @pytest.mark.parametrize(
        "key", ["tsk_000000000000_secret", "tsk__", "tsk_abc", "tsk_" + "x" * 500]
    )
    async def test_malformed_or_unknown_bearer_key_is_401(self, client, tenant, key):
        response = await client.get("/v1/users/count", headers=_bearer(key))
        assert response.status_code == 401
        assert response.json() == {"message": "invalid, expired or revoked credential"}

    async def test_another_projects_ids_are_404_with_a_bearer_key(self, client, tenant, other):
        theirs = await create_user(client, other)
        response = await client.post(
            "/v1/users/profile", headers=_bearer(tenant.read_key), json={"id": theirs["id"]}
        )
        assert response.status_code == 404


class TestOwnTokens:
    async def test_client_credentials_form_and_json(self, client, tenant):
        issued = await _token(client, tenant)
        assert issued["token_type"] == "Bearer" and issued["expires_in"] == 3600
        response = await client.post(
            "/v1/auth/token",
            json={"client_id": tenant.client_id, "client_secret": tenant.client_secret},
        )
        assert response.status_code == 200 and response.json()["access_token"]
        count = await client.get("/v1/users/count", headers=_bearer(issued["access_token"]))
        assert count.status_code == 200 and count.json() == {"count": 0}

    async def test_token_carries_project_and_scope(self, client, tenant, app):
        token = (await _token(client, tenant, scope="read"))["access_token"]
        claims = jwt.decode(token, options={"verify_signature": False})
        assert claims["pid"] == str(tenant.project_id)
        assert claims["scope"] == "read"
        assert claims["iss"] == "tessera" and claims["aud"] == "tessera-api"
        response = await client.post(
            "/v1/users/create", headers=_bearer(token), json=[{"email": "b@example.com"}]
        )
        assert response.status_code == 403

    @pytest.mark.parametrize(
        "body",
        [
            {"client_secret": "x"},
            {"client_id": "x"},
            {"client_id": "x", "client_secret": "y", "grant_type": "password"},
            {"client_id": "x", "client_secret": "y", "scope": "admin"},
        ],
    )
    async def test_bad_token_requests_are_400(self, client, tenant, body):
        response = await client.post("/v1/auth/token", data=body)
        assert response.status_code == 400 and response.json()["errors"]

    async def test_wrong_secret_is_401(self, client, tenant):
        response = await client.post(
            "/v1/auth/token", data={"client_id": tenant.client_id, "client_secret": "wrong"}
        )
        assert response.status_code == 401
        assert response.json() == {"message": "invalid client_id or client_secret"}

    async def test_jwks_publishes_the_signing_key(self, client, tenant):
        token = (await _token(client, tenant))["access_token"]
        keys = (await client.get("/.well-known/jwks.json")).json()["keys"]
        kid = jwt.get_unverified_header(token)["kid"]
        jwk = next(k for k in keys if k["kid"] == kid)
        assert set(jwk) >= {"kty", "crv", "x", "y", "kid", "alg"} and "d" not in jwk
        claims = jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["ES256"], audience="tessera-api")
        assert claims["pid"] == str(tenant.project_id)

    async def test_signing_key_rotates_and_old_tokens_still_verify(
        self, client, tenant, app, database
    ):
        old = (await _token(client, tenant))["access_token"]
        old_kid = jwt.get_unverified_header(old)["kid"]
        rotation = app.state.settings.signing_key_rotation_seconds
        async with orm.session(database) as session:  # age every key past the rotation period
            await session.execute(
                update(SigningKey).values(created_at=utcnow() - timedelta(seconds=rotation + 5))
            )
            await session.commit()
        issuer = app.state.authenticator.issuer
        issuer._signing = None  # another process would not have it cached either
        new = (await _token(client, tenant))["access_token"]
        assert jwt.get_unverified_header(new)["kid"] != old_kid
        kids = {k["kid"] for k in (await client.get("/.well-known/jwks.json")).json()["keys"]}
        assert {old_kid, jwt.get_unverified_header(new)["kid"]} <= kids
        assert (await client.get("/v1/users/count", headers=_bearer(old))).status_code == 200
        assert (await client.get("/v1/users/count", headers=_bearer(new))).status_code == 200

    async def test_tampered_expired_and_foreign_tokens_are_401(self, client, tenant, app):
        token = (await _token(client, tenant))["access_token"]
        header, payload, signature = token.split(".")
        tampered = f"{header}.{payload}.{signature[:-4]}AAAA"
        foreign = jwt.encode(
            {
                "iss": "tessera",
                "aud": "tessera-api",
                "pid": str(tenant.project_id),
                "scope": "read write",
                "exp": int(time.time()) + 60,
            },
            "not-our-key-" * 4,
            algorithm="HS256",
            headers={"kid": jwt.get_unverified_header(token)["kid"]},
        )
        kid, private = await app.state.authenticator.issuer._signing_key(database_of(app))
        expired = jwt.encode(
            jwt.decode(token, options={"verify_signature": False}) | {"exp": int(time.time()) - 5},
            private,
            algorithm="ES256",
            headers={"kid": kid},
        )
        for bad in (tampered, foreign, expired, "not-a-jwt", f"{header}.{payload}."):
            response = await client.get("/v1/users/count", headers=_bearer(bad))
            assert response.status_code == 401, bad
        response = await client.get("/v1/users/count", headers={"Authorization": f"Basic {token}"})
        assert response.status_code == 401


def _oidc_token(jwks_server, **claims) -> str:
    now = int(time.time())
    body = {"iss": OIDC_ISSUER, "aud": OIDC_AUDIENCE, "sub": "svc-1", "iat": now, "exp": now + 300}
    return jwt.encode(
        body | claims,
        jwks_server.private_key,
        algorithm="RS256",
        headers={"kid": jwks_server.kid},
    )


class TestExternalOidc:
    async def _bind(self, database, tenant, subject="svc-1", permission="write"):
        from tessera.projects.service import bind_identity

        await bind_identity(
            database,
            project_id=tenant.project_id,
            issuer=OIDC_ISSUER,
            subject=subject,
            permission=permission,
        )

    async def test_bound_subject_acts_for_its_project(
        self, client, tenant, other, database, jwks_server
    ):
        await self._bind(database, tenant)
        user = await create_user(client, tenant)
        headers = _bearer(_oidc_token(jwks_server))
        response = await client.post("/v1/users/profile", headers=headers, json={"id": user["id"]})
        assert response.status_code == 200 and response.json()["id"] == user["id"]
        created = await client.post(
            "/v1/users/create", headers=headers, json=[{"email": "o@example.com"}]
        )
        assert created.status_code == 201
        theirs = await create_user(client, other)
        response = await client.post(
            "/v1/users/profile", headers=headers, json={"id": theirs["id"]}
        )
        assert response.status_code == 404

    async def test_read_binding_gets_403_on_writes(self, client, tenant, database, jwks_server):
        await self._bind(database, tenant, subject="reader", permission="read")
        headers = _bearer(_oidc_token(jwks_server, sub="reader"))
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 200
        response = await client.post(
            "/v1/users/create", headers=headers, json=[{"email": "r@example.com"}]
        )
        assert response.status_code == 403

    @pytest.mark.parametrize(
        "claims",
        [
            {"sub": "unbound"},
            {"aud": "someone-else"},
            {"exp": int(time.time()) - 3600},
        ],
    )
    async def test_unbound_wrong_audience_or_expired_is_401(
        self, client, tenant, database, jwks_server, claims
    ):
        await self._bind(database, tenant)
        headers = _bearer(_oidc_token(jwks_server, **claims))
        assert (await client.get("/v1/users/count", headers=headers)).status_code == 401

    async def test_token_signed_by_another_key_is_401(self, client, tenant, database, jwks_server):
        from cryptography.hazmat.primitives.asymmetric import rsa

        await self._bind(database, tenant)
        impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = int(time.time())
        token = jwt.encode(
            {"iss": OIDC_ISSUER, "aud": OIDC_AUDIENCE, "sub": "svc-1", "exp": now + 300},
            impostor,
            algorithm="RS256",
            headers={"kid": jwks_server.kid},
        )
        assert (await client.get("/v1/users/count", headers=_bearer(token))).status_code == 401

    async def test_jwks_is_cached(self, client, tenant, database, jwks_server):
        await self._bind(database, tenant)
        headers = _bearer(_oidc_token(jwks_server))
        await client.get("/v1/users/count", headers=headers)
        before = jwks_server.requests
        for _ in range(3):
            assert (await client.get("/v1/users/count", headers=headers)).status_code == 200
        assert jwks_server.requests == before

    async def test_unknown_issuer_is_401(self, client, tenant, jwks_server):
        token = _oidc_token(jwks_server, iss="https://elsewhere.invalid")
        assert (await client.get("/v1/users/count", headers=_bearer(token))).status_code == 401
