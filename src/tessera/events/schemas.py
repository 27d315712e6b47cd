import uuid
from datetime import datetime
from typing import Annotated, Self

from pydantic import ConfigDict, Field, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from tessera.schemas import (
    Email,
    Pagination,
    RefId,
    SnakeInput,
    SnakeModel,
    UnixSeconds,
    requires_one_of,
)
from tessera.users.schemas import UserBase, UserRef

EventName = Annotated[str, StringConstraints(min_length=3, max_length=255)]
Location = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Address = Annotated[str, StringConstraints(min_length=1, max_length=255)]
Description = Annotated[str, StringConstraints(max_length=5000)]
# A rule JSON Schema cannot state, so the schema says it in words (and tests/fuzz/hooks.py
# keeps the fuzzer's valid requests to it).
END_DATE = (
    "Unix seconds, not before `start_date` (400). On update, one date that would put the event's"
    " end before its start is 409."
)


class EventCreate(SnakeInput):
    name: EventName
    start_date: UnixSeconds
    end_date: UnixSeconds = Field(description=END_DATE)
    location: Location
    address: Address
    description: Description | None = None
    reference_id: RefId | None = None


class EventUpdate(SnakeInput):
    """Names the event by ``id``, else by ``reference_id``; with ``id`` given, ``reference_id``
    is a new value for it. Only the fields present change."""

    model_config = ConfigDict(json_schema_extra=requires_one_of("id", "reference_id"))

    id: uuid.UUID | None = None
    reference_id: RefId | None = None
    # Absent is "unchanged"; null is refused (these have a value), so the schema has no null.
    name: EventName | SkipJsonSchema[None] = None
    start_date: UnixSeconds | SkipJsonSchema[None] = None
    end_date: UnixSeconds | SkipJsonSchema[None] = Field(default=None, description=END_DATE)
    location: Location | SkipJsonSchema[None] = None
    address: Address | SkipJsonSchema[None] = None
    description: Description | None = None

    @model_validator(mode="after")
    def _target(self) -> Self:
        if self.id is None and self.reference_id is None:
            raise ValueError("one of id or reference_id is required")
        for name in ("name", "start_date", "end_date", "location", "address"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} may not be null")
        return self

    def changes(self) -> dict[str, object]:
        ignored = {"id"} if self.id is not None else {"id", "reference_id"}
        return {k: getattr(self, k) for k in self.model_fields_set - ignored}


class EventRead(SnakeModel):
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    name: str
    start_date: int
    end_date: int
    location: str
    address: str
    project_id: uuid.UUID
    reference_id: str | None
    description: str | None


class EventList(SnakeModel):
    events: list[EventRead]
    pagination: Pagination


class AttendeeRegister(SnakeInput):
    """``event_id`` plus one of ``email``, ``reference_id``, ``user_id`` (used in that order)."""

    model_config = ConfigDict(json_schema_extra=requires_one_of("email", "reference_id", "user_id"))

    event_id: uuid.UUID
    user_id: uuid.UUID | None = None
    reference_id: RefId | None = None
    email: Email | None = None
    registered_at: UnixSeconds | None = None
    checked_in_at: UnixSeconds | None = None

    @model_validator(mode="after")
    def _one_user(self) -> Self:
        if self._user() is None:
            raise ValueError("one of email, reference_id or user_id is required")
        return self

    def _user(self) -> UserRef | None:
        return UserRef.first(email=self.email, reference_id=self.reference_id, id=self.user_id)

    def user(self) -> UserRef:
        ref = self._user()
        assert ref is not None  # the validator requires one
        return ref


class AttendeeRead(SnakeModel):
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    event_id: uuid.UUID
    user: UserBase
    registered_at: int | None
    checked_in_at: int | None


class AttendeeRegistered(AttendeeRead):
    event: EventRead


class AttendeeList(SnakeModel):
    event: EventRead
    attendees: list[AttendeeRead]
