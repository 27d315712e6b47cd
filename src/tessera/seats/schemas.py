"""Seating plans, seats and holds as the API reads and answers them."""

import uuid
from collections import Counter
from typing import Annotated, Any, Literal, Self

from pydantic import MISSING, ConfigDict, Field, StrictInt, StringConstraints, model_validator

from tessera.schemas import Bool, Integral, SnakeInput, SnakeModel

MAX_SEATS = 50_000  # in a plan
MAX_HELD = 100  # seats in one hold
DEFAULT_HOLD_SECONDS, MAX_HOLD_SECONDS = 600, 3_600

AreaName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
RowName = Annotated[str, StringConstraints(min_length=1, max_length=32)]
SeatNumber = Annotated[str, StringConstraints(min_length=1, max_length=16)]
Category = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-1e9, le=1e9)]
SeatStatus = Literal["available", "held", "sold", "blocked"]


class PlanSeat(SnakeInput):
    number: SeatNumber
    category: Category | None = None
    x: Coordinate | None = None
    y: Coordinate | None = None


class PlanRow(SnakeInput):
    name: RowName
    seats: list[PlanSeat] = Field(min_length=1, max_length=MAX_SEATS)


class PlanArea(SnakeInput):
    name: AreaName
    rows: list[PlanRow] = Field(min_length=1, max_length=MAX_SEATS)


class SeatingPlan(SnakeInput):
    """An event's whole seating plan: areas, their rows (the front row first) and each row's
    seats. Area names are unique in the plan, row names in their area, seat numbers in their
    row; at most 50,000 seats. No areas: the event has no plan."""

    areas: list[PlanArea] = Field(max_length=1_000)

    @model_validator(mode="after")
    def _names_unique(self) -> Self:
        problems = []
        areas = [area.name for area in self.areas]
        problems += [f"areas: {name!r} is named twice" for name in _twice(areas)]
        for area in self.areas:
            rows = [row.name for row in area.rows]
            problems += [
                f"areas: row {name!r} of {area.name!r} is named twice" for name in _twice(rows)
            ]
            for row in area.rows:
                numbers = [seat.number for seat in row.seats]
                problems += [
                    f"areas: seat {n!r} of row {row.name!r} of {area.name!r} is named twice"
                    for n in _twice(numbers)
                ]
        seats = sum(len(row.seats) for area in self.areas for row in area.rows)
        if seats > MAX_SEATS:
            problems.append(f"areas: at most {MAX_SEATS} seats in a plan, got {seats}")
        if problems:
            raise ValueError("; ".join(problems[:5]))
        return self


def _twice(names: list[str]) -> list[str]:
    return sorted(name for name, count in Counter(names).items() if count > 1)


class SeatRef(SnakeModel):
    """A seat as an item, a hold or a ticket names it."""

    id: uuid.UUID
    area: str
    row: str
    number: str


def _none(value: object) -> bool:
    return value is None


class PlanSeatRead(SnakeModel):
    """A seat as the plan has it: what was sent (a field not sent is left out, a whole
    number stays one), with its ``id``."""

    id: uuid.UUID
    number: str
    category: str | None = Field(default=None, exclude_if=_none)
    x: int | float | None = Field(default=None, exclude_if=_none)
    y: int | float | None = Field(default=None, exclude_if=_none)


class PlanRowRead(SnakeModel):
    name: str
    seats: list[PlanSeatRead]


class PlanAreaRead(SnakeModel):
    name: str
    rows: list[PlanRowRead]


class SeatingRead(SnakeModel):
    event_id: uuid.UUID
    seat_count: int
    areas: list[PlanAreaRead]


class SeatRead(SnakeModel):
    id: uuid.UUID
    area: str
    row: str
    number: str
    category: str | None
    x: float | None
    y: float | None
    status: SeatStatus


class SeatList(SnakeModel):
    seats: list[SeatRead]


class SeatFilter(SnakeInput):
    product_id: uuid.UUID | None = None
    status: SeatStatus | None = None


class SeatBlock(SnakeInput):
    blocked: Bool


def _seats_or_count_schema(schema: dict[str, Any]) -> None:
    schema["oneOf"] = [
        {"required": ["seats"], "not": {"required": ["count"]}},
        {"required": ["count"], "not": {"required": ["seats"]}},
    ]


class HoldCreate(SnakeInput):
    """Seats of a seated product kept for a buyer: the ``seats`` named, or the best ``count``
    available (``together``: side by side in one row)."""

    model_config = ConfigDict(json_schema_extra=_seats_or_count_schema)

    product_id: uuid.UUID
    seats: (
        Annotated[
            list[uuid.UUID],
            Field(min_length=1, max_length=MAX_HELD, json_schema_extra={"uniqueItems": True}),
        ]
        | MISSING
    ) = MISSING
    count: Annotated[StrictInt, Field(ge=1, le=MAX_HELD), Integral] | MISSING = MISSING
    together: Bool = True
    seconds: Annotated[StrictInt, Field(ge=1, le=MAX_HOLD_SECONDS), Integral] = DEFAULT_HOLD_SECONDS

    @model_validator(mode="after")
    def _seats_or_count(self) -> Self:
        if ("seats" in self.model_fields_set) == ("count" in self.model_fields_set):
            raise ValueError("seats, count: give one of the two")
        if (named := self.named) is not None and len(set(named)) != len(named):
            raise ValueError("seats: a seat is named twice")
        return self

    @property
    def named(self) -> list[uuid.UUID] | None:
        """The seats named, or None for the best ``count``."""
        return self.seats if isinstance(self.seats, list) else None

    @property
    def best(self) -> int | None:
        return self.count if isinstance(self.count, int) else None


class HoldRead(SnakeModel):
    id: uuid.UUID
    product_id: uuid.UUID
    seats: list[SeatRef]
    expires_at: int
