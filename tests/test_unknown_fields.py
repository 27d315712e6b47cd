"""A field or query parameter the endpoint does not know is a 400 naming it, and changes nothing;
every field Mufi's own OpenAPI documents for an operation Tessera has is known."""

import re
import uuid
from pathlib import Path
from typing import Any

import yaml
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy import func, select

from tessera.models import Order, Product, User
from tests import orm
from tests.factories import create_product, create_user, product_body, user_body

MUFI_OPENAPI = Path(__file__).resolve().parent / "fixtures" / "mufi-openapi.yaml"


async def _count(database, model) -> int:
    async with orm.session(database, write=False) as session:
        return await session.scalar(select(func.count()).select_from(model)) or 0


class TestUnknownBodyFields:
    async def test_a_misspelt_product_field_is_refused_and_nothing_is_created(
        self, client, tenant, database
    ):
        before = await _count(database, Product)
        response = await client.post(
            "/v1/products", headers=tenant.w, json=product_body(is_transferrable=True)
        )
        assert response.status_code == 400
        assert response.json() == {"errors": ["is_transferrable: unknown field"]}
        assert await _count(database, Product) == before

    async def test_in_a_batch_the_entry_is_named(self, client, tenant, database):
        before = await _count(database, User)
        response = await client.post(
            "/v1/users/create",
            headers=tenant.w,
            json=[user_body(), user_body(first_name="Ada")],
        )
        assert response.status_code == 400
        assert response.json() == {"errors": ["1.first_name: unknown field"]}
        assert await _count(database, User) == before

    async def test_nested_objects_are_checked_too(self, client, tenant, database):
        user = await create_user(client, tenant)
        product = await create_product(client, tenant)
        before = await _count(database, Order)
        response = await client.post(
            "/v1/orders",
            headers=tenant.w,
            json={
                "user": {"id": user["id"], "name": "Ada"},
                "items": [{"product_id": product["id"], "quantity": 1, "qty": 2}],
            },
        )
        assert response.status_code == 400
        assert sorted(response.json()["errors"]) == [
            "items.0.qty: unknown field",
            "user.name: unknown field",
        ]
        assert await _count(database, Order) == before

    async def test_known_fields_still_pass(self, client, tenant):
        response = await client.post(
            "/v1/products", headers=tenant.w, json=product_body(is_transferable=True)
        )
        assert response.status_code == 201 and response.json()["is_transferable"] is True


class TestUnknownQueryParameters:
    async def test_a_list_refuses_an_unknown_parameter(self, client, tenant):
        response = await client.get("/v1/products?page=1&limt=5", headers=tenant.r)
        assert response.status_code == 400
        assert response.json() == {"errors": ["limt: unknown query parameter"]}

    async def test_a_route_without_parameters_refuses_any(self, client, tenant):
        product = await create_product(client, tenant)
        response = await client.get(
            f"/v1/products/{product['id']}?expand=event&b=1", headers=tenant.r
        )
        assert response.status_code == 400
        assert response.json() == {
            "errors": ["b: unknown query parameter", "expand: unknown query parameter"]
        }
        version = await client.get("/v1/version?verbose=1")
        assert version.status_code == 400
        assert version.json() == {"errors": ["verbose: unknown query parameter"]}

    async def test_the_credential_is_checked_first(self, client):
        response = await client.get("/v1/products?foo=1")
        assert response.status_code == 401

    async def test_declared_parameters_pass(self, client, tenant):
        await create_product(client, tenant)
        listed = await client.get("/v1/products?page=1&limit=5", headers=tenant.r)
        assert listed.status_code == 200 and len(listed.json()) == 1
        balances = await client.get("/v1/projects/wallets/balances?chain=Nope", headers=tenant.r)
        assert balances.status_code == 400
        assert balances.json()["errors"][0].startswith("chain: Input should be")


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _documented_fields(spec: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """Top-level property names of a request body schema (arrays: of their items)."""
    schema = _resolve(spec, schema)
    if schema.get("type") == "array":
        return _documented_fields(spec, schema["items"])
    fields = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        fields |= _documented_fields(spec, part)
    return fields


def _mufi_operations() -> list[tuple[str, str, str, set[str]]]:
    spec = yaml.safe_load(MUFI_OPENAPI.read_text())
    operations = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                fields = _documented_fields(spec, body["schema"])
                operations.append((method.upper(), path, operation["operationId"], fields))
    return operations


async def test_every_field_mufi_documents_is_known(app, client, tenant):
    served = {
        (method, route.path)
        for route in iter_route_contexts(app.routes)
        if isinstance(route.original_route, APIRoute)
        for method in route.methods
    }
    checked, not_served = 0, set()
    for method, path, _operation_id, fields in _mufi_operations():
        if (method, path) not in served:
            not_served.add((method, path))
            continue
        url = re.sub(r"{[^}]+}", str(uuid.uuid4()), path)
        for field in sorted(fields):
            # The value may well be invalid: only "unknown field" is what this test looks for.
            body: Any = [{field: None}] if path == "/v1/users/create" else {field: None}
            response = await client.request(method, url, headers=tenant.w, json=body)
            errors = response.json().get("errors", []) if response.status_code == 400 else []
            assert not [e for e in errors if "unknown field" in e], (method, path, field, errors)
            checked += 1
    assert checked >= 60
    assert not_served == set()  # every operation of Mufi's, the older calls too
