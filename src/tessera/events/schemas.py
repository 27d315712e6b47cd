import uuid
from datetime import datetime
from typing import Annotated, Self

from pydantic import StringConstraints, model_validator

from tessera.schemas import Email, Pagination, RefId, SnakeModel, UnixSeconds
from tessera.users.schemas import UserBase, UserRef

EventName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=255)]
Location = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]
Address = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
Description = Annotated[str, StringConstraints(max_length=5000)]


class EventCreate(SnakeModel):
    name: EventName
    start_date: UnixSeconds
    end_date: UnixSeconds
    location: Location
    address: Address
    description: Description | None = None
    reference_id: RefId | None = None


class EventUpdate(SnakeModel):
    """Names the event by ``id``, else by ``reference_id``; with ``id`` given, ``reference_id``
    is a new value for it. Only the fields present change."""

    id: uuid.UUID | None = None
    reference_id: RefId | None = None
    name: EventName | None = None
    start_date: UnixSeconds | None = None
    end_date: UnixSeconds | None = None
    location: Location | None = None
    address: Address | None = None
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


class AttendeeRegister(SnakeModel):
    """``event_id`` plus one of ``email``, ``reference_id``, ``user_id`` (used in that order)."""

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
