"""Input that once answered 500 or was stored as given: each is a 400 (or 401/405) in the
promised shape, and changes nothing."""

import asyncio
import time
import uuid
from typing import get_args

import asyncpg
import jwt
import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel

from tessera.db import database_of
from tessera.errors import ChainUnavailable
from tessera.schemas import Input
from tests.conftest import BACKEND
from tests.factories import (
    create_event,
    create_product,
    create_user,
    event_body,
    product_body,
    row_counts,
    user_body,
)

NUL = "must not contain the NUL character (\\u0000)"


class TestIntegerBounds:
    @pytest.mark.parametrize("offset", [2**64, 2**63, 2**53 + 1])
    async def test_an_offset_past_the_bound_is_400(self, client, tenant, offset):
        response = await client.post("/v1/users/fetch", headers=tenant.r, json={"offset": offset})
        assert response.status_code == 400
        [error] = response.json()["errors"]
        assert error.startswith("offset: ")

    async def test_the_bound_is_in_the_openapi(self, client):
        spec = (await client.get("/openapi.json")).json()
        offset = spec["components"]["schemas"]["UserFetch"]["properties"]["offset"]
        assert offset["maximum"] == 2**53

    async def test_the_largest_offset_answers_an_empty_page(self, client, tenant):
        await create_user(client, tenant)
        response = await client.post("/v1/users/fetch", headers=tenant.r, json={"offset": 2**53})
        assert response.status_code == 200
        assert response.json()["users"] == [] and response.json()["total"] == 1


class TestNulCharacter:
    @pytest.mark.parametrize(
        ("path", "body", "field"),
        [
            ("/v1/users/create", [user_body(firstName="a\u0000b")], "0.firstName"),
            ("/v1/users/create", [user_body(referenceId="r\u0000")], "0.referenceId"),
            ("/v1/events/create", event_body(name="Gala\u0000"), "name"),
            ("/v1/products", product_body(name="\u0000"), "name"),
            ("/v1/products", product_body(description="x\u0000y"), "description"),
        ],
    )
    async def test_in_a_body_is_400_naming_the_field(
        self, client, tenant, database, path, body, field
    ):
        before = await row_counts(database)
        response = await client.post(path, headers=tenant.w, json=body)
        assert response.status_code == 400, response.text
        assert response.json() == {"errors": [f"{field}: {NUL}"]}
        assert await row_counts(database) == before

    async def test_in_a_lookup_is_400(self, client, tenant):
        response = await client.post(
            "/v1/users/profile", headers=tenant.r, json={"referenceId": "a\u0000"}
        )
        assert response.status_code == 400
        assert response.json() == {"errors": [f"referenceId: {NUL}"]}

    async def test_in_a_path_or_query_is_400(self, client, tenant):
        await create_event(client, tenant)
        response = await client.get("/v1/events/abc%00def", headers=tenant.r)
        assert response.status_code == 400
        assert response.json() == {"errors": [f"path: {NUL}"]}
        response = await client.get("/v1/products?limit=1%00", headers=tenant.r)
        assert response.status_code == 400
        assert response.json() == {"errors": [f"query: {NUL}"]}

    async def test_an_escaped_backslash_is_plain_text(self, client, tenant):
        """``\\\\u0000`` in JSON is six characters of text, not a NUL."""
        product = await create_product(client, tenant, name="C:\\u0000")
        assert product["name"] == "C:\\u0000"

    async def test_in_an_unknown_field_name_is_named_escaped(self, client, tenant):
        response = await client.post(
            "/v1/webhooks",
            headers=tenant.w,
            json={"url": "https://93.184.216.34/h", "a\u0000b": 1},
        )
        assert response.status_code == 400
        # The name as six characters of text (backslash, u, 0000), not a NUL.
        assert response.json() == {"errors": ["a\\u0000b: unknown field"]}
        assert "\x00" not in response.json()["errors"][0]

    async def test_in_client_credentials_is_400(self, client, tenant):
        response = await client.post(
            "/v1/auth/token", json={"client_id": "a\u0000", "client_secret": "b"}
        )
        assert response.status_code == 400
        assert response.json() == {"errors": [f"client_id: {NUL}"]}


class TestUnparsableBodies:
    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (b'{"email": "\xff\xfe@example.com"}', "body: not valid UTF-8"),
            (b"[" * 5000 + b"]" * 5000, "body: JSON nested too deeply"),
            (b'{"offset": ' + b"9" * 5000 + b"}", "body: malformed JSON: "),
        ],
    )
    async def test_every_400_has_the_errors_shape(self, client, tenant, content, expected):
        response = await client.post(
            "/v1/users/fetch",
            headers=tenant.r | {"content-type": "application/json"},
            content=content,
        )
        assert response.status_code == 400
        [error] = response.json()["errors"]
        assert error.startswith(expected), error

    async def test_a_deep_token_request_is_400(self, client):
        response = await client.post(
            "/v1/auth/token",
            headers={"content-type": "application/json"},
            content=b"[" * 5000 + b"]" * 5000,
        )
        assert response.status_code == 400 and response.json()["errors"]


class TestCredentialsOfMissingProjects:
    async def test_a_valid_token_for_no_project_is_401(self, client, tenant, app):
        # The issuer's signing key (made now if this test runs first).
        kid, private = await app.state.authenticator.issuer._signing_key(database_of(app))
        claims = {
            "iss": "tessera",
            "aud": "tessera-api",
            "pid": str(uuid.uuid4()),
            "scope": "read write",
            "sub": "ghost",
            "exp": int(time.time()) + 60,
        }
        token = jwt.encode(claims, private, algorithm="ES256", headers={"kid": kid})
        headers = {"Authorization": f"Bearer {token}"}
        for method, path, body in [
            ("GET", "/v1/users/count", None),
            ("GET", "/v1/products", None),
            ("POST", "/v1/products", product_body()),
        ]:
            response = await client.request(method, path, headers=headers, json=body)
            assert response.status_code == 401, (path, response.text)
            assert set(response.json()) == {"message"}


class TestMethodNotAllowed:
    async def test_405_names_every_method_of_the_path(self, client, tenant):
        response = await client.options("/v1/products", headers=tenant.r)
        assert response.status_code == 405 and set(response.json()) == {"message"}
        assert response.headers["allow"] == "GET, POST"
        response = await client.delete("/v1/events/abc", headers=tenant.w)
        assert response.status_code != 405
        response = await client.patch("/v1/events/abc", headers=tenant.w)
        assert response.headers["allow"] == "DELETE, GET"


class TestSlowChainHoldsNoWriteSlot:
    async def test_a_write_waits_for_no_chain_read(self, client, tenant, app, monkeypatch):
        """A mint_nft product reads the project wallet's balance from the chain; a chain that
        does not answer must not hold up other writes (SQLite has one write slot)."""
        answered = asyncio.Event()

        async def silent_chain(name, work, *, in_request=False):
            await asyncio.wait_for(answered.wait(), 5)
            raise ChainUnavailable(f"chain {name} is unavailable: timeout")

        monkeypatch.setattr(app.state.chains, "run", silent_chain)
        minting = asyncio.create_task(
            client.post(
                "/v1/products",
                headers=tenant.w,
                json=product_body(
                    mint_nft=True, chain="WestendAssetHub", metadata_uri="https://x/meta.json"
                ),
            )
        )
        await asyncio.sleep(0.2)  # the product request is waiting on the chain
        assert not minting.done()
        started = time.monotonic()
        created = await client.post("/v1/users/create", headers=tenant.w, json=[user_body()])
        assert created.status_code == 201
        assert time.monotonic() - started < 5  # the chain answers only once told to
        answered.set()
        response = await minting
        assert response.status_code == 503 and set(response.json()) == {"message"}


class TestTheSchemaSaysWhatTheServerDoes:
    @pytest.fixture
    async def spec(self, client):
        return (await client.get("/openapi.json")).json()["components"]["schemas"]

    async def test_one_identifier_is_an_any_of_required_non_null(self, spec, client, tenant):
        [rule] = spec["UserLookup"]["allOf"]
        required = [branch["required"] for branch in rule["anyOf"]]
        assert required == [["email"], ["referenceId"], ["id"]]
        assert all(
            branch["properties"][branch["required"][0]] == {"not": {"type": "null"}}
            for branch in rule["anyOf"]
        )
        assert "allOf" not in spec["UserFetch"]  # every user, or the one an identifier names
        response = await client.post("/v1/users/profile", headers=tenant.r, json={"email": None})
        assert response.status_code == 400

    async def test_delta_zero_and_mint_without_chain_are_in_the_schema(self, spec):
        assert spec["ReputationAdjust"]["properties"]["delta"]["not"] == {"const": 0}
        [mint, seated] = spec["ProductCreate"]["allOf"]
        assert mint["anyOf"][1]["required"] == ["metadata_uri", "chain"]
        assert seated["anyOf"][2]["required"] == ["event_id"]  # a seated product's event

    async def test_a_blank_event_id_is_documented_and_accepted(self, spec, client, tenant):
        assert {"const": ""} in spec["ProductCreate"]["properties"]["event_id"]["anyOf"]
        product = await create_product(client, tenant, event_id="", stock="")
        assert product["event_id"] is None and product["stock"] is None

    async def test_fields_that_refuse_null_have_no_null(self, spec, client, tenant):
        name = spec["EventUpdate"]["properties"]["name"]
        assert name.get("type") == "string" and "anyOf" not in name
        event = await create_event(client, tenant)
        response = await client.put(
            "/v1/events/update", headers=tenant.w, json={"id": event["id"], "name": None}
        )
        assert response.status_code == 400

    async def test_an_integral_float_is_an_integer(self, client, tenant):
        await create_user(client, tenant)
        response = await client.post(
            "/v1/users/fetch", headers=tenant.r, json={"limit": 5.0, "offset": 0.0}
        )
        assert response.status_code == 200 and response.json()["total"] == 1
        for bad in (5.5, "5", True):
            response = await client.post("/v1/users/fetch", headers=tenant.r, json={"limit": bad})
            assert response.status_code == 400, bad

    async def test_order_lines_show_their_bound_and_the_total_is_described(self, spec):
        quantity = spec["OrderLineCreate"]["properties"]["quantity"]
        assert (quantity["minimum"], quantity["maximum"]) == (1, 550)
        assert "550" in spec["OrderCreate"]["properties"]["items"]["description"]

    async def test_text_in_the_schema_refuses_nul(self, spec):
        nonce = spec["RedeemRequest"]["properties"]["nonce"]["anyOf"][0]
        assert nonce["pattern"] == "^[^\\u0000]*$"

    async def test_text_is_kept_as_sent(self, client, tenant):
        [user] = (
            await client.post(
                "/v1/users/create",
                headers=tenant.w,
                json=[user_body(firstName=" Ann ", referenceId=" r-1 ")],
            )
        ).json()["users"]
        assert (user["firstName"], user["referenceId"]) == (" Ann ", " r-1 ")


def _models(annotation):
    """The pydantic models an annotation names (through lists, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        for field in annotation.model_fields.values():
            yield from _models(field.annotation)
    for argument in get_args(annotation):
        yield from _models(argument)


class TestEveryRequestSchemaRefusesNul:
    def test_every_body_model_is_an_input(self, app):
        bodies = [
            route.body_field.field_info.annotation
            for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, APIRoute) and route.original_route.body_field
        ]
        models = {model for body in bodies for model in _models(body)}
        assert len(models) >= 10
        assert not [m.__name__ for m in models if not issubclass(m, Input)]


@pytest.mark.skipif(BACKEND != "postgresql", reason="PostgreSQL's pooled connections")
@pytest.mark.direct_postgresql
class TestDroppedConnections:
    async def test_reads_recover_once_the_server_dropped_the_pool(self, client, tenant, database):
        """A restart (here: every backend of the pool terminated) fails at most one read;
        the pool's connections are replaced, and the next reads work."""
        user = await create_user(client, tenant)
        for _ in range(5):  # fill the pool with connections that read
            await asyncio.gather(
                *(
                    client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
                    for _ in range(8)
                )
            )
        dsn = database.url.set(drivername="postgresql").render_as_string(hide_password=False)
        killer = await asyncpg.connect(dsn)
        try:
            await killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND usename = current_user"  # not autovacuum's, say
            )
        finally:
            await killer.close()
        statuses = []
        for _ in range(6):
            response = await client.post(
                "/v1/users/profile", headers=tenant.r, json={"id": user["id"]}
            )
            statuses.append(response.status_code)
        assert statuses[1:] == [200] * 5, statuses
        assert statuses[0] in (200, 503)  # the connection it had was dead: try again
        for _ in range(3):  # no dead connection is left in the pool, for reads or writes
            answers = await asyncio.gather(
                *(
                    client.post("/v1/users/profile", headers=tenant.r, json={"id": user["id"]})
                    for _ in range(8)
                ),
                *(create_user(client, tenant) for _ in range(4)),
            )
            assert all(a.status_code == 200 for a in answers[:8])
