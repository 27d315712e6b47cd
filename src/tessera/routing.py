"""Routing by index: the app's routes tried in their order, but only those that can match.

FastAPI tries every route of the app in order until one matches the whole request, and each
try is a regular expression and a few calls: among Tessera's 105 routes, a request for a route
near the end spent more time being routed than being answered. ``RouteIndex`` keeps the rule
(the first route in order that matches the path and the method wins) and narrows the routes it
is tried on by the path's first two segments: a route whose template starts with other literal
segments cannot match the path. The routes that remain are tried in the app's order, exactly as
FastAPI would try them.

Whatever the narrowed routes do not fully match (a 404, a 405, a redirect to the slashed path,
a WebSocket, the lifespan) goes to FastAPI's own routing over every route, so those answers do
not change either. It is installed as the router's middleware stack (Starlette's hook for
what runs in front of a router's own dispatch), inside FastAPI's exception handling.
"""

from collections.abc import Sequence

from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute, Match, Router
from starlette.types import Receive, Scope, Send

Prefix = tuple[str, ...]

TELEMETRY = "fastapi.telemetry"  # the scope key FastAPI sets while its OpenTelemetry is on

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


class RouteIndex:
    """The router's routes by the literal prefixes of their templates (see the module)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.buckets = self._buckets(router.routes)
        self._indexed = len(router.routes)

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

    def candidates(self, path: str) -> list[BaseRoute] | None:
        """The routes that can match ``path``, in order; None when no bucket covers it."""
        key = path_key(path)
        for length in range(len(key), -1, -1):
            bucket = self.buckets.get(key[:length])
            if bucket is not None:
                return bucket
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Under FastAPI's OpenTelemetry (TESSERA_OPENTELEMETRY) its routing names each span's
        # route, so it routes; so it does under a root path, which it strips before matching.
        if scope["type"] == "http" and not scope.get("root_path") and TELEMETRY not in scope:
            if len(self.router.routes) != self._indexed:  # routes added since
                self.buckets = self._buckets(self.router.routes)
                self._indexed = len(self.router.routes)
            for route in self.candidates(scope["path"]) or ():
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope.setdefault("router", self.router)
                    scope.update(child_scope)
                    await route.handle(scope, receive, send)
                    return
        await self.router.app(scope, receive, send)


def install(router: Router) -> None:
    router.middleware_stack = RouteIndex(router)
