"""Plain routes (tessera.web.handlers) answer every request as FastAPI's general handler does: the
same status, headers and body, for answers and for each kind of refusal."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute, request_response

from tessera.web.handlers import plain_handler
from tessera.web.routes import ProjectRoute
from tessera.web.routing import TELEMETRY
from tests.factories import create_event, create_order, create_product, create_user

SECRET = "tsk_unknown_0000000000000000000000000000000000000000000"


def plain_routes(app: FastAPI) -> list[ProjectRoute]:
    """The routes of ``app`` that the plain handler answers (the others fall back)."""
    return [
        route
        for route in app.router.routes
        if isinstance(route, ProjectRoute)
        and plain_handler(route, APIRoute.get_route_handler(route)) is not None
    ]


@contextmanager
def general_handling(app: FastAPI) -> Iterator[int]:
    """Every plain route of ``app`` handled by FastAPI's general handler meanwhile (behind
    the same admission); how many."""
    plain = plain_routes(app)
    for route in plain:
        route.app = request_response(route.admitting(APIRoute.get_route_handler(route)))
    try:
        yield len(plain)
    finally:
        for route in plain:
            route.app = request_response(route.get_route_handler())


def test_the_hot_routes_are_plain(app):
    plain = {(method, route.path) for route in plain_routes(app) for method in route.methods}
    assert {
        ("POST", "/v1/users/profile"),
        ("GET", "/v1/users/count"),
        ("GET", "/v1/events/{IdOrReferenceId}"),
        ("GET", "/v1/products/{id}"),
        ("GET", "/v1/products"),
        ("GET", "/v1/orders/{id}"),
        ("POST", "/v1/orders"),
        ("POST", "/v1/products/{id}/items"),
        # Those that once took an ORM session, like the rest.
        ("GET", "/v1/projects/wallets"),
        ("GET", "/v1/projects/wallets/balances"),
        ("POST", "/v1/users/activate"),
        ("POST", "/v1/users/activation"),
        ("POST", "/v1/users/balances"),
        ("POST", "/v1/events/create"),
        ("PUT", "/v1/events/update"),
        ("GET", "/v1/events"),
        ("GET", "/v1/events/{event_id}/attendees"),
        ("DELETE", "/v1/events/{IdOrReferenceId}"),
    } <= plain


async def test_both_handlers_answer_alike(app, client, tenant):
    user = await create_user(client, tenant)
    event = await create_event(client, tenant)
    product = await create_product(client, tenant, event_id=event["id"], price="5.00")
    order = (await create_order(client, tenant, user["id"], (product["id"], 1))).json()
    json_type = {"content-type": "application/json"}
    requests = [
        ("POST", "/v1/users/profile", tenant.r, {"json": {"id": user["id"]}}),
        ("POST", "/v1/users/profile", tenant.r, {"json": {"email": user["email"].upper()}}),
        ("POST", "/v1/users/profile", tenant.r, {"json": {"id": str(uuid.uuid4())}}),
        ("POST", "/v1/users/profile", tenant.r, {"json": {"id": "not-an-id"}}),
        ("POST", "/v1/users/profile", tenant.r, {"json": {"id": user["id"], "extra": 1}}),
        ("POST", "/v1/users/profile", tenant.r, {"content": b"{", "headers": json_type}),
        ("POST", "/v1/users/profile", tenant.r, {"content": b"[1]", "headers": json_type}),
        ("POST", "/v1/users/profile", tenant.r, {"content": b'{"id": 1}'}),
        (
            "POST",
            "/v1/users/profile",
            tenant.r,
            {"content": b'{"id": 1}', "headers": {"content-type": "text/plain"}},
        ),
        ("POST", "/v1/users/profile", tenant.r, {}),
        ("POST", "/v1/users/profile", {}, {"json": {"id": user["id"]}}),
        # Which refusal wins: the credential before the parameters, the JSON before both.
        ("POST", "/v1/users/profile", {}, {"json": {"id": "not-an-id"}}),
        ("POST", "/v1/users/profile", {}, {"content": b"{", "headers": json_type}),
        ("GET", "/v1/products/not-a-uuid?surprise=1", {}, {}),
        ("POST", "/v1/users/profile", {"x-api-key": SECRET}, {"json": {"id": user["id"]}}),
        ("POST", "/v1/users/fetch", tenant.r, {"json": {"limit": 0}}),
        ("GET", "/v1/users/count", tenant.r, {}),
        ("GET", "/v1/users/count?surprise=1", tenant.r, {}),
        ("GET", f"/v1/events/{event['id']}", tenant.r, {}),
        ("GET", f"/v1/products/{product['id']}", tenant.r, {}),
        ("GET", "/v1/products/not-a-uuid", tenant.r, {}),
        ("GET", "/v1/products?limit=2&page=1", tenant.r, {}),
        ("GET", "/v1/products?limit=1000", tenant.r, {}),
        ("GET", f"/v1/products/{product['id']}/sales?limit=5", tenant.r, {}),
        ("GET", f"/v1/orders/{order['id']}", tenant.r, {}),
        ("GET", f"/v1/orders/{uuid.uuid4()}", tenant.r, {}),
        ("POST", "/v1/orders", tenant.r, {"json": {}}),
        ("POST", "/v1/orders", tenant.w, {"json": {"user_id": user["id"], "items": []}}),
        ("POST", f"/v1/products/{product['id']}/items", tenant.w, {"json": {"users": "x"}}),
        ("GET", "/v1/projects/wallets", tenant.r, {}),
        ("GET", "/v1/projects/wallets/balances?chain=Nope", tenant.r, {}),
        ("GET", "/v1/projects/wallets/balances?chain=AssetHub", tenant.r, {}),
        ("GET", "/v1/events?limit=5", tenant.r, {}),
        ("GET", f"/v1/events/{event['id']}/attendees", tenant.r, {}),
        ("POST", "/v1/users/activation", tenant.r, {"json": {"id": user["id"]}}),
        ("DELETE", f"/v1/events/{uuid.uuid4()}", tenant.w, {}),
        ("DELETE", f"/v1/events/{event['id']}", tenant.r, {}),
    ]

    async def seen(method, path, credential, options) -> tuple:
        options = dict(options)
        headers = credential | options.pop("headers", {})
        response = await client.request(method, path, headers=headers, **options)
        kept = {k: v for k, v in response.headers.items() if k != "x-request-id"}
        return response.status_code, kept, response.content

    plain = [await seen(*request) for request in requests]
    with general_handling(app) as count:
        general = [await seen(*request) for request in requests]
    assert count > 30
    for request, mine, fastapis in zip(requests, plain, general, strict=True):
        assert mine == fastapis, request[:2]
    statuses = {status for status, _, _ in plain}
    assert {200, 400, 401, 403, 404} <= statuses


@pytest.mark.parametrize("write", [False, True])
async def test_a_write_answers_alike(app, client, tenant, write):
    """A write through either handler: the same status and the same fields."""
    product = await create_product(client, tenant)
    user = await create_user(client, tenant)
    body = {"users": [user["id"]]}
    path = f"/v1/products/{product['id']}/items"
    headers = tenant.w if write else tenant.r
    mine = await client.post(path, headers=headers, json=body)
    with general_handling(app):
        fastapis = await client.post(path, headers=headers, json=body)
    assert mine.status_code == fastapis.status_code == (201 if write else 403)
    if write:
        assert mine.json().keys() == fastapis.json().keys()
    else:
        assert mine.json() == fastapis.json()


async def test_opentelemetry_takes_the_general_handler(app):
    """While FastAPI's OpenTelemetry is on (its key in the scope), a plain route's requests go
    to FastAPI's general handler, which names the spans."""
    route = next(r for r in plain_routes(app) if r.path == "/v1/users/count")
    answered = Response(b"general")

    async def general(request: Request) -> Response:
        return answered

    handle = plain_handler(route, general)
    assert handle is not None
    scope = {"type": "http", "method": "GET", "path": route.path, "headers": [], "app": app}
    assert await handle(Request(scope | {TELEMETRY: object()})) is answered
