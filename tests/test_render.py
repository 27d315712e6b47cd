"""Answers rendered once (tessera.web.render) are the bytes FastAPI's own way gives: validating the
answer against the response model from its attributes, then encoding the model by alias.

Every response model of the app that the renderer compiles is tried on rows generated from the
model's fields: values of each field's type in the forms rows carry them (a UUID of asyncpg's
class, a Decimal or an integer for a float, an enum member or its text, timestamps with and
without microseconds), nested rows, extra columns, and a dict instead of a row."""

import enum
import types
import typing
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import asyncpg.pgproto.pgproto as pgproto
import pytest
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, computed_field, field_validator

from tessera.main import create_app
from tessera.web.render import Renderer

INT = st.integers(min_value=-(2**53), max_value=2**53)


def _fastapi_way(annotation: Any, answer: Any) -> bytes:
    """What FastAPI's ``serialize_response`` makes of ``answer`` (its ModelField's calls)."""
    adapter = TypeAdapter(annotation)
    return adapter.dump_json(adapter.validate_python(answer, from_attributes=True), by_alias=True)


def values(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of ``annotation`` in the forms the database's rows give them."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return values(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(values(member) for member in typing.get_args(annotation)))
    if origin is list:
        return st.lists(values(typing.get_args(annotation)[0]), max_size=3)
    if origin is dict:
        key, value = typing.get_args(annotation)
        return st.dictionaries(values(key), values(value), max_size=3)
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(annotation))
    if annotation is types.NoneType:
        return st.none()
    if issubclass(annotation, BaseModel):
        return rows_of(annotation)
    if issubclass(annotation, enum.Enum):
        members = list(annotation)
        return st.sampled_from(members) | st.sampled_from([m.value for m in members])
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return INT
    if annotation is float:
        return st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            INT,
            st.decimals(allow_nan=False, allow_infinity=False, places=2, max_value=10**12),
        )
    if annotation is str:
        return st.text(max_size=20)
    if annotation is uuid.UUID:
        return st.uuids() | st.uuids().map(lambda u: pgproto.UUID(str(u)))
    if annotation is datetime:
        moments = st.datetimes(
            min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
        )
        return moments | moments.map(lambda moment: moment.replace(microsecond=0))
    if annotation is date:
        return st.dates()
    raise AssertionError(f"no values for {annotation!r}: teach this test")


def rows_of(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Rows that ``model`` reads: each field (excluded ones too: computed fields use them) as an
    attribute named as the column it would be read from (its validation alias if any), plus a
    column the model does not have; sometimes a dict instead."""
    generated = bool(model.model_config.get("alias_generator"))
    fields = {
        name if generated and info.alias_priority == 1 else info.validation_alias or name: values(
            info.annotation
        )
        for name, info in model.model_fields.items()
    }
    row = st.builds(lambda **kw: SimpleNamespace(**kw, not_in_the_model=1), **fields)
    mapping = st.fixed_dictionaries(fields)
    return row | mapping if fields else row


def rendered_routes() -> list[APIRoute]:
    app = create_app()
    return [
        route
        for route in app.routes
        if isinstance(route, APIRoute)
        and route.response_model is not None
        and Renderer.of(route.response_model) is not None
    ]


ROUTES = rendered_routes()


def test_the_hot_reads_are_rendered():
    rendered = {(method, route.path) for route in ROUTES for method in route.methods}
    assert {
        ("POST", "/v1/users/profile"),
        ("POST", "/v1/users/fetch"),
        ("GET", "/v1/events/{IdOrReferenceId}"),
        ("GET", "/v1/products"),
        ("GET", "/v1/products/{id}"),
        ("GET", "/v1/products/{id}/sales"),
        ("GET", "/v1/orders/{id}"),
    } <= rendered


@pytest.mark.parametrize(
    "annotation",
    sorted({route.response_model for route in ROUTES}, key=repr),
    ids=repr,
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_rendered_answer_is_fastapis(annotation, data):
    renderer = Renderer.of(annotation)
    answer = data.draw(values(annotation))
    assert renderer.render(answer) == _fastapi_way(annotation, answer)


def test_a_model_answer_is_left_to_pydantic():
    """A model the endpoint built is encoded by pydantic, faster on its own instances."""

    class Thing(BaseModel):
        name: str

    renderer = Renderer.of(list[Thing])
    assert renderer.validated([Thing(name="a")])
    assert not renderer.validated([SimpleNamespace(name="a")])
    assert not renderer.validated([])
    assert renderer.render([SimpleNamespace(name="a")]) == b'[{"name":"a"}]'


class _Base(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class _Validated(_Base):
    name: str

    @field_validator("name")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class _Serialized(_Base):
    when: timedelta


class _Union(_Base):
    value: int | str


class _Mapping(_Base):
    values: dict[int, str]  # pydantic writes the keys as strings


class _Strict(_Base):
    model_config = ConfigDict(from_attributes=True, ser_json_timedelta="float")
    name: str


class _Exact(_Base):
    amount: Decimal


@pytest.mark.parametrize(
    "annotation", [_Validated, _Serialized, _Union, _Mapping, _Strict, _Exact, list[_Validated]]
)
def test_what_it_cannot_render_alike_is_left_to_fastapi(annotation):
    assert Renderer.of(annotation) is None


class _Priced(_Base):
    model_config = ConfigDict(
        from_attributes=True, alias_generator=lambda n: n.upper(), populate_by_name=True
    )
    price: float
    hidden: int = Field(exclude=True)
    note: str | None = None
    tags: list[str] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def doubled(self) -> float:
        return self.price * 2


def test_aliases_exclusions_defaults_and_computed_fields():
    row = SimpleNamespace(price=Decimal("2.50"), hidden=1)  # note and tags left to defaults
    renderer = Renderer.of(_Priced)
    assert renderer.render(row) == b'{"PRICE":2.5,"NOTE":null,"TAGS":[],"DOUBLED":5.0}'
    assert renderer.render(row) == _fastapi_way(_Priced, row)


class _Seated(_Base):
    name: str
    seat: str | None = Field(default=None, exclude_if=lambda seat: seat is None)
    count: int = Field(default=0, exclude_if=lambda count: count == 0)


def test_a_field_whose_exclude_if_holds_is_left_out_as_pydantic_leaves_it():
    renderer = Renderer.of(list[_Seated])
    rows = [
        SimpleNamespace(name="a", seat=None, count=0),
        SimpleNamespace(name="b", seat="A-1", count=2),
        SimpleNamespace(name="c", seat="A-2", count=0),
    ]
    assert renderer.render(rows) == (
        b'[{"name":"a"},{"name":"b","seat":"A-1","count":2},{"name":"c","seat":"A-2"}]'
    )
    assert renderer.render(rows) == _fastapi_way(list[_Seated], rows)


def test_timestamps_are_written_as_pydantic_writes_them():
    class Stamped(_Base):
        at: datetime

    renderer = Renderer.of(Stamped)
    for moment in (
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=timezone(timedelta(hours=-3, minutes=-30))),
        datetime(2026, 1, 1, 12),
    ):
        row = SimpleNamespace(at=moment)
        assert renderer.render(row) == _fastapi_way(Stamped, row)


def test_a_missing_required_attribute_is_an_error_as_in_pydantic():
    with pytest.raises(AttributeError):
        Renderer.of(_Priced).render(SimpleNamespace(hidden=1))
