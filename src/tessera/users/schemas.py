import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, ClassVar, Literal, Self

from pydantic import ConfigDict, Field, StringConstraints, field_validator, model_validator

from tessera.config import Chain
from tessera.schemas import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_PAGE,
    CamelInput,
    CamelModel,
    Email,
    Integer,
    NonNegativeInt,
    PageParams,
    Pagination,
    RefId,
    requires_one_of,
)

Name = Annotated[str, StringConstraints(max_length=255)]


@dataclass(frozen=True, slots=True)
class UserRef:
    """A user of the caller's project, named by one field.

    Requests may name a user by several fields at once; Mufi's rule picks ``email`` first, then
    ``referenceId``, then ``id``. ``first`` is the only place that rule is written.
    """

    field: Literal["email", "reference_id", "id"]
    value: str | uuid.UUID

    @classmethod
    def first(
        cls,
        *,
        email: str | None = None,
        reference_id: str | None = None,
        id: uuid.UUID | None = None,
    ) -> Self | None:
        if email is not None:
            return cls("email", email)
        if reference_id is not None:
            return cls("reference_id", reference_id)
        if id is not None:
            return cls("id", id)
        return None


class UserLookup(CamelInput):
    """One of ``email``, ``referenceId``, ``id``; when several are given that is also the order
    in which they are used."""

    model_config = ConfigDict(json_schema_extra=requires_one_of("email", "referenceId", "id"))

    id: uuid.UUID | None = None
    email: Email | None = None
    reference_id: RefId | None = None

    identifier_required: ClassVar[bool] = True

    @model_validator(mode="after")
    def _one_identifier(self) -> Self:
        if type(self).identifier_required and self.ref_or_none() is None:
            raise ValueError("one of email, referenceId or id is required")
        return self

    def ref_or_none(self) -> UserRef | None:
        return UserRef.first(email=self.email, reference_id=self.reference_id, id=self.id)

    def ref(self) -> UserRef:
        ref = self.ref_or_none()
        if ref is None:  # only UserFetch allows no identifier, and it never calls this
            raise ValueError("one of email, referenceId or id is required")
        return ref


class BalancesQuery(UserLookup):
    chain: Chain | None = None


class UserFetch(UserLookup):
    """Every user of the project, or the one an identifier names."""

    model_config = ConfigDict(json_schema_extra=None)
    identifier_required: ClassVar[bool] = False

    limit: Integer = Field(default=10, ge=1, le=1000)
    offset: NonNegativeInt = 0


class UserCreate(CamelInput):
    email: Email
    first_name: Name | None = None
    last_name: Name | None = None
    reference_id: RefId | None = None


class WalletRead(CamelModel):
    id: uuid.UUID
    type: str
    address: str
    custody: str


class WalletSummary(CamelModel):
    type: str
    address: str
    custody: str


class UserBase(CamelModel):
    id: uuid.UUID
    is_activated: bool
    activated_on: datetime | None
    first_name: str | None
    last_name: str | None
    email: str
    reference_id: str | None


class UserRead(UserBase):
    wallets: list[WalletRead]


class UserListItem(UserBase):
    wallets: list[WalletSummary]


class UsersCreated(CamelModel):
    message: str
    users: list[UserRead]


class UserList(CamelModel):
    users: list[UserListItem]
    total: int


class UserCount(CamelModel):
    count: int


class ActivationRead(CamelModel):
    activated_on: datetime | None
    is_activated: bool


class ReputationAdjust(UserLookup):
    delta: Integer = Field(ge=-1_000_000, le=1_000_000, json_schema_extra={"not": {"const": 0}})
    reason: Annotated[str, StringConstraints(min_length=1, max_length=255)]

    @field_validator("delta")
    @classmethod
    def _non_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("must not be 0")
        return value


class ReputationRead(CamelModel):
    user_id: uuid.UUID
    balance: int
    delta: int
    reason: str
    created_at: datetime


class UserPageLookup(UserLookup):
    """A user, and a page of one of its lists: ``page`` (from 1) and ``limit`` (1-100, default
    20) as in the paginated lists' queries, as strict integers."""

    page: Integer = Field(default=1, ge=1, le=MAX_PAGE)
    limit: Integer = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)

    def paging(self) -> PageParams:
        return PageParams(page=self.page, limit=self.limit)


class ReputationEntryRead(CamelModel):
    delta: int
    balance: int
    reason: str
    created_at: datetime


class ReputationHistory(CamelModel):
    user_id: uuid.UUID
    balance: int
    entries: list[ReputationEntryRead]
    pagination: Pagination
