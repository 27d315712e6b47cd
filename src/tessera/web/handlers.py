"""Running a route: ``PlainRoute`` answers a plain route's requests in one pass.

FastAPI's request handler is general: on every request it walks the route's tree of
dependencies and, for each, works out again how to call it (a generator? a coroutine? which
scopes?), builds a cache key, and looks for four kinds of parameters a project route does not
have. A project route takes the request, path parameters, a query model and a JSON body, and
that general work was a quarter of the time a read took in process.

``PlainRoute`` is FastAPI's documented extension point for this, an ``APIRoute`` whose
``get_route_handler`` returns the handler of its requests. For a *plain* route it reads, once,
from the endpoint's signature (what FastAPI reads it from too): the ``Request`` parameter, the
path parameters (``Path``), one query model (``Annotated[Model, Query()]``), one JSON body
(a model, a list or an optional model, or ``Body(...)``) and dependencies that are coroutine
functions of the request alone (``Depends(fn)``, or ``Depends(obj)`` whose ``__call__`` is
one, as ``tessera.auth.dependencies.Access``). Each is validated by a pydantic
``TypeAdapter`` of its annotation, as FastAPI validates it, and the errors are raised together
as FastAPI's ``RequestValidationError``, located as FastAPI locates them (``("path", name)``,
``("query", field)``, ``("body", field)``). The answer is rendered once through the response
model (``tessera.web.render``); an answer that is the response model already is dumped by its
``TypeAdapter``; a ``Response`` is sent as it is (an endpoint declared to return one, without
a response model, answers with it alone).

Any other route (a generator dependency such as a session, a header, cookie, form or file, a
declared response class, router dependencies, a response model the renderer cannot render),
every request while a dependency override is set, and every request while FastAPI's
OpenTelemetry is on (it names spans by FastAPI's own handling) goes to FastAPI's general
handler. tests/test_handlers.py proves that both handlers answer alike, byte for byte.
"""

import copy
import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.params import Body, Depends, File, Form, Path, Query
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from tessera.web.render import Renderer
from tessera.web.routing import TELEMETRY

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
Errors = list[dict[str, Any]]

_MISSING = object()
_NO_BODY = frozenset({204, 205, 304})


class NotPlain(Exception):
    """The route takes something only FastAPI's general handler gives."""


@dataclass(frozen=True, slots=True)
class _Input:
    """A parameter of the endpoint, validated as FastAPI validates it."""

    name: str
    alias: str
    adapter: TypeAdapter[Any]
    required: bool
    default: Any

    @classmethod
    def of(cls, name: str, validated: Any, info: FieldInfo) -> "_Input":
        """``validated``: the type with its declaration (``Annotated[T, ..., Query()]``)."""
        adapter: TypeAdapter[Any] = TypeAdapter(validated)
        return cls(name, info.alias or name, adapter, info.is_required(), info.default)

    def validate(self, value: Any, loc: tuple[str | int, ...], errors: Errors) -> Any:
        if value is _MISSING:
            if self.required:
                errors.append(
                    {"type": "missing", "loc": loc, "msg": "Field required", "input": None}
                )
                return None
            return copy.deepcopy(self.default)
        try:
            return self.adapter.validate_python(value, from_attributes=True)
        except ValidationError as exc:
            errors.extend(
                {**error, "loc": (*loc, *error["loc"])} for error in exc.errors(include_url=False)
            )
            return None


@dataclass(frozen=True, slots=True)
class _QueryModel:
    """A query model (``Annotated[Model, Query()]``): its fields read from the query string
    by their aliases (a list field from every occurrence), the rest given to the model too,
    which refuses or ignores them as it is configured."""

    input: _Input
    fields: tuple[tuple[str, bool], ...]  # (the name it is sent as, a list of values?)
    aliases: frozenset[str]

    @classmethod
    def of(
        cls, name: str, model: type[BaseModel], info: FieldInfo, validated: Any
    ) -> "_QueryModel":
        fields = []
        for key, field in model.model_fields.items():
            alias = field.validation_alias or field.alias or key
            if not isinstance(alias, str):
                raise NotPlain(f"{name}.{key}: alias choices")
            fields.append((alias, _is_sequence(field.annotation)))
        aliases = frozenset(alias for alias, _ in fields)
        return cls(_Input.of(name, validated, info), tuple(fields), aliases)

    def validate(self, query: Any, errors: Errors) -> Any:
        values: dict[str, Any] = {}
        for alias, many in self.fields:
            if many:
                if found := query.getlist(alias):
                    values[alias] = found
            elif (value := query.get(alias)) is not None:
                values[alias] = value
        extras: dict[str, list[str]] = {}
        for key, value in query.multi_items():
            if key not in self.aliases:
                extras.setdefault(key, []).append(value)
        values.update({k: v[0] if len(v) == 1 else v for k, v in extras.items()})
        return self.input.validate(values, ("query",), errors)


def _missing(loc: tuple[str | int, ...]) -> dict[str, Any]:
    return {"type": "missing", "loc": loc, "msg": "Field required", "input": None}


def _is_sequence(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    return any(_is_sequence(arg) for arg in typing.get_args(annotation) if arg is not type(None))


@dataclass(frozen=True, slots=True)
class _Dependency:
    """``Depends(call)`` where ``call`` is a coroutine function of the request alone: called
    once a request."""

    name: str
    call: Callable[..., Awaitable[Any]]
    request_name: str | None


@dataclass(frozen=True, slots=True)
class Signature:
    """What a plain endpoint takes, read once from its signature."""

    request_name: str | None
    dependencies: tuple[_Dependency, ...]
    path: tuple[_Input, ...]
    query: _QueryModel | None
    body: _Input | None

    @classmethod
    def of(cls, route: APIRoute) -> "Signature":
        endpoint = route.endpoint
        if not inspect.iscoroutinefunction(endpoint):
            raise NotPlain("not a coroutine function")
        hints = typing.get_type_hints(endpoint, include_extras=True)
        request_name = None
        dependencies: list[_Dependency] = []
        path: list[_Input] = []
        query: _QueryModel | None = None
        body: _Input | None = None
        path_names = set(route.param_convertors)
        for name, parameter in inspect.signature(endpoint).parameters.items():
            annotation, info, validated = _split(hints.get(name, Any), parameter.default)
            if info is None and parameter.default is not inspect.Parameter.empty:
                if not _is_body(annotation):
                    raise NotPlain(f"{name}: a parameter with a plain default")
                info = Body(default=parameter.default)
                validated = Annotated[validated, info]
            if annotation is Request and info is None:
                request_name = name
            elif type(info) is Depends:  # not Security: its scopes are FastAPI's to check
                dependencies.append(_dependency(name, info))
            elif name in path_names or isinstance(info, Path):
                if info is not None and not isinstance(info, Path):
                    raise NotPlain(f"{name}: a path parameter declared otherwise")
                path.append(_Input.of(name, validated, info or Path()))
            elif isinstance(info, Query):
                model = annotation
                if query or not (isinstance(model, type) and issubclass(model, BaseModel)):
                    raise NotPlain(f"{name}: a query parameter that is not one model")
                query = _QueryModel.of(name, model, info, validated)
            elif isinstance(info, Form | File) or (info is not None and not isinstance(info, Body)):
                raise NotPlain(f"{name}: {type(info).__name__}")
            elif body is None and (info is not None or _is_body(annotation)):
                if info is not None and getattr(info, "embed", False):
                    raise NotPlain(f"{name}: an embedded body")
                body = _Input.of(name, validated, info or Body())
            else:
                raise NotPlain(f"{name}: {annotation!r}")
        return cls(request_name, tuple(dependencies), tuple(path), query, body)

    async def arguments(self, request: Request, body: Any) -> dict[str, Any]:
        """The endpoint's arguments, its dependencies called first; the validation errors of
        the path, the query and the body raised together."""
        values: dict[str, Any] = {}
        for dependency in self.dependencies:
            arguments = (
                {} if dependency.request_name is None else {dependency.request_name: request}
            )
            values[dependency.name] = await dependency.call(**arguments)
        if self.request_name is not None:
            values[self.request_name] = request
        errors: Errors = []
        path_params: Mapping[str, Any] = request.path_params
        for parameter in self.path:
            value = path_params.get(parameter.alias, _MISSING)
            values[parameter.name] = parameter.validate(value, ("path", parameter.alias), errors)
        if self.query is not None:
            values[self.query.input.name] = self.query.validate(request.query_params, errors)
        if self.body is not None:
            values[self.body.name] = self.body.validate(body, ("body",), errors)
        if errors:
            raise RequestValidationError(errors, body=None if body is _MISSING else body)
        return values


def _split(hint: Any, default: Any) -> tuple[Any, FieldInfo | Depends | None, Any]:
    """A parameter's type, its FastAPI declaration (``Annotated[T, Query()]`` or
    ``= Body(...)``) if any, and what it is validated as: the whole ``Annotated`` type, its
    other metadata (validators, constraints) included, as FastAPI merges them."""
    info = default if isinstance(default, FieldInfo | Depends) else None
    if typing.get_origin(hint) is Annotated:
        annotation, *metadata = typing.get_args(hint)
        declared = [m for m in metadata if isinstance(m, FieldInfo | Depends)]
        if len(declared) > 1 or (declared and info is not None):
            raise NotPlain("a parameter declared twice")
        if declared:
            return annotation, declared[0], hint
        return annotation, info, hint if info is None else Annotated[hint, info]
    return hint, info, hint if info is None else Annotated[hint, info]


def _dependency(name: str, depends: Depends) -> _Dependency:
    """``Depends(call)``: ``call`` a coroutine function, or an object whose ``__call__`` is one
    (FastAPI's parameterized dependencies, such as ``tessera.auth.dependencies.Access``)."""
    call = depends.dependency
    if call is None:
        raise NotPlain(f"{name}: a dependency without a callable")
    function = call if inspect.isroutine(call) else type(call).__call__
    if not inspect.iscoroutinefunction(function) or not depends.use_cache:
        raise NotPlain(f"{name}: not a cached coroutine dependency")
    hints = typing.get_type_hints(function)
    parameters = inspect.signature(call).parameters  # an object's: without ``self``
    request_name = None
    for parameter_name in parameters:
        if hints.get(parameter_name) is not Request:
            raise NotPlain(f"{name}: a dependency that takes more than the request")
        request_name = parameter_name
    return _Dependency(name, call, request_name)


def _is_body(annotation: Any) -> bool:
    """Whether FastAPI takes a parameter of this type from the body: a model, or a list or an
    optional of one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_is_body(arg) for arg in typing.get_args(annotation))


class PlainRoute(APIRoute):
    """An ``APIRoute`` whose requests are handled by ``plain_handler`` when the route is
    plain (see the module), by FastAPI's general handler otherwise."""

    def get_route_handler(self) -> Handler:
        general = super().get_route_handler()
        return plain_handler(self, general) or general


def plain_handler(route: APIRoute, general: Handler) -> Handler | None:
    answers_itself = route.response_model is None and _returns_a_response(route)
    if (
        route.dependencies
        or (route.response_model is None and not answers_itself)
        or isinstance(route.response_class, type)  # declared: FastAPI's default is not a class
    ):
        return None
    try:
        signature = Signature.of(route)
    except NotPlain:
        return None
    strict_content_type = route.strict_content_type is not False
    overrides = route.dependency_overrides_provider
    reads_body = signature.body is not None

    async def arguments(request: Request) -> dict[str, Any]:
        body = await _json_body(request, strict_content_type) if reads_body else _MISSING
        return await signature.arguments(request, body)

    if answers_itself:

        async def respond(request: Request) -> Response:
            if TELEMETRY in request.scope or (overrides and overrides.dependency_overrides):
                return await general(request)
            answer: Response = await route.endpoint(**await arguments(request))
            return answer

        return respond

    renderer = Renderer.of(route.response_model) if _renders_as_is(route) else None
    if renderer is None:
        return None
    model: TypeAdapter[Any] = TypeAdapter(route.response_model)
    status_code = route.status_code or 200

    async def handle(request: Request) -> Response:
        if TELEMETRY in request.scope or (overrides and overrides.dependency_overrides):
            return await general(request)
        answer = await route.endpoint(**await arguments(request))
        if isinstance(answer, Response):
            return answer
        if renderer.validated(answer):
            content = model.dump_json(answer, by_alias=True)
        else:
            content = renderer.render(answer)
        if status_code < 200 or status_code in _NO_BODY:
            content = b""
        return Response(content, status_code=status_code, media_type="application/json")

    return handle


def _returns_a_response(route: APIRoute) -> bool:
    """Whether the endpoint is declared to answer with a ``Response`` of its own (a 204)."""
    returns = typing.get_type_hints(route.endpoint).get("return")
    return isinstance(returns, type) and issubclass(returns, Response)


def _renders_as_is(route: APIRoute) -> bool:
    """Whether the route leaves FastAPI's options of the answer (include, exclude, aliases)
    as they are: the renderer writes what the response model writes by default."""
    return (
        route.response_model_include is None
        and route.response_model_exclude is None
        and route.response_model_by_alias
        and not route.response_model_exclude_unset
        and not route.response_model_exclude_defaults
        and not route.response_model_exclude_none
    )


async def _json_body(request: Request, strict_content_type: bool) -> Any:
    """The request's body as FastAPI reads it for a JSON body parameter: parsed when it is
    declared JSON (``application/json`` or ``+json``; or not declared, when the route is not
    strict), its bytes otherwise, and missing when it is empty."""
    try:
        raw = await request.body()
        if not raw:
            return _MISSING
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
