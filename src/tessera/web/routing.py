"""Routing by groups: the app's routes tried in their order, but only those that can match.

FastAPI tries every route of the app in order until one matches the whole request, and each
try is a regular expression and a few calls: among Tessera's hundred routes, a request for a
route near the end spent more time being routed than being answered. ``index`` puts a
``RouteIndex`` (a Starlette ``BaseRoute``) at the head of the router's routes: it files the
routes by the literal prefixes of their templates (at most their first two segments) and, for
a path, tries in the app's order only the routes that can match it: those whose templates
start with the path's first segments, with a part of them, or with a parameter. So the first
route in the app's order that matches the path and the method still wins, exactly as in
FastAPI's routing, which goes on over the routes behind the index when it matches nothing.

The index holds the same route objects as the app's list, which keeps every route where it
was: the OpenAPI, ``url_path_for`` and whatever walks ``app.routes`` see the routes, and what the
index does not match fully (a 404, a 405, a redirect to the slashed path, a route added later)
goes on through the list as before. Under a root path (which FastAPI's routing strips before
matching) and under FastAPI's OpenTelemetry (whose spans name the route its routing picked) the
index steps aside.
"""

from collections.abc import Sequence
from typing import Any

from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute, Match, NoMatchFound, Router
from starlette.types import Receive, Scope, Send

Prefix = tuple[str, ...]

TELEMETRY = "fastapi.telemetry"  # the scope key FastAPI sets while its OpenTelemetry is on
CHOSEN = "tessera.route"  # the scope key of the route the index matched, for its ``handle``

PREFIX_SEGMENTS = 2


def prefix(template: str) -> Prefix:
    """The literal leading segments of a path template, at most ``PREFIX_SEGMENTS``: the
    paths the template can match all start with them."""
    literal = []
    for segment in template.split("/")[1 : PREFIX_SEGMENTS + 1]:
        if "{" in segment:
            break
        literal.append(segment)
    return tuple(literal)


def path_key(path: str) -> Prefix:
    return tuple(path.split("/", PREFIX_SEGMENTS + 1)[1 : PREFIX_SEGMENTS + 1])


class RouteIndex(BaseRoute):
    """The router's routes by the literal prefixes of their templates (see the module): a
    route at the head of the router's routes that matches what one of them matches."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self.buckets = self._buckets(routes)

    @staticmethod
    def _buckets(routes: Sequence[BaseRoute]) -> dict[Prefix, list[BaseRoute]]:
        prefixes: list[set[Prefix]] = []
        for route in routes:
            templates = [c.path_format or c.path for c in iter_route_contexts([route])]
            # A route whose templates are not known can match anything: the empty prefix.
            known = [prefix(t) for t in templates if t] if all(templates) else []
            prefixes.append(set(known) or {()})
        keys = set().union(*prefixes)
        return {
            key: [
                route
                for route, route_prefixes in zip(routes, prefixes, strict=True)
                if any(key[: len(p)] == p for p in route_prefixes)
            ]
            for key in keys
        }

    def candidates(self, path: str) -> list[BaseRoute]:
        """The routes that can match ``path``, in order (none: the router tries its own)."""
        key = path_key(path)
        for length in range(len(key), -1, -1):
            bucket = self.buckets.get(key[:length])
            if bucket is not None:
                return bucket
        return []

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope.get("root_path") or TELEMETRY in scope:
            return Match.NONE, {}
        partial: Scope | None = None
        for route in self.candidates(scope["path"]):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                child_scope[CHOSEN] = route
                return match, child_scope
            if match is Match.PARTIAL and partial is None:
                partial = {**child_scope, CHOSEN: route}
        if partial is not None:
            return Match.PARTIAL, partial
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await scope[CHOSEN].handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)  # the router's own routes answer it


def index(router: Router) -> None:
    """Put the index of the router's routes at their head, once they are all added."""
    routes = [route for route in router.routes if not isinstance(route, RouteIndex)]
    router.routes[:] = [RouteIndex(routes), *routes]
