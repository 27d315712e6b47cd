"""Every route is authenticated unless allowlisted (``tessera.api.OPEN_ROUTES``), and every
write refuses a read credential."""

import re
import uuid

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from tessera.api import OPEN_ROUTES
from tessera.auth.dependencies import DoorWriteAccess, ReadAccess, WriteAccess
from tessera.console.web import signed_in
from tessera.db import DatabaseDep
from tessera.web.routes import ProjectRoute, project_router
from tests.factories import door_key


def _depends_on(dependant, target) -> bool:
    return any(d.call is target or _depends_on(d, target) for d in dependant.dependencies)


class TestRouteSecurity:
    def test_only_the_allowlisted_routes_are_open(self, app: FastAPI):
        seen_open = set()
        for route in iter_route_contexts(app.routes):
            methods = getattr(route, "methods", None) or set()
            for method in methods - {"HEAD"}:
                key = (method, route.path)
                # The API's credentials (every ProjectRoute admits a request first), or a
                # console session (the console's own sign-in).
                api_route = isinstance(route.original_route, APIRoute)
                guarded = isinstance(route.original_route, ProjectRoute) or (
                    api_route and _depends_on(route.dependant, signed_in)
                )
                if guarded:
                    assert key not in OPEN_ROUTES, f"{key} is allowlisted but authenticates"
                else:
                    assert key in OPEN_ROUTES, f"{key} answers without a credential"
                    seen_open.add(key)
        assert seen_open == OPEN_ROUTES


# POST routes that only read (lookups with a body).
READ_POSTS = {
    "/v1/users/profile",
    "/v1/users/fetch",
    "/v1/users/activation",
    "/v1/users/balances",
    "/v1/users/items",
    "/v1/users/reputation/history",
}


def _project_routes(app):
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute):
            continue
        if not route.original_route.include_in_schema:  # a 405 of a concrete path (legacy)
            continue
        for method in route.methods:
            if (method, route.path) not in OPEN_ROUTES:
                path = re.sub(r"{[^}]+}", str(uuid.uuid4()), route.path)
                yield method, route.path, path


class TestEveryProjectRoute:
    async def test_needs_a_credential(self, app, client, tenant):
        routes = list(_project_routes(app))
        assert len(routes) == 74
        for method, template, path in routes:
            response = await client.request(method, path, json={})
            assert response.status_code == 401, (method, template)
            assert set(response.json()) == {"message"}

    async def test_read_credential_cannot_write(self, app, client, tenant):
        writes = [r for r in _project_routes(app) if r[0] != "GET" and r[1] not in READ_POSTS]
        assert len(writes) == 40
        for method, template, path in writes:
            # Permission is checked before the body is validated: {} is enough to get a 403.
            response = await client.request(method, path, headers=tenant.r, json={})
            assert response.status_code == 403, (method, template)
            assert response.json() == {
                "message": "this credential is read-only; a write credential is required"
            }

    async def test_a_checkin_key_is_refused_off_the_door(self, app, client, tenant):
        door = await door_key(app, tenant)
        routes = list(_project_routes(app))
        at_the_door = {
            (method, route.path)
            for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, ProjectRoute) and route.original_route.access.door
            for method in route.methods
        }
        assert at_the_door == {
            ("POST", "/v1/checkins"),
            ("POST", "/v1/checkins/annul"),
            ("POST", "/v1/checkins/batch"),
            ("GET", "/v1/checkins/sync"),
            ("GET", "/v1/checkins/events"),
        }
        for method, template, path in routes:
            response = await client.request(method, path, headers=door, json={})
            if (method, template) in at_the_door:
                assert response.status_code in (200, 400), (method, template, response.text)
            else:
                assert response.status_code == 403, (method, template)
                assert response.json()["message"].startswith("this is a check-in key"), template


def test_the_read_only_posts_take_read_access(app):
    reading = {
        route.path
        for route in iter_route_contexts(app.routes)
        if isinstance(route.original_route, ProjectRoute)
        and "POST" in route.methods
        and not route.original_route.access.writes
    }
    assert reading == READ_POSTS


class TestAccessInTheSignature:
    """A project route names who may call it in its endpoint's signature, once."""

    def test_a_route_without_an_access_is_refused_when_made(self):
        router = project_router("/nowhere", tags=["test"])

        async def unguarded(database: DatabaseDep) -> None:
            """Takes no access."""

        with pytest.raises(TypeError, match="unguarded: a project route names who may call it"):
            router.add_api_route("", unguarded, methods=["GET"])

    def test_a_route_with_two_accesses_is_refused_when_made(self):
        router = project_router("/nowhere", tags=["test"])

        async def twice(reader: ReadAccess, writer: WriteAccess) -> None:
            """Takes two."""

        with pytest.raises(TypeError, match=r"\(2 found\)"):
            router.add_api_route("", twice, methods=["POST"])

    def test_the_access_adds_no_parameter_to_the_openapi(self):
        app = FastAPI()
        router = project_router("/door", tags=["test"])

        async def scan(principal: DoorWriteAccess) -> None:
            """Takes the door's access."""

        router.add_api_route("", scan, methods=["POST"], status_code=204)
        app.include_router(router)
        operation = app.openapi()["paths"]["/v1/door"]["post"]
        # The Idempotency-Key header only (ProjectRoute's writes), no principal.
        assert [p["name"] for p in operation["parameters"]] == ["Idempotency-Key"]
        assert router.routes[0].access.door and router.routes[0].access.writes
