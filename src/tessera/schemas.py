"""Schema bases, shared field types, and the rule that unknown input is refused.

Request bodies use strict scalars (``"10"`` is not an integer, ``1`` is not a boolean) so that a
wrong type is a 400 naming the field rather than a silent coercion. Query parameters are text by
nature and use plain ``int``.

A field or query parameter that the endpoint does not know is a 400 naming it (as Stripe does),
not silently dropped: a misspelt ``is_transferrable`` would otherwise create a product that is
not transferable. Every field that Mufi's published OpenAPI documents for an operation is known
to Tessera's schema for it, even where Tessera ignores it (``tests/test_unknown_fields.py``).

Text with a NUL character (``\u0000``) is refused wherever it comes in, as a 400 naming the
field: PostgreSQL cannot store it, and SQLite would store what other tools cut short. Bodies are
checked here, by every request schema (``Input``); paths and queries in ``tessera.web.middleware``.
"""

import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import email_validator
from fastapi import Request, Response, params
from fastapi.routing import APIRoute
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    EmailStr,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from tessera.errors import InvalidInput

# Tessera never sends mail, so an address at a special-use domain (a company's .local, a
# staging app's .test, .arpa) is an address like any other: the schema's "format: email" is
# syntax only, and so is the check (email-validator would refuse these by default).
email_validator.SPECIAL_USE_DOMAIN_NAMES.clear()


def normalize_email(email: str) -> str:
    """Emails compare case-insensitively: they are stored and matched lowercased."""
    return email.strip().lower()


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` includes ``1.0``: an integral float is that integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Integers in request bodies: strict (no "10", no true), but 1.0 is 1, as the schema says.
# (The bounds go before the validator, or the OpenAPI would not show them.)
Integral = BeforeValidator(_integral)
Integer = Annotated[StrictInt, Integral]
# Unix timestamps in seconds (the spec's start_date, registered_at, ...), up to 9999-12-31.
UnixSeconds = Annotated[StrictInt, Field(gt=0, le=253402300799), Integral]
PositiveInt = Annotated[StrictInt, Field(ge=1, le=2**53), Integral]
NonNegativeInt = Annotated[StrictInt, Field(ge=0, le=2**53), Integral]
Bool = StrictBool
Email = Annotated[EmailStr, StringConstraints(max_length=320), AfterValidator(normalize_email)]
# Text is kept as sent: no trimming, so that the bounds in the OpenAPI are exactly the server's.
RefId = Annotated[str, StringConstraints(min_length=1, max_length=255)]


NOT_NULL: dict[str, Any] = {"not": {"type": "null"}}  # a JSON Schema: present means a value


def requires_one_of(*names: str, lists: bool = False) -> Callable[[dict[str, Any]], None]:
    """For ``json_schema_extra``: the model needs one of ``names`` present and not null (a
    non-empty list with ``lists``), which its validator checks. Several such rules add up."""

    def present(name: str) -> dict[str, Any]:
        value = {"minItems": 1} if lists else NOT_NULL
        return {"required": [name], "properties": {name: value}}

    def extra(schema: dict[str, Any]) -> None:
        schema.setdefault("allOf", []).append({"anyOf": [present(name) for name in names]})

    return extra


def schema_rules(*rules: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Several ``json_schema_extra`` rules for one model."""

    def extra(schema: dict[str, Any]) -> None:
        for rule in rules:
            rule(schema)

    return extra


def blank_allowed(schema: dict[str, Any]) -> None:
    """For a field's ``json_schema_extra``: ``""`` is accepted too, meaning no value."""
    schema.setdefault("anyOf", []).append({"const": ""})


NUL_REFUSED = "must not contain the NUL character (\\u0000)"


def refuse_nul(value: Any) -> Any:
    """``value`` unchanged, unless it is text (or a list of texts) holding a NUL character."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(NUL_REFUSED)
    elif isinstance(value, list) and any(isinstance(v, str) and "\x00" in v for v in value):
        raise ValueError(NUL_REFUSED)
    return value


class Input(BaseModel):
    """What every request schema shares: no NUL character in any text field. (Responses are
    built from stored rows, which had to come in through these.)"""

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return refuse_nul(value)


class SnakeModel(BaseModel):
    """Product, event, sales and transfer resources: snake_case, as the spec writes them."""

    model_config = ConfigDict(from_attributes=True, extra="forbid")


class CamelModel(BaseModel):
    """User resources: camelCase on the wire."""

    model_config = ConfigDict(
        from_attributes=True, alias_generator=to_camel, populate_by_name=True, extra="forbid"
    )


class SnakeInput(SnakeModel, Input):
    """A request body in snake_case."""


class CamelInput(CamelModel, Input):
    """A request body in camelCase."""


class Pagination(SnakeModel):
    page: int
    limit: int
    total: int


# The bounds of every paginated list, in a query (``PageParams``) or a body.
MAX_PAGE, MAX_LIMIT, DEFAULT_LIMIT = 1_000_000, 100, 20


class PageParams(SnakeInput):
    """``page`` (from 1) and ``limit`` (1-100, default 20) of the paginated lists."""

    page: int = Field(default=1, ge=1, le=MAX_PAGE)
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit


# id(route) -> (route, its query parameter names); routes are not hashable.
_QUERY_NAMES: dict[int, tuple[APIRoute, frozenset[str]]] = {}


def _query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters a route declares, a query model's fields included: read from the
    signatures of its endpoint and its dependencies, as FastAPI reads them (a ``Query``, or a
    parameter of a plain type that is neither a path parameter nor the request)."""
    cached = _QUERY_NAMES.get(id(route))
    if cached is not None and cached[0] is route:
        return cached[1]
    names: set[str] = set()
    pending = [route.endpoint, *(d.dependency for d in route.dependencies if d.dependency)]
    seen: set[object] = set()
    while pending:
        call = pending.pop()
        if call in seen:
            continue
        seen.add(call)
        function = call.__init__ if inspect.isclass(call) else call
        hints = typing.get_type_hints(function, include_extras=True)
        for name, parameter in inspect.signature(call).parameters.items():
            hint = hints.get(name, Any)
            declared: list[Any] = [parameter.default]
            if typing.get_origin(hint) is Annotated:
                hint, *metadata = typing.get_args(hint)
                declared += metadata
            dependency = next((d for d in declared if isinstance(d, params.Depends)), None)
            info = next((d for d in declared if isinstance(d, FieldInfo)), None)
            if dependency is not None:
                if dependency.dependency is not None:
                    pending.append(dependency.dependency)
            elif isinstance(info, params.Query):
                if isinstance(hint, type) and issubclass(hint, BaseModel):
                    names.update(f.alias or key for key, f in hint.model_fields.items())
                else:
                    names.add(info.alias or name)
            elif info is None and name not in route.param_convertors and _plain(hint):
                names.add(name)
    _QUERY_NAMES[id(route)] = (route, frozenset(names))
    return frozenset(names)


def _plain(hint: Any) -> bool:
    """Whether FastAPI takes an undeclared parameter of this type from the query string: not a
    model (the body), not the request or another object FastAPI gives."""
    if hint in (Request, Response, Any) or (
        isinstance(hint, type) and issubclass(hint, BaseModel | Request | Response)
    ):
        return False
    return all(_plain(arg) for arg in typing.get_args(hint) if arg is not type(None))


async def known_query_only(request: Request) -> None:
    """Refuse query parameters the route does not declare (400 naming each): the dependency of
    the open routes (project routes check it in ``authenticate``)."""
    refuse_unknown_query(request)


def refuse_unknown_query(request: Request) -> None:
    if not request.scope["query_string"]:
        return
    route = request.scope.get("route")
    known = _query_names(route) if isinstance(route, APIRoute) else frozenset()
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise InvalidInput(*(f"{name}: unknown query parameter" for name in unknown))
