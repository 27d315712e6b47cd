"""Answers rendered once: the JSON that a route's response model makes of the endpoint's answer,
without validating the answer first.

FastAPI answers a route by validating what the endpoint returned against the response model (from
its attributes), then encoding the validated model. A read's rows come from columns that already
hold what the schema describes, so that is the same work twice, the validation costing more than
the encoding (bench/README.md). ``Renderer.of(ProductList)`` compiles a
response type once into a function from the answer (rows, namespaces, models) to the bytes
FastAPI would send: each model's fields in order under their aliases, excluded fields left out
(and those whose ``exclude_if`` holds for their value), computed fields last, values encoded by
orjson, which writes UUIDs, datetimes (``Z`` for UTC), floats and enums as pydantic does.

Only what it can answer alike is compiled: models without validators or serializers of their
own, fields of the types below, and the route options FastAPI's defaults. Anything else gets
None, and the route keeps FastAPI's way (``tessera.web.handlers``). tests/test_render.py compares
both ways for every response model of the app that compiles; tests/test_handlers.py compares the
two handlers' answers byte for byte.
"""

import enum
import types
import typing
import uuid
from collections.abc import Callable
from datetime import date, datetime
from operator import attrgetter
from typing import Any

import annotated_types
import orjson
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic.types import Strict, StringConstraints

Convert = Callable[[Any], Any]

# Values orjson writes as pydantic does, passed as they are.
_AS_IS: tuple[type, ...] = (str, int, bool, uuid.UUID, datetime, date, types.NoneType)
# Metadata that only constrains validation (bounds, lengths, strictness): the output is the same.
_CONSTRAINTS: tuple[type, ...] = (
    annotated_types.BaseMetadata,
    annotated_types.GroupedMetadata,
    Strict,
    StringConstraints,
)
# Model settings that change neither what is validated from attributes nor how it is written.
_NEUTRAL_CONFIG = frozenset(
    {
        "from_attributes",
        "alias_generator",
        "populate_by_name",
        "extra",
        "json_schema_extra",
        "title",
    }
)


class Unsupported(Exception):
    """The type holds something the renderer cannot write as pydantic would."""


class Renderer:
    """A response type compiled (see the module): ``render(answer)`` is the body FastAPI's
    ``serialize_response`` would give for it."""

    def __init__(self, convert: Convert | None, model: type[BaseModel] | None) -> None:
        self._convert = convert
        self._model = model

    @classmethod
    def of(cls, annotation: Any) -> "Renderer | None":
        try:
            convert = _converter(annotation)
        except Unsupported:
            return None
        if typing.get_origin(annotation) is list:
            (annotation,) = typing.get_args(annotation)
        model = annotation if isinstance(annotation, type) else None
        return cls(convert, model if model and issubclass(model, BaseModel) else None)

    def validated(self, answer: Any) -> bool:
        """Whether ``answer`` is the response model already (or a list of it), which pydantic
        encodes faster itself than it could be rendered."""
        if isinstance(answer, list):
            answer = answer[0] if answer else None
        return self._model is not None and type(answer) is self._model

    def render(self, answer: Any) -> bytes:
        value = answer if self._convert is None else self._convert(answer)
        return orjson.dumps(value, default=_default, option=orjson.OPT_UTC_Z)


def _default(value: Any) -> Any:
    """What orjson does not know itself: UUIDs of the driver's own class (asyncpg)."""
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot render {type(value).__name__}")


def _converter(annotation: Any) -> Convert | None:
    """How a value of ``annotation`` becomes what orjson writes as pydantic would: None when it
    is written as it is."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *metadata = typing.get_args(annotation)
        _only_constraints(metadata)
        return _converter(inner)
    if origin in (typing.Union, types.UnionType):
        others = [a for a in typing.get_args(annotation) if a is not types.NoneType]
        if len(others) != 1:
            raise Unsupported(annotation)  # pydantic picks among the members of a union
        member = _converter(others[0])
        return None if member is None else _optional(member)
    if origin is list:
        (item,) = typing.get_args(annotation)
        each = _converter(item)
        return None if each is None else _each(each)
    if origin is dict:
        key, value = typing.get_args(annotation)
        if key is not str:
            raise Unsupported(annotation)  # pydantic writes other keys as strings
        each = _converter(value)
        return None if each is None else _values(each)
    if origin is typing.Literal:
        return None
    if origin is not None:
        raise Unsupported(annotation)  # tuple, set, ...: not needed so far
    if annotation is float:
        return float  # an integer or a Decimal is written as pydantic's float: 25 -> 25.0
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return _model_converter(annotation)
        if issubclass(annotation, enum.Enum) or annotation in _AS_IS:
            return None
    raise Unsupported(annotation)


def _optional(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _each(convert: Convert) -> Convert:
    return lambda values: [convert(value) for value in values]


def _values(convert: Convert) -> Convert:
    return lambda mapping: {key: convert(value) for key, value in mapping.items()}


def _only_constraints(metadata: list[Any]) -> None:
    for item in metadata:
        if not isinstance(item, _CONSTRAINTS):
            raise Unsupported(item)


def _model_converter(model: type[BaseModel]) -> Convert:
    """A model as the dict pydantic writes for it, from anything with its fields as attributes
    (see ``_attribute``), or the model itself; a dict is validated first, as pydantic reads
    dicts by alias."""
    decorators = model.__pydantic_decorators__
    if (
        decorators.validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.field_serializers
        or decorators.model_serializers
        or decorators.model_validators
        or model.__pydantic_root_model__
        or set(model.model_config) - _NEUTRAL_CONFIG
    ):
        raise Unsupported(model)
    by_name = bool(model.model_config.get("populate_by_name"))
    fields = [(name, info) for name, info in model.model_fields.items() if not info.exclude]
    names = [_attribute(name, info, by_name=by_name) for name, info in fields]
    keys = [_key(name, info) for name, info in fields]
    converted = [
        (key, change)
        for (_, info), key in zip(fields, keys, strict=True)
        if (change := _field_converter(info)) is not None
    ]
    # Fields left out of the answer when their value says so (``Field(exclude_if=...)``).
    excluded = [
        (key, info.exclude_if)
        for (_, info), key in zip(fields, keys, strict=True)
        if info.exclude_if is not None
    ]
    computed: list[tuple[str, Convert, Convert | None]] = []
    for name, decorator in decorators.computed_fields.items():
        info = decorator.info
        get = info.wrapped_property.fget
        if get is None or info.exclude_if is not None:
            raise Unsupported(model)
        computed.append((info.alias or name, get, _converter(info.return_type)))
    field_names = [name for name, _ in fields]
    by_attribute = _getter(names)
    # A model of this class is validated already: its values sit under the fields' names.
    by_field = _getter(field_names)
    aliased = names != field_names
    defaults = {
        attribute: info
        for attribute, (_, info) in zip(names, fields, strict=True)
        if not info.is_required()
    }

    def read(source: Any) -> tuple[Any, tuple[Any, ...]]:
        """The source and its values, the slow way: a dict validated first, a model of this
        class by its fields' names, a row with a field left to its default."""
        if isinstance(source, dict):
            source = model.model_validate(source)
        if isinstance(source, model):
            return source, by_field(source)
        return source, tuple(_value(source, name, defaults.get(name)) for name in names)

    def convert(source: Any) -> dict[str, Any]:
        # (A dict's methods would pass for fields named "items" or "values".)
        if isinstance(source, dict) or (aliased and isinstance(source, model)):
            source, values = read(source)
        else:
            try:
                values = by_attribute(source)
            except AttributeError:
                source, values = read(source)
        out = dict(zip(keys, values, strict=True))
        for key, exclude in excluded:
            if exclude(out[key]):
                del out[key]
        for key, change in converted:
            value = out.get(key)
            if value is not None:
                out[key] = change(value)
        for key, get, result in computed:
            value = get(source)
            out[key] = value if result is None or value is None else result(value)
        return out

    return convert


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The attributes ``names`` of an object, as a tuple (``attrgetter`` in C)."""
    if len(names) > 1:
        return attrgetter(*names)
    return lambda source: tuple(getattr(source, name) for name in names)


def _attribute(name: str, info: FieldInfo, *, by_name: bool) -> str:
    """The attribute a field is read from: its validation alias, unless that only came from
    the model's alias generator and the model is read by name too. (pydantic would try the
    alias first even then; rows never have the camelCase spellings of the generator, only their
    columns' names.)"""
    alias = info.validation_alias
    if alias is None or (by_name and info.alias_priority == 1):
        return name
    if not isinstance(alias, str):
        raise Unsupported(info)  # AliasPath, AliasChoices
    return alias


def _key(name: str, info: FieldInfo) -> str:
    return info.serialization_alias or info.alias or name


def _field_converter(info: FieldInfo) -> Convert | None:
    _only_constraints(info.metadata)
    return _converter(info.annotation)


def _value(source: Any, name: str, default: FieldInfo | None) -> Any:
    if default is None:
        return getattr(source, name)  # required: missing is an error, as in pydantic
    return getattr(source, name, default.get_default(call_default_factory=True))
