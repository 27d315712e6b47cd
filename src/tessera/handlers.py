"""Running a route: ``PlainRoute`` solves a plain route's dependencies in one pass.

FastAPI's request handler is general: on every request it walks the route's tree of
dependencies, and for each one it works out again how to call it (a generator? a coroutine?
which scopes?), builds a cache key, and validates four kinds of parameters it does not have.
A project route has two or three dependencies, each a coroutine of the request (the
credential, the database), and that work was a quarter of the time a read took in process.

A route whose dependencies are all *plain* (coroutine functions that take at most the request
and other plain dependencies) and whose parameters are path, query and JSON body parameters is
handled here with FastAPI's own pieces, in FastAPI's order: the dependencies first, each once
a request; then the path, query and body parameters, validated by FastAPI, their errors
raised together as its ``RequestValidationError``; then the endpoint, its answer rendered once
through the route's response model (``tessera.render``), or, for a model that cannot be
rendered so, validated and encoded by FastAPI's ``serialize_response``. Any other route (a
generator dependency such as a session, a form, a header, cookie or ``Response`` parameter, a
streaming or custom response class), a dependency override, and every request while FastAPI's
OpenTelemetry is on, goes to FastAPI's general handler. tests/test_handlers.py proves that
both handlers answer alike.
"""

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.params import Form
from fastapi.routing import APIRoute, serialize_response
from fastapi.utils import is_body_allowed_for_status_code
from pydantic_core import PydanticUndefined as Undefined

from tessera.render import Renderer
from tessera.routing import TELEMETRY

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


@dataclass(frozen=True, slots=True)
class _Dependency:
    """A plain dependency: ``call(**{name: value of each of ``needs``}, request=request)``."""

    call: Callable[..., Awaitable[Any]]
    needs: tuple[tuple[str, "_Dependency"], ...]
    request_name: str | None

    @classmethod
    def of(cls, dependant: Dependant) -> "_Dependency | None":
        if not (
            dependant.call is not None
            and inspect.iscoroutinefunction(dependant.call)
            and dependant.use_cache
            and not _has_other_inputs(dependant)
            and not dependant.path_params
            and not dependant.query_params
            and not dependant.body_params
        ):
            return None
        needs = _needs(dependant)
        if needs is None:
            return None
        return cls(dependant.call, needs, dependant.request_param_name)

    async def solve(self, request: Request, solved: dict[Any, Any]) -> Any:
        if self.call in solved:
            return solved[self.call]
        values = {name: await need.solve(request, solved) for name, need in self.needs}
        if self.request_name is not None:
            values[self.request_name] = request
        value = solved[self.call] = await self.call(**values)
        return value


def _has_other_inputs(dependant: Dependant) -> bool:
    """Whether ``dependant`` takes what only FastAPI's general handler gives: headers,
    cookies, the ``Response``, background tasks, security scopes, a connection or WebSocket."""
    return bool(
        dependant.header_params
        or dependant.cookie_params
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.own_oauth_scopes
        or dependant.concurrency is not None
    )


def _needs(dependant: Dependant) -> tuple[tuple[str, _Dependency], ...] | None:
    """The plain dependencies of ``dependant`` by parameter name (a router's dependencies
    have none: their value is only computed), or None when one is not plain."""
    needs = []
    for sub in dependant.dependencies:
        plain = _Dependency.of(sub)
        if plain is None:
            return None
        needs.append((sub.name or "", plain))
    return tuple(needs)


class PlainRoute(APIRoute):
    """An ``APIRoute`` whose requests are handled by ``plain_handler`` when the route is
    plain (see the module), by FastAPI's general handler otherwise."""

    def get_route_handler(self) -> Handler:
        general = super().get_route_handler()
        return plain_handler(self, general) or general


def plain_handler(route: APIRoute, general: Handler) -> Handler | None:
    dependant = route.dependant
    call = dependant.call
    needs = _needs(dependant)
    if (
        needs is None
        or call is None
        or not inspect.iscoroutinefunction(call)
        or _has_other_inputs(dependant)
        or route.response_field is None
        or not isinstance(route.response_class, DefaultPlaceholder)
        or route.is_json_stream
        or route.stream_item_field is not None
        or (route.body_field is not None and isinstance(route.body_field.field_info, Form))
    ):
        return None
    body_field, response_field = route.body_field, route.response_field
    status_code = route.status_code
    strict_content_type = route.strict_content_type
    if isinstance(strict_content_type, DefaultPlaceholder):
        strict_content_type = strict_content_type.value
    request_name = dependant.request_param_name
    embed_body = _embedded(dependant)
    overrides = route.dependency_overrides_provider
    renderer = _renderer(route)

    async def handle(request: Request) -> Response:
        if TELEMETRY in request.scope or (overrides and overrides.dependency_overrides):
            return await general(request)
        body = await _json_body(request, strict_content_type) if body_field else Undefined
        solved: dict[Any, Any] = {}
        values = {name: await need.solve(request, solved) for name, need in needs}
        values.pop("", None)  # a router's dependencies
        if request_name is not None:
            values[request_name] = request
        path_values, errors = request_params_to_args(dependant.path_params, request.path_params)
        query_values, query_errors = request_params_to_args(
            dependant.query_params, request.query_params
        )
        values.update(path_values)
        values.update(query_values)
        errors += query_errors
        if dependant.body_params:
            body_values, body_errors = await request_body_to_args(
                body_fields=dependant.body_params,
                received_body=body,
                embed_body_fields=embed_body,
            )
            values.update(body_values)
            errors += body_errors
        if errors:
            raise RequestValidationError(errors, body=None if body is Undefined else body)
        answer = await call(**values)
        if isinstance(answer, Response):
            return answer
        if renderer is not None and not renderer.validated(answer):
            content = renderer.render(answer)
        else:
            content = await serialize_response(
                field=response_field,
                response_content=answer,
                include=route.response_model_include,
                exclude=route.response_model_exclude,
                by_alias=route.response_model_by_alias,
                exclude_unset=route.response_model_exclude_unset,
                exclude_defaults=route.response_model_exclude_defaults,
                exclude_none=route.response_model_exclude_none,
                dump_json=True,
            )
        response = Response(content, status_code=status_code or 200, media_type="application/json")
        if not is_body_allowed_for_status_code(response.status_code):
            response.body = b""
        return response

    return handle


def _embedded(dependant: Dependant) -> bool:
    """Whether the body holds each body parameter under its name (FastAPI's rule for a route
    without forms, which a plain route never has): more than one body parameter, or one
    declared ``Body(embed=True)``."""
    fields = dependant.body_params
    if len({field.name for field in fields}) > 1:
        return True
    return bool(fields) and bool(getattr(fields[0].field_info, "embed", False))


def _renderer(route: APIRoute) -> Renderer | None:
    """The route's response model compiled for rendering, when the route leaves FastAPI's
    options of the answer (include, exclude, aliases) as they are."""
    if (
        route.response_model_include is not None
        or route.response_model_exclude is not None
        or not route.response_model_by_alias
        or route.response_model_exclude_unset
        or route.response_model_exclude_defaults
        or route.response_model_exclude_none
    ):
        return None
    return Renderer.of(route.response_model)


async def _json_body(request: Request, strict_content_type: bool) -> Any:
    """The request's body as FastAPI reads it for a JSON body parameter: parsed when it is
    declared JSON (``application/json`` or ``+json``; or not declared, when the route is not
    strict), its bytes otherwise, and Undefined when it is empty."""
    try:
        raw = await request.body()
        if not raw:
            return Undefined
        declared = request.headers.get("content-type")
        if declared:
            main, _, sub = declared.partition(";")[0].strip().lower().partition("/")
            if main == "application" and (sub == "json" or sub.endswith("+json")):
                return await request.json()
        elif not strict_content_type:
            return await request.json()
        return raw
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error], body=exc.doc) from exc
    except HTTPException:
        raise
    except Exception as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc
