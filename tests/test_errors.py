"""The two error shapes, the request id on failures, the body size limit."""

import json
import logging

import httpx
import pytest

from tessera.main import create_app
from tests.factories import create_product, create_user, row_counts, user_body


class TestErrorShapes:
    async def test_malformed_json_is_400(self, client, tenant):
        response = await client.post(
            "/v1/users/profile",
            headers=tenant.r | {"content-type": "application/json"},
            content=b'{"id": ',
        )
        assert response.status_code == 400
        [error] = response.json()["errors"]
        assert error.startswith("malformed JSON")

    @pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
    async def test_json_without_a_json_content_type_is_400_naming_it(
        self, client, tenant, content_type
    ):
        response = await client.post(
            "/v1/users/profile",
            headers=tenant.r | {"content-type": content_type},
            content=b'{"email": "a@example.com"}',
        )
        assert response.status_code == 400
        assert response.json() == {
            "errors": [
                f"body: send JSON with Content-Type: application/json (got '{content_type}')"
            ]
        }

    async def test_unknown_route_is_404_message(self, client, tenant):
        response = await client.get("/v1/nothing-here", headers=tenant.r)
        assert response.status_code == 404
        assert response.json() == {"message": "nothing answers GET /v1/nothing-here"}

    async def test_an_unknown_route_names_the_nearest(self, client, tenant):
        response = await client.get("/v1/product", headers=tenant.r)
        assert response.status_code == 404
        assert response.json() == {
            "message": "nothing answers GET /v1/product; the nearest is /v1/products"
        }

    async def test_wrong_method_is_405_naming_the_allowed_ones(self, client, tenant):
        response = await client.delete("/v1/version")
        assert response.status_code == 405 and response.headers["allow"] == "GET"
        assert response.json() == {
            "message": "DELETE is not allowed on /v1/version: it answers GET"
        }

    async def test_a_path_of_several_methods_names_them_all(self, client, tenant):
        response = await client.put("/v1/products", headers=tenant.w, json={})
        assert response.status_code == 405 and response.headers["allow"] == "GET, POST"
        assert response.json() == {
            "message": "PUT is not allowed on /v1/products: it answers GET or POST"
        }

    async def test_bad_input_changes_nothing(self, client, tenant, database):
        product = await create_product(client, tenant, stock=1)
        user = await create_user(client, tenant)
        before = await row_counts(database)
        response = await client.post(
            f"/v1/products/{product['id']}/items",
            headers=tenant.w,
            json={"users": [user["id"], "x"]},
        )
        assert response.status_code == 400
        assert await row_counts(database) == before
        issued = await client.post(
            f"/v1/products/{product['id']}/items", headers=tenant.w, json={"users": [user["id"]]}
        )
        assert issued.status_code == 201 and issued.json()["items"][0]["item_id"] == 1


class TestBodyLimit:
    async def test_declared_oversize_body_is_413(self, client, tenant, settings):
        body = [user_body() for _ in range(settings.max_body_bytes // 50)]  # 50+ bytes each
        assert len(json.dumps(body)) > settings.max_body_bytes
        response = await client.post("/v1/users/create", headers=tenant.w, json=body)
        assert response.status_code == 413
        assert response.json() == {
            "message": f"request body too large (limit {settings.max_body_bytes} bytes)"
        }
        assert response.headers["x-request-id"]
        assert (await client.post("/v1/users/fetch", headers=tenant.r, json={})).json()[
            "total"
        ] == 0

    async def test_streamed_oversize_body_is_413(self, client, tenant, settings):
        async def chunks():
            yield b"["
            for _ in range(settings.max_body_bytes // 34 + 1):  # 34 bytes each
                yield b'{"email": "streamed@example.com"},'
            yield b"{}]"

        response = await client.post(
            "/v1/users/create",
            headers=tenant.w | {"content-type": "application/json"},
            content=chunks(),
        )
        assert response.status_code == 413


class TestUnexpectedErrors:
    @pytest.fixture
    async def broken_client(self, settings):
        app = create_app(settings)

        @app.get("/boom")
        async def boom() -> None:
            raise RuntimeError("secret detail that must stay in the log")

        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                yield http

    async def test_500_has_request_id_and_no_traceback(self, broken_client, caplog):
        with caplog.at_level(logging.ERROR, logger="tessera"):
            response = await broken_client.get("/boom", headers={"x-request-id": "req-500"})
        assert response.status_code == 500
        assert response.json() == {"message": "internal error", "request_id": "req-500"}
        assert response.headers["x-request-id"] == "req-500"
        assert "secret detail" in caplog.text and "req-500" in caplog.text


class TestNoSecretsLeak:
    async def test_credentials_and_keys_never_appear_in_responses_or_logs(
        self, client, tenant, app, caplog
    ):
        caplog.set_level(logging.DEBUG)
        token = await client.post(
            "/v1/auth/token",
            data={"client_id": tenant.client_id, "client_secret": tenant.client_secret},
        )
        bearer = token.json()["access_token"]
        user = await create_user(client, tenant)
        bodies = [token.text]
        for path, body in (
            ("/v1/users/profile", {"id": user["id"]}),
            ("/v1/users/fetch", {"limit": 5}),
        ):
            bodies.append((await client.post(path, headers=tenant.w, json=body)).text)
        bodies.append(
            (
                await client.get(
                    "/v1/projects/wallets", headers={"Authorization": f"Bearer {bearer}"}
                )
            ).text
        )
        bodies.append((await client.get("/openapi.json")).text)
        settings = app.state.settings
        secrets = [
            tenant.write_key,
            tenant.read_key,
            tenant.client_secret,
            settings.hash_key.get_secret_value(),
            settings.secret_keys.get_secret_value().split(":", 1)[1],
        ]
        for secret in secrets:
            assert all(secret not in body for body in bodies)
            assert secret not in caplog.text
        api = bodies.pop()
        assert "secret_blob" not in "".join(bodies) + api and "public_key" not in "".join(bodies)
        # The one public key the API shows is a check-in key's: what verifies ticket secrets.
        schemas = json.loads(api)["components"]["schemas"]
        shown = {name for name, schema in schemas.items() if "public_key" in str(schema)}
        assert shown == {"PublicCheckinKey"}
        assert "**********" in repr(settings)


class TestSettings:
    def test_production_refuses_placeholder_secrets(self):
        from pydantic import ValidationError

        from tessera.config import Settings

        with pytest.raises(ValidationError, match="must be set in production"):
            Settings(env="production")
        with pytest.raises(ValidationError, match="must be 32 bytes"):
            Settings(secret_keys="k1:c2hvcnQ=")
