"""Routing by index (tessera.web.routing) picks the route FastAPI's own routing picks, for every
route of the app, and leaves what matches nothing to FastAPI."""

import re

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute, Match

from tessera.web.routing import RouteIndex, path_key, prefix


def _routes(app: FastAPI) -> list[BaseRoute]:
    """The app's routes behind its index."""
    assert isinstance(app.router.routes[0], RouteIndex)
    return app.router.routes[1:]


def _concrete(template: str) -> str:
    """A path the template matches: each parameter filled in."""
    return re.sub(r"\{[^}:]+:path\}", "a/b", re.sub(r"\{[^}:]+(:(str|int|uuid))?\}", "7", template))


def _first_full(routes: list[BaseRoute], scope: dict) -> BaseRoute | None:
    for route in routes:
        match, _ = route.matches(dict(scope))
        if match is Match.FULL:
            return route
    return None


def _scope(method: str, path: str) -> dict:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def test_prefixes_are_the_literal_leading_segments():
    assert prefix("/v1/users/profile") == ("v1", "users")
    assert prefix("/v1/events/{id}") == ("v1", "events")
    assert prefix("/claim/{token}") == ("claim",)
    assert prefix("/{path:path}") == ()
    assert prefix("/metrics") == ("metrics",)
    assert path_key("/v1/users/profile") == ("v1", "users")
    assert path_key("/metrics") == ("metrics",)
    assert path_key("/") == ("",)


def test_every_route_is_found_where_fastapi_finds_it(app: FastAPI):
    routes = _routes(app)
    index = RouteIndex(routes)
    checked = 0
    for context in iter_route_contexts(routes):
        template = context.path_format or context.path
        for method in sorted(context.methods or {"GET"}):
            scope = _scope(method, _concrete(template))
            expected = _first_full(routes, scope)
            assert expected is not None, (method, template)
            assert _first_full(index.candidates(scope["path"]), scope) is expected, (
                method,
                template,
            )
            match, child_scope = index.matches(dict(scope))
            assert match is Match.FULL and child_scope["tessera.route"] is expected
            checked += 1
    assert checked > 100


def test_a_bucket_keeps_the_apps_order(app: FastAPI):
    routes = _routes(app)
    index = RouteIndex(routes)
    order = {id(route): n for n, route in enumerate(routes)}
    for bucket in index.buckets.values():
        positions = [order[id(route)] for route in bucket]
        assert positions == sorted(positions)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/nothing/here", 404),
        ("GET", "/nowhere", 404),
        ("DELETE", "/v1/users/count", 405),
        ("PUT", "/v1/orders", 405),
    ],
)
async def test_what_matches_no_route_is_answered_by_fastapi(client, method, path, status):
    response = await client.request(method, path)
    assert response.status_code == status


async def test_a_route_added_after_the_app_started_is_found(settings):
    from tessera.main import create_app

    app = create_app(settings)

    @app.get("/v1/late")
    async def late() -> dict[str, bool]:
        return {"late": True}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as client:
        response = await client.get("/v1/late")
    assert response.status_code == 200
    assert response.json() == {"late": True}
    # Not indexed: found by FastAPI's routing behind the index, as the last route.
    added = app.router.routes[-1]
    assert not any(added in bucket for bucket in app.router.routes[0].buckets.values())


@pytest.mark.parametrize(
    "extra", [{"fastapi.telemetry": object()}, {"root_path": "/behind-a-proxy"}]
)
def test_the_index_steps_aside_under_telemetry_and_under_a_root_path(app, extra):
    """FastAPI's routing names the route of a telemetry span and strips a root path: the index
    leaves both to it."""
    index = app.router.routes[0]
    assert index.matches(_scope("GET", "/v1/users/count"))[0] is Match.FULL
    assert index.matches(_scope("GET", "/v1/users/count") | extra) == (Match.NONE, {})


async def test_a_request_under_a_root_path_is_routed_by_fastapi(settings):
    from tessera.main import create_app

    transport = httpx.ASGITransport(create_app(settings), root_path="/behind-a-proxy")
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/behind-a-proxy/v1/version")
    assert response.status_code == 200
