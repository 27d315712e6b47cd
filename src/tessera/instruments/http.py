"""Requests by route template, method and status, and their latency.

The route label is the matched route's template (``/v1/products/{id}``), never the raw path:
the series stay few, and no identifier or claim token reaches them. A request answered before
routing (an unknown path, a replayed idempotent write, a refused body) counts as
``unmatched``. The cost on the request path is a dict lookup, one counter increment and one
histogram observation: the series of each (route, method, status) are found once.
"""

from collections.abc import Sequence
from typing import Any

from fastapi.routing import iter_route_contexts
from prometheus_client import Counter, Histogram, disable_created_metrics
from starlette.routing import BaseRoute
from starlette.types import Scope

UNMATCHED = "unmatched"

# No `_created` series beside each counter and histogram: several processes never show them,
# so one process shows the same families as several.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Not registered anywhere: a scrape collects them (tessera.instruments.process), from this process
# or, with several, from the files every process writes.
REQUESTS = Counter(
    "tessera_http_requests",
    "HTTP requests answered, by route template, method and status (0: no answer was sent).",
    ["route", "method", "status"],
    registry=None,
)
LATENCY = Histogram(
    "tessera_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer, by route template and method.",
    ["route", "method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=None,
)


class RequestMetrics:
    """One app's request series, keyed by what routing left in the scope: the route object
    (FastAPI routes) or the endpoint (other routes, mounts, ``api.ConstantAnswers``)."""

    def __init__(self) -> None:
        self._series: dict[tuple[int, str, int], tuple[str, Any, Any]] = {}
        self._templates: dict[int, str] = {}

    def observe(self, scope: Scope, status: int, seconds: float) -> str:
        """Count the request and its duration; its route template."""
        matched = scope.get("route") or scope.get("endpoint")
        key = (id(matched), scope["method"], status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._new_series(scope, matched, status)
        template, count, latency = series
        count.inc()
        latency.observe(seconds)
        return template

    def _new_series(self, scope: Scope, matched: object, status: int) -> tuple[str, Any, Any]:
        template = self._template(scope, matched)
        method = scope["method"]
        return (
            template,
            REQUESTS.labels(template, method, str(status)),
            LATENCY.labels(template, method),
        )

    def _template(self, scope: Scope, matched: object) -> str:
        if matched is None:
            return UNMATCHED
        if id(matched) not in self._templates:  # routes added since: index them again
            self._templates = templates(scope["app"].routes)
        return self._templates.get(id(matched), UNMATCHED)


def templates(routes: Sequence[BaseRoute]) -> dict[int, str]:
    """The full path template of each route of an app (with the prefixes of the routers that
    include it), by the id of the route object and by the id of its endpoint; an endpoint
    that serves several templates is left out (its routes are found by the route object)."""
    by_route: dict[int, str] = {}
    by_endpoint: dict[int, str | None] = {}
    for context in iter_route_contexts(routes):
        template = context.path_format or context.path
        if template is None:
            continue
        by_route.setdefault(id(context.original_route), template)
        # A mount hands the request to its app, which routing leaves as the "endpoint".
        endpoint = context.endpoint or getattr(context.original_route, "app", None)
        if endpoint is not None:
            known = by_endpoint.setdefault(id(endpoint), template)
            if known != template:
                by_endpoint[id(endpoint)] = None
    return {k: v for k, v in by_endpoint.items() if v is not None} | by_route
